from __future__ import annotations

from celery import shared_task

from bots import services
from bots.models import BotEvent


@shared_task
def check_reply(bot_event_id: str) -> bool:
    """Hand the chat to agents if the provider stayed silent past the reply timeout."""
    bot_event = BotEvent.objects.filter(pk=bot_event_id).first()
    return bot_event is not None and services.hand_over_if_silent(bot_event=bot_event)


@shared_task
def hand_over_silent_chats() -> int:
    """The reply timeout for what ``check_reply`` missed; returns how many chats went."""
    return sum(services.hand_over_if_silent(bot_event=e) for e in services.silent_events())
