"""The agent's live stream over the real web server (gunicorn with uvicorn
workers): events reach exactly the streams entitled to them, from this
process and from the worker; a reconnect with Last-Event-ID misses nothing."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.test import Client as Browser
from django.utils import timezone

from agents import live, services
from agents.models import Agent, Chat, LiveEvent
from agents.tokens import issue_token, issue_visitor_token
from channels_api.services import create_chat_api_channel
from tests.delivery.target import Target
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.web.server import WebServer
from tests.worker import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Event:
    id: int
    kind: str
    data: dict[str, Any]


class Reader:
    """Reads one stream in a thread, as a browser's EventSource would."""

    def __init__(self, url: str, **headers: str) -> None:
        self.response = requests.get(url, headers=headers, stream=True, timeout=(5, 30))
        self.events: queue.Queue[Event] = queue.Queue()
        self.comments: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        if self.response.status_code == 200:
            # It hears what happens from here on (and what it missed before).
            wait_for(lambda: "connected" in self.comments, timeout=10)

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            for raw in self.response.iter_lines(decode_unicode=True):
                line = raw or ""
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                elif not line:
                    if "data" in fields:
                        self.events.put(
                            Event(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                        )
                    fields = {}
                else:
                    name, _, value = line.partition(": ")
                    fields[name] = value
        except (requests.RequestException, AttributeError, ValueError):
            pass  # closed by the test

    def next(self, timeout: float = 10) -> Event:
        return self.events.get(timeout=timeout)

    def until(self, kind: str, timeout: float = 10) -> Event:
        while True:
            event = self.next(timeout)
            if event.kind == kind:
                return event

    def quiet(self, seconds: float = 1.5) -> list[Event]:
        """Whatever arrives within ``seconds`` (nothing, usually)."""
        try:
            return [self.next(seconds)]
        except queue.Empty:
            return []

    def close(self) -> None:
        self.response.close()


@pytest.fixture(scope="module")
def web(django_db_setup: None) -> Iterator[WebServer]:
    server = WebServer(LIVE_HEARTBEAT_SECONDS="1").start()
    yield server
    server.stop()


@pytest.fixture
def alice() -> Agent:
    return AgentFactory.create(name="Alice")


@pytest.fixture
def token(alice: Agent) -> str:
    return issue_token(agent=alice)


def open_stream(web: WebServer, token: str, **headers: str) -> Reader:
    reader = Reader(
        f"{web.base_url}/api/agent/v1/stream", Authorization=f"Token {token}", **headers
    )
    assert reader.response.status_code == 200
    assert reader.response.headers["Content-Type"].startswith("text/event-stream")
    return reader


def test_a_message_on_my_channel_arrives_and_one_on_another_does_not(
    web: WebServer, alice: Agent, token: str
) -> None:
    mine = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]), name="Mia")
    other = ClientFactory.create(channel=ChannelFactory.create(), name="Otto")
    stream = open_stream(web, token)
    try:
        services.post_client_message(client=other, content=text("not for Alice"))
        services.post_client_message(client=mine, content=text("for Alice"))

        opened = stream.next()
        assert opened.kind == "chat.opened" and opened.data["state"] == "queued"
        message = stream.next()
        assert message.kind == "message"
        assert message.data["message"]["text"] == "for Alice"
        assert message.data["chat_id"] == opened.data["chat_id"] == Chat.objects.get(client=mine).pk
        assert message.id > opened.id
        assert stream.quiet() == []
    finally:
        stream.close()


def test_a_reconnect_with_last_event_id_misses_nothing(
    web: WebServer, alice: Agent, token: str
) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]))
    first = open_stream(web, token)
    services.post_client_message(client=client, content=text("one"))
    seen = first.until("message")
    first.close()

    # While no stream is open: three more changes.
    chat = Chat.objects.get(client=client)
    services.post_client_message(client=client, content=text("two"))
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=text("three"))

    again = open_stream(web, token, **{"Last-Event-ID": str(seen.id)})
    try:
        replayed = [again.next() for _ in range(3)]
        assert [(e.kind, e.data.get("message", {}).get("text")) for e in replayed] == [
            ("message", "two"),
            ("chat.accepted", None),
            ("message", "three"),
        ]
        assert [e.id for e in replayed] == sorted(e.id for e in replayed)
        services.post_agent_message(chat=chat, agent=alice, content=text("four"))
        assert again.next().data["message"]["text"] == "four"
        assert again.quiet() == []  # nothing twice
    finally:
        again.close()


def test_an_idle_stream_gets_heartbeats(web: WebServer, token: str) -> None:
    stream = open_stream(web, token)
    try:
        wait_for(lambda: "heartbeat" in stream.comments, timeout=5)
    finally:
        stream.close()


def test_the_page_stream_takes_the_signed_in_agent(web: WebServer, alice: Agent) -> None:
    browser = Browser()
    browser.force_login(alice)
    cookie = browser.cookies["sessionid"].value
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]))

    stream = Reader(f"{web.base_url}/agent/stream", Cookie=f"sessionid={cookie}")
    try:
        assert stream.response.status_code == 200
        services.post_client_message(client=client, content=text("hello page"))
        assert stream.until("message").data["message"]["text"] == "hello page"
    finally:
        stream.close()

    refused = requests.get(f"{web.base_url}/agent/stream", timeout=5)
    assert refused.status_code == 403


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "Authorization: Token <key>"),
        ({"Authorization": "Bearer abc"}, "Authorization: Token <key>"),
        ({"Authorization": "Token wrong"}, "token is not valid"),
    ],
)
def test_the_api_stream_needs_a_token(
    web: WebServer, headers: dict[str, str], message: str
) -> None:
    answer = requests.get(f"{web.base_url}/api/agent/v1/stream", headers=headers, timeout=5)
    assert answer.status_code == 401
    assert message in answer.json()["error"]["message"]
    assert requests.post(f"{web.base_url}/api/agent/v1/stream", timeout=5).status_code == 405


@pytest.mark.worker
def test_a_delivery_result_from_the_worker_reaches_the_stream(
    web: WebServer, alice: Agent, token: str, celery_worker: Worker
) -> None:
    integrator = Target("127.0.0.1").start()
    try:
        chat_api, _ = create_chat_api_channel(
            name="App", webhook_url=integrator.url(), agents=[alice]
        )
        client = ClientFactory.create(channel=chat_api.channel)
        chat = services.post_client_message(client=client, content=text("hi")).chat
        services.accept_chat(chat=chat, agent=alice)
        stream = open_stream(web, token)
        try:
            sent = services.post_agent_message(chat=chat, agent=alice, content=text("hello"))
            assert stream.until("message").data["message"]["id"] == sent.pk
            states = []
            while "delivered" not in states:
                event = stream.until("message.delivery", timeout=20)
                assert event.data["message_id"] == sent.pk
                states.append(event.data["status"])
        finally:
            stream.close()
    finally:
        integrator.stop()


def test_a_visitor_hears_its_own_chat_only(web: WebServer, alice: Agent) -> None:
    channel = ChannelFactory.create(agents=[alice])
    vera, otto = (ClientFactory.create(channel=channel, name=n) for n in ("Vera", "Otto"))
    token = issue_visitor_token(client=vera)
    chat = services.post_client_message(client=vera, content=text("hello")).chat
    services.post_client_message(client=otto, content=text("not Vera's"))

    stream = Reader(f"{web.base_url}/visitor/{token}/stream")
    try:
        assert stream.response.headers["Access-Control-Allow-Origin"] == "*"
        services.accept_chat(chat=chat, agent=alice)
        services.set_client_typing(chat=chat, typing=True)  # her own typing: not echoed
        services.set_agent_typing(chat=chat, agent=alice, typing=True)
        services.post_system_message(chat=chat, text="an agents' note")
        services.post_note(chat=chat, agent=alice, text="an internal note")
        services.post_agent_message(chat=chat, agent=alice, content=text("Hi Vera"))
        services.post_client_message(client=otto, content=text("still not Vera's"))
        services.finish_chat(chat=chat, agent=alice)

        heard = [stream.next() for _ in range(4)]
        assert [e.kind for e in heard] == ["chat.accepted", "typing", "message", "chat.finished"]
        assert heard[1].data == {"kind": "typing", "chat_id": chat.pk, "state": "active",
                                 "who": "agent", "typing": True}  # fmt: skip
        assert heard[2].data["message"]["text"] == "Hi Vera"
        assert heard[2].data["message"]["sender_name"] == "Alice"
        assert stream.quiet() == []
    finally:
        stream.close()


def test_an_unknown_visitor_token_is_404(web: WebServer) -> None:
    answer = requests.get(f"{web.base_url}/visitor/{'x' * 32}/stream", timeout=5)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert "x" * 32 not in web.stdout()  # the access log redacts the token


def test_idle_streams_hold_no_database_connection(alice: Agent, token: str) -> None:
    """Twenty open streams on a web process whose two workers may hold four
    database connections each (psycopg's smallest pool): a request still
    gets one at once."""
    server = WebServer(DATABASE_POOL_SIZE="4", LIVE_HEARTBEAT_SECONDS="1").start()
    streams = []
    try:
        streams = [open_stream(server, token) for _ in range(20)]
        started = time.monotonic()
        answer = requests.get(
            f"{server.base_url}/api/agent/v1/chats",
            headers={"Authorization": f"Token {token}"},
            timeout=10,
        )
        assert answer.status_code == 200 and time.monotonic() - started < 5
        wait_for(lambda: all("heartbeat" in s.comments for s in streams), timeout=10)
    finally:
        for stream in streams:
            stream.close()
        server.stop()


def test_old_events_are_forgotten_and_a_late_reconnect_is_told_to_reload(
    web: WebServer, alice: Agent, token: str
) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]))
    services.post_client_message(client=client, content=text("long ago"))
    old = LiveEvent.objects.order_by("-id").first()
    assert old is not None
    LiveEvent.objects.update(created=timezone.now() - timedelta(minutes=11))
    services.post_client_message(client=client, content=text("just now"))

    assert live.forget_old_events() == 2  # chat.opened and the first message
    stream = open_stream(web, token, **{"Last-Event-ID": str(old.pk)})
    try:
        assert stream.next().kind == "reset"
        assert stream.next().data["message"]["text"] == "just now"
    finally:
        stream.close()


def test_old_events_not_yet_forgotten_do_not_make_a_reconnect_reload(
    web: WebServer, alice: Agent, token: str
) -> None:
    """Rows past the window wait for the next prune; a reconnect whose own
    last event is kept has missed nothing and is not told to reload."""
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]))
    services.post_client_message(client=client, content=text("long ago"))
    LiveEvent.objects.update(created=timezone.now() - timedelta(minutes=11))
    services.post_client_message(client=client, content=text("a minute ago"))
    seen = LiveEvent.objects.order_by("-id").first()
    assert seen is not None
    services.post_client_message(client=client, content=text("just now"))

    stream = open_stream(web, token, **{"Last-Event-ID": str(seen.pk)})
    try:
        first = stream.next()
        assert first.kind == "message" and first.data["message"]["text"] == "just now"
    finally:
        stream.close()
