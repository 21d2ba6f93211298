"""With Redis stopped, what needs only PostgreSQL keeps working, and all of
it recovers by itself once Redis is back (issue 29, "Dependencies down").

Each test starts its own redis-server (tests/reliability/redis_server.py)
and points a real web process and worker at it, whatever the suite's
REDIS_URL; the database is the suite's (PostgreSQL, or SQLite on the
embedded default run).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests

from agents import ratelimit, services
from agents.models import Chat, Message
from agents.tokens import issue_token
from bots import services as bots
from bots.models import BotProvider
from channels_api.services import create_chat_api_channel
from delivery.models import Delivery
from devhooks.widget.tokens import issue_visitor_token
from tests.delivery.target import Target
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.reliability.redis_server import RedisServer
from tests.web.server import WebServer
from tests.web.sse import Reader
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TOKEN = "bot-token-0123456789abcdef"


def on_own_redis(server: RedisServer) -> dict[str, str]:
    """The environment of a process whose broker and cache are ``server``'s."""
    return {"REDIS_URL": server.url(0), "REDIS_CACHE_URL": server.url(1)}


@pytest.fixture
def web_and_worker(redis_server: RedisServer) -> Iterator[tuple[WebServer, Worker]]:
    web = WebServer(REDIS_URL=redis_server.url(0), REDIS_CACHE_URL=redis_server.url(1)).start()
    worker = Worker(concurrency=4, env=on_own_redis(redis_server))
    try:
        worker.start()
        yield web, worker
    finally:
        worker.stop()
        web.stop()


def test_a2_and_b2_are_stored_while_redis_is_down_and_their_deliveries_go_out_when_it_returns(
    redis_server: RedisServer, web_and_worker: tuple[WebServer, Worker], target: Target
) -> None:
    web, worker = web_and_worker
    made, _ = create_chat_api_channel(
        name="App", webhook_url=target.url("/a3"), agents=[AgentFactory.create(is_online=True)]
    )
    provider = bots.create_bot_provider(name="Bot", endpoint_url=target.url("/bot"))
    bots.attach_bot(channel=made.channel, provider=provider, token=TOKEN)
    a2 = f"{web.base_url}/chat-api/{made.path_secret}/{made.channel.public_id}"
    b2 = f"{web.base_url}/webhooks/{BotProvider.objects.get().provider_id}/{TOKEN}"

    redis_server.stop()
    said = requests.post(
        a2, json={"sender": {"id": "u1"}, "message": {"type": "text", "text": "hi"}}, timeout=10
    )
    assert said.status_code == 200, said.text
    print(f"\nA2 with Redis down: 200 in {said.elapsed.total_seconds():.2f} s")
    chat = Chat.objects.get()

    def bot_says(n: int) -> requests.Response:
        event = {
            "event": "BOT_MESSAGE", "id": str(n), "chat_id": str(chat.pk),
            "client_id": str(chat.client_id), "message": {"type": "TEXT", "text": f"reply {n}"},
        }  # fmt: skip
        return requests.post(b2, json=event, timeout=10)

    replies = [bot_says(1), bot_says(2)]
    assert [(r.status_code, r.json()) for r in replies] == [(200, {"result": "ok"})] * 2
    assert list(chat.messages.values_list("author", "text")) == [
        ("client", "hi"), ("bot", "reply 1"), ("bot", "reply 2"),
    ]  # fmt: skip
    # Their deliveries (B1 to the bot, A3 to the integrator) wait in the outbox.
    waiting = Delivery.objects.filter(status=Delivery.Status.PENDING)
    assert waiting.count() == 3 and not waiting.filter(dispatched_at__isnull=False).exists()
    time.sleep(1)
    assert target.received == []

    redis_server.start()
    back = time.monotonic()
    received = target.wait_for(3, timeout=15)
    took = max(r.at for r in received) - back
    print(f"\nthe outbox's 3 deliveries reached their receivers {took:.1f} s after Redis returned")
    assert took <= 5.0
    a3 = [json.loads(r.body)["message"]["text"] for r in received if r.path.startswith("/a3")]
    assert a3 == ["reply 1", "reply 2"]  # in order
    assert worker.process is not None and worker.process.poll() is None
    assert not re.search(r'" 5\d\d$', web.stdout(), re.MULTILINE), web.stdout()

    # All of it is back: A2 again, its delivery at once.
    again = requests.post(
        a2, json={"sender": {"id": "u1"}, "message": {"type": "text", "text": "again"}}, timeout=10
    )
    assert again.status_code == 200
    wait_for(lambda: Message.objects.filter(text="again").exists())
    target.wait_for(4, timeout=5)


def test_the_rate_limit_counts_in_each_process_while_redis_is_down(
    redis_server: RedisServer, settings: Any
) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_server.url(1),
        }
    }
    key = f"reliability-{time.monotonic_ns()}"
    redis_server.stop()
    down = [ratelimit.admit(key=key, limit=3, window=60) for _ in range(5)]
    assert down == [True, True, True, False, False]  # the limit, in this process

    redis_server.start()
    up = [ratelimit.admit(key=key, limit=3, window=60) for _ in range(4)]
    assert up == [True, True, True, False]  # counted in Redis again
    with redis.Redis.from_url(redis_server.url(1)) as client:
        assert client.zcard(f"{{{ratelimit.KEY_PREFIX}{key}}}:hits") == 3


def test_the_streams_go_on_while_redis_is_down_and_are_back_on_redis_when_it_returns(
    redis_server: RedisServer,
) -> None:
    alice = AgentFactory.create(name="Alice", is_online=True)
    channel = ChannelFactory.create(agents=[alice])
    vera = ClientFactory.create(channel=channel, name="Vera")
    chat = services.post_client_message(client=vera, content=text("hello")).chat
    services.accept_chat(chat=chat, agent=alice)
    api = {"Authorization": f"Token {issue_token(agent=alice)}"}
    broker, cache = redis_server.url(0), redis_server.url(1)
    web = WebServer(REDIS_URL=broker, REDIS_CACHE_URL=cache, LIVE_HEARTBEAT_SECONDS="1").start()

    def reply(words: str) -> None:
        said = requests.post(
            f"{web.base_url}/api/agent/v1/chats/{chat.pk}/messages",
            json={"type": "text", "text": words}, headers=api, timeout=10,
        )  # fmt: skip
        assert said.status_code == 201, said.text

    def heard(stream: Reader, words: str, timeout: float) -> float:
        started = time.monotonic()
        while True:
            event = stream.until("message", timeout=timeout)
            if event.data["message"]["text"] == words:
                return time.monotonic() - started

    agent_stream = Reader(f"{web.base_url}/api/agent/v1/stream", **api)
    streams = [agent_stream]
    try:
        redis_server.stop()
        # An open stream and one opened now (its slots taken in the database).
        visitor_stream = Reader(f"{web.base_url}/visitor/{issue_visitor_token(client=vera)}/stream")
        streams.append(visitor_stream)
        assert visitor_stream.response.status_code == 200
        reply("said while Redis is down")
        for stream in streams:
            assert heard(stream, "said while Redis is down", timeout=5) < 5

        redis_server.start()
        back = time.monotonic()
        wait_for(lambda: "live.redis_back" in web.stderr(), timeout=10)
        print(f"\nthe hub was back on Redis {time.monotonic() - back:.1f} s after it returned")
        reply("said once Redis is back")
        for stream in streams:  # from Redis's pub/sub again: at once
            assert heard(stream, "said once Redis is back", timeout=2) < 2
        assert not any(stream.ended(0) for stream in streams)
    finally:
        for stream in streams:
            stream.close()
        web.stop()
