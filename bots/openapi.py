"""B2, the Bot API's inbound endpoint, in /api/docs/ (docs/bot-api.md).

B2 is a plain Django view whose URL is the credential (the provider's id and
token in the path, no DRF authentication), so drf-spectacular does not find
it: this hook writes it into the schema as bots/serializers.py reads it.
What the service sends to the bot (B1) is docs/bot-api.md's.
"""

from __future__ import annotations

from typing import Any

from bots.models import URL_PREFIX
from bots.serializers import CONTACT_LIMITS, EVENTS, MESSAGE_TYPES
from config.openapi import OK_SCHEMA, error_ref
from config.text import TEXT_LIMIT

TAG = "Bot API"

ID = {
    "oneOf": [{"type": "string", "pattern": "^[0-9]{1,18}$"}, {"type": "integer", "minimum": 1}],
    "description": "The id the service sent, a string of digits (a number is taken too).",
}

BOT_EVENT = {
    "type": "object",
    "required": ["event", "chat_id"],
    "properties": {
        "event": {
            "type": "string",
            "enum": list(EVENTS),
            "description": "BOT_MESSAGE needs message; CLIENT_INFO needs client_id; "
            "INVITE_AGENT hands the chat to the agents.",
        },
        "id": {
            "oneOf": [{"type": "string", "maxLength": 255}, {"type": "integer"}],
            "nullable": True,
            "description": "The event's id, for logs.",
        },
        "chat_id": ID,
        "client_id": ID,
        "message": {
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": {"type": "string", "enum": list(MESSAGE_TYPES)},
                "text": {"type": "string", "maxLength": TEXT_LIMIT},
                "timestamp": {
                    "oneOf": [{"type": "number"}, {"type": "string", "pattern": "^[0-9]+$"}],
                    "description": "Unix seconds.",
                },
                "buttons": {
                    "type": "array",
                    "description": "BUTTONS: the choices offered (docs/bot-api.md).",
                    "items": {"type": "object"},
                },
            },
        },
        **{
            field: {"type": "string", "description": f"CLIENT_INFO; cut to {limit} characters."}
            for field, limit in CONTACT_LIMITS.items()
        },
    },
}


def _path() -> dict[str, Any]:
    return {
        "post": {
            "operationId": "bot_api_event",
            "tags": [TAG],
            "summary": "B2: the bot's message, its hand-over to an agent, or the client's "
            "contact details",
            "security": [],
            "parameters": [
                {
                    "name": "provider_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "The bot provider's id.",
                },
                {
                    "name": "token",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "The provider's token: the credential.",
                },
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "maxLength": 255},
                    "description": "A retry with the same key is answered as the first and "
                    "changes nothing.",
                },
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/BotEvent"}}
                },
            },
            "responses": {
                "200": {
                    "description": "Taken.",
                    "content": {"application/json": {"schema": OK_SCHEMA}},
                },
                "400": error_ref("The body breaks a rule (not JSON, a missing field, …)."),
                "401": error_ref("No provider with that id and token."),
                "403": error_ref("The bot is switched off, or the chat is not with it."),
                "404": error_ref("No such chat of this bot's channels."),
                "413": error_ref("The body is larger than BOT_API_MAX_BODY_BYTES."),
                "429": error_ref("Over the provider's rate limit."),
            },
        }
    }


def add_bot_api(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular's POSTPROCESSING_HOOKS entry."""
    result.setdefault("paths", {})[f"/{URL_PREFIX}/{{provider_id}}/{{token}}"] = _path()
    result.setdefault("components", {}).setdefault("schemas", {})["BotEvent"] = BOT_EVENT
    result.setdefault("tags", []).append(
        {"name": TAG, "description": "The bot provider calls this (docs/bot-api.md)."}
    )
    return result
