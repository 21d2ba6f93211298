"""Every lifecycle transition and the event it publishes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agents import events, services
from agents.content import Content
from agents.models import Chat, Client, Message
from tests.factories import AgentFactory, ChannelFactory, ChatFactory, ClientFactory, text

pytestmark = pytest.mark.django_db


def test_first_client_message_opens_a_queued_chat(published: list[events.Event]) -> None:
    client = ClientFactory.create()

    message = services.post_client_message(client=client, content=text("hello"))

    chat = message.chat
    assert chat.state == Chat.State.QUEUED and chat.queued_at is not None
    assert chat.channel == client.channel
    assert published == [
        events.ChatOpened(chat_id=chat.pk, state="queued", chat=chat),
        events.MessagePosted(
            chat_id=chat.pk, message_id=message.pk, author="client", message=message
        ),
    ]
    # The rows ride along, so no subscriber reads them again; the chat as it is now.
    opened, posted = published
    assert isinstance(opened, events.ChatOpened) and isinstance(posted, events.MessagePosted)
    assert opened.chat is chat and posted.message is message
    assert posted.message.chat.last_message_at == message.created


def test_next_client_message_goes_to_the_open_chat(published: list[events.Event]) -> None:
    first = services.post_client_message(client=ClientFactory.create(), content=text("one"))
    published.clear()

    second = services.post_client_message(client=first.chat.client, content=text("two"))

    assert second.chat_id == first.chat_id
    assert [type(e) for e in published] == [events.MessagePosted]


def test_a_chat_can_open_with_the_bot(published: list[events.Event]) -> None:
    message = services.post_client_message(
        client=ClientFactory.create(), content=text("hi"), open_state=Chat.State.BOT
    )

    assert published[0] == events.ChatOpened(
        chat_id=message.chat_id, state=Chat.State.BOT, chat=message.chat
    )


def test_a_chat_with_the_bot_can_be_queued(published: list[events.Event]) -> None:
    chat = services.queue_chat(chat=ChatFactory.create(state=Chat.State.BOT), reason="invite_agent")

    assert chat.state == Chat.State.QUEUED and chat.queued_at is not None
    assert published == [events.ChatQueued(chat_id=chat.pk, reason="invite_agent")]


def test_queue_refuses_a_chat_not_with_the_bot() -> None:
    with pytest.raises(services.InvalidState):
        services.queue_chat(chat=ChatFactory.create(state=Chat.State.ACTIVE), reason="x")


def test_open_chat_refuses_a_second_open_chat() -> None:
    chat = ChatFactory.create()
    with pytest.raises(services.InvalidState):
        services.open_chat(client=chat.client)


def test_accept_makes_the_chat_active_with_the_agent(published: list[events.Event]) -> None:
    chat, agent = ChatFactory.create(), AgentFactory.create()

    chat = services.accept_chat(chat=chat, agent=agent)

    assert chat.state == Chat.State.ACTIVE and chat.accepted_at is not None
    assert list(chat.agents.all()) == [agent]
    assert published == [events.ChatAccepted(chat_id=chat.pk, agent_id=agent.pk)]


def test_accept_twice_by_the_same_agent_changes_nothing(published: list[events.Event]) -> None:
    chat, agent = ChatFactory.create(), AgentFactory.create()
    services.accept_chat(chat=chat, agent=agent)
    published.clear()

    services.accept_chat(chat=chat, agent=agent)

    assert published == []


def test_accept_by_a_second_agent_is_refused() -> None:
    chat = ChatFactory.create()
    services.accept_chat(chat=chat, agent=AgentFactory.create())
    with pytest.raises(services.InvalidState, match="cannot be accepted"):
        services.accept_chat(chat=chat, agent=AgentFactory.create())


def test_agent_message_needs_an_active_chat_of_the_agent(published: list[events.Event]) -> None:
    chat, agent = ChatFactory.create(), AgentFactory.create()
    with pytest.raises(services.InvalidState, match="press Reply"):
        services.post_agent_message(chat=chat, agent=agent, content=text("hi"))
    services.accept_chat(chat=chat, agent=agent)
    with pytest.raises(services.InvalidState, match="another agent"):
        services.post_agent_message(chat=chat, agent=AgentFactory.create(), content=text("hi"))
    published.clear()

    message = services.post_agent_message(chat=chat, agent=agent, content=text("hello"))

    assert (message.author, message.agent, message.text) == ("agent", agent, "hello")
    assert published == [
        events.MessagePosted(
            chat_id=chat.pk, message_id=message.pk, author="agent", message=message
        )
    ]


def test_bot_and_system_messages(published: list[events.Event]) -> None:
    chat = ChatFactory.create(state=Chat.State.BOT)
    content = Content("buttons", "Pick one", {"buttons": [{"text": "Yes"}], "title": "?"})

    bot = services.post_bot_message(chat=chat, content=content)
    system = services.post_system_message(chat=chat, text="Bot unreachable")

    assert (bot.author, bot.type, bot.payload["buttons"]) == ("bot", "buttons", [{"text": "Yes"}])
    assert (system.author, system.text) == ("system", "Bot unreachable")
    assert [e.author for e in published if isinstance(e, events.MessagePosted)] == [
        "bot",
        "system",
    ]


def test_bot_cannot_write_in_a_finished_chat() -> None:
    with pytest.raises(services.InvalidState):
        services.post_bot_message(
            chat=ChatFactory.create(state=Chat.State.FINISHED), content=text("late")
        )


def test_finish_closes_the_chat_and_a_new_message_opens_another(
    published: list[events.Event],
) -> None:
    chat, agent = ChatFactory.create(), AgentFactory.create()
    services.accept_chat(chat=chat, agent=agent)
    published.clear()

    chat = services.finish_chat(chat=chat, agent=agent)

    assert chat.state == Chat.State.FINISHED and chat.finished_at is not None
    assert published == [events.ChatFinished(chat_id=chat.pk, agent_id=agent.pk)]
    with pytest.raises(services.InvalidState):
        services.finish_chat(chat=chat)
    again = services.post_client_message(client=chat.client, content=text("back again"))
    assert again.chat_id != chat.pk


def test_finish_by_another_agent_is_refused() -> None:
    chat = ChatFactory.create()
    services.accept_chat(chat=chat, agent=AgentFactory.create())
    with pytest.raises(services.InvalidState):
        services.finish_chat(chat=chat, agent=AgentFactory.create())


def test_rate_and_blacklist(published: list[events.Event]) -> None:
    chat = ChatFactory.create()

    services.rate_chat(chat=chat, rating="positive")
    services.blacklist_client(chat=chat)

    chat.refresh_from_db()
    assert (chat.rating, chat.blacklisted) == ("positive", True)
    assert published == [
        events.ChatRated(chat_id=chat.pk, rating="positive"),
        events.ClientBlacklisted(chat_id=chat.pk, client_id=chat.client_id),
        events.ChatFinished(chat_id=chat.pk, agent_id=None),  # blacklisting ends the chat
    ]
    with pytest.raises(services.ServiceError):
        services.rate_chat(chat=chat, rating="great")


def test_agent_status(published: list[events.Event]) -> None:
    agent = AgentFactory.create(is_online=False)

    services.set_agent_status(agent=agent, online=True)

    agent.refresh_from_db()
    assert agent.is_online
    assert published == [events.AgentStatusChanged(agent_id=agent.pk, online=True)]


def test_client_typing_expires_by_itself(published: list[events.Event], settings) -> None:
    settings.TYPING_TTL_SECONDS = 10
    chat = ChatFactory.create()

    services.set_client_typing(chat=chat, typing=True)

    chat.refresh_from_db()
    assert chat.client_typing
    assert published == [events.TypingChanged(chat_id=chat.pk, who="client", typing=True)]
    # A lost typeout: ten seconds later nobody is typing any more.
    Chat.objects.filter(pk=chat.pk).update(
        client_typing_until=timezone.now() - timedelta(milliseconds=1)
    )
    chat.refresh_from_db()
    assert not chat.client_typing


def test_typeout_and_a_message_clear_client_typing() -> None:
    chat = ChatFactory.create()
    services.set_client_typing(chat=chat, typing=True)
    services.set_client_typing(chat=chat, typing=False)
    chat.refresh_from_db()
    assert not chat.client_typing

    services.set_client_typing(chat=chat, typing=True)
    services.post_client_message(client=chat.client, content=text("done typing"))
    chat.refresh_from_db()
    assert not chat.client_typing


def test_agent_typing(published: list[events.Event]) -> None:
    chat, agent = ChatFactory.create(), AgentFactory.create()
    with pytest.raises(services.InvalidState):
        services.set_agent_typing(chat=chat, agent=agent, typing=True)
    services.accept_chat(chat=chat, agent=agent)
    published.clear()

    chat = services.set_agent_typing(chat=chat, agent=agent, typing=True)

    assert chat.agent_typing
    assert published == [
        events.TypingChanged(chat_id=chat.pk, who="agent", typing=True, agent_id=agent.pk)
    ]
    services.post_agent_message(chat=chat, agent=agent, content=text("sent"))
    chat.refresh_from_db()
    assert not chat.agent_typing


def test_client_contact_updates(published: list[events.Event]) -> None:
    channel = ChannelFactory.create()
    client = services.get_or_create_client(channel=channel, external_id=42)
    assert (client.external_id, client.external_id_raw, client.display_name) == (
        "42",
        42,
        "Anonymous",
    )
    chat = services.post_client_message(client=client, content=text("hi")).chat
    published.clear()

    same = services.get_or_create_client(
        channel=channel, external_id=42, contact={"name": "Ann", "phone": "", "email": "a@b.c"}
    )

    assert same.pk == client.pk
    same.refresh_from_db()
    assert (same.name, same.email, same.phone) == ("Ann", "a@b.c", "")
    assert published == [
        events.ClientUpdated(client_id=client.pk, chat_id=chat.pk, fields=("name", "email"))
    ]
    published.clear()
    services.get_or_create_client(channel=channel, external_id=42, contact={"name": "Ann"})
    assert published == []


def test_visitor_numbers_are_sequential_across_channels() -> None:
    first = services.get_or_create_client(channel=ChannelFactory.create(), external_id="a")
    second = services.get_or_create_client(channel=ChannelFactory.create(), external_id="a")
    third = services.get_or_create_client(channel=ChannelFactory.create(), external_id="b")
    assert [
        second.visitor_number - first.visitor_number,
        third.visitor_number - first.visitor_number,
    ] == [1, 2]


def test_a_rolled_back_client_gives_its_visitor_number_back() -> None:
    channel = ChannelFactory.create()
    before = services.get_or_create_client(channel=channel, external_id="x").visitor_number
    with pytest.raises(RuntimeError), transaction.atomic():
        services.get_or_create_client(channel=channel, external_id="y")
        raise RuntimeError
    after = services.get_or_create_client(channel=channel, external_id="z").visitor_number
    assert after == before + 1
    assert not Client.objects.filter(external_id="y").exists()


def test_delivery_status_of_an_outbound_message(published: list[events.Event]) -> None:
    chat, agent = ChatFactory.create(), AgentFactory.create()
    services.accept_chat(chat=chat, agent=agent)
    message = services.post_agent_message(chat=chat, agent=agent, content=text("x"))
    published.clear()

    services.mark_message_delivery(message=message, status="failed", error="HTTP 500")

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error) == ("failed", "HTTP 500")
    assert published == [
        events.MessageDeliveryChanged(chat_id=chat.pk, message_id=message.pk, status="failed")
    ]


def test_a_subscriber_runs_inside_the_transaction() -> None:
    """A subscriber's writes roll back with the change that published the event."""
    client = ClientFactory.create()

    class Rollback(Exception):
        pass

    def write_a_note(event: events.MessagePosted) -> None:
        if event.author == "client":
            services.post_system_message(chat=Chat.objects.get(pk=event.chat_id), text="note")

    events.subscribe(events.MessagePosted, write_a_note)
    try:
        with pytest.raises(Rollback), transaction.atomic():
            services.post_client_message(client=client, content=text("hi"))
            assert Message.objects.filter(author="system").count() == 1
            raise Rollback
    finally:
        events.unsubscribe(events.MessagePosted, write_a_note)
    assert not Message.objects.exists() and not Chat.objects.exists()


def test_an_idle_chat_with_a_fresh_message_is_not_finished() -> None:
    chat = ChatFactory.create(created=timezone.now() - timedelta(days=2))
    cutoff = timezone.now() - timedelta(hours=1)
    services.post_client_message(client=chat.client, content=text("still here"))

    assert services.finish_idle_chat(chat=chat, idle_since=cutoff) is False
    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    Message.objects.filter(chat=chat).update(created=timezone.now() - timedelta(days=1))
    assert services.finish_idle_chat(chat=chat, idle_since=cutoff) is True
