"""The Chat Channel API in /api/docs/ beside the agent API (docs/chat-api.md).

A1 and A2 are plain Django views (the endpoint URL is the credential, no
DRF authentication), and A3 is a request the service makes, so neither is
found by drf-spectacular: this hook writes them into the schema, exactly as
the spec's tables describe them. A3 is a path of its own whose server is the
integrator's endpoint (OpenAPI 3.0 has no webhooks section).
"""

from __future__ import annotations

from typing import Any

from channels_api.models import URL_PREFIX
from channels_api.serializers import TEXT_LIMIT
from config.openapi import ERROR_SCHEMA, OK_SCHEMA

TAG = "Chat Channel API"
A3_TAG = "Chat Channel API: what your endpoint receives (A3)"

MEDIA_TYPES = ["video", "audio", "voice", "photo", "sticker", "document"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": _ref("ChatApiError")}},
    }


MESSAGE_FIELDS: dict[str, Any] = {
    "text": {
        "type": "string",
        "description": f"Text or caption; over {TEXT_LIMIT} characters is cut.",
    },
    "file": {"type": "string", "format": "uri", "description": "http(s) URL of the file (media)."},
    "thumb": {
        "type": "string",
        "format": "uri",
        "description": "http(s) URL of a 320 px wide thumbnail.",
    },
    "emoji": {"type": "string", "description": "A character that may stand for the media."},
    "file_size": {"type": "integer", "minimum": 1, "description": "Bytes (media)."},
    "file_name": {"type": "string", "description": "The file's name (media)."},
    "duration": {"type": "integer", "minimum": 1, "description": "Seconds."},
    "width": {"type": "integer", "minimum": 1},
    "height": {"type": "integer", "minimum": 1},
    "performer": {"type": "string"},
    "title": {"type": "string"},
    "latitude": {"type": "number", "description": "Location only."},
    "longitude": {"type": "number", "description": "Location only."},
}

SCHEMAS: dict[str, Any] = {
    "ChatApiUserSender": {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {
                "oneOf": [{"type": "string"}, {"type": "integer"}],
                "description": "The customer's id in your system; empty or absent: not taken.",
            },
            "name": {"type": "string", "description": "Shown to agents; absent: Anonymous."},
            "phone": {"type": "string"},
            "email": {"type": "string"},
            "photo": {"type": "string", "format": "uri", "description": "http(s) avatar, 128x128."},
            "url": {"type": "string", "format": "uri"},
            "invite": {"type": "string", "description": "The invitation text agents see."},
        },
    },
    "ChatApiMessage": {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {
                "type": "string",
                "enum": ["text", *MEDIA_TYPES, "location", "typein", "typeout"],
                "description": "typein / typeout: typing starts / ends (other fields ignored). "
                "Media need file, file_name, file_size; location latitude, longitude.",
            },
            "id": {"type": "string", "description": "Your message id (logs, duplicate checks)."},
            **MESSAGE_FIELDS,
        },
    },
    "ChatApiUserMessage": {
        "type": "object",
        "required": ["sender", "message"],
        "properties": {"sender": _ref("ChatApiUserSender"), "message": _ref("ChatApiMessage")},
    },
    "ChatApiAgentMessage": {
        "type": "object",
        "required": ["sender", "recipient", "message"],
        "properties": {
            "sender": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "The agent (or the bot's display name).",
                    },
                    "photo": {
                        "type": "string",
                        "format": "uri",
                        "description": "The agent's avatar.",
                    },
                },
            },
            "recipient": {
                "type": "object",
                "required": ["id"],
                "properties": {
                    "id": {
                        "oneOf": [{"type": "string"}, {"type": "integer"}],
                        "description": "Your sender.id, returned unchanged.",
                    }
                },
            },
            "message": {
                "type": "object",
                "required": ["type", "id"],
                "properties": {
                    "type": {
                        "type": "string",
                        "enum": ["text", *MEDIA_TYPES, "location", "typein", "typeout"],
                    },
                    "id": {"type": "string", "description": "The service's message id."},
                    **MESSAGE_FIELDS,
                },
            },
        },
    },
    "ChatApiResult": OK_SCHEMA,
    "ChatApiError": ERROR_SCHEMA,
}

PATH_PARAMETERS = [
    {"name": "path_secret", "in": "path", "required": True, "schema": {"type": "string"},
     "description": "The random part of the channel's endpoint URL: the credential."},
    {"name": "public_id", "in": "path", "required": True, "schema": {"type": "string"},
     "description": "CHANNEL_PUBLIC_ID."},
]  # fmt: skip

SIGNATURE_HEADERS = [
    {"name": "webhook-id", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "The delivery's id; the same on every retry (de-duplicate on it)."},
    {"name": "webhook-timestamp", "in": "header", "required": True, "schema": {"type": "integer"},
     "description": "Unix seconds of this try."},
    {"name": "webhook-signature", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "v1,<base64 HMAC-SHA256 of id.timestamp.body> with the channel's signing "
     "secret (Standard Webhooks; docs/signatures.md)."},
]  # fmt: skip


def _paths() -> dict[str, Any]:
    base = f"/{URL_PREFIX}/{{path_secret}}/{{public_id}}"
    return {
        f"{base}/status": {
            "get": {
                "operationId": "chat_api_status",
                "tags": [TAG],
                "summary": "A1: is the chat available? 1 while an agent of the channel is online",
                "security": [],
                "parameters": PATH_PARAMETERS,
                "responses": {
                    "200": {
                        "description": "A bare integer: 1 available, 0 not.",
                        "content": {
                            "application/json": {"schema": {"type": "integer", "enum": [0, 1]}}
                        },
                    },
                    "404": _error("No channel with that identifier."),
                    "405": _error("Any method but GET or HEAD."),
                },
            }
        },
        base: {
            "post": {
                "operationId": "chat_api_user_message",
                "tags": [TAG],
                "summary": "A2: a user message (or typein / typeout) from your chat front end",
                "security": [],
                "parameters": [
                    *PATH_PARAMETERS,
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "maxLength": 255},
                        "description": "A retry with the same key is answered as the first "
                        "and changes nothing.",
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("ChatApiUserMessage")}},
                },
                "responses": {
                    "200": {
                        "description": "Taken.",
                        "content": {"application/json": {"schema": _ref("ChatApiResult")}},
                    },
                    "400": _error("The body breaks a rule (not JSON, a missing field, …)."),
                    "403": _error("The channel is switched off."),
                    "404": _error("No channel with that identifier."),
                    "413": _error("The body is larger than CHAT_API_MAX_BODY_BYTES."),
                    "429": _error("Over the channel's rate limit (see Retry-After)."),
                },
            }
        },
        "/{public_id}": {
            "post": {
                "operationId": "chat_api_agent_message",
                "servers": [
                    {
                        "url": "{customer_endpoint}",
                        "description": "Your endpoint, given when the channel was made.",
                        "variables": {
                            "customer_endpoint": {"default": "https://integrator.example.com/chat"}
                        },
                    }
                ],
                "tags": [A3_TAG],
                "summary": "A3: an agent's message (or typein / typeout) that the service "
                "POSTs to your endpoint",
                "description": "Signed; sent with Content-Length or chunked (the channel's "
                "option); tried 3 times 3 s apart until a 2xx. An error body's message is "
                "shown to the agent in the chat.",
                "security": [],
                "parameters": [
                    {
                        "name": "public_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "CHANNEL_PUBLIC_ID.",
                    },
                    *SIGNATURE_HEADERS,
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("ChatApiAgentMessage")}},
                },
                "responses": {
                    "200": {
                        "description": "Your answer: shown as delivered.",
                        "content": {"application/json": {"schema": _ref("ChatApiResult")}},
                    },
                    "default": _error("Not delivered: the agent sees your error's message."),
                },
            },
        },
    }


def add_chat_channel_api(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular's POSTPROCESSING_HOOKS entry."""
    result.setdefault("paths", {}).update(_paths())
    result.setdefault("components", {}).setdefault("schemas", {}).update(SCHEMAS)
    tags = result.setdefault("tags", [])
    tags.append({"name": TAG, "description": "Your chat front end calls these (docs/chat-api.md)."})
    tags.append({"name": A3_TAG, "description": "The service calls your endpoint with this."})
    return result
