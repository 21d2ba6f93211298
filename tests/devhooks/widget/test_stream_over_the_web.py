"""The visitor's live stream over the real web server (gunicorn with uvicorn
workers): a visitor hears its own chat only, a blacklisted one loses its
stream, and the limits of open streams per visitor and per address hold
(docs/live.md). The agents' streams: tests/agents/test_streams.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from agents import services
from agents.models import Agent
from devhooks.widget.tokens import issue_visitor_token
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.web.server import WebServer
from tests.web.sse import Reader
from tests.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web(django_db_setup: None) -> Iterator[WebServer]:
    server = WebServer(LIVE_HEARTBEAT_SECONDS="1").start()
    yield server
    server.stop()


@pytest.fixture
def alice() -> Agent:
    return AgentFactory.create(name="Alice")


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


def test_the_slots_of_a_process_that_died_free_themselves(web: WebServer) -> None:
    """Nobody gives the slots back: they count until their leases expire
    (three access checks of the process that took them, 6 s here); then
    another process (the module's) admits the visitor."""
    dying = WebServer(LIVE_ACCESS_SECONDS="2").start()
    try:
        url = visitor_url(dying)
        streams = [try_stream(url) for _ in range(3)]
        assert [s.response.status_code for s in streams] == [200, 200, 200]
        dying.kill()
        for stream in streams:
            stream.close()

        elsewhere = url.replace(dying.base_url, web.base_url)
        assert_too_many(elsewhere)
        open_when_free(elsewhere).close()
    finally:
        dying.stop()
