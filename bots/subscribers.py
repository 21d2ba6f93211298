"""How the Bot API reacts to the core's events and to delivery results.

A client message in a chat the bot owns goes to the provider; an agent
joining and the chat closing are told to the bot that had the chat. A
CLIENT_MESSAGE every send of which failed hands the chat to the agents; one
the provider acknowledged starts the reply timeout.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from agents import events
from agents.models import Chat, Message
from bots import services
from bots.models import BotEvent
from delivery import handlers
from delivery import services as delivery
from delivery.models import Delivery

ERASED = "the client's data was erased"


def on_message_posted(event: events.MessagePosted) -> None:
    # Only a chat the bot has hears of its client's messages (the event's
    # chat was read under its lock: its state is the chat's now).
    if event.author == Message.Author.CLIENT and event.message.chat.state == Chat.State.BOT:
        services.forward_client_message(message=event.message)


def on_chat_accepted(event: events.ChatAccepted) -> None:
    services.agent_joined(
        chat=Chat.objects.select_related("channel", "client").get(pk=event.chat_id)
    )


def on_chat_finished(event: events.ChatFinished) -> None:
    services.chat_closed(
        chat=Chat.objects.select_related("channel", "client").get(pk=event.chat_id)
    )


def _bot_event_of(item: Delivery) -> BotEvent | None:
    return BotEvent.objects.filter(delivery=item).first()


def on_delivered(item: Delivery, reply: Any) -> None:
    bot_event = _bot_event_of(item)
    if bot_event is None or bot_event.kind != BotEvent.Kind.CLIENT_MESSAGE:
        return
    services.event_acknowledged(bot_event=bot_event)
    # The beat task hands over what this misses (a lost message, a dead
    # worker, a broker that is down: robust, logged and not raised).
    from bots import tasks  # tasks imports services

    transaction.on_commit(
        lambda: tasks.check_reply.apply_async(
            (str(bot_event.pk),), countdown=settings.BOT_REPLY_TIMEOUT_SECONDS + 0.5
        ),
        robust=True,
    )


def on_failed(item: Delivery, error: str) -> None:
    bot_event = _bot_event_of(item)
    if bot_event is not None:
        services.event_failed(bot_event=bot_event, error=error)


def connect() -> None:
    """Subscribe to the core's events and to delivery results (AppConfig.ready)."""
    events.subscribe(events.MessagePosted, on_message_posted)
    events.subscribe(events.ChatAccepted, on_chat_accepted)
    events.subscribe(events.ChatFinished, on_chat_finished)
    handlers.register(services.PURPOSE, on_success=on_delivered, on_failure=on_failed)
    events.subscribe(events.ChatsErased, on_chats_erased)


def on_chats_erased(event: events.ChatsErased) -> None:
    """The B1 bodies about the erased chats are forgotten, and one not yet
    sent is dropped (docs/privacy.md)."""
    found = BotEvent.objects.filter(chat_id__in=event.chat_ids, delivery__isnull=False)
    ids = [pk for pk in found.values_list("delivery_id", flat=True) if pk is not None]
    delivery.forget(delivery_ids=ids, reason=ERASED)
