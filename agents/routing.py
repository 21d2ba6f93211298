"""Who answers a new chat first: the bot, when an integration app says the
channel has one (docs/architecture.md, "The chat lifecycle").

``agents`` imports no integration app, so the bots app tells the core in its
``AppConfig.ready()`` how to find out; with no answer a chat opens queued.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.models import Channel

BotCheck = Callable[[Channel], bool]

_bot_check: BotCheck | None = None


def set_bot_check(check: BotCheck | None) -> None:
    """``check(channel)`` says whether a new chat on ``channel`` goes to a bot first."""
    global _bot_check
    _bot_check = check


def opens_with_bot(channel: Channel) -> bool:
    return _bot_check is not None and _bot_check(channel)
