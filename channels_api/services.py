"""Chat API channels: creation, the A1/A2 inbound side, the A3 outbound side."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from agents import events
from agents import services as chats
from agents.content import Content
from agents.models import Agent, Channel, Chat, Client, Message
from channels_api import payloads
from channels_api.models import ChatApiChannel, InboundRequest
from delivery import handlers
from delivery import services as delivery
from delivery.models import Delivery

logger = logging.getLogger(__name__)

MESSAGE_PURPOSE = "chat_api_message"
TYPING_PURPOSE = "chat_api_typing"


# --- channels ---------------------------------------------------------------


@transaction.atomic
def create_chat_api_channel(
    *,
    name: str,
    webhook_url: str,
    chunked: bool = False,
    agents: Iterable[Agent] = (),
    unique_message_ids: bool = False,
) -> tuple[ChatApiChannel, str]:
    """A new channel and the signing secret of its A3 requests (shown once)."""
    delivery.validate_endpoint_url(webhook_url)
    channel = Channel.objects.create(name=name, kind=Channel.Kind.CHAT_API)
    channel.agents.set(agents)
    chat_api = ChatApiChannel(channel=channel, webhook_url=webhook_url)
    endpoint, secret = delivery.create_endpoint(url=chat_api.target_url, chunked=chunked)
    chat_api.endpoint = endpoint
    chat_api.unique_message_ids = unique_message_ids
    chat_api.save()
    logger.info("chat_api.channel_created channel=%s", channel.public_id)
    return chat_api, secret


@transaction.atomic
def update_chat_api_channel(
    *,
    chat_api: ChatApiChannel,
    name: str,
    webhook_url: str,
    chunked: bool,
    active: bool,
    agents: Iterable[Agent],
    unique_message_ids: bool,
) -> ChatApiChannel:
    delivery.validate_endpoint_url(webhook_url)
    channel = chat_api.channel
    channel.name, channel.is_active = name, active
    channel.save(update_fields=["name", "is_active"])
    channel.agents.set(agents)
    chat_api.webhook_url = webhook_url
    chat_api.unique_message_ids = unique_message_ids
    chat_api.save(update_fields=["webhook_url", "unique_message_ids"])
    delivery.update_endpoint(endpoint=chat_api.endpoint, url=chat_api.target_url, chunked=chunked)
    return chat_api


URL_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def channel_for_path(*, path_secret: str, public_id: str) -> ChatApiChannel | None:
    """The channel an endpoint URL names, or None — the same for a wrong secret
    and an unknown id. The secret is compared in constant time."""
    chat_api = None
    if URL_TOKEN.fullmatch(public_id):
        chat_api = (
            ChatApiChannel.objects.select_related("channel", "endpoint")
            .filter(channel__public_id=public_id)
            .first()
        )
    expected = chat_api.path_secret if chat_api else "x" * 32
    matches = hmac.compare_digest(expected.encode(), path_secret.encode())
    return chat_api if chat_api and matches else None


def channel_status(*, chat_api: ChatApiChannel) -> int:
    """A1: 1 when the channel is active and one of its agents is online, else 0."""
    channel = chat_api.channel
    return int(channel.is_active and channel.agents.filter(is_online=True, is_active=True).exists())


# --- A2: user messages in ---------------------------------------------------


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class UserMessage:
    sender_id: str | int
    contact: dict[str, str]
    type: str
    message_id: str
    content: Content | None  # None for typein / typeout


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


def remembered_answer(*, chat_api: ChatApiChannel, key: str) -> Answer | None:
    seen = InboundRequest.objects.filter(channel=chat_api.channel, key=key).first()
    if seen is None or seen.status_code is None:
        return None
    return Answer(seen.status_code, seen.response or {})


@transaction.atomic
def receive_user_message(
    *, chat_api: ChatApiChannel, message: UserMessage, idempotency_key: str = ""
) -> Answer:
    """A2: store a user message (or typing state) from the integrator.

    With an ``Idempotency-Key`` the key is claimed first, in this
    transaction: a concurrent retry waits for it and is answered the same.
    """
    if idempotency_key:
        try:
            with transaction.atomic():
                claim = InboundRequest.objects.create(channel=chat_api.channel, key=idempotency_key)
        except IntegrityError:
            seen = InboundRequest.objects.get(channel=chat_api.channel, key=idempotency_key)
            return Answer(seen.status_code or 200, seen.response or {"result": "ok"})
    answer = _store(chat_api, message)
    if idempotency_key:
        claim.status_code, claim.response = answer.status, answer.body
        claim.save(update_fields=["status_code", "response"])
    return answer


def _store(chat_api: ChatApiChannel, message: UserMessage) -> Answer:
    channel = chat_api.channel
    if not channel.is_active:
        raise Refused(403, "access_denied", "the channel is not active")
    if message.content is None:
        # typein / typeout: every other field is ignored, and a sender with
        # no open chat is no one to show typing for.
        chat = Chat.objects.filter(
            client__channel=channel,
            client__external_id=str(message.sender_id),
            state__in=Chat.OPEN_STATES,
        ).first()
        if chat is not None:
            chats.set_client_typing(chat=chat, typing=message.type == "typein")
        return Answer(200, {"result": "ok"})
    client = chats.get_or_create_client(
        channel=channel, external_id=message.sender_id, contact=message.contact
    )
    if Chat.objects.filter(client=client, blacklisted=True).exists():
        raise Refused(403, "access_denied", "the client is blacklisted")
    if chat_api.unique_message_ids and message.message_id:
        # One check at a time per client, so two concurrent retries of one
        # message cannot both find no duplicate.
        Client.objects.select_for_update().filter(pk=client.pk).first()
        duplicate = Message.objects.filter(
            chat__client=client, author=Message.Author.CLIENT, external_id=message.message_id
        ).exists()
        if duplicate:
            logger.info("chat_api.duplicate_message message_id=%s", message.message_id)
            return Answer(200, {"result": "ok"})
    stored = chats.post_client_message(
        client=client, content=message.content, external_id=message.message_id
    )
    logger.info(
        "chat_api.user_message channel=%s chat=%s message=%s message_id=%s",
        channel.public_id, stored.chat_id, stored.pk, message.message_id,
    )  # fmt: skip
    return Answer(200, {"result": "ok"})


# --- A3: agent messages and typing out --------------------------------------


def _chat_api_of(chat_id: int) -> ChatApiChannel | None:
    return (
        ChatApiChannel.objects.select_related("channel", "endpoint")
        .filter(channel__chats__id=chat_id)
        .first()
    )


def _send(chat_api: ChatApiChannel, message: Message) -> None:
    body = payloads.agent_message(message)
    if body is None:
        chats.mark_message_delivery(
            message=message,
            status=Message.Delivery.FAILED,
            error="not sent: this channel shows plain text only and the message has none",
        )
        return
    delivery.enqueue(
        endpoint=chat_api.endpoint,
        purpose=MESSAGE_PURPOSE,
        event="message",
        body=body,
        policy=MESSAGE_PURPOSE,
        ordering_key=f"chat:{message.chat_id}",
        subject=f"message:{message.pk}",
    )
    chats.mark_message_delivery(message=message, status=Message.Delivery.PENDING)


def on_message_posted(event: events.MessagePosted) -> None:
    if event.author not in (Message.Author.AGENT, Message.Author.BOT):
        return
    chat_api = _chat_api_of(event.chat_id)
    if chat_api is not None:
        message = Message.objects.select_related("agent", "chat__client").get(pk=event.message_id)
        _send(chat_api, message)


def on_retry_requested(event: events.MessageRetryRequested) -> None:
    chat_api = _chat_api_of(event.chat_id)
    if chat_api is None:
        return
    last = deliveries_of(message_id=event.message_id).first()
    if last is not None and last.status in (Delivery.Status.FAILED, Delivery.Status.DROPPED):
        delivery.redeliver(delivery=last)
    else:
        message = Message.objects.select_related("agent", "chat__client").get(pk=event.message_id)
        _send(chat_api, message)


def on_typing_changed(event: events.TypingChanged) -> None:
    if event.who != "agent" or event.agent_id is None:
        return
    chat_api = _chat_api_of(event.chat_id)
    if chat_api is None:
        return
    chat = Chat.objects.select_related("client").get(pk=event.chat_id)
    agent = Agent.objects.get(pk=event.agent_id)
    delivery.enqueue(
        endpoint=chat_api.endpoint,
        purpose=TYPING_PURPOSE,
        event="typein" if event.typing else "typeout",
        body=payloads.typing(agent=agent, client=chat.client, typing=event.typing),
        policy=TYPING_PURPOSE,
        ordering_key=f"chat:{chat.pk}",
    )


def deliveries_of(*, message_id: int) -> QuerySet[Delivery]:
    return Delivery.objects.filter(
        purpose=MESSAGE_PURPOSE, subject=f"message:{message_id}"
    ).order_by("-created", "-id")


def _message_of(item: Delivery) -> Message | None:
    kind, _, pk = item.subject.partition(":")
    if kind != "message" or not pk.isdigit():
        return None
    return Message.objects.filter(pk=int(pk)).first()


def on_delivered(item: Delivery, reply: Any) -> None:
    message = _message_of(item)
    if message is not None:
        chats.mark_message_delivery(message=message, status=Message.Delivery.DELIVERED)


def on_failed(item: Delivery, error: str) -> None:
    message = _message_of(item)
    if message is not None:
        chats.mark_message_delivery(message=message, status=Message.Delivery.FAILED, error=error)


def connect() -> None:
    """Subscribe to the core's events and to delivery results (AppConfig.ready)."""
    events.subscribe(events.MessagePosted, on_message_posted)
    events.subscribe(events.MessageRetryRequested, on_retry_requested)
    events.subscribe(events.TypingChanged, on_typing_changed)
    handlers.register(MESSAGE_PURPOSE, on_success=on_delivered, on_failure=on_failed)
