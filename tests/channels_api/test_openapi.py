"""The Chat Channel API in /api/schema/ and /api/docs/, beside the agent API."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client as Browser
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema() -> dict[str, Any]:
    answer = Browser().get("/api/schema/")
    assert answer.status_code == 200
    loaded: dict[str, Any] = yaml.safe_load(answer.content)
    return loaded


def test_the_schema_is_valid_openapi_with_both_apis(schema: dict[str, Any]) -> None:
    validate_schema(schema)
    paths = schema["paths"]
    assert "/api/agent/v1/chats" in paths
    a1 = paths["/chat-api/{path_secret}/{public_id}/status"]["get"]
    assert a1["responses"]["200"]["content"]["application/json"]["schema"]["enum"] == [0, 1]
    a2 = paths["/chat-api/{path_secret}/{public_id}"]["post"]
    assert set(a2["responses"]) == {"200", "400", "403", "404", "413", "429"}
    assert "Idempotency-Key" in [p["name"] for p in a2["parameters"]]


def test_the_spec_fields_are_all_there(schema: dict[str, Any]) -> None:
    schemas = schema["components"]["schemas"]
    sender = schemas["ChatApiUserSender"]
    assert sender["required"] == ["id"]
    assert set(sender["properties"]) == {"id", "name", "phone", "email", "photo", "url", "invite"}
    message = schemas["ChatApiMessage"]["properties"]
    assert set(message["type"]["enum"]) == {
        "text", "video", "audio", "voice", "photo", "sticker", "document", "location",
        "typein", "typeout",
    }  # fmt: skip
    spec_fields = {
        "file", "thumb", "emoji", "file_size", "file_name", "duration", "width", "height",
        "performer", "title", "latitude", "longitude", "text", "id",
    }  # fmt: skip
    assert spec_fields <= set(message)
    a3 = schemas["ChatApiAgentMessage"]["properties"]
    assert set(a3) == {"sender", "recipient", "message"}
    assert set(a3["sender"]["properties"]) == {"name", "photo"}


def test_a3_is_documented_as_the_request_the_integrator_receives(schema: dict[str, Any]) -> None:
    a3 = schema["paths"]["/{public_id}"]["post"]
    assert a3["servers"][0]["url"] == "{customer_endpoint}"
    headers = {p["name"] for p in a3["parameters"] if p["in"] == "header"}
    assert headers == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    body = a3["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ChatApiAgentMessage"}
    assert {t["name"] for t in schema["tags"]} >= {
        "Chat Channel API",
        "Chat Channel API: what your endpoint receives (A3)",
    }
