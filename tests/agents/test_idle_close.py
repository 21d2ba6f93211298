"""Idle chats close by themselves (docs/routing.md, "Idle chats close"): per
channel, an active chat whose last shown message is the agent's, left
unanswered for the channel's minutes, gets the warning and is finished as
an agent's Finish would; one whose last message is the client's never is.

Time travels by setting the messages' ``created`` back, not by sleeping."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.db.models import F
from django.test import Client as Browser

from agents import services
from agents.models import Agent, Channel, Chat, ChatOffer, LiveEvent, Mail, Message
from bots.models import BotEvent
from channels_api.models import ChatApiChannel, MessageDelivery
from delivery.models import Delivery
from devhooks.models import IntegrationSettings
from tests.bots.conftest import BotSetup
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db


def idle_close(channel: Channel, minutes: int | None = 10, warning: str = "") -> Channel:
    Channel.objects.filter(pk=channel.pk).update(idle_close_minutes=minutes, idle_warning=warning)
    channel.refresh_from_db()
    return channel


def answered_chat(channel: Channel, agent: Agent, client_name: str = "") -> Chat:
    """The client wrote, the agent took the chat and answered: the agent wrote last."""
    client = ClientFactory.create(channel=channel, name=client_name)
    chat = services.post_client_message(client=client, content=text("Where is my order?")).chat
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("It left today."))
    return chat


def age(chat: Chat, minutes: float) -> None:
    """Everything written in ``chat`` so far happened ``minutes`` earlier."""
    back = timedelta(minutes=minutes)
    chat.messages.update(created=F("created") - back)
    Chat.objects.filter(pk=chat.pk).update(last_message_at=F("last_message_at") - back)


def state(chat: Chat) -> str:
    return str(Chat.objects.values_list("state", flat=True).get(pk=chat.pk))


# --- the rule ---------------------------------------------------------------------


def test_idle_close_is_off_by_default(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent])
    chat = answered_chat(channel, agent)
    age(chat, 60 * 23)
    assert channel.idle_close_minutes is None and channel.idle_warning == ""
    assert services.due_idle_chats() == []
    assert services.close_idle_chats() == 0
    assert state(chat) == Chat.State.ACTIVE


def test_the_chat_closes_after_the_channels_minutes_when_the_agent_wrote_last(
    agent: Agent,
) -> None:
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=10)
    chat = answered_chat(channel, agent)
    other = idle_close(ChannelFactory.create(agents=[agent]), minutes=30)
    slower = answered_chat(other, agent)

    age(chat, 9.5)
    age(slower, 11)
    assert services.due_idle_chats() == []
    assert services.close_idle_chats() == 0
    assert state(chat) == Chat.State.ACTIVE

    age(chat, 1)  # 10.5 minutes since the agent wrote
    assert services.due_idle_chats() == [chat.pk]
    assert services.close_idle_chats() == 1

    assert state(chat) == Chat.State.FINISHED and state(slower) == Chat.State.ACTIVE
    finished = LiveEvent.objects.get(kind="chat.finished")
    assert finished.for_client is True  # the widget's rating prompt hangs on it
    assert not chat.messages.filter(payload__has_key=Message.IDLE_WARNING).exists()
    assert services.close_idle_chats() == 0  # a finished chat is not finished twice


def test_a_chat_whose_last_message_is_the_clients_is_never_closed(agent: Agent) -> None:
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=5)
    waiting = answered_chat(channel, agent)
    services.post_client_message(client=waiting.client, content=text("Which carrier?"))
    unanswered = ClientFactory.create(channel=channel)
    taken = services.post_client_message(client=unanswered, content=text("hi")).chat
    services.accept_chat(chat=taken, agent=agent)  # accepted, the agent never wrote
    queued = services.post_client_message(
        client=ClientFactory.create(channel=channel), content=text("anyone?")
    ).chat
    for chat in (waiting, taken, queued):
        age(chat, 60 * 20)

    assert services.due_idle_chats() == []
    assert [services.close_idle_chat(chat_id=c.pk) for c in (waiting, taken, queued)] == [
        False, False, False,
    ]  # fmt: skip
    assert {state(waiting), state(taken)} == {Chat.State.ACTIVE}
    assert state(queued) == Chat.State.QUEUED


def test_notes_and_system_messages_neither_start_nor_stop_the_count(agent: Agent) -> None:
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=10)
    noted = answered_chat(channel, agent)
    age(noted, 11)
    services.post_note(chat=noted, agent=agent, text="call them tomorrow")  # just now
    services.post_system_message(chat=noted, text="a system line")

    # The client wrote last; a note after it does not make it the agent's turn.
    asked = ClientFactory.create(channel=channel)
    chat = services.post_client_message(client=asked, content=text("hello")).chat
    services.accept_chat(chat=chat, agent=agent)
    services.post_note(chat=chat, agent=agent, text="checking")
    age(chat, 30)

    assert services.due_idle_chats() == [noted.pk]
    assert services.close_idle_chats() == 1
    assert state(noted) == Chat.State.FINISHED and state(chat) == Chat.State.ACTIVE


def test_the_warning_goes_to_the_client_before_the_chat_finishes(
    chat_api: ChatApiChannel, agent: Agent, webhook: IntegrationSettings
) -> None:
    channel = idle_close(chat_api.channel, minutes=10, warning="Closing this chat, write again!")
    chat = answered_chat(channel, agent)
    age(chat, 11)

    assert services.close_idle_chats() == 1

    warning = chat.messages.get(payload__has_key=Message.IDLE_WARNING)
    assert (warning.author, warning.text, warning.sender_name) == (
        Message.Author.BOT, "Closing this chat, write again!", channel.name,
    )  # fmt: skip
    # It reaches the client as the away message does: here the integrator's A3 …
    assert MessageDelivery.objects.filter(message=warning).exists()
    # … and the client's stream hears it before the chat's end.
    kinds = list(
        LiveEvent.objects.filter(for_client=True).order_by("id").values_list("kind", flat=True)
    )
    assert kinds[-2:] == ["message", "chat.finished"]
    chat.refresh_from_db()
    assert chat.state == Chat.State.FINISHED and chat.finished_at is not None
    assert warning.created <= chat.finished_at
    # The CRM's chat_finished, as after an agent's Finish: the agent's answer in the log.
    body = json.loads(Delivery.objects.get(purpose="devhook", event="chat_finished").body)
    assert [a["id"] for a in body["agents"]] == [agent.pk]
    assert [item["type"] for item in body["chat"]["messages"]] == ["visitor", "agent"]


def test_a_bot_hears_chat_closed(bot: BotSetup, agent: Agent) -> None:
    idle_close(bot.chat_api.channel, minutes=3, warning="Bye for now")
    chat = bot.say("a person please")
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("Hello, I am Ann"))
    age(chat, 4)

    assert services.close_idle_chats() == 1

    assert bot.kinds() == ["CLIENT_MESSAGE", "AGENT_JOINED", "CHAT_CLOSED"]
    # The warning went to the client through the integrator, not to the bot.
    assert not BotEvent.objects.filter(kind="BOT_MESSAGE").exists()
    assert MessageDelivery.objects.filter(message__payload__has_key=Message.IDLE_WARNING).exists()


def test_an_idle_closed_chat_with_the_agents_answer_is_mailed_to_the_client(
    agent: Agent,
) -> None:
    """Not "nobody answered": the agent did (agents/transcripts.py)."""
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=10)
    client = ClientFactory.create(
        channel=channel, email="wendy@example.com", email_from="integrator"
    )
    chat = services.post_client_message(client=client, content=text("Mail me this")).chat
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("Sure"))
    age(chat, 11)

    assert services.close_idle_chats() == 1
    assert Mail.objects.filter(chat=chat, to="wendy@example.com").exists()


def test_the_agent_frees_up_and_is_offered_a_waiting_chat(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(max_chats=1)
    channel = ChannelFactory.create(agents=[agent], routing_mode=Channel.RoutingMode.OFFER)
    idle_close(channel, minutes=10)
    chat = answered_chat(channel, agent)
    ChatOffer.objects.all().delete()
    waiting = services.post_client_message(
        client=ClientFactory.create(channel=channel), content=text("me next")
    ).chat
    waiting.refresh_from_db()
    assert waiting.offered_to is None  # the agent is at capacity
    age(chat, 11)

    assert services.close_idle_chats() == 1

    waiting.refresh_from_db()
    assert waiting.offered_to_id == agent.pk


def test_a_client_message_racing_the_sweep_keeps_the_chat_open(agent: Agent) -> None:
    """The sweep found the chat due; the client wrote before its turn came:
    read again under the chat's lock, the rule no longer holds."""
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=10, warning="Bye")
    chat = answered_chat(channel, agent)
    age(chat, 11)
    due = services.due_idle_chats()
    assert due == [chat.pk]

    services.post_client_message(client=chat.client, content=text("wait, one more thing"))

    assert [services.close_idle_chat(chat_id=chat_id) for chat_id in due] == [False]
    assert state(chat) == Chat.State.ACTIVE
    assert not chat.messages.filter(payload__has_key=Message.IDLE_WARNING).exists()


def test_turning_idle_close_off_stops_a_due_chat_from_closing(agent: Agent) -> None:
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=10)
    chat = answered_chat(channel, agent)
    age(chat, 11)
    due = services.due_idle_chats()
    services.set_routing(channel=channel, idle_close_minutes=0)
    assert [services.close_idle_chat(chat_id=chat_id) for chat_id in due] == [False]
    assert state(chat) == Chat.State.ACTIVE


# --- set_routing and the admin ----------------------------------------------------


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("set_routing", *args, stdout=out)
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def test_the_command_sets_idle_close_and_its_warning_and_turns_it_off() -> None:
    channel = ChannelFactory.create()
    made = run("--channel", channel.public_id, "--idle-close-minutes", "15",
               "--idle-warning", "  We close idle chats.  ")  # fmt: skip
    assert made == {
        "channel": channel.public_id, "mode": "manual", "offer_seconds": 30,
        "idle_close_minutes": 15, "idle_warning": "We close idle chats.",
    }  # fmt: skip

    # Each option given replaces what it names; the others stay.
    moved = run("--channel", channel.public_id, "--mode", "offer", "--idle-close-minutes", "1440")
    assert (moved["mode"], moved["idle_close_minutes"], moved["idle_warning"]) == (
        "offer", 1440, "We close idle chats.",
    )  # fmt: skip
    off = run("--channel", channel.public_id, "--idle-close-minutes", "off", "--idle-warning", "")
    assert (off["mode"], off["idle_close_minutes"], off["idle_warning"]) == ("offer", None, "")
    for given, kept in (("5", 5), ("0", None)):
        answer = run("--channel", channel.public_id, "--idle-close-minutes", given)
        assert answer["idle_close_minutes"] == kept
    # No option: the routing as it is.
    assert run("--channel", channel.public_id) == {**off, "idle_close_minutes": None}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--idle-close-minutes", "1441"], "1 to 1440 minutes"),
        (["--idle-close-minutes", "-1"], "1 to 1440 minutes"),
        (["--idle-close-minutes", "ten"], "minutes or off"),
        (["--idle-close-minutes", ""], "minutes or off"),
        (["--idle-warning", "x" * 4001], "longer than 4000"),
        (["--mode", "offer", "--idle-close-minutes", "99999"], "1 to 1440 minutes"),
        (["--idle-close-minutes", "20", "--offer-seconds", "1"], "5 to 600 seconds"),
    ],
)
def test_the_command_refuses_bad_idle_close_and_changes_nothing(args: list[str], says: str) -> None:
    channel = idle_close(ChannelFactory.create(), minutes=10, warning="Bye")
    with pytest.raises(CommandError, match=says):
        call_command("set_routing", "--channel", channel.public_id, *args, stdout=StringIO())
    channel.refresh_from_db()
    assert (channel.routing_mode, channel.idle_close_minutes, channel.idle_warning) == (
        "manual", 10, "Bye",
    )  # fmt: skip


def test_the_channels_admin_page_edits_idle_close() -> None:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    channel = ChannelFactory.create()
    url = f"/admin/agents/channel/{channel.pk}/change/"
    form = {
        "name": channel.name, "is_active": "on", "routing_mode": "manual",
        "offer_seconds": "30", "business_time_zone": "UTC",
        "idle_close_minutes": "20", "idle_warning": "Closing soon",
        "callback-TOTAL_FORMS": "0", "callback-INITIAL_FORMS": "0",
    }  # fmt: skip
    assert "idle_close_minutes" in browser.get(url).content.decode()

    assert browser.post(url, form).status_code == 302
    channel.refresh_from_db()
    assert (channel.idle_close_minutes, channel.idle_warning) == (20, "Closing soon")

    for bad in ("0", "1441", "x"):
        refused = browser.post(url, {**form, "idle_close_minutes": bad})
        assert refused.status_code == 200 and "errorlist" in refused.content.decode()
    assert browser.post(url, {**form, "idle_close_minutes": ""}).status_code == 302
    channel.refresh_from_db()
    assert channel.idle_close_minutes is None


@pytest.mark.django_db(transaction=True)
def test_a_client_message_committing_while_the_sweep_waits_for_the_lock_keeps_the_chat_open(
    agent: Agent,
) -> None:
    """Two connections: the client's message holds the chat's lock (on
    SQLite the write lock) when the sweep reaches the chat; the sweep waits,
    then reads the message and leaves the chat open."""
    channel = idle_close(ChannelFactory.create(agents=[agent]), minutes=10, warning="Bye")
    chat = answered_chat(channel, agent)
    age(chat, 11)
    due = services.due_idle_chats()
    holding, done = threading.Event(), threading.Event()

    def client_writes() -> None:
        try:
            with transaction.atomic():
                services.post_client_message(client=chat.client, content=text("still here"))
                holding.set()
                done.wait(0.5)  # the sweep is waiting for the lock meanwhile
        finally:
            connections.close_all()

    writer = threading.Thread(target=client_writes)
    writer.start()
    assert holding.wait(10)
    closed = [services.close_idle_chat(chat_id=chat_id) for chat_id in due]
    done.set()
    writer.join(10)

    assert closed == [False]
    assert state(chat) == Chat.State.ACTIVE
    assert list(chat.messages.order_by("id").values_list("author", flat=True)) == [
        "client", "agent", "client",
    ]  # fmt: skip
