"""B1: what the provider receives, over real HTTP, and when the chat leaves the bot."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import services as chats
from agents.models import Agent, Chat, Message
from bots import services, tasks
from bots.models import BotEvent
from tests.bots.conftest import TOKEN, BotSetup
from tests.delivery.target import Reply

pytestmark = pytest.mark.django_db


def notes(chat: Chat) -> list[str]:
    return list(chat.messages.filter(author=Message.Author.SYSTEM).values_list("text", flat=True))


def test_a_new_chat_goes_to_the_bot_and_the_provider_gets_the_exact_envelope(
    bot: BotSetup,
) -> None:
    chat = bot.say("Hello there")

    assert chat.state == Chat.State.BOT
    [body] = bot.events()
    [request] = bot.server.received
    assert request.path == f"/bot/{TOKEN}"
    assert request.headers["Content-Type"].startswith("application/json")
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= {
        name.lower() for name, _ in request.headers.items()
    }
    event_id = str(BotEvent.objects.get().pk)
    assert body == {
        "event": "CLIENT_MESSAGE",
        "id": event_id,
        "site_id": body["site_id"],
        "client_id": str(chat.client_id),
        "chat_id": str(chat.pk),
        "agents_online": True,
        "sender": {"id": chat.client_id, "name": "", "url": "", "has_contacts": False},
        "channel": {"id": bot.chat_api.channel.public_id, "type": "chat_api"},
        "message": {
            "type": "TEXT",
            "text": "Hello there",
            "timestamp": body["message"]["timestamp"],
        },
    }
    assert isinstance(body["site_id"], str) and body["site_id"].isdigit()
    assert body["client_id"].isdigit() and body["chat_id"].isdigit()
    stamp = body["message"]["timestamp"]
    assert isinstance(stamp, int) and abs(stamp - timezone.now().timestamp()) < 60


def test_sender_fields_and_agents_offline(bot: BotSetup, agent: Agent) -> None:
    chats.set_agent_status(agent=agent, online=False)

    bot.say("hi", name="Ann", email="ann@example.com", url="https://shop.example/cart")

    [body] = bot.events()
    assert body["agents_online"] is False
    assert body["sender"] == {
        "id": bot.chat().client_id,
        "name": "Ann",
        "url": "https://shop.example/cart",
        "has_contacts": True,
    }


@pytest.mark.parametrize(
    ("message", "seen"),
    [
        (
            {"type": "photo", "file": "https://cdn.example/a.png", "file_name": "a.png",
             "file_size": 10, "text": "my receipt"},
            "my receipt",
        ),
        (
            {"type": "document", "file": "https://cdn.example/b.pdf", "file_name": "b.pdf",
             "file_size": 99},
            "https://cdn.example/b.pdf",
        ),
        ({"type": "location", "latitude": 52.52, "longitude": 13.405}, "52.52,13.405"),
    ],
)  # fmt: skip
def test_media_reach_a_text_only_bot_as_text(
    bot: BotSetup, message: dict[str, Any], seen: str
) -> None:
    assert bot.client.post({"sender": {"id": "c-1"}, "message": message}).status_code == 200

    [body] = bot.events()
    assert body["message"] == {
        "type": "TEXT",
        "text": seen,
        "timestamp": body["message"]["timestamp"],
    }


def test_events_of_a_chat_go_in_order(bot: BotSetup) -> None:
    for text in ("one", "two", "three"):
        bot.say(text)

    assert [body["message"]["text"] for body in bot.events()] == ["one", "two", "three"]
    assert {e.delivery and e.delivery.ordering_key for e in bot_events_with_delivery()} == {
        f"chat:{bot.chat().pk}"
    }


def bot_events_with_delivery() -> list[BotEvent]:
    return list(BotEvent.objects.select_related("delivery"))


def test_take_over_by_an_agent_then_the_bot_is_quiet_until_closed(
    bot: BotSetup, agent: Agent
) -> None:
    chat = bot.say("hi")
    chats.accept_chat(chat=chat, agent=agent)

    bot.say("are you a person?")
    chats.post_agent_message(chat=bot.chat(), agent=agent, content=text_content("I am"))
    chats.finish_chat(chat=bot.chat(), agent=agent)

    assert bot.kinds() == ["CLIENT_MESSAGE", "AGENT_JOINED", "CHAT_CLOSED"]
    joined = bot.events()[1]
    assert "message" not in joined and joined["chat_id"] == str(chat.pk)


def text_content(value: str) -> Any:
    from agents.content import Content

    return Content("text", value, {})


def test_invite_agent_queues_the_chat_and_the_accepting_agent_is_announced(
    bot: BotSetup, agent: Agent
) -> None:
    chat = bot.say("I want a human")
    assert bot.invite_agent().json() == {"result": "ok"}

    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    assert notes(chat) == ["The bot invited an agent."]
    bot.say("hello?")  # while queued the bot hears nothing
    chats.accept_chat(chat=chat, agent=agent)
    assert bot.kinds() == ["CLIENT_MESSAGE", "AGENT_JOINED"]


def test_no_agent_online_sends_agent_unavailable_and_the_bot_answers_again(
    bot: BotSetup, agent: Agent
) -> None:
    chats.set_agent_status(agent=agent, online=False)
    chat = bot.say("a human please")

    assert bot.invite_agent().status_code == 200

    chat.refresh_from_db()
    assert chat.state == Chat.State.BOT
    assert "none is online" in notes(chat)[0]
    bot.say("ok, then my e-mail is ann@example.com")
    assert bot.bot_says("Thanks, we will write to you").status_code == 200
    bodies = bot.events()
    assert [b["event"] for b in bodies] == ["CLIENT_MESSAGE", "AGENT_UNAVAILABLE", "CLIENT_MESSAGE"]
    assert bodies[1]["agents_online"] is False and "message" not in bodies[1]
    assert bodies[2]["message"]["text"] == "ok, then my e-mail is ann@example.com"
    assert chat.messages.filter(author="bot").get().text == "Thanks, we will write to you"


def test_outside_the_business_hours_invite_agent_gets_agent_unavailable(
    bot: BotSetup, agent: Agent
) -> None:
    today = timezone.now().date().isoformat()
    chats.set_business_hours(channel=bot.chat_api.channel, closed=[today])
    chat = bot.say("a human please")  # the bot still answers: it heard the message

    assert bot.invite_agent().status_code == 200

    chat.refresh_from_db()
    assert chat.state == Chat.State.BOT and agent.is_online
    assert [b["event"] for b in bot.events()] == ["CLIENT_MESSAGE", "AGENT_UNAVAILABLE"]


def test_a_provider_that_is_down_hands_the_chat_to_the_agents(bot: BotSetup) -> None:
    bot.server.script(Reply(500), Reply(502), Reply(503))

    chat = bot.say("hello?")
    bot.events()

    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    assert len(bot.server.received) == 3  # 3 s timeout, 2 retries
    [note] = notes(chat)
    assert note.startswith("The bot did not answer:") and "503" in note
    bot.say("anyone?")  # the chat is the agents' now: nothing more to the bot
    assert bot.kinds() == ["CLIENT_MESSAGE"] * 3


def test_a_provider_slower_than_3_seconds_hands_the_chat_over(bot: BotSetup) -> None:
    bot.server.script(Reply(200, delay=4), Reply(200, delay=4), Reply(200, delay=4))

    chat = bot.say("hello?")
    bot.events()

    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    [note] = notes(chat)
    assert note.startswith("The bot did not answer:") and "timed out" in note


def test_an_acknowledged_but_silent_bot_loses_the_chat_after_the_reply_timeout(
    bot: BotSetup, settings: Any
) -> None:
    chat = bot.say("hello?")
    bot.events()
    [event] = BotEvent.objects.all()
    assert event.acknowledged_at is not None
    assert tasks.hand_over_silent_chats() == 0  # not yet due

    ago = timezone.now() - timedelta(seconds=settings.BOT_REPLY_TIMEOUT_SECONDS + 1)
    BotEvent.objects.update(acknowledged_at=ago)
    assert tasks.hand_over_silent_chats() == 1

    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    assert notes(chat) == [
        f"The bot did not answer within {settings.BOT_REPLY_TIMEOUT_SECONDS} s: "
        "the chat goes to the agents."
    ]


def test_a_bot_that_answers_in_time_keeps_the_chat(bot: BotSetup, settings: Any) -> None:
    bot.say("hello?")
    bot.events()
    assert bot.bot_says("Hi!").status_code == 200

    ago = timezone.now() - timedelta(seconds=settings.BOT_REPLY_TIMEOUT_SECONDS + 1)
    BotEvent.objects.update(acknowledged_at=ago)

    assert tasks.hand_over_silent_chats() == 0
    assert bot.chat().state == Chat.State.BOT


def test_a_switched_off_bot_hands_new_messages_to_the_agents(bot: BotSetup) -> None:
    chat = bot.say("hi")
    services.set_attachment_active(attachment=bot.attachment, active=False)

    bot.say("still there?")

    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    assert notes(chat) == ["The bot is switched off: the chat goes to the agents."]
    assert bot.kinds() == ["CLIENT_MESSAGE"]


def test_a_channel_without_a_bot_queues_as_before(bot: BotSetup) -> None:
    services.detach_bot(channel=bot.chat_api.channel)

    chat = bot.say("hi")

    assert chat.state == Chat.State.QUEUED and bot.kinds() == []


def test_the_delivery_is_linked_to_its_event(bot: BotSetup) -> None:
    bot.say("hi")
    [event] = BotEvent.objects.select_related("delivery")
    assert event.delivery is not None
    assert json.loads(event.delivery.body)["id"] == str(event.pk)
