"""Reactions of the Chat API channels to the core's events (``agents/events.py``)
and to the outcome of their A3 deliveries. ``connect()`` runs in
``AppConfig.ready()``."""

from __future__ import annotations

from typing import Any, Literal

from agents import events
from agents import services as chats
from agents.models import Agent, Channel, Chat, Message
from channels_api import payloads, selectors, services
from channels_api.models import ChatApiChannel, MessageDelivery
from delivery import handlers
from delivery import services as delivery
from delivery.models import Delivery

ERASED = "the client's data was erased"


def connect() -> None:
    """Subscribe to the core's events and to delivery results."""
    chats.register_delivery_state_rule(starts_sending)
    events.subscribe(events.MessagePosted, on_message_posted)
    events.subscribe(events.MessageRetryRequested, on_retry_requested)
    events.subscribe(events.TypingChanged, on_typing_changed)
    handlers.register(services.MESSAGE_PURPOSE, on_success=on_delivered, on_failure=on_failed)
    events.subscribe(events.ChatsErased, on_chats_erased)


def on_chats_erased(event: events.ChatsErased) -> None:
    """The A3 bodies that carried the erased chats' messages are forgotten,
    and one not yet sent is dropped (docs/privacy.md)."""
    links = MessageDelivery.objects.filter(message__chat_id__in=event.chat_ids)
    ids = list(links.values_list("delivery_id", flat=True))
    delivery.forget(delivery_ids=ids, reason=ERASED)


def _message(message_id: int) -> Message:
    return Message.objects.select_related("agent", "chat__client").get(pk=message_id)


OUTBOUND_AUTHORS = (Message.Author.AGENT, Message.Author.BOT)


def _chat_api_read_with(chat: Chat) -> ChatApiChannel | Literal[False] | None:
    """The chat's Chat API channel when it was read with the chat (B2), None
    when the chat's channel is known to have none; False when unknown."""
    if not Chat.channel.is_cached(chat):
        return False
    if chat.channel.kind != Channel.Kind.CHAT_API:
        return None
    if not Channel.chat_api.is_cached(chat.channel):
        return False
    return getattr(chat.channel, "chat_api", None)


def starts_sending(chat: Chat, message: Message) -> str:
    """The delivery state a message being posted is inserted in: "sending"
    when ``on_message_posted`` will send it and that is known without a
    query, so its row is not updated to it right after."""
    chat_api = _chat_api_read_with(chat)
    if message.author in OUTBOUND_AUTHORS and chat_api and payloads.sendable(message):
        return Message.Delivery.PENDING
    return ""


def on_message_posted(event: events.MessagePosted) -> None:
    """An agent's or the bot's message goes out to the integrator (A3)."""
    if event.author not in OUTBOUND_AUTHORS:
        return
    chat_api = _chat_api_read_with(event.message.chat)
    if chat_api is False:
        chat_api = selectors.chat_api_of_chat(chat_id=event.chat_id)
    if chat_api is not None:  # the event's message, as stored: not read again
        services.send_message(chat_api=chat_api, message=event.message)


def on_retry_requested(event: events.MessageRetryRequested) -> None:
    """The agent sends a message again: its failed delivery is redelivered
    (same ``webhook-id``), otherwise a new one is enqueued."""
    chat_api = selectors.chat_api_of_chat(chat_id=event.chat_id)
    if chat_api is None:
        return
    last = selectors.deliveries_of(message_id=event.message_id).first()
    if last is not None and last.status in (Delivery.Status.FAILED, Delivery.Status.DROPPED):
        delivery.redeliver(delivery=last)
    else:
        services.send_message(chat_api=chat_api, message=_message(event.message_id))


def on_typing_changed(event: events.TypingChanged) -> None:
    if event.who != "agent" or event.agent_id is None:
        return
    chat_api = selectors.chat_api_of_chat(chat_id=event.chat_id)
    if chat_api is None:
        return
    services.send_typing(
        chat_api=chat_api,
        chat=Chat.objects.select_related("client").get(pk=event.chat_id),
        agent=Agent.objects.get(pk=event.agent_id),
        typing=event.typing,
    )


def _message_of(item: Delivery) -> Message | None:
    link = MessageDelivery.objects.select_related("message").filter(delivery=item).first()
    return link.message if link else None


def on_delivered(item: Delivery, reply: Any) -> None:
    message = _message_of(item)
    if message is not None:
        chats.mark_message_delivery(message=message, status=Message.Delivery.DELIVERED)


def on_failed(item: Delivery, error: str) -> None:
    message = _message_of(item)
    if message is not None:
        chats.mark_message_delivery(message=message, status=Message.Delivery.FAILED, error=error)
