"""What every API's schema shares (SPECTACULAR_SETTINGS' POSTPROCESSING_HOOKS).

Every API answers a refusal with one body, ``{"error": {"code", "message"}}``
(config/api_errors.py). drf-spectacular describes only the agent API's
answers that succeed; this hook adds its refusals, so a client generated from
the schema (and tests/test_schemathesis.py) knows every status it can get.
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}

# The answer of an inbound call that only takes (A2, B2).
OK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["result"],
    "properties": {"result": {"type": "string", "enum": ["ok"]}},
}

AGENT_API = "/api/agent/v1/"
AGENT_API_REFUSALS = {
    "400": "The body or a parameter breaks a rule, or the chat's state refuses the action.",
    "401": "No token, or one that is not valid (`Authorization: Token <key>`).",
    "403": "Not yours to see or change (another agent's chat, an admin's page).",
    "404": "No such chat, message, call or offline message of yours.",
    "413": "The body (or the file) is too large.",
    "415": "The body is not JSON (or, for files, not multipart).",
    "429": "Too many requests (see Retry-After).",
}


def error_ref(description: str) -> dict[str, Any]:
    """A response whose body is the error body."""
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def add_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """The agent API's refusals, each with the error body."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in result.get("paths", {}).items():
        if not path.startswith(AGENT_API):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status, description in AGENT_API_REFUSALS.items():
                responses.setdefault(status, error_ref(description))
    return result
