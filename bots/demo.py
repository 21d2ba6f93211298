"""Demo data for ``seed_demo``: the example bot provider on a Chat API channel.

The provider's endpoint is where ``make run`` starts docs/examples/bot_provider.py
(``EXAMPLE_BOT_URL``, by default http://127.0.0.1:8010). A loopback address
is a private target: allowed while ``WEBHOOK_ALLOW_PRIVATE_NETWORKS`` is on
(by default in DEBUG), refused otherwise, and then the bot demo is left out
and the description says why.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ValidationError

from agents import demo
from agents.audit import COMMAND_LINE
from agents.models import Agent
from bots import services
from bots.models import BotAttachment, BotProvider

PROVIDER_NAME = "Example bot"
CHANNEL_NAME = "Demo with bot"
# The same on every seed, so a restarted example bot keeps working.
DEMO_TOKEN = "example-bot-demo-token"  # noqa: S105 (demo data, printed by seed_demo)
DEFAULT_URL = "http://127.0.0.1:8010"


def example_bot_url() -> str:
    return os.environ.get("EXAMPLE_BOT_URL", "").strip() or DEFAULT_URL


def _provider(url: str) -> BotProvider:
    provider = BotProvider.objects.filter(name=PROVIDER_NAME).first()
    if provider is None:
        return services.create_bot_provider(
            name=PROVIDER_NAME, endpoint_url=url, display_name="Example Bot", by=COMMAND_LINE
        )
    if provider.endpoint_url != url or not provider.is_active:
        provider = services.update_bot_provider(
            provider=provider,
            name=provider.name,
            endpoint_url=url,
            display_name=provider.display_name,
            active=True,
            by=COMMAND_LINE,
        )
    return provider


def seed_demo_bot(agents: list[Agent]) -> list[dict[str, Any]]:
    """The example provider attached, with ``DEMO_TOKEN``, to its own Chat API channel."""
    url = example_bot_url()
    try:
        provider = _provider(url)
    except (ValidationError, services.BotError) as error:
        reason = "; ".join(error.messages) if isinstance(error, ValidationError) else str(error)
        return [{"kind": "bot", "name": CHANNEL_NAME, "skipped": f"{url}: {reason}"}]
    # A Chat API channel, made by channels_api (agents.demo.register_channel_kind).
    channel, urls = demo.demo_channel("chat_api", CHANNEL_NAME, agents)
    attachment = BotAttachment.objects.filter(channel=channel).first()
    secret = None
    if (
        attachment is None
        or attachment.provider_id != provider.pk
        or attachment.token != DEMO_TOKEN
        or not attachment.is_active
    ):
        attachment, secret = services.attach_bot(
            channel=channel, provider=provider, token=DEMO_TOKEN, by=COMMAND_LINE
        )
    return [
        {
            "kind": "bot",
            "name": CHANNEL_NAME,
            "public_id": urls["public_id"],
            "endpoint_url": urls["endpoint_url"],
            "status_url": urls["status_url"],
            "provider": provider.name,
            "provider_endpoint": url,
            "webhook_url_prefix": provider.webhook_url_prefix,
            "token": DEMO_TOKEN,
            "signing_secret": secret or "(shown when first attached; rotate it in the admin)",
        }
    ]
