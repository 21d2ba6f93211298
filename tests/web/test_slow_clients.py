"""Slow or idle clients hold no thread, and their requests have time limits.

Against the real web process (config/gunicorn.py: uvicorn workers): fifty
connections that send a header line every two seconds leave A1 answering;
headers that never complete close the connection after
HTTP_HEADER_TIMEOUT_SECONDS, a body that never completes gets 408 after
HTTP_BODY_TIMEOUT_SECONDS.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import requests

from channels_api.services import create_chat_api_channel
from tests.factories import AgentFactory
from tests.web.server import WebServer

SLOW_CONNECTIONS = 50
# The strict server's limits; every wait below is generous next to them.
TIMEOUT_SECONDS = 2
CLOSE_WITHIN = 20.0


@pytest.fixture(scope="module")
def patient_server(django_db_setup: None) -> Iterator[WebServer]:
    """Limits far away: slow clients stay connected as long as the test likes."""
    web = WebServer(HTTP_HEADER_TIMEOUT_SECONDS="300", HTTP_BODY_TIMEOUT_SECONDS="300").start()
    yield web
    web.stop()


@pytest.fixture(scope="module")
def strict_server(django_db_setup: None) -> Iterator[WebServer]:
    web = WebServer(
        HTTP_HEADER_TIMEOUT_SECONDS=str(TIMEOUT_SECONDS),
        HTTP_BODY_TIMEOUT_SECONDS=str(TIMEOUT_SECONDS),
        # Idle kept-alive connections stay far longer than the test waits, so
        # a connection closed in time was closed by the header limit.
        GUNICORN_CMD_ARGS="--keep-alive 120",
    ).start()
    yield web
    web.stop()


def connect(server: WebServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=CLOSE_WITHIN)


def is_closed(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock``, without waiting."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def seconds_until_closed(sock: socket.socket, *, trickle: bytes = b"") -> float | None:
    """Seconds until the server closes ``sock`` (None: not within CLOSE_WITHIN),
    sending ``trickle`` every half second meanwhile."""
    started = time.monotonic()
    while time.monotonic() - started < CLOSE_WITHIN:
        try:
            if trickle:
                sock.sendall(trickle)
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - started
        if is_closed(sock):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


class SlowClients:
    """Connections that send a request line, then one header line every two seconds."""

    def __init__(self, server: WebServer, count: int) -> None:
        self.sockets = [connect(server) for _ in range(count)]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self) -> SlowClients:
        for sock in self.sockets:
            sock.sendall(b"GET /agent/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        self.thread.start()
        return self

    def _trickle(self) -> None:
        while not self.stopped.wait(2):
            for sock in self.sockets:
                sock.sendall(b"X-Slow: 1\r\n")

    def open_count(self) -> int:
        return sum(not is_closed(sock) for sock in self.sockets)

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(10)
        for sock in self.sockets:
            sock.close()


@pytest.mark.django_db(transaction=True)
def test_fifty_slow_clients_leave_a1_answering(patient_server: WebServer) -> None:
    # Given a channel, and fifty clients sending their headers a line every two seconds
    made, _signing_secret = create_chat_api_channel(
        name="App",
        webhook_url="http://127.0.0.1:9/integrator",
        agents=[AgentFactory.create(is_online=True)],
    )
    status_url = (
        f"{patient_server.base_url}/chat-api/{made.path_secret}/{made.channel.public_id}/status"
    )
    with SlowClients(patient_server, SLOW_CONNECTIONS) as slow:
        # When an integrator asks A1 ten times meanwhile, each on a new connection
        answers = []
        for _ in range(10):
            answers.append(requests.get(status_url, timeout=5))
            time.sleep(0.5)
        still_open = slow.open_count()

    # Then every answer came, and the slow clients were held all along
    assert [(answer.status_code, answer.text) for answer in answers] == [(200, "1")] * 10
    assert still_open == SLOW_CONNECTIONS


def test_a_connection_that_sends_nothing_is_closed(strict_server: WebServer) -> None:
    with connect(strict_server) as sock:
        waited = seconds_until_closed(sock)

    assert waited is not None and waited >= TIMEOUT_SECONDS - 0.1


def test_headers_that_never_end_are_cut_off(strict_server: WebServer) -> None:
    with connect(strict_server) as sock:
        sock.sendall(b"GET /agent/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        waited = seconds_until_closed(sock, trickle=b"X-Slow: 1\r\n")

    assert waited is not None and waited >= TIMEOUT_SECONDS - 0.1


def read_response(sock: socket.socket) -> tuple[str, bytes]:
    """The status line and body of one response with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(
        int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return lines[0], body


def test_on_a_kept_alive_connection_the_next_headers_are_timed_too(
    strict_server: WebServer,
) -> None:
    with connect(strict_server) as sock:
        sock.sendall(b"GET /agent/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status_line, _body = read_response(sock)
        sock.sendall(b"GET /agent/login/ HTTP/1.1\r\n")
        waited = seconds_until_closed(sock, trickle=b"X-Slow: 1\r\n")

    assert status_line == "HTTP/1.1 200 OK"
    assert waited is not None


def test_a_pipelined_request_whose_headers_never_end_is_cut_off(
    strict_server: WebServer,
) -> None:
    # Given a whole request and, in the same packet, the start of a second one
    with connect(strict_server) as sock:
        sock.sendall(
            b"GET /agent/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            b"GET /agent/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        )
        status_line, _body = read_response(sock)
        # When nothing more comes, the second request's header clock runs out
        waited = seconds_until_closed(sock)

    assert status_line == "HTTP/1.1 200 OK"
    assert waited is not None  # not kept for the 120 s keep-alive


def test_a_body_that_never_arrives_is_answered_408_and_the_connection_closed(
    strict_server: WebServer,
) -> None:
    # Given a request whose headers promise 100 bytes of body
    with connect(strict_server) as sock:
        sock.sendall(
            b"POST /chat-api/x/y HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        # When only one byte of it comes
        status_line, body = read_response(sock)
        closed = seconds_until_closed(sock)

    # Then the answer is a 408 in the service's error shape, and the connection ends
    assert status_line == "HTTP/1.1 408 Request Timeout"
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert closed is not None


@pytest.mark.parametrize(
    ("path", "declared"),
    [
        ("/chat-api/x/y", 300_000_000),
        ("/webhooks/x/y", 300_000_000),
        ("/webhooks/x/y", 64 * 1024 + 1),  # B2's limit, far under Django's 2.5 MB
    ],
)
def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(
    patient_server: WebServer, path: str, declared: int
) -> None:
    # Given a request to the Chat API or the Bot API that declares a body over its limit
    with connect(patient_server) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n".encode()
        )
        # When not a byte of the body has been sent, the answer is already there
        status_line, body = read_response(sock)
        closed = seconds_until_closed(sock)

    assert status_line == "HTTP/1.1 413 Request Entity Too Large"
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert closed is not None


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(patient_server: WebServer) -> None:
    # Given a chunked request to the Chat API that sends 16 KiB chunks without end
    with connect(patient_server) as sock:
        sock.sendall(
            b"POST /chat-api/x/y HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"4000\r\n" + b" " * 0x4000 + b"\r\n"
        sent = 0
        answer = b""
        while sent < 64_000_000 and not answer:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                answer = sock.recv(65536)
        if not answer:  # the server closed before the client looked: read what it said
            with contextlib.suppress(ConnectionResetError):
                answer = sock.recv(65536)

    # Then it is answered 413 while the client is still sending (what it had
    # sent by then is mostly in the two sides' socket buffers, a few MB on
    # loopback). The server closes with the client's bytes unread, so a reset
    # may cut the rest of the answer short: the body is the one the test
    # above reads whole.
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]
    assert b"content-type: application/json" in answer.lower()
    assert sent < 32_000_000
