"""The agent REST API, as an outside tool drives it."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, Chat
from agents.tokens import issue_token
from tests.factories import (
    AgentFactory,
    ChannelFactory,
    ChatFactory,
    ClientFactory,
    MessageFactory,
    text,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(agent: Agent) -> Chat:
    client = ClientFactory.create(
        channel=ChannelFactory.create(agents=[agent]), email="c@example.com"
    )
    return services.post_client_message(client=client, content=text("Hello?")).chat


def test_status_goes_online_and_offline(api: APIClient, agent: Agent) -> None:
    answer = api.post("/api/agent/v1/status", {"status": "offline"}, format="json")

    assert (answer.status_code, answer.json()) == (200, {"status": "offline"})
    agent.refresh_from_db()
    assert not agent.is_online


@pytest.mark.parametrize("body", [{}, {"status": "away"}, {"status": None}, []])
def test_status_rejects_bad_input(api: APIClient, body: object) -> None:
    answer = api.post("/api/agent/v1/status", body, format="json")

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
    assert answer.json()["error"]["message"]


def test_chat_list_shows_my_chats(api: APIClient, chat: Chat) -> None:
    ChatFactory.create()  # another channel's chat

    answer = api.get("/api/agent/v1/chats")

    assert answer.status_code == 200
    assert answer.json()["count"] == 1
    item = answer.json()["results"][0]
    assert item["id"] == chat.pk and item["state"] == "queued"
    assert item["channel"] == {"id": chat.channel.pk, "name": chat.channel.name, "kind": "chat_api"}
    assert item["client"] == {
        "id": chat.client.pk,
        "name": chat.client.name,
        "email": "c@example.com",
        "phone": "",
    }
    assert item["client_typing"] is False and item["created"]


def test_chat_list_filters_by_state(api: APIClient, chat: Chat) -> None:
    assert api.get("/api/agent/v1/chats?state=queued").json()["count"] == 1
    assert api.get("/api/agent/v1/chats?state=active").json()["count"] == 0
    bad = api.get("/api/agent/v1/chats?state=sleeping")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"


def test_chat_detail_has_contact_and_crm_data(api: APIClient, chat: Chat) -> None:
    Chat.objects.filter(pk=chat.pk).update(
        custom_data=[{"title": "Plan", "content": "Gold"}], crm_link="https://crm.example/1"
    )
    services.set_client_typing(chat=chat, typing=True)

    body = api.get(f"/api/agent/v1/chats/{chat.pk}").json()

    assert body["client_typing"] is True
    assert body["client"]["visitor_number"] == chat.client.visitor_number
    assert body["custom_data"] == [{"title": "Plan", "content": "Gold"}]
    assert body["crm_link"] == "https://crm.example/1"


def test_reply_flow(api: APIClient, chat: Chat, agent: Agent) -> None:
    early = api.post(f"/api/agent/v1/chats/{chat.pk}/messages", {"type": "text", "text": "hi"})
    assert early.status_code == 400 and early.json()["error"]["code"] == "invalid_state"

    accepted = api.post(f"/api/agent/v1/chats/{chat.pk}/accept")
    assert accepted.status_code == 200 and accepted.json()["state"] == "active"
    assert accepted.json()["agents"] == [{"id": agent.pk, "name": agent.name}]

    typing = api.post(f"/api/agent/v1/chats/{chat.pk}/typing", {"typing": True}, format="json")
    assert typing.json() == {"typing": True}

    sent = api.post(
        f"/api/agent/v1/chats/{chat.pk}/messages", {"type": "text", "text": "How can I help?"}
    )
    assert sent.status_code == 201
    assert sent.json()["author"] == "agent" and sent.json()["agent_name"] == agent.name

    messages = api.get(f"/api/agent/v1/chats/{chat.pk}/messages").json()
    assert [(m["author"], m["text"]) for m in messages] == [
        ("client", "Hello?"),
        ("agent", "How can I help?"),
    ]
    assert messages[1]["delivery"] == {"status": "", "error": ""}

    finished = api.post(f"/api/agent/v1/chats/{chat.pk}/finish")
    assert finished.json()["state"] == "finished" and finished.json()["finished"]
    again = api.post(f"/api/agent/v1/chats/{chat.pk}/finish")
    assert again.status_code == 400 and again.json()["error"]["code"] == "invalid_state"


def test_agent_sends_media(api: APIClient, chat: Chat) -> None:
    api.post(f"/api/agent/v1/chats/{chat.pk}/accept")
    photo = {
        "type": "photo",
        "file": "https://cdn.example/p.png",
        "file_name": "p.png",
        "file_size": 2048,
        "thumb": "https://cdn.example/t.png",
    }

    sent = api.post(f"/api/agent/v1/chats/{chat.pk}/messages", photo, format="json")

    assert sent.status_code == 201
    assert sent.json()["payload"] == {
        "file": "https://cdn.example/p.png",
        "thumb": "https://cdn.example/t.png",
        "file_name": "p.png",
        "file_size": 2048,
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "text"}, "text is required for type text"),
        ({"type": "text", "text": "x" * 4001}, "text"),
        ({"type": "smoke", "text": "x"}, "type"),
        ({"type": "photo", "file": "ftp://x/y", "file_name": "a", "file_size": 1}, "URL"),
        ({"type": "photo", "file": "https://x/y", "file_name": "a", "file_size": -3}, "positive"),
        ({"type": "location", "latitude": 91, "longitude": 0}, "latitude"),
    ],
)
def test_agent_message_rejects_bad_content(
    api: APIClient, chat: Chat, body: dict[str, object], message: str
) -> None:
    api.post(f"/api/agent/v1/chats/{chat.pk}/accept")

    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/messages", body, format="json")

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
    assert message in answer.json()["error"]["message"]
    assert chat.messages.count() == 1


def test_malformed_json_is_a_400(api: APIClient, chat: Chat) -> None:
    answer = api.post(
        f"/api/agent/v1/chats/{chat.pk}/messages", "{not json", content_type="application/json"
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"


def test_no_token_is_401(chat: Chat) -> None:
    answer = APIClient().get("/api/agent/v1/chats")

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_client"
    assert answer["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("header", ["{key}", "Bearer {key}", "token{key}"])
def test_a_key_without_the_token_prefix_is_told_so(chat: Chat, header: str) -> None:
    key = issue_token(agent=AgentFactory.create())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header.format(key=key))

    answer = client.get("/api/agent/v1/chats")

    assert answer.status_code == 401 and answer["WWW-Authenticate"] == "Token"
    assert answer.json()["error"]["code"] == "invalid_client"
    assert "'Authorization: Token <key>'" in answer.json()["error"]["message"]


def test_wrong_token_is_401(chat: Chat) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.get("/api/agent/v1/chats").status_code == 401


def test_a_chat_of_another_channel_is_404(api: APIClient) -> None:
    other = ChatFactory.create()
    MessageFactory.create(chat=other)
    urls = [f"/api/agent/v1/chats/{other.pk}", f"/api/agent/v1/chats/{other.pk}/messages"]
    for url in urls:
        answer = api.get(url)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    for action in ("accept", "finish"):
        assert api.post(f"/api/agent/v1/chats/{other.pk}/{action}").status_code == 404
    assert api.post(f"/api/agent/v1/chats/{other.pk}/typing", {"typing": True}).status_code == 404
    assert (
        api.post(f"/api/agent/v1/chats/{other.pk}/messages", {"type": "text", "text": "x"})
    ).status_code == 404
    other.refresh_from_db()
    assert other.state == Chat.State.QUEUED


def test_unknown_api_path_and_method(api: APIClient) -> None:
    missing = api.get("/api/agent/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = api.delete("/api/agent/v1/chats")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


def test_api_root_schema_and_docs_are_served(client) -> None:
    assert client.get("/api/agent/v1/").json()["endpoints"]["chats"].endswith("/chats")
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code == 200
    assert "/api/agent/v1/chats/{chat_id}/accept" in schema.json()["paths"]
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    assert b"cdn" not in docs.content.lower()


def test_the_openapi_schema_is_valid_without_warnings() -> None:
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", stdout=StringIO())


@pytest.mark.parametrize("kind", ["markdown", "buttons", "typein", "typeout", "sticker-pack"])
def test_the_api_takes_only_what_an_agent_may_send(api: APIClient, agent: Agent, kind: str) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.accept_chat(chat=chat, agent=agent)

    answer = api.post(
        f"/api/agent/v1/chats/{chat.pk}/messages",
        {"type": kind, "text": "x", "content": "**x**", "buttons": [{"text": "a"}]},
        format="json",
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        f"type: an agent sends text, media or a location, not {kind}"
    )
    assert chat.messages.count() == 1


def test_the_queue_lists_the_longest_waiting_client_first_with_the_wait(
    api: APIClient, agent: Agent, chat: Chat
) -> None:
    later = ClientFactory.create(channel=chat.channel)
    services.post_client_message(client=later, content=text("Me too"))
    Chat.objects.filter(pk=chat.pk).update(queued_at=timezone.now() - timedelta(minutes=7))
    services.post_client_message(client=chat.client, content=text("Still there?"))

    results = api.get("/api/agent/v1/chats?state=queued").json()["results"]

    assert [item["client"]["id"] for item in results] == [chat.client.pk, later.pk]
    assert 7 * 60 <= results[0]["waiting_seconds"] < 8 * 60
    assert results[0]["queued"] and 0 <= results[1]["waiting_seconds"] < 60


def test_status_tells_me_my_status(api: APIClient, agent: Agent) -> None:
    assert api.get("/api/agent/v1/status").json() == {"status": "online"}
    api.post("/api/agent/v1/status", {"status": "offline"}, format="json")

    answer = api.get("/api/agent/v1/status")

    assert (answer.status_code, answer.json()) == (200, {"status": "offline"})
