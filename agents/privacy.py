"""Everything held about one client, as JSON (docs/privacy.md): what the
admin's "Export data" and ``manage.py export_client`` give a person who asks
for their data. A read; erasing is ``agents.services.erase_client``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agents import attachments, audit
from agents.models import Agent, Call, Chat, Client, Message, OfflineMessage
from agents.selectors import consent_of
from agents.services.privacy import client_key


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _message(message: Message) -> dict[str, Any]:
    return {
        "author": message.author,
        "author_name": message.agent.name if message.agent else message.sender_name,
        "type": message.type,
        "text": message.text,
        "payload": message.payload,
        "time": _time(message.created),
    }


def _chat(chat: Chat) -> dict[str, Any]:
    return {
        "id": chat.pk,
        "state": chat.state,
        "created": _time(chat.created),
        "finished": _time(chat.finished_at),
        "rating": chat.rating,
        "rating_comment": chat.rating_comment,
        "consent": consent_of(chat),
        "labels": [label.name for label in chat.labels.all()],
        "custom_data": chat.custom_data,
        "contact_info": chat.contact_info,
        "messages": [_message(message) for message in chat.messages.all()],
        "files": [
            {
                "name": attachment.file_name,
                "size": attachment.file_size,
                "content_type": attachment.content_type,
                "url": attachments.url_of(attachment),
                "time": _time(attachment.created),
            }
            for attachment in chat.attachments.all()
        ],
    }


def _offline(offline: OfflineMessage) -> dict[str, Any]:
    return {
        "name": offline.name,
        "email": offline.email,
        "phone": offline.phone,
        "description": offline.description,
        "message": offline.message,
        "page_url": offline.page_url,
        "page_title": offline.page_title,
        "time": _time(offline.created),
    }


def _call(call: Call) -> dict[str, Any]:
    return {
        "type": call.type,
        "status": call.status,
        "phone": call.phone,
        "reason": call.reason,
        "record_url": call.record_url,
        "time": _time(call.created),
        "ended": _time(call.ended_at),
    }


def export_client(client: Client, *, by: Agent | str | None = None) -> dict[str, Any]:
    """Everything held about ``client``: contact details, addresses, what
    the site told of the visitor, chats with their messages, ratings, labels
    and files (as links), offline messages and calls. JSON-able. The export
    is audited as made by ``by``."""
    client = Client.objects.select_related("channel").get(pk=client.pk)
    audit.record(audit.Action.EXPORT_MADE, actor=by, target=audit.of_client(client))
    chats = (
        Chat.objects.filter(client=client)
        .order_by("created", "pk")
        .prefetch_related("labels", "attachments", "messages__agent")
    )
    return {
        "client": client_key(client),
        "channel": client.channel.public_id,
        "external_id": client.external_id_raw,
        "visitor_number": client.visitor_number,
        "name": client.name,
        "email": client.email,
        "phone": client.phone,
        "photo_url": client.photo_url,
        "url": client.url,
        "description": client.description,
        "invite_text": client.invite_text,
        "visitor_data": client.visitor_data,
        "created": _time(client.created),
        "blacklisted": _time(client.blacklisted_at),
        "erased": _time(client.erased_at),
        "addresses": [
            {"address": a.address, "source": a.source, "confirmed": _time(a.confirmed_at)}
            for a in client.addresses.order_by("created", "pk")
        ],
        "chats": [_chat(chat) for chat in chats],
        "offline_messages": [
            _offline(offline) for offline in client.offline_messages.order_by("created", "pk")
        ],
        "calls": [_call(call) for call in client.calls.order_by("created", "pk")],
    }
