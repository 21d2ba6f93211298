"""B1: the events the service POSTs to a bot provider (docs/bot-api.md).

The envelope is the original platform's, field for field, because providers
parse it with strict schemas: ids are strings of digits except ``sender.id``
(an integer), ``url`` is ``""`` rather than null, ``timestamp`` is integer
unix seconds.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agents.content import MEDIA_TYPES
from agents.models import Chat, Client, Message
from bots.models import BotEvent


def _sender(client: Client) -> dict[str, Any]:
    return {
        "id": client.pk,
        "name": client.name,
        "url": client.url or "",
        "has_contacts": bool(client.phone or client.email),
    }


def message_text(message: Message) -> str:
    """What a text-only bot sees of a client message: the text, else for media
    its file's URL, for a location ``latitude,longitude``."""
    if message.text:
        return message.text
    if message.type in MEDIA_TYPES:
        return str(message.payload.get("file", ""))
    if message.type == Message.Type.LOCATION:
        return f"{message.payload.get('latitude')},{message.payload.get('longitude')}"
    return ""


def event(
    bot_event: BotEvent, *, chat: Chat, agents_online: bool, message: Message | None = None
) -> dict[str, Any]:
    """The envelope of ``bot_event``; a CLIENT_MESSAGE carries ``message``."""
    client = chat.client
    body: dict[str, Any] = {
        "event": bot_event.kind,
        "id": str(bot_event.id),
        "site_id": settings.INSTALLATION_ID,
        "client_id": str(client.pk),
        "chat_id": str(chat.pk),
        "agents_online": agents_online,
        "sender": _sender(client),
        "channel": {"id": chat.channel.public_id, "type": chat.channel.kind},
    }
    if message is not None:
        body["message"] = {
            "type": "TEXT",
            "text": message_text(message),
            "timestamp": int(message.created.timestamp()),
        }
    return body
