"""C1: the JSON of each developer-webhook event (docs/webhooks.md).

Receivers written for the original platform parse these with typed classes
that build one object per field, so the shapes are strict: every object the
spec marks required (``visitor``, ``session``, ``session.geoip``, ``page``,
``agent`` where required) is always a JSON object, never ``null``; a string
we do not know is ``""``; ``chat_id`` is a number and ``widget_id`` a string.
"""

from __future__ import annotations

from typing import Any

from agents import selectors
from agents.content import MEDIA_TYPES
from agents.models import Agent, Call, Channel, Chat, Client, Message, OfflineMessage
from devhooks.visitor_data import GEOIP_FIELDS, UTM_FIELDS


def _text(value: Any) -> str:
    """A string field: ``""`` for what is missing; numbers as their text."""
    if value is None or isinstance(value, (dict, list)):
        return ""
    return str(value)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def widget_id(channel: Channel) -> str:
    """The channel's id as the chat code shows it: its public id."""
    return channel.public_id


def visitor(client: Client | None, **override: str) -> dict[str, Any]:
    if client is None:
        fields = {"name": "", "email": "", "phone": "", "number": "", "description": ""}
        return {**fields, **override, "social": {}, "chats_count": 0}
    fields = {
        "name": client.name,
        "email": client.email,
        "phone": client.phone,
        "number": str(client.visitor_number),
        "description": client.description,
    }
    fields.update({key: value for key, value in override.items() if value})
    return {**fields, "social": {}, "chats_count": client.chats.count()}


def agent(person: Agent | None) -> dict[str, Any]:
    """The agent object; with nobody (a chat no agent has taken yet) a zero
    agent, because receivers require the object."""
    if person is None:
        return {"id": 0, "name": "", "email": "", "phone": ""}
    return {"id": person.pk, "name": person.name, "email": person.email, "phone": person.phone}


def session(client: Client | None) -> dict[str, Any]:
    data = _object(client.visitor_data if client else {})
    geoip = _object(data.get("geoip"))
    utm_json = _object(data.get("utm_json"))
    return {
        "geoip": {field: _text(geoip.get(field)) for field in GEOIP_FIELDS},
        "utm": _text(data.get("utm")),
        "utm_json": {field: _text(utm_json.get(field)) for field in UTM_FIELDS},
        "ip_addr": _text(data.get("ip_addr")),
        "user_agent": _text(data.get("user_agent")),
    }


def page(client: Client | None, *, url: str = "", title: str = "") -> dict[str, str]:
    known = _object(_object(client.visitor_data if client else {}).get("page"))
    return {"url": url or _text(known.get("url")), "title": title or _text(known.get("title"))}


def _common(event_name: str, channel: Channel, client: Client | None) -> dict[str, Any]:
    body: dict[str, Any] = {"event_name": event_name, "widget_id": widget_id(channel)}
    if client is not None and client.user_token:
        body["user_token"] = client.user_token
    body["visitor"] = visitor(client)
    return body


def _chat_common(event_name: str, chat: Chat) -> dict[str, Any]:
    body = _common(event_name, chat.channel, chat.client)
    body = {"event_name": event_name, "chat_id": chat.pk, **body}
    return body


def _session_and_page(body: dict[str, Any], chat: Chat) -> dict[str, Any]:
    if chat.department is not None:
        body["department"] = {"id": chat.department.pk, "name": chat.department.name}
    body["session"] = session(chat.client)
    body["page"] = page(chat.client)
    body["analytics"] = {}
    return body


def chat_accepted(chat: Chat, by: Agent) -> dict[str, Any]:
    body = _chat_common("chat_accepted", chat)
    body["agent"] = agent(by)
    return _session_and_page(body, chat)


def chat_assigned(chat: Chat, by: Agent, crm_link: str) -> dict[str, Any]:
    body = _chat_common("chat_assigned", chat)
    body["agent"] = agent(by)
    body = _session_and_page(body, chat)
    body["assign_to"] = crm_link
    return body


def chat_updated(chat: Chat, by: Agent | None) -> dict[str, Any]:
    body = _chat_common("chat_updated", chat)
    body["agent"] = agent(by)
    return _session_and_page(body, chat)


def message_text(message: Message) -> str:
    """The text of a log item: the text, else a media file's URL, else a
    location's ``latitude,longitude``."""
    if message.text:
        return message.text
    if message.type in MEDIA_TYPES:
        return _text(message.payload.get("file"))
    if message.type == Message.Type.LOCATION:
        return f"{message.payload.get('latitude')},{message.payload.get('longitude')}"
    return ""


def log_item(message: Message) -> dict[str, Any]:
    item: dict[str, Any] = {
        "timestamp": int(message.created.timestamp()),
        "type": "agent" if message.author == Message.Author.AGENT else "visitor",
    }
    if message.author == Message.Author.AGENT:
        item["agent_id"] = message.agent_id or 0
    item["message"] = message_text(message)
    if message.payload.get(Message.BLACKLISTED) is True:
        item["blacklisted"] = True
    return item


def chat_finished(chat: Chat) -> dict[str, Any]:
    """The log holds the client's and the agents' messages; bot and system
    messages have no place in the spec's ``visitor | agent`` items."""
    body = _chat_common("chat_finished", chat)
    body["agents"] = [agent(person) for person in selectors.agents_of(chat)]
    body = _session_and_page(body, chat)
    log = chat.messages.filter(author__in=(Message.Author.CLIENT, Message.Author.AGENT))
    body["chat"] = {
        "messages": [log_item(message) for message in log.order_by("created", "id")],
        "rate": chat.rating or None,
        "blacklisted": chat.blacklisted,
    }
    return body


def offline_message(offline: OfflineMessage) -> dict[str, Any]:
    """No ``chat_id`` and no ``agent``: nobody was there to chat."""
    body = _common("offline_message", offline.channel, offline.client)
    body["visitor"] = visitor(
        offline.client,
        name=offline.name,
        email=offline.email,
        phone=offline.phone,
        description=offline.description,
    )
    body["session"] = session(offline.client)
    body["page"] = page(offline.client, url=offline.page_url, title=offline.page_title)
    body["analytics"] = {}
    body["offline_message_id"] = str(offline.pk)
    body["message"] = offline.message
    return body


def call_event(call: Call) -> dict[str, Any]:
    """``chat_id`` is the client's chat the call belongs to, 0 when it has none."""
    body = _common("call_event", call.channel, call.client)
    body = {"event_name": "call_event", "chat_id": call.chat_id or 0, **body}
    body["agent"] = agent(call.agent)
    if call.chat is not None and call.chat.department is not None:
        department = call.chat.department
        body["department"] = {"id": department.pk, "name": department.name}
    body["session"] = session(call.client)
    body["page"] = page(call.client)
    body["analytics"] = {}
    details: dict[str, Any] = {"type": call.type, "phone": call.phone, "status": call.status}
    if call.status == Call.Status.ERROR:
        details["reason"] = call.reason
    if call.status == Call.Status.END and call.record_url:
        details["record_url"] = call.record_url
    body["call"] = details
    return body
