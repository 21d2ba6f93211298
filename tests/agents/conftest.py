"""The integrations' fixtures, for the core's tests of what reaches them (or not)."""

from tests.bots.conftest import bot, integrator_server, provider_server  # noqa: F401
from tests.channels_api.conftest import chat_api, integrator  # noqa: F401
from tests.devhooks.conftest import webhook  # noqa: F401
