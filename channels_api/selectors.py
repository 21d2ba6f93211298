"""Reads of the Chat API channels: the channel a URL names, its status, the
chat a sender or an event concerns, the deliveries of a message."""

from __future__ import annotations

import hmac
import re

from django.db.models import QuerySet

from agents import idempotency
from agents.models import Chat
from agents.selectors import agents_online
from channels_api.models import ChatApiChannel
from delivery.models import Delivery

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
    return int(channel.is_active and agents_online(channel=channel))


def idempotency_key_seen(*, chat_api: ChatApiChannel, key: str) -> bool:
    """Whether an A2 request with this ``Idempotency-Key`` was acted on."""
    return idempotency.seen(scope=chat_api.idempotency_scope, key=key)


def open_chat_of_sender(*, chat_api: ChatApiChannel, sender_id: str | int) -> Chat | None:
    """The open chat of the client an A2 ``sender.id`` names, if there is one."""
    return Chat.objects.filter(
        client__channel=chat_api.channel,
        client__external_id=str(sender_id),
        state__in=Chat.OPEN_STATES,
    ).first()


def chat_api_of_chat(*, chat_id: int) -> ChatApiChannel | None:
    """The Chat API channel a chat belongs to; None for a chat of another kind."""
    return (
        ChatApiChannel.objects.select_related("channel", "endpoint")
        .filter(channel__chats__id=chat_id)
        .first()
    )


def deliveries_of(*, message_id: int) -> QuerySet[Delivery]:
    """The A3 deliveries that carried a message, newest first."""
    return Delivery.objects.filter(chat_api_message__message_id=message_id).order_by(
        "-created", "-id"
    )
