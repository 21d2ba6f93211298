"""Presence (docs/routing.md, "Presence"): an online agent silent for
AGENT_AWAY_MINUTES is away — offered nothing, their offers moved on, their
chats kept — and any sign of life (a page, the API, an open stream) brings
them back to be offered what waits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from agents import presence, services
from agents.models import Agent, Channel, Chat, ChatOffer
from agents.tokens import issue_token
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text
from tests.web.server import WebServer
from tests.web.sse import Reader
from tests.worker import wait_for

pytestmark = pytest.mark.django_db


def silent(agent: Agent, minutes: float = 6) -> None:
    """``agent`` showed no sign of life for ``minutes`` (the default away time is 5)."""
    then = timezone.now() - timedelta(minutes=minutes)
    Agent.objects.filter(pk=agent.pk).update(last_seen_at=then)
    presence._written.pop(agent.pk, None)  # this process wrote nothing for them since


def new_chat(channel: Channel) -> Chat:
    client = ClientFactory.create(channel=channel)
    return services.post_client_message(client=client, content=text("hello")).chat


def taken(channel: Channel, agent: Agent) -> Chat:
    """A chat of ``channel`` that ``agent`` answers."""
    chat = services.open_chat(client=ClientFactory.create(channel=channel))
    return services.accept_chat(chat=chat, agent=agent)


def offered_to(chat: Chat) -> Agent | None:
    chat.refresh_from_db()
    return chat.offered_to


@pytest.fixture
def ann() -> Agent:
    return services.set_agent_status(agent=AgentFactory.create(name="Ann"), online=True)


@pytest.fixture
def channel(ann: Agent) -> Channel:
    return ChannelFactory.create(agents=[ann], routing_mode=Channel.RoutingMode.OFFER)


def test_going_online_is_a_sign_of_life(ann: Agent) -> None:
    ann.refresh_from_db()
    assert ann.last_seen_at is not None and ann.status == "online"


def test_an_agent_silent_past_the_away_time_is_offered_nothing(
    ann: Agent, channel: Channel
) -> None:
    silent(ann, minutes=4)
    assert offered_to(new_chat(channel)) == ann  # 4 minutes: still here
    silent(ann, minutes=6)
    ann.refresh_from_db()
    assert ann.status == "away"
    assert offered_to(new_chat(channel)) is None


def test_an_away_agents_offers_move_on_and_their_chats_stay(ann: Agent, channel: Channel) -> None:
    bob = services.set_agent_status(agent=AgentFactory.create(name="Bob"), online=True)
    channel.agents.add(bob)
    mine = taken(channel, ann)
    Agent.objects.filter(pk=bob.pk).update(max_chats=1)
    taken(channel, bob)
    waiting = new_chat(channel)
    assert offered_to(waiting) == ann  # Bob is full

    silent(ann)
    assert presence.move_offers_of_away_agents() == 1

    assert offered_to(waiting) is None  # Bob is full, Ann away: it waits
    assert ChatOffer.objects.get(chat=waiting).outcome == ChatOffer.Outcome.WITHDRAWN
    mine.refresh_from_db()
    assert mine.state == Chat.State.ACTIVE and list(mine.agents.all()) == [ann]
    assert presence.move_offers_of_away_agents() == 0


def test_a_page_request_brings_an_away_agent_back_to_what_waits(
    ann: Agent, channel: Channel
) -> None:
    silent(ann)
    chat = new_chat(channel)
    assert offered_to(chat) is None

    assert page_of(ann).get("/agent/").status_code == 200

    assert offered_to(chat) == ann
    ann.refresh_from_db()
    assert ann.status == "online"


def test_an_api_request_is_a_sign_of_life(ann: Agent, channel: Channel) -> None:
    silent(ann)
    chat = new_chat(channel)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=ann)}")
    assert api.get("/api/agent/v1/status").json() == {"status": "online"}
    assert offered_to(chat) == ann


def test_an_agent_asking_for_their_status_is_not_away(ann: Agent) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=ann)}")
    silent(ann)
    ann.refresh_from_db()
    assert ann.status == "away"
    # The request itself is a sign of life.
    assert api.get("/api/agent/v1/status").json() == {"status": "online"}


def test_an_offline_agent_is_neither_away_nor_offered(ann: Agent, channel: Channel) -> None:
    services.set_agent_status(agent=ann, online=False)
    silent(ann)
    ann.refresh_from_db()
    assert ann.status == "offline"
    assert offered_to(new_chat(channel)) is None
    page_of(ann).get("/agent/")  # seen, but offline: still offered nothing
    assert not ChatOffer.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_open_stream_keeps_its_agent_present(ann: Agent) -> None:
    server = WebServer(LIVE_ACCESS_SECONDS="1").start()
    token = issue_token(agent=ann)
    silent(ann)  # opening a stream says nothing: its checks do
    assert Agent.objects.get(pk=ann.pk).status == "away"
    stream = Reader(f"{server.base_url}/api/agent/v1/stream", Authorization=f"Token {token}")
    try:
        # The stream's next check (every LIVE_ACCESS_SECONDS) sees the agent.
        wait_for(lambda: Agent.objects.get(pk=ann.pk).status == "online", timeout=15)
    finally:
        stream.close()
        server.stop()
