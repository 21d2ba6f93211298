"""Verbs of the Chat API channels: create and change a channel, take in an A2
user message, send an A3 message or typing notice.

Each verb runs in a transaction. A refusal is a ``ChatApiError``; how it is
answered (status code, error body) is the view's business.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from agents import audit, idempotency
from agents import services as chats
from agents.content import Content
from agents.models import Agent, Channel, Chat, ClientAddress, Message
from channels_api import payloads, selectors
from channels_api.models import ChatApiChannel, MessageDelivery, new_path_secret
from delivery import services as delivery
from delivery.models import Delivery

logger = logging.getLogger(__name__)

MESSAGE_PURPOSE = "chat_api_message"
TYPING_PURPOSE = "chat_api_typing"
NO_FALLBACK_NOTE = (
    "The bot's message was not sent to this channel: the channel shows plain "
    "text only and the message has no text fallback."
)


class ChatApiError(Exception):
    """A request the channel refuses; ``message`` says why, for the integrator."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ChannelSwitchedOff(ChatApiError):
    def __init__(self) -> None:
        super().__init__("the channel is not active")


# --- channels ---------------------------------------------------------------


@transaction.atomic
def create_chat_api_channel(
    *,
    name: str,
    webhook_url: str,
    chunked: bool = False,
    agents: Iterable[Agent] = (),
    unique_message_ids: bool = False,
    by: Agent | str | None = None,
) -> tuple[ChatApiChannel, str]:
    """A new channel and the signing secret of its A3 requests (shown once);
    ``by``: who made it (the audit log)."""
    delivery.validate_endpoint_url(webhook_url)
    channel = Channel.objects.create(name=name, kind=Channel.Kind.CHAT_API)
    channel.agents.set(agents)
    chat_api = ChatApiChannel(channel=channel, webhook_url=webhook_url)
    endpoint, secret = delivery.create_endpoint(url=chat_api.target_url, chunked=chunked)
    chat_api.endpoint = endpoint
    chat_api.unique_message_ids = unique_message_ids
    chat_api.save()
    audit.record(
        audit.Action.CHANNEL_CREATED, actor=by, target=audit.of_channel(channel), kind=channel.kind
    )
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
    by: Agent | str | None = None,
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
    audit.record(
        audit.Action.CHANNEL_CHANGED,
        actor=by,
        target=audit.of_channel(channel),
        kind=channel.kind,
        active=active,
    )
    return chat_api


@transaction.atomic
def rotate_path_secret(
    *, chat_api: ChatApiChannel, by: Agent | str | None = None
) -> ChatApiChannel:
    """A new secret in the channel's endpoint and status URLs (docs/chat-api.md,
    "Rotating the URL"): the old URLs answer 404 from the next request on, with
    no grace period, as a leaked URL is the reason to rotate it."""
    locked = ChatApiChannel.objects.select_for_update().get(pk=chat_api.pk)
    locked.path_secret = new_path_secret()
    locked.save(update_fields=["path_secret"])
    chat_api.path_secret = locked.path_secret
    audit.record(
        audit.Action.CHANNEL_SECRET_ROTATED,
        actor=by,
        target=audit.of_channel(chat_api.channel),
        which="endpoint URL",
    )
    logger.info("chat_api.path_secret_rotated channel=%s", chat_api.channel.public_id)
    return chat_api


@transaction.atomic
def rotate_signing_secret(*, chat_api: ChatApiChannel, by: Agent | str | None = None) -> str:
    """A new secret signing the channel's A3 requests (the old one signs too
    for DELIVERY_SECRET_GRACE_SECONDS); returned once."""
    secret = delivery.rotate_secret(endpoint=chat_api.endpoint)
    audit.record(
        audit.Action.CHANNEL_SECRET_ROTATED,
        actor=by,
        target=audit.of_channel(chat_api.channel),
        which="signing secret",
    )
    return secret


# --- A2: user messages in ---------------------------------------------------


@dataclass(frozen=True)
class UserMessage:
    sender_id: str | int
    contact: dict[str, str]
    type: str
    message_id: str
    content: Content | None  # None for typein / typeout


@transaction.atomic
def receive_user_message(
    *, chat_api: ChatApiChannel, message: UserMessage, idempotency_key: str = ""
) -> Message | None:
    """A2: store a user message, or set the typing state, from the integrator.

    Returns the stored message; None when nothing was stored (typing, a
    repeated ``Idempotency-Key``, a repeated ``message.id`` on a channel
    whose ids are unique). The key is claimed first, in this transaction: a
    concurrent retry waits for it, and a refusal rolls the claim back.
    """
    if idempotency_key and not idempotency.claim(
        scope=chat_api.idempotency_scope, key=idempotency_key
    ):
        return None
    if not chat_api.channel.is_active:
        raise ChannelSwitchedOff()
    if message.content is None:
        _set_typing(chat_api, message)
        return None
    # The integrator signs in to send: the address it gives for its user is trusted.
    client, new = chats.find_or_create_client(
        channel=chat_api.channel,
        external_id=message.sender_id,
        contact=message.contact,
        address_source=ClientAddress.Source.INTEGRATOR,
        lock=True,  # the row the posting verb would lock next: read once
    )
    if chat_api.unique_message_ids and not new:  # a new client sent nothing before
        # The core checks for an earlier message with this id under the client's lock.
        once = chats.post_client_message_once(
            client=client,
            content=message.content,
            external_id=message.message_id,
            client_locked=True,
        )
        if once is None:
            logger.info("chat_api.duplicate_message message_id=%s", message.message_id)
            return None
        stored = once
    else:
        stored = chats.post_client_message(
            client=client,
            content=message.content,
            external_id=message.message_id,
            client_locked=True,
            new_client=new,
        )
    logger.info(
        "chat_api.user_message channel=%s chat=%s message=%s message_id=%s",
        chat_api.channel.public_id, stored.chat_id, stored.pk, message.message_id,
    )  # fmt: skip
    return stored


def _set_typing(chat_api: ChatApiChannel, message: UserMessage) -> None:
    # typein / typeout: every other field is ignored, and a sender with no
    # open chat is no one to show typing for.
    chat = selectors.open_chat_of_sender(chat_api=chat_api, sender_id=message.sender_id)
    if chat is not None:
        chats.set_client_typing(chat=chat, typing=message.type == "typein")


# --- A3: agent and bot messages, agent typing out ---------------------------


@transaction.atomic(savepoint=False)  # on the path of each agent and bot message
def send_message(*, chat_api: ChatApiChannel, message: Message) -> Delivery | None:
    """A3: enqueue an agent or bot message for the integrator, linked to it.

    A bot message the channel cannot show (Markdown or buttons without a
    plain-text fallback) is not sent; a system note in the chat says so.
    """
    body = payloads.agent_message(message)
    if body is None:
        chats.post_system_message(chat=message.chat, text=NO_FALLBACK_NOTE)
        logger.info("chat_api.message_not_sent message=%s reason=no_text_fallback", message.pk)
        return None
    sent = delivery.enqueue(
        endpoint=chat_api.endpoint,
        purpose=MESSAGE_PURPOSE,
        event="message",
        body=body,
        policy=MESSAGE_PURPOSE,
        ordering_key=f"chat:{message.chat_id}",
        subject=f"message:{message.pk}",  # for a person reading the delivery log
        link=MessageDelivery(message=message),  # inserted with it
    )
    # A message posted "sending" (subscribers.starts_sending) is not written again.
    stored = (message.delivery_status, message.delivery_error) == (Message.Delivery.PENDING, "")
    chats.mark_message_delivery(message=message, status=Message.Delivery.PENDING, stored=stored)
    return sent


@transaction.atomic
def send_typing(*, chat_api: ChatApiChannel, chat: Chat, agent: Agent, typing: bool) -> Delivery:
    """A3: the agent's typein / typeout, tried once (policy ``chat_api_typing``)."""
    return delivery.enqueue(
        endpoint=chat_api.endpoint,
        purpose=TYPING_PURPOSE,
        event="typein" if typing else "typeout",
        body=payloads.typing(agent=agent, client=chat.client, typing=typing),
        policy=TYPING_PURPOSE,
        ordering_key=f"chat:{chat.pk}",
    )
