"""The agent's live stream over the real web server (gunicorn with uvicorn
workers): events reach exactly the streams entitled to them, from this
process and from the worker; a reconnect with Last-Event-ID misses nothing."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.test import Client as Browser
from django.utils import timezone

from agents import live, services
from agents.models import Agent, ApiToken, Chat, LiveEvent
from agents.tokens import issue_token, revoke_token
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from devhooks.widget.tokens import issue_visitor_token
from tests.aio import run_async
from tests.channels_api import conftest as chat_api_fixtures
from tests.delivery.target import Target
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.web.server import WebServer
from tests.worker import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

chat_api = chat_api_fixtures.chat_api  # a Chat API channel of ``agent`` (Alice)


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

    def ended(self, timeout: float = 10) -> bool:
        """Whether the service closed the stream within ``timeout``."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def drain(self) -> list[Event]:
        """Every event read and not yet taken."""
        heard = []
        while not self.events.empty():
            heard.append(self.events.get_nowait())
        return heard

    def close(self) -> None:
        self.response.close()


@pytest.fixture(scope="module")
def web(django_db_setup: None) -> Iterator[WebServer]:
    server = WebServer(LIVE_HEARTBEAT_SECONDS="1").start()
    yield server
    server.stop()


@pytest.fixture
def agent() -> Agent:
    return AgentFactory.create(name="Alice")


@pytest.fixture
def alice(agent: Agent) -> Agent:
    """The agent of the Chat API channel ``chat_api`` (tests/channels_api/conftest.py)."""
    return agent


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


# --- a stream lives only as long as its access (docs/live.md, "Access") -------


def post_a2(web: WebServer, chat_api: ChatApiChannel, text: str) -> None:
    """The integrator's A2, through the web process."""
    path = chat_api.endpoint_url.split("/", 3)[3]
    body = {"sender": {"id": "u-1", "name": "Carla"}, "message": {"type": "text", "text": text}}
    assert requests.post(f"{web.base_url}/{path}", json=body, timeout=10).status_code == 200


def delete_in_the_admin(agent: Agent) -> None:
    admin = Browser()
    admin.force_login(AgentFactory.create(is_staff=True, is_superuser=True))
    token = ApiToken.objects.get(agent=agent)
    answer = admin.post(f"/admin/agents/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302


def deactivate(agent: Agent) -> None:
    agent.is_active = False
    agent.save()  # as the admin's form does


@pytest.mark.parametrize(
    "revoke",
    [
        pytest.param(lambda agent: revoke_token(agent=agent), id="token deleted"),
        pytest.param(delete_in_the_admin, id="token deleted in the admin"),
        pytest.param(lambda agent: issue_token(agent=agent), id="token replaced"),
        pytest.param(deactivate, id="agent deactivated"),
    ],
)
def test_a_revoked_token_ends_its_stream_before_the_next_message(
    web: WebServer,
    alice: Agent,
    token: str,
    chat_api: ChatApiChannel,
    revoke: Callable[[Agent], object],
) -> None:
    post_a2(web, chat_api, "before")
    stream = open_stream(web, token)
    try:
        revoke(alice)
        post_a2(web, chat_api, "my card is 4111 1111 1111 1111")

        assert stream.ended()
        heard = stream.drain()
        assert all("4111" not in json.dumps(event.data) for event in heard), heard
        again = requests.get(
            f"{web.base_url}/api/agent/v1/stream",
            headers={"Authorization": f"Token {token}"},
            timeout=5,
        )
        assert again.status_code == 401
    finally:
        stream.close()


def test_signing_out_ends_the_page_stream(
    web: WebServer, alice: Agent, chat_api: ChatApiChannel
) -> None:
    browser = Browser()
    browser.force_login(alice)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    stream = Reader(f"{web.base_url}/agent/stream", Cookie=cookie)
    try:
        post_a2(web, chat_api, "hello page")
        assert stream.until("message").data["message"]["text"] == "hello page"

        browser.logout()
        post_a2(web, chat_api, "my card is 4111 1111 1111 1111")

        assert stream.ended()
        assert all("4111" not in json.dumps(event.data) for event in stream.drain())
        again = requests.get(f"{web.base_url}/agent/stream", headers={"Cookie": cookie}, timeout=5)
        assert again.status_code == 403
    finally:
        stream.close()


def test_a_blacklisted_visitor_s_stream_ends_and_does_not_come_back(
    web: WebServer, alice: Agent
) -> None:
    vera = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]), name="Vera")
    token = issue_visitor_token(client=vera)
    chat = services.post_client_message(client=vera, content=text("hello")).chat
    services.accept_chat(chat=chat, agent=alice)
    stream = Reader(f"{web.base_url}/visitor/{token}/stream")
    try:
        services.blacklist_client(chat=chat, agent=alice)

        assert stream.ended()
        again = requests.get(f"{web.base_url}/visitor/{token}/stream", timeout=5)
        assert again.status_code == 403
        assert again.json()["error"]["code"] == "access_denied"
    finally:
        stream.close()


def test_a_change_no_event_told_ends_the_stream_at_the_next_check(
    alice: Agent, token: str, chat_api: ChatApiChannel
) -> None:
    """An ``update()`` sends no signal: the periodic re-check finds it."""
    server = WebServer(LIVE_ACCESS_SECONDS="1").start()
    stream = open_stream(server, token)
    try:
        Agent.objects.filter(pk=alice.pk).update(is_active=False)
        assert stream.ended(timeout=10)
        again = requests.get(
            f"{server.base_url}/api/agent/v1/stream",
            headers={"Authorization": f"Token {token}"},
            timeout=5,
        )
        assert again.status_code == 401  # and its reconnect is refused
    finally:
        stream.close()
        server.stop()


def test_an_unrelated_access_change_leaves_the_stream_open(
    web: WebServer, token: str, chat_api: ChatApiChannel
) -> None:
    bob = AgentFactory.create(name="Bob")
    issue_token(agent=bob)
    stream = open_stream(web, token)
    try:
        revoke_token(agent=bob)
        post_a2(web, chat_api, "still for Alice")
        assert stream.until("message").data["message"]["text"] == "still for Alice"
    finally:
        stream.close()


# --- limits of open visitor streams (docs/live.md, "Limits") -------------------


def try_stream(url: str) -> Reader:
    """A stream if the service opens one, else the refusal's answer."""
    reader = Reader(url)
    if reader.response.status_code != 200:
        reader.close()
    return reader


def open_when_free(url: str) -> Reader:
    """A stream, once a slot is free."""

    def attempt() -> Reader | None:
        reader = try_stream(url)
        return reader if reader.response.status_code == 200 else None

    reader = wait_for(attempt)
    assert reader is not None
    return reader


def assert_too_many(url: str) -> None:
    """One more stream is refused (read as a stream: an admitted one never ends)."""
    with requests.get(url, stream=True, timeout=5) as answer:
        assert answer.status_code == 429
        assert answer.json()["error"]["code"] == "too_many_requests"
        assert int(answer.headers["Retry-After"]) > 0


def visitor_url(web: WebServer) -> str:
    client = ClientFactory.create(channel=ChannelFactory.create())
    return f"{web.base_url}/visitor/{issue_visitor_token(client=client)}/stream"


def test_a_visitor_holds_at_most_three_streams_and_a_closed_one_frees_its_slot(
    web: WebServer,
) -> None:
    url = visitor_url(web)
    streams = [try_stream(url) for _ in range(3)]
    try:
        assert [s.response.status_code for s in streams] == [200, 200, 200]
        assert_too_many(url)

        streams.pop().close()
        streams.append(open_when_free(url))
        assert_too_many(url)
    finally:
        for stream in streams:
            stream.close()


def test_a_stream_open_longer_than_its_lease_keeps_its_slot() -> None:
    """Leases of 3 s (LIVE_ACCESS_SECONDS 1), renewed while the streams live."""
    server = WebServer(LIVE_ACCESS_SECONDS="1", LIVE_HEARTBEAT_SECONDS="1").start()
    url = visitor_url(server)
    streams = [try_stream(url) for _ in range(3)]
    try:
        assert [s.response.status_code for s in streams] == [200, 200, 200]
        # Six heartbeats a second apart: twice the lease has passed.
        wait_for(lambda: all(s.comments.count("heartbeat") >= 6 for s in streams), timeout=30)
        assert_too_many(url)
    finally:
        for stream in streams:
            stream.close()
        server.stop()


def test_an_address_holds_a_limited_number_of_streams_whatever_its_visitors() -> None:
    server = WebServer(LIVE_STREAMS_PER_ADDRESS="4").start()
    streams = []
    try:
        for url in (visitor_url(server), visitor_url(server)):
            streams += [try_stream(url), try_stream(url)]
        assert [s.response.status_code for s in streams] == [200] * 4
        assert_too_many(visitor_url(server))
    finally:
        for stream in streams:
            stream.close()
        server.stop()


def test_the_slots_of_a_process_that_died_free_themselves() -> None:
    """Nobody gives the slots back: they count until their leases expire
    (three access checks of the process that took them)."""
    dying, server = WebServer(LIVE_ACCESS_SECONDS="2").start(), WebServer().start()
    try:
        url = visitor_url(dying)
        streams = [try_stream(url) for _ in range(3)]
        assert [s.response.status_code for s in streams] == [200, 200, 200]
        dying.kill()
        for stream in streams:
            stream.close()

        elsewhere = url.replace(dying.base_url, server.base_url)
        assert_too_many(elsewhere)
        open_when_free(elsewhere).close()
    finally:
        dying.stop()
        server.stop()


def test_the_periodic_checks_outlive_a_moment_without_streams() -> None:
    """A reload closes a page's stream and opens another: a check that woke in
    between must not end for good while the hub goes on (it did: no stream of
    that process was re-checked or had its slot renewed again)."""
    from agents.streams import Hub

    async def scenario() -> list[int]:
        hub, steps = Hub(), []

        async def step() -> None:
            steps.append(len(hub.listeners))

        task = asyncio.create_task(hub._every(0.01, step))
        await asyncio.sleep(0.05)  # no stream: nothing checked, and the task waits
        assert not task.done()
        hub.listeners.add(object())  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        task.cancel()
        return steps

    assert run_async(scenario())  # checked once a stream came back
