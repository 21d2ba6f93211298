"""Routing under concurrency (docs/routing.md, "Under concurrency"): new
chats arriving at once through the real web server's two worker processes,
while agents go online and offline from this one, never offer one chat to
two agents nor an agent more chats than their capacity."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.db import connections

from agents import services
from agents.models import Agent, Channel, Chat, ChatOffer
from channels_api.services import create_chat_api_channel
from tests.factories import AgentFactory
from tests.web.server import WebServer

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS, CAPACITY, CHATS = 3, 2, 30


def loads() -> Counter[int]:
    """Each agent's open chats: active ones and pending offers."""
    load: Counter[int] = Counter()
    for chat in Chat.objects.filter(state=Chat.State.ACTIVE).prefetch_related("agents"):
        load.update(agent.pk for agent in chat.agents.all())
    load.update(
        Chat.objects.filter(state=Chat.State.QUEUED, offered_to__isnull=False).values_list(
            "offered_to", flat=True
        )
    )
    return load


def test_chats_arriving_at_once_in_two_processes_never_overfill_an_agent() -> None:
    agents = [
        AgentFactory.create(name=f"Agent {n}", is_online=False, max_chats=CAPACITY)
        for n in range(AGENTS)
    ]
    chat_api, _ = create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/integrator", agents=agents
    )
    services.set_routing(channel=chat_api.channel, mode=Channel.RoutingMode.OFFER)
    url = chat_api.endpoint_url.split("/", 3)[3]
    server = WebServer(workers=2).start()
    stop = threading.Event()

    start = threading.Barrier(CHATS)

    def post_now(n: int) -> int:
        body = {"sender": {"id": f"c-{n}", "name": f"Client {n}"},
                "message": {"type": "text", "text": f"hello {n}"}}  # fmt: skip
        return requests.post(f"{server.base_url}/{url}", json=body, timeout=30).status_code

    def post(n: int) -> int:
        body = {"sender": {"id": f"c-{n}", "name": f"Client {n}"},
                "message": {"type": "text", "text": f"hello {n}"}}  # fmt: skip
        with requests.Session() as session:
            session.get(f"{server.base_url}/agent/login/", timeout=30)  # connected
            start.wait(timeout=60)  # then all at once
            return session.post(f"{server.base_url}/{url}", json=body, timeout=60).status_code

    def flicker() -> None:
        """The last agent goes offline and online again and again meanwhile:
        their offers move on, and coming back they are offered what waits."""
        try:
            while not stop.is_set():
                for online in (False, True):
                    services.set_agent_status(agent=agents[-1], online=online)
                    # As often as a person could, not in a tight loop: on
                    # SQLite a loop that takes the write lock again at once
                    # starves the requests waiting for it.
                    stop.wait(0.05)
        finally:
            connections.close_all()

    # The clients wrote before: a new client's first message waits for the
    # visitor-number counter's lock, which would queue the chats up.
    for n in range(CHATS):
        assert post_now(n) == 200
    for chat in Chat.objects.filter(channel=chat_api.channel):
        services.finish_chat(chat=chat)
    for agent in agents:
        services.set_agent_status(agent=agent, online=True)

    flickering = threading.Thread(target=flicker)
    flickering.start()
    try:
        with ThreadPoolExecutor(max_workers=CHATS) as pool:
            answers = list(pool.map(post, range(CHATS)))
    finally:
        stop.set()
        flickering.join()
        server.stop()

    assert answers == [200] * CHATS
    chats = Chat.objects.filter(channel=chat_api.channel).exclude(state=Chat.State.FINISHED)
    assert chats.count() == CHATS and not chats.exclude(state=Chat.State.QUEUED).exists()
    # Every agent's capacity is used and none is passed; one offer per chat.
    load = loads()
    assert load == {agent.pk: CAPACITY for agent in agents}, load
    pending = ChatOffer.objects.filter(outcome=ChatOffer.Outcome.PENDING)
    assert pending.count() == AGENTS * CAPACITY
    assert sorted(pending.values_list("chat_id", flat=True)) == sorted(
        chats.filter(offered_to__isnull=False).values_list("pk", flat=True)
    )
    assert all(
        Agent.objects.get(pk=offer.agent_id).is_online for offer in pending
    )  # an offline agent keeps no offer
