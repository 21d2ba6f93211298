"""A3: what the integrator receives for agent messages, typing and bot messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from agents import services
from agents.content import Content
from agents.models import Agent, Chat, Message
from channels_api.models import ChatApiChannel
from channels_api.selectors import deliveries_of
from channels_api.services import create_chat_api_channel
from delivery import services as delivery_services
from delivery import tasks
from delivery.models import Delivery
from tests.channels_api.conftest import Integrator
from tests.delivery.target import Reply, Target, drive
from tests.factories import text

pytestmark = pytest.mark.django_db


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


def make_channel(agent: Agent, target: Target, *, chunked: bool = False) -> ChatApiChannel:
    agent.photo_url = "https://cdn.example/agent.png"
    agent.save()
    return create_chat_api_channel(
        name="App", webhook_url=target.url("/a3"), chunked=chunked, agents=[agent]
    )[0]


def active_chat(chat_api: ChatApiChannel, agent: Agent, sender_id: Any = 77) -> Chat:
    assert Integrator(chat_api).say("hi", sender_id=sender_id).status_code == 200
    return services.accept_chat(chat=Chat.objects.get(), agent=agent)


def sent(message: Message) -> Delivery:
    return drive(deliveries_of(message_id=message.pk).get())


@pytest.mark.parametrize("sender_id", [77, "u-77"])
def test_an_agent_message_reaches_the_integrator(
    agent: Agent, target: Target, sender_id: Any
) -> None:
    chat_api = make_channel(agent, target)
    chat = active_chat(chat_api, agent, sender_id)

    message = services.post_agent_message(chat=chat, agent=agent, content=text("How can I help?"))

    message.refresh_from_db()
    assert message.delivery_status == "pending"
    assert sent(message).status == "delivered"
    [request] = target.received
    assert request.path == f"/a3/{chat_api.channel.public_id}"
    assert json.loads(request.body) == {
        "sender": {"name": agent.name, "photo": "https://cdn.example/agent.png"},
        "recipient": {"id": sender_id},  # the same JSON type as received
        "message": {"type": "text", "id": str(message.pk), "text": "How can I help?"},
    }
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Content-Length"] == str(len(request.body))
    assert "Transfer-Encoding" not in request.headers
    assert request.headers["webhook-signature"].startswith("v1,")
    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error) == ("delivered", "")


def test_a_chunked_channel_sends_chunked(agent: Agent, target: Target) -> None:
    chat = active_chat(make_channel(agent, target, chunked=True), agent)

    message = services.post_agent_message(chat=chat, agent=agent, content=text("chunks"))

    assert sent(message).status == "delivered"
    [request] = target.received
    assert request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in request.headers
    assert json.loads(request.body)["message"]["text"] == "chunks"


def test_media_goes_out_with_its_fields(agent: Agent, target: Target) -> None:
    chat = active_chat(make_channel(agent, target), agent)
    photo = Content(
        "photo",
        "look",
        {"file": "https://cdn.example/p.png", "file_name": "p.png", "file_size": 9, "width": 320},
    )

    message = services.post_agent_message(chat=chat, agent=agent, content=photo)

    sent(message)
    assert json.loads(target.received[0].body)["message"] == {
        "type": "photo", "id": str(message.pk), "text": "look",
        "file": "https://cdn.example/p.png", "file_name": "p.png", "file_size": 9, "width": 320,
    }  # fmt: skip


def test_agent_typing_goes_out_as_typein_and_typeout(agent: Agent, target: Target) -> None:
    chat = active_chat(make_channel(agent, target), agent)

    services.set_agent_typing(chat=chat, agent=agent, typing=True)
    services.set_agent_typing(chat=chat, agent=agent, typing=False)

    typing = Delivery.objects.filter(purpose="chat_api_typing").order_by("id")
    assert [d.policy for d in typing] == ["chat_api_typing"] * 2
    for item in typing:
        drive(item)
    bodies = [json.loads(r.body) for r in target.received]
    assert [b["message"] for b in bodies] == [{"type": "typein"}, {"type": "typeout"}]
    assert bodies[0]["recipient"] == {"id": 77} and bodies[0]["sender"]["name"] == agent.name


def test_an_error_reply_is_shown_to_the_agent(agent: Agent, target: Target) -> None:
    chat = active_chat(make_channel(agent, target), agent)
    error = {"error": {"code": "user_blocked", "message": "The user blocked the app"}}
    target.script(Reply(200, json.dumps(error)))

    message = services.post_agent_message(chat=chat, agent=agent, content=text("hello?"))

    assert sent(message).status == "failed"
    message.refresh_from_db()
    assert message.delivery_status == "failed"
    assert "The user blocked the app" in message.delivery_error
    assert len(target.received) == 1  # an error answer is final


@pytest.mark.parametrize("reply", ['{"result": "ok"}', '"ok"', "", "{}"])
def test_any_non_error_2xx_is_delivered(agent: Agent, target: Target, reply: str) -> None:
    chat = active_chat(make_channel(agent, target), agent)
    target.script(Reply(200, reply))
    message = services.post_agent_message(chat=chat, agent=agent, content=text("hi"))
    assert sent(message).status == "delivered"


def bot_chat(chat_api: ChatApiChannel, sender_id: Any = 77) -> Chat:
    """A chat the bot has (no client message: with no bot attached to the
    channel, one would hand the chat over to the agents)."""
    client = services.get_or_create_client(channel=chat_api.channel, external_id=sender_id)
    return services.open_chat(client=client, state=Chat.State.BOT)


def test_bot_markdown_goes_out_as_its_text_fallback(agent: Agent, target: Target) -> None:
    chat = bot_chat(make_channel(agent, target))

    message = services.post_bot_message(
        chat=chat, content=Content("markdown", "Plain", {"content": "**Bold**"})
    )

    assert sent(message).status == "delivered"
    body = json.loads(target.received[0].body)
    assert body == {
        "sender": {"name": "Bot"},
        "recipient": {"id": 77},
        "message": {"type": "text", "id": str(message.pk), "text": "Plain"},
    }
    message.refresh_from_db()
    assert message.delivery_status == "delivered"


def test_a_bot_message_carries_the_bots_name(agent: Agent, target: Target) -> None:
    chat = bot_chat(make_channel(agent, target))

    message = services.post_bot_message(
        chat=chat, content=text("Hello, I am Ada"), sender_name="Ada the helper"
    )

    sent(message)
    assert json.loads(target.received[0].body)["sender"] == {"name": "Ada the helper"}


def test_a_bot_message_without_a_text_fallback_is_noted_not_sent(
    agent: Agent, target: Target
) -> None:
    chat = bot_chat(make_channel(agent, target))

    without = services.post_bot_message(
        chat=chat, content=Content("buttons", "", {"buttons": [{"text": "Yes"}]})
    )

    assert not deliveries_of(message_id=without.pk).exists()
    assert not Delivery.objects.exists()
    without.refresh_from_db()
    assert without.delivery_status == Message.Delivery.NONE
    note = chat.messages.get(author=Message.Author.SYSTEM)
    assert note.created >= without.created
    assert "not sent to this channel" in note.text
    assert "plain text only" in note.text and "no text fallback" in note.text


def test_client_messages_are_not_sent_back(agent: Agent, target: Target) -> None:
    active_chat(make_channel(agent, target), agent)
    assert not Delivery.objects.exists()


def test_a_failed_message_can_be_retried(agent: Agent, target: Target) -> None:
    chat = active_chat(make_channel(agent, target), agent)
    target.script(Reply(400, "bad"))
    message = services.post_agent_message(chat=chat, agent=agent, content=text("again"))
    assert sent(message).status == "failed"

    services.retry_message(message=message, agent=agent)

    message.refresh_from_db()
    assert message.delivery_status == "pending"
    drive(Delivery.objects.get())
    message.refresh_from_db()
    assert message.delivery_status == "delivered"
    assert len(target.received) == 2
    with pytest.raises(services.InvalidState):
        services.retry_message(message=message, agent=agent)


def test_a_webhook_url_change_moves_the_target(agent: Agent, target: Target) -> None:
    from channels_api.services import update_chat_api_channel

    chat_api = make_channel(agent, target)
    update_chat_api_channel(
        chat_api=chat_api, name="App", webhook_url=target.url("/v2/"), chunked=False,
        active=True, agents=[agent], unique_message_ids=False,
    )  # fmt: skip
    chat = active_chat(chat_api, agent)

    sent(services.post_agent_message(chat=chat, agent=agent, content=text("moved")))

    assert target.received[0].path == f"/v2/{chat_api.channel.public_id}"


def test_a_chats_next_message_is_handed_out_after_others_while_the_last_is_pending(
    agent: Agent,
    target: Target,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A burst of replies: a chat's later message, whose try would only wait
    for the earlier one, goes to the broker behind every other delivery's
    first message (on PostgreSQL, whose INSERT reads whether one is
    pending; elsewhere it goes as any new one)."""
    chat = active_chat(make_channel(agent, target), agent)
    priorities: list[int] = []
    monkeypatch.setattr(
        tasks.deliver, "apply_async", lambda args, **options: priorities.append(options["priority"])
    )

    def reply(words: str) -> Message:
        with django_capture_on_commit_callbacks(execute=True):
            return services.post_agent_message(chat=chat, agent=agent, content=text(words))

    first, second = reply("one"), reply("two")
    sent(first)
    sent(second)
    reply("three")  # the earlier ones are delivered

    behind = delivery_services.PRIORITY_BEHIND if connection.vendor == "postgresql" else None
    new = delivery_services.PRIORITY_NEW
    assert priorities == [new, behind or new, new]
