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
from agents.models import Agent, Message
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from tests.factories import AgentFactory, ClientFactory, page_of, text

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


HUGE = "9" * 5000


@pytest.mark.parametrize("number", [HUGE, f"-{HUGE}", f"{HUGE}.5", "1e999"])
def test_a_number_too_large_for_anything_is_a_400_in_our_words(
    chat_api: ChatApiChannel, agent_api: tuple[APIClient, int], number: str
) -> None:
    # Given A2's and the agent API's bodies with a number no field of ours can hold
    a2 = "/" + chat_api.endpoint_url.split("/", 3)[3]
    api, chat_id = agent_api
    stored = Message.objects.count()

    # When they are sent
    answers: list[Any] = [
        Browser().post(
            a2,
            f'{{"sender": {{"id": {number}}}, "message": {{"type": "text", "text": "hi"}}}}',
            content_type="application/json",
        ),
        api.generic(
            "POST",
            f"/api/agent/v1/chats/{chat_id}/messages",
            f'{{"type": "text", "text": "hi", "id": {number}}}',
            content_type="application/json",
        ),
    ]

    # Then each is refused with our own message, and nothing is stored
    for answer in answers:
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["code"] == "invalid_request"
        assert error["message"].startswith("the body is not valid JSON: a number is longer than")
        assert "sys." not in error["message"]
    assert Message.objects.count() == stored


def test_a_number_too_large_for_an_id_in_a_page_query_names_no_chat(
    agent_api: tuple[APIClient, int],
) -> None:
    # Given an agent with a chat, signed in to the pages
    page = page_of(Agent.objects.get())

    # When a page asks with an id no row can have
    live = page.get(f"/agent/live?chat={HUGE}&after={HUGE}")
    search = page.get(f"/agent/canned/search?q=x&chat={HUGE}")

    # Then it is answered as for no chat at all
    assert live.status_code == 200 and live.json()["online"] is True
    assert search.status_code == 200 and search.json() == {"replies": []}
