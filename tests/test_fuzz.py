"""No input makes a 500: arbitrary JSON against A2 and the agent API.

Hypothesis builds bodies shaped like the real ones with hostile values in
every place (wrong types, huge numbers, NUL, lone surrogates, deep nesting);
every answer must be one of the spec's statuses with the error shape.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client as Browser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = pytest.mark.django_db

SPEC_STATUSES = {200, 201, 400, 401, 403, 404, 405, 413, 429}
TYPES = ["text", "photo", "video", "audio", "voice", "sticker", "document", "location",
         "markdown", "buttons", "typein", "typeout", "", "TEXT"]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["\x00", "\ud83d", "https://x.example/a", "javascript:alert(1)", "x" * 3000])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
fields = ["id", "name", "phone", "email", "photo", "url", "invite"]
media = [
    "text", "file", "thumb", "file_name", "file_size", "duration", "width", "height",
    "latitude", "longitude", "title", "performer", "emoji", "content", "buttons", "id",
]  # fmt: skip
hostile_text = st.text(max_size=30) | st.sampled_from(
    ["\x00", "a\x00b", "\ud83d", "x\udc00y", "x" * 3000, "<script>alert(1)</script>"]
)
sender_ids = st.text(min_size=1, max_size=20) | st.integers(1, 10**6) | hostile_text | values
senders = st.fixed_dictionaries(
    {"id": sender_ids}, optional={name: hostile_text | values for name in fields if name != "id"}
)
messages = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES) | st.sampled_from(TYPES) | values},
    optional={
        name: hostile_text | st.integers(-5, 10**20) | st.floats(allow_nan=False) | values
        for name in media
    },
)
# Mostly the real shape, with hostile values inside; sometimes anything at all.
bodies = st.fixed_dictionaries({"sender": senders, "message": messages}) | st.fixed_dictionaries(
    {}, optional={"sender": senders | values, "message": messages | values}
)


def encode(body: Any) -> bytes:
    return json.dumps(body).encode()  # keeps \\u0000 and lone surrogates as JSON escapes


def assert_well_formed(answer: Any) -> None:
    assert answer.status_code in SPEC_STATUSES, (answer.status_code, answer.content[:300])
    if answer.status_code >= 400:
        error = answer.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str)


@pytest.fixture
def chat_api(db: None) -> ChatApiChannel:
    agent = AgentFactory.create(is_online=True)
    return create_chat_api_channel(name="Fuzz", webhook_url="https://x.example/h", agents=[agent])[
        0
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies)
def test_a2_never_answers_500(chat_api: ChatApiChannel, body: Any) -> None:
    path = "/" + chat_api.endpoint_url.split("/", 3)[3]
    answer = Browser().post(path, encode(body), content_type="application/json")
    assert_well_formed(answer)


@pytest.fixture
def agent_api(db: None) -> tuple[APIClient, int]:
    agent: Agent = AgentFactory.create(is_online=True)
    client = ClientFactory.create()
    client.channel.agents.add(agent)
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.accept_chat(chat=chat, agent=agent)
    api = APIClient()
    from agents.tokens import issue_token

    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return api, chat.pk


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=messages | values, action=st.sampled_from(["messages", "typing", "status"]))
def test_the_agent_api_never_answers_500(
    agent_api: tuple[APIClient, int], body: Any, action: str
) -> None:
    api, chat_id = agent_api
    path = (
        "/api/agent/v1/status" if action == "status" else f"/api/agent/v1/chats/{chat_id}/{action}"
    )
    answer = api.generic("POST", path, encode(body).decode(), content_type="application/json")
    assert_well_formed(answer)
