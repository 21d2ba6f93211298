"""The agent's live stream over the real web server (gunicorn with uvicorn
workers): events reach exactly the streams entitled to them, from this
process and from the worker; a reconnect with Last-Event-ID misses nothing.
(The visitor's stream: tests/devhooks/widget/test_stream_over_the_web.py.)"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.test import Client as Browser
from django.utils import timezone

from agents import live, services, sessions
from agents.models import Agent, AgentSession, ApiToken, Chat, LiveEvent
from agents.streams import Inbox
from agents.tokens import issue_token, revoke_token
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from tests.aio import run_async
from tests.channels_api import conftest as chat_api_fixtures
from tests.delivery.target import Target
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.web.server import WebServer
from tests.web.sse import Reader
from tests.worker import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

chat_api = chat_api_fixtures.chat_api  # a Chat API channel of ``agent`` (Alice)


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


def test_idle_streams_hold_no_database_connection(alice: Agent, token: str) -> None:
    """Twenty open streams on a web process whose two workers may hold four
    database connections each (psycopg's smallest pool): a request still
    gets one at once."""
    server = WebServer(workers=2, DATABASE_POOL_SIZE="4", LIVE_HEARTBEAT_SECONDS="1").start()
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


def test_open_streams_hold_no_thread_each(web: WebServer, alice: Agent, token: str) -> None:
    """Django's ASGI handler keeps a thread for each request's synchronous
    code until the request ends; an open stream lets it go. Forty open
    streams: the web worker has about as many threads as before them (its
    pools', a handful), not forty more."""
    [worker] = web._workers()

    def threads() -> int:
        status = Path(f"/proc/{worker}/status").read_text()
        return int(status.split("Threads:")[1].split()[0])

    open_stream(web, token).close()  # the worker's pools have started their threads
    before = threads()
    streams = [open_stream(web, token) for _ in range(40)]
    try:
        # A thread ends a moment after its stream began: allow for that.
        wait_for(lambda: threads() < before + 10, timeout=10)
    finally:
        for stream in streams:
            stream.close()


def test_page_streams_give_their_database_connections_back(web: WebServer, alice: Agent) -> None:
    """A page's stream reads its session on the thread it then lets go; the
    connection of that thread went with it, never back to the web process's
    pool (DATABASE_POOL_SIZE, 10): after ten page streams every request
    waited 30 s for a connection (CI: thirty browser tests timed out)."""
    browser = Browser()
    browser.force_login(alice)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    for _ in range(12):
        stream = Reader(f"{web.base_url}/agent/stream", Cookie=cookie)
        try:
            wait_for(lambda: "connected" in stream.comments, timeout=10)  # noqa: B023
        finally:
            stream.close()

    started = time.monotonic()
    page = requests.get(f"{web.base_url}/agent/", headers={"Cookie": cookie}, timeout=20)

    assert (page.status_code, time.monotonic() - started < 5) == (200, True)


def test_page_streams_opened_together_do_not_wait_for_connections(alice: Agent) -> None:
    """A page stream's middleware reads the session on the request's thread,
    which keeps that connection while the (async) view runs; the view read
    the session again on a thread of its own, needing a second connection.
    As many streams opening at once as the pool has connections held them
    all, each waiting for one more: the pool's time-out, then 503 (bench
    scenario 8's 50 pages). The view reads on the request's thread now."""
    server = WebServer(DATABASE_POOL_SIZE="4", DATABASE_POOL_TIMEOUT_SECONDS="5").start()
    browser = Browser()
    browser.force_login(alice)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    streams: list[Reader] = []
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(12) as pool:
            opening = [
                pool.submit(Reader, f"{server.base_url}/agent/stream", Cookie=cookie)
                for _ in range(12)
            ]
            streams = [each.result() for each in opening]
        statuses = [stream.response.status_code for stream in streams]
        assert (statuses, time.monotonic() - started < 4) == ([200] * 12, True)
        wait_for(lambda: all("connected" in s.comments for s in streams), timeout=10)
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
    admin.force_login(AgentFactory.create(role="admin"))
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


def sign_out_itself(here: Browser, there: Browser) -> None:
    there.logout()


def sign_out_from_the_list(here: Browser, there: Browser) -> None:
    key = there.cookies["sessionid"].value
    row = AgentSession.objects.get(key_hash=sessions.hash_key(key))
    assert here.post(f"/agent/settings/sessions/{row.pk}/sign-out").status_code == 302


def sign_out_the_others(here: Browser, there: Browser) -> None:
    assert here.post("/agent/settings/sessions/sign-out-others").status_code == 302


@pytest.mark.parametrize("sign_out", [sign_out_itself, sign_out_from_the_list, sign_out_the_others])
def test_signing_out_ends_the_page_stream_and_another_session_streams_on(
    web: WebServer,
    alice: Agent,
    chat_api: ChatApiChannel,
    sign_out: Callable[[Browser, Browser], None],
) -> None:
    """Signed out by itself, or from another session's settings page."""
    here, there = Browser(), Browser()
    here.force_login(alice)
    there.force_login(alice)
    cookie = f"sessionid={there.cookies['sessionid'].value}"
    stream = Reader(f"{web.base_url}/agent/stream", Cookie=cookie)
    try:
        post_a2(web, chat_api, "hello page")
        assert stream.until("message").data["message"]["text"] == "hello page"

        sign_out(here, there)
        post_a2(web, chat_api, "my card is 4111 1111 1111 1111")

        assert stream.ended()
        assert all("4111" not in json.dumps(event.data) for event in stream.drain())
        again = requests.get(f"{web.base_url}/agent/stream", headers={"Cookie": cookie}, timeout=5)
        assert again.status_code == 403
        mine = f"sessionid={here.cookies['sessionid'].value}"
        kept = requests.get(
            f"{web.base_url}/agent/stream", headers={"Cookie": mine}, timeout=5, stream=True
        )
        assert kept.status_code == 200
        kept.close()
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


def test_the_hub_writes_heartbeats_to_the_socket_itself_where_it_can() -> None:
    """One pass for every quiet stream: straight to the socket through the web
    server's writer (config/web_server.py, WRITE_NOW); through the stream's
    own task only where the writer refuses (a client that reads slowly) or
    is not there yet (the stream is still replaying). Quiet is nine tenths
    of LIVE_HEARTBEAT_SECONDS: the timer runs every tenth of it, so no
    stream is silent longer."""
    from django.conf import settings

    from agents.streams import HEARTBEAT, HEARTBEAT_BYTES, Hub, Listener

    async def scenario() -> None:
        hub = Hub()
        written: list[bytes] = []
        now = asyncio.get_running_loop().time()
        direct, refused, replaying, busy = Listener(), Listener(), Listener(), Listener()

        def write(data: bytes) -> bool:
            written.append(data)
            return True

        direct.write_now = write
        refused.write_now = lambda data: False
        # Wrote a moment less than nine tenths ago: not yet.
        busy.written = now - settings.LIVE_HEARTBEAT_SECONDS * 0.85
        busy.write_now = direct.write_now
        direct.written = now - settings.LIVE_HEARTBEAT_SECONDS * 0.95  # past nine tenths
        ended = Listener()  # closed before it was due: forgotten
        hub.listeners = {direct, refused, replaying, busy}
        for listener in (direct, refused, replaying, busy, ended):
            hub.due_at(now, listener)

        await hub.beat()

        assert written == [HEARTBEAT_BYTES]  # one, for ``direct``; its task stays asleep
        assert direct.queue.empty() and direct.written >= now
        assert refused.queue.get_nowait() is HEARTBEAT
        assert replaying.queue.get_nowait() is HEARTBEAT
        assert busy.queue.empty()
        await hub.beat()  # ``direct`` is no longer quiet
        assert written == [HEARTBEAT_BYTES]
        # Each is due again when it will have been quiet for nine tenths.
        quiet = settings.LIVE_HEARTBEAT_SECONDS * 0.9
        due = {id(listener): when for when, _, listener in hub.due}
        assert set(due) == {id(direct), id(refused), id(replaying), id(busy)}
        assert due[id(busy)] == pytest.approx(busy.written + quiet)
        assert due[id(direct)] == pytest.approx(direct.written + quiet)

    run_async(scenario())


def test_an_inbox_hands_events_on_in_order_and_ends_a_stream_too_far_behind() -> None:
    """A stream's ``Inbox`` (the part of ``asyncio.Queue`` a stream uses, at
    a fraction of its memory): in order, refused past its size, a reader
    that waits woken by the next event, one cancelled (its client left)
    leaving it as it was."""

    async def scenario() -> None:
        inbox = Inbox(2)
        assert inbox.empty() and not inbox.full()
        waiting = asyncio.ensure_future(inbox.get())
        await asyncio.sleep(0)
        assert not waiting.done()
        inbox.put_nowait("a")
        assert await waiting == "a" and inbox.empty()
        inbox.put_nowait("b")
        inbox.put_nowait("c")
        assert inbox.full()
        with pytest.raises(asyncio.QueueFull):
            inbox.put_nowait("d")
        assert [await inbox.get(), inbox.get_nowait()] == ["b", "c"]
        with pytest.raises(asyncio.QueueEmpty):
            inbox.get_nowait()
        cancelled = asyncio.ensure_future(inbox.get())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        inbox.put_nowait("e")
        assert await asyncio.wait_for(inbox.get(), timeout=1) == "e"

    run_async(scenario())
