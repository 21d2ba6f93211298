"""A queued chat's place in the queue and its estimated wait
(``agents.selectors.queue_place``; docs/routing.md, "Queue position")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import selectors, services
from agents.models import Agent, Channel, Chat, Department
from agents.selectors import QueuePlace, queue_place
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(db: None) -> Agent:
    return AgentFactory.create(name="Ann")


@pytest.fixture
def channel(agent: Agent) -> Channel:
    return ChannelFactory.create(agents=[agent])


def queued(channel: Channel, *, ago: float = 0, department: Department | None = None) -> Chat:
    """A client's chat, waiting in the queue since ``ago`` seconds."""
    client = ClientFactory.create(channel=channel)
    message = services.post_client_message(
        client=client, content=text("hello"), department=department
    )
    Chat.objects.filter(pk=message.chat_id).update(
        queued_at=timezone.now() - timedelta(seconds=ago)
    )
    return Chat.objects.select_related("channel").get(pk=message.chat_id)


def waited(channel: Channel, agent: Agent, seconds: float, *, hours_ago: float = 1) -> Chat:
    """A chat of the channel an agent took after ``seconds`` in the queue."""
    chat = queued(channel)
    services.accept_chat(chat=chat, agent=agent)
    taken = timezone.now() - timedelta(hours=hours_ago)
    Chat.objects.filter(pk=chat.pk).update(
        queued_at=taken - timedelta(seconds=seconds), accepted_at=taken
    )
    return chat


def place(chat: Chat) -> QueuePlace | None:
    chat.refresh_from_db()
    return queue_place(chat=chat)


def test_the_oldest_queued_chat_is_first_and_each_later_one_a_place_behind(
    channel: Channel,
) -> None:
    third, first, second = (
        queued(channel, ago=10),
        queued(channel, ago=300),
        queued(channel, ago=60),
    )

    assert [place(chat) for chat in (first, second, third)] == [
        QueuePlace(position=1, wait_seconds=None),
        QueuePlace(position=2, wait_seconds=None),
        QueuePlace(position=3, wait_seconds=None),
    ]


def test_chats_queued_at_the_same_moment_go_by_their_id(channel: Channel) -> None:
    one, two = queued(channel), queued(channel)
    Chat.objects.filter(pk__in=[one.pk, two.pk]).update(queued_at=timezone.now())

    assert [place(one).position, place(two).position] == [1, 2]  # type: ignore[union-attr]


def test_a_chat_taken_ahead_moves_the_others_up(channel: Channel, agent: Agent) -> None:
    first, second, third = queued(channel, ago=30), queued(channel, ago=20), queued(channel, ago=10)
    assert place(third).position == 3  # type: ignore[union-attr]

    services.accept_chat(chat=first, agent=agent)
    assert [place(second).position, place(third).position] == [1, 2]  # type: ignore[union-attr]

    services.finish_chat(chat=second)  # ended while it waited: no longer ahead
    assert place(third).position == 1  # type: ignore[union-attr]


def test_only_the_chats_own_channel_counts(channel: Channel, agent: Agent) -> None:
    elsewhere = ChannelFactory.create(agents=[agent])
    queued(elsewhere, ago=100)
    waited(elsewhere, agent, seconds=900)

    assert place(queued(channel)) == QueuePlace(position=1, wait_seconds=None)


def test_a_chat_not_in_the_queue_has_no_place(channel: Channel, agent: Agent) -> None:
    chat = queued(channel)
    services.accept_chat(chat=chat, agent=agent)
    assert place(chat) is None

    services.finish_chat(chat=chat)
    assert place(chat) is None

    bot_chat = services.open_chat(client=ClientFactory.create(channel=channel), state="bot")
    assert place(bot_chat) is None


def test_on_an_offer_channel_a_department_waits_for_its_own_chats_and_those_of_none(
    agent: Agent,
) -> None:
    channel = ChannelFactory.create(agents=[agent], routing_mode=Channel.RoutingMode.OFFER)
    billing, sales = (
        Department.objects.create(name="Billing"),
        Department.objects.create(name="Sales"),
    )
    queued(channel, ago=50, department=sales)  # Sales' agents take it: not ahead of Billing's
    queued(channel, ago=40, department=billing)
    queued(channel, ago=30)  # anyone's, Billing's agents' too
    mine = queued(channel, ago=20, department=billing)
    anyones = queued(channel, ago=10)

    assert place(mine).position == 3  # type: ignore[union-attr]
    # A chat for any agent waits for every chat ahead of it.
    assert place(anyones).position == 5  # type: ignore[union-attr]


def test_in_manual_mode_a_department_waits_for_the_whole_queue(channel: Channel) -> None:
    billing, sales = (
        Department.objects.create(name="Billing"),
        Department.objects.create(name="Sales"),
    )
    queued(channel, ago=50, department=sales)
    mine = queued(channel, ago=20, department=billing)

    assert place(mine).position == 2  # type: ignore[union-attr]


def test_the_estimate_is_the_median_recent_wait_times_the_position(
    channel: Channel, agent: Agent
) -> None:
    for seconds in (60, 90, 3600):  # one chat forgotten for an hour moves no median
        waited(channel, agent, seconds)
    first, second = queued(channel, ago=20), queued(channel, ago=10)

    assert place(first) == QueuePlace(position=1, wait_seconds=90)
    assert place(second) == QueuePlace(position=2, wait_seconds=180)


def test_only_the_last_recent_waits_count(
    channel: Channel, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selectors, "RECENT_WAITS", 3)
    waited(channel, agent, 1000, hours_ago=25)  # outside the day's window
    for hours_ago in (5, 4):
        waited(channel, agent, 600, hours_ago=hours_ago)  # older than the last three
    for seconds, hours_ago in ((30, 3), (40, 2), (50, 1)):
        waited(channel, agent, seconds, hours_ago=hours_ago)

    assert place(queued(channel)) == QueuePlace(position=1, wait_seconds=40)


def test_waits_that_were_no_wait_in_the_queue_do_not_count(channel: Channel, agent: Agent) -> None:
    # A bot's chat an agent took over never waited in the queue.
    bot_chat = services.open_chat(client=ClientFactory.create(channel=channel), state="bot")
    services.accept_chat(chat=bot_chat, agent=agent)
    # A chat a transfer queued again: its accept is from before its wait.
    moved = waited(channel, agent, 30)
    Chat.objects.filter(pk=moved.pk).update(state=Chat.State.QUEUED, queued_at=timezone.now())
    moved.refresh_from_db()

    assert place(moved) == QueuePlace(position=1, wait_seconds=None)
    assert place(queued(channel)) == QueuePlace(position=2, wait_seconds=None)


def test_a_long_queue_is_read_in_two_queries(
    channel: Channel, agent: Agent, django_assert_num_queries: Any
) -> None:
    for seconds in (60, 120):
        waited(channel, agent, seconds)
    for ago in range(30, 0, -1):
        queued(channel, ago=ago)
    last = Chat.objects.select_related("channel").latest("queued_at")

    with django_assert_num_queries(2):
        found = queue_place(chat=last)

    assert found == QueuePlace(position=30, wait_seconds=90 * 30)
