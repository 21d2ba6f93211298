"""JSON Schemas of the developer-webhook events, written from the spec's
field tables (section C, "Common webhook request fields" and "Per-event extra
fields"), independently of devhooks/payloads.py.

Strict where a typed receiver is strict: types as the tables give them,
required objects are objects (never null), and no field outside the tables.
"""

from __future__ import annotations

from typing import Any

STRING = {"type": "string"}
NUMBER = {"type": "number"}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


VISITOR = _object(
    {
        "name": STRING,
        "email": STRING,
        "phone": STRING,
        "number": STRING,
        "description": STRING,
        "social": {"type": "object"},
        "chats_count": NUMBER,
    },
    ["number", "description", "chats_count"],
)
AGENT = _object(
    {"id": {"type": "integer"}, "name": STRING, "email": STRING, "phone": STRING},
    ["id", "name", "email"],
)
DEPARTMENT = _object({"id": NUMBER, "name": STRING}, ["id", "name"])
GEOIP_FIELDS = [
    "region_code",
    "country",
    "country_code",
    "region",
    "city",
    "latitude",
    "longitude",
    "organization",
]
GEOIP = _object({name: STRING for name in GEOIP_FIELDS}, GEOIP_FIELDS)
UTM_JSON = _object(
    {name: STRING for name in ("source", "campaign", "content", "medium", "term")}, []
)
SESSION = _object(
    {
        "geoip": GEOIP,
        "utm": STRING,
        "utm_json": UTM_JSON,
        "ip_addr": STRING,
        "user_agent": STRING,
    },
    ["geoip", "utm", "utm_json", "ip_addr", "user_agent"],
)
PAGE = _object({"url": STRING, "title": STRING}, ["url"])

COMMON = {
    "chat_id": NUMBER,
    "widget_id": STRING,
    "user_token": STRING,
    "visitor": VISITOR,
    "agent": AGENT,
    "department": DEPARTMENT,
    "session": SESSION,
    "page": PAGE,
    "analytics": {"type": "object"},
}
REQUIRED = ["event_name", "chat_id", "widget_id", "visitor", "session", "page"]

LOG_ITEM = {
    "type": "object",
    "properties": {
        "timestamp": NUMBER,
        "type": {"enum": ["visitor", "agent"]},
        "agent_id": NUMBER,
        "message": STRING,
        "blacklisted": {"type": "boolean"},
    },
    "required": ["timestamp", "type", "message"],
    "additionalProperties": False,
    # agent_id is present exactly on agent items.
    "if": {"properties": {"type": {"const": "agent"}}},
    "then": {"required": ["agent_id"]},
    "else": {"not": {"required": ["agent_id"]}},
}

CALL = {
    "type": "object",
    "properties": {
        "type": {"enum": ["callback", "incoming", "outgoing"]},
        "phone": STRING,
        "status": {"enum": ["start", "end", "agent_connected", "client_connected", "error"]},
        "reason": STRING,
        "record_url": STRING,
    },
    "required": ["type", "phone", "status"],
    "additionalProperties": False,
    "allOf": [
        {
            "if": {"properties": {"status": {"const": "error"}}},
            "then": {"required": ["reason"]},
            "else": {"not": {"required": ["reason"]}},
        },
        {
            "if": {"properties": {"status": {"not": {"const": "end"}}}},
            "then": {"not": {"required": ["record_url"]}},
        },
    ],
}


def _event(
    name: str, extra: dict[str, Any], required: list[str], *, drop: tuple[str, ...] = ()
) -> dict[str, Any]:
    properties = {"event_name": {"const": name}, **COMMON, **extra}
    for field in drop:
        properties.pop(field)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": name,
        "type": "object",
        "properties": properties,
        "required": [field for field in REQUIRED if field not in drop] + required,
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "chat_accepted": _event("chat_accepted", {}, ["agent"]),
    "chat_assigned": _event("chat_assigned", {"assign_to": STRING}, ["agent", "assign_to"]),
    "chat_updated": _event("chat_updated", {}, ["agent"]),
    "chat_finished": _event(
        "chat_finished",
        {
            "agents": {"type": "array", "items": AGENT},
            "chat": _object(
                {
                    "messages": {"type": "array", "items": LOG_ITEM},
                    "rate": {"enum": ["positive", "negative", None]},
                    "blacklisted": {"type": "boolean"},
                },
                ["messages", "rate", "blacklisted"],
            ),
        },
        ["agents", "chat"],
        drop=("agent",),
    ),
    "offline_message": _event(
        "offline_message",
        {"offline_message_id": STRING, "message": STRING},
        ["offline_message_id", "message"],
        drop=("chat_id", "agent"),
    ),
    "call_event": _event("call_event", {"call": CALL}, ["agent", "call"]),
}
