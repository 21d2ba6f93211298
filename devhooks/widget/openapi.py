"""The widget's visitor API in /api/docs/ (docs/widget.md).

``POST /widget/<widget_id>/v1/<action>`` is one plain Django view for every
action of ``window.svc_api``; the visitor is the token in the body (none
before the first action that makes one), so drf-spectacular finds nothing.
This hook writes each action as a path of its own, its body as
devhooks/widget/serializers.py reads it and its answer as
devhooks/widget/views.py gives it.
"""

from __future__ import annotations

from typing import Any

from config.openapi import error_ref
from devhooks.widget.serializers import MAX_CUSTOM_FIELDS, RATINGS

TAG = "Widget visitor API"

STRING = {"type": "string"}
OBJECT = {"type": "object"}
TEXT_OR_NULL = {"type": "string", "nullable": True}

VISIT = {
    "token": {
        "type": "string",
        "nullable": True,
        "description": "The visitor's token, as an earlier answer gave it; absent for a new "
        "visitor.",
    },
    "landing_url": {"type": "string", "description": "The URL the visit began on (its UTM)."},
    "page": {
        "type": "object",
        "properties": {"url": STRING, "title": STRING},
        "description": "The page the visitor is on.",
    },
}
FORM = {name: TEXT_OR_NULL for name in ("name", "email", "phone", "description")}
CONTACT = {
    "type": "object",
    "properties": {name: TEXT_OR_NULL for name in ("client_name", "email", "phone", "description")},
}

# Each action: (summary, its own body fields, the fields it requires, its answer's fields).
ACTIONS: dict[str, tuple[str, dict[str, Any], list[str], dict[str, Any]]] = {
    "session": (
        "On each page load: the widget's settings and a returning visitor's chat",
        {},
        [],
        {"config": OBJECT, "visitor": {"type": "object", "nullable": True}},
    ),
    "visitor": (
        "The visitor (made now if the token names none) and its chat",
        {},
        [],
        {
            "visitor_number": {"type": "integer"},
            "contact": CONTACT,
            "chat": {"type": "object", "nullable": True},
            "messages": {"type": "array", "items": OBJECT},
            "last_event_id": {"type": "integer"},
        },
    ),
    "message": (
        "A message of the visitor (starts a chat when none is open)",
        {
            "text": STRING,
            "department_id": {"oneOf": [{"type": "integer"}, STRING], "nullable": True},
            "invitation": STRING,
            "consent_version": {"type": "integer", "minimum": 0, "nullable": True},
            "language": STRING,
        },
        ["text"],
        {
            "message_id": {"type": "integer"},
            "chat_id": {"type": "integer"},
            "state": STRING,
            "created": {"type": "string", "format": "date-time"},
        },
    ),
    "typing": ("The visitor started or stopped typing", {"typing": {"type": "boolean"}}, [], {}),
    "contact": (
        "The visitor's contact details (setContactInfo, the contact form)",
        FORM,
        [],
        {"contact": CONTACT, "email_link_sent": {"type": "boolean"}},
    ),
    "custom_data": (
        "Fields for the agent's side panel (setCustomData)",
        {"fields": {"type": "array", "maxItems": MAX_CUSTOM_FIELDS, "items": OBJECT}},
        ["fields"],
        {"fields": {"type": "array", "items": OBJECT}},
    ),
    "user_token": (
        "The site's id of the visitor, sent in webhooks (setUserToken)",
        {"user_token": {"oneOf": [STRING, {"type": "integer"}]}},
        ["user_token"],
        {"user_token": STRING},
    ),
    "page": (
        "The page opened now (sendPageTitle)",
        {"url": STRING, "title": STRING},
        [],
        {"page": {"type": "object", "properties": {"url": STRING, "title": STRING}}},
    ),
    "rate": (
        "Rate the visitor's chat",
        {"rating": {"type": "string", "enum": list(RATINGS)}, "comment": TEXT_OR_NULL},
        ["rating"],
        {"rating": {**STRING, "nullable": True}, "comment": STRING},
    ),
    "call": ("Ask to be called back", {"phone": STRING}, ["phone"], {}),
    "callback": (
        "Why a callback cannot be asked for now (empty: it can)",
        {},
        [],
        {"reason": STRING},
    ),
    "queue": (
        "The visitor's chat's place in the queue",
        {},
        [],
        {"queue": {"type": "object", "nullable": True}},
    ),
    "offline": (
        "A message left while no agent is online (the offline form)",
        {**FORM, "message": TEXT_OR_NULL},
        [],
        {},
    ),
}


def _operation(action: str) -> dict[str, Any]:
    summary, fields, required, answer = ACTIONS[action]
    body: dict[str, Any] = {"type": "object", "properties": {**VISIT, **fields}}
    if required:
        body["required"] = required
    return {
        "post": {
            "operationId": f"widget_{action}",
            "tags": [TAG],
            "summary": summary,
            "security": [],
            "parameters": [
                {
                    "name": "widget_id",
                    "in": "path",
                    "required": True,
                    "schema": STRING,
                    "description": "The widget's id, as in its script's URL.",
                },
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": body}},
            },
            "responses": {
                "200": {
                    "description": "Done. An answer that made the visitor carries its new "
                    "token and the event its stream replays from.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["result", *answer],
                                "properties": {
                                    "result": {"type": "string", "enum": ["ok"]},
                                    "token": STRING,
                                    "last_event_id": {"type": "integer"},
                                    **answer,
                                },
                            }
                        }
                    },
                },
                "400": error_ref("The body breaks a rule; the message is the visitor's to read."),
                "404": error_ref("No such widget."),
                "429": error_ref("Too many requests from this visitor or address."),
            },
        }
    }


def add_widget_api(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular's POSTPROCESSING_HOOKS entry."""
    paths = result.setdefault("paths", {})
    for action in ACTIONS:
        paths[f"/widget/{{widget_id}}/v1/{action}"] = _operation(action)
    result.setdefault("tags", []).append(
        {"name": TAG, "description": "The widget's script calls these (docs/widget.md)."}
    )
    return result
