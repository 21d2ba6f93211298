"""The agent API's reply takes an ``Idempotency-Key`` as A2 and B2 do
(``agents.idempotency``): a client that retries a reply whose answer it lost
stores it once and is answered as the first time (issue 29)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, Chat, Message
from tests.factories import ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db


def open_chat(agent: Agent, *, accepted: bool = True) -> Chat:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("Hello?")).chat
    if accepted:
        services.accept_chat(chat=chat, agent=agent)
    return chat


def reply(api: APIClient, chat: Chat, body: object, key: str | None) -> tuple[int, dict]:
    headers = {} if key is None else {"Idempotency-Key": key}
    answer = api.post(
        f"/api/agent/v1/chats/{chat.pk}/messages", body, format="json", headers=headers
    )
    return answer.status_code, answer.json()


def replies(chat: Chat) -> list[str]:
    return list(chat.messages.filter(author="agent").values_list("text", flat=True))


def test_a_retry_with_the_same_key_is_stored_once_and_answered_as_the_first(
    api: APIClient, agent: Agent
) -> None:
    chat = open_chat(agent)
    body = {"type": "text", "text": "How can I help?"}

    first = reply(api, chat, body, "r-1")
    again = reply(api, chat, body, "r-1")
    other = reply(api, chat, body, "r-2")
    unkeyed = reply(api, chat, body, None)

    assert first[0] == 201 and first[1]["text"] == "How can I help?"
    assert again == first
    assert other[0] == 201 and other[1]["id"] != first[1]["id"]
    assert unkeyed[0] == 201
    assert replies(chat) == ["How can I help?"] * 3


def test_a_different_body_with_a_used_key_is_answered_as_the_first(
    api: APIClient, agent: Agent
) -> None:
    """As A2 and B2: the key decides, before the body is read; the retry's
    body (another text, or damaged on the way) is not stored."""
    chat = open_chat(agent)
    first = reply(api, chat, {"type": "text", "text": "one"}, "r-1")

    changed = reply(api, chat, {"type": "text", "text": "two"}, "r-1")
    damaged = api.post(
        f"/api/agent/v1/chats/{chat.pk}/messages",
        "{not json",
        content_type="application/json",
        headers={"Idempotency-Key": "r-1"},
    )

    assert changed == first
    assert (damaged.status_code, damaged.json()) == first
    assert replies(chat) == ["one"]


def test_a_key_is_the_agents_in_one_chat(api: APIClient, agent: Agent) -> None:
    """The same key in another chat is another reply."""
    chat, other = open_chat(agent), open_chat(agent)
    body = {"type": "text", "text": "hi"}

    assert reply(api, chat, body, "r-1")[0] == 201
    assert reply(api, other, body, "r-1")[0] == 201
    assert (replies(chat), replies(other)) == (["hi"], ["hi"])


def test_a_retry_after_the_chat_finished_gets_the_first_answer(
    api: APIClient, agent: Agent
) -> None:
    """The first reply was stored, its answer lost, the chat finished since:
    the retry is still answered with the reply, not with invalid_state."""
    chat = open_chat(agent)
    first = reply(api, chat, {"type": "text", "text": "bye"}, "r-1")
    services.finish_chat(chat=chat, agent=agent)

    assert reply(api, chat, {"type": "text", "text": "bye"}, "r-1") == first
    assert Message.objects.filter(chat=chat, author="agent").count() == 1


def test_a_refused_reply_does_not_keep_its_key(api: APIClient, agent: Agent) -> None:
    chat = open_chat(agent, accepted=False)
    body = {"type": "text", "text": "hi"}

    refused = reply(api, chat, body, "r-1")
    services.accept_chat(chat=chat, agent=agent)
    retried = reply(api, chat, body, "r-1")

    assert refused[0] == 400 and refused[1]["error"]["code"] == "invalid_state"
    assert retried[0] == 201
    assert replies(chat) == ["hi"]


def test_a_key_over_255_characters_is_refused(api: APIClient, agent: Agent) -> None:
    chat = open_chat(agent)

    status, body = reply(api, chat, {"type": "text", "text": "hi"}, "k" * 256)

    assert status == 400 and body["error"]["code"] == "invalid_request"
    assert body["error"]["message"] == "Idempotency-Key is longer than 255 characters"
    assert replies(chat) == []
