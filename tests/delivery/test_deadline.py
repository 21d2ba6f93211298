"""Every try ends by its timeout, whatever the target does.

Real receivers on raw sockets (``dripper.py``) answer a byte now and then —
the body with ``Connection: close`` (the review's finding), kept alive,
chunked, the status line, the headers — or say nothing, or read nothing.
Each would hold a try for its own 30 s; the try must end at its timeout,
and the receiver sees the connection closed.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from delivery import services, transport
from delivery.models import Delivery, DeliveryAttempt
from tests.delivery.dripper import DRIPS, Dripper
from tests.delivery.target import Target, send

TIMEOUT = 1.0
# How late a try may end past its deadline here: generous, for a loaded
# 2-core machine; without the deadline these tries would last 30 s.
SLACK = 1.5
RECEIVER_LIMIT = 30.0


def _post(url: str, *, body: bytes = b"{}", chunked: bool = False) -> transport.Exchange:
    return transport.post(
        url=url, body=body, headers={"webhook-id": "msg_deadline"}, chunked=chunked, timeout=TIMEOUT
    )


def _assert_timed_out(exchange: transport.Exchange) -> None:
    assert exchange.status_code is None
    assert exchange.error == "timed out after 1 s"
    assert TIMEOUT * 1000 <= exchange.duration_ms <= (TIMEOUT + SLACK) * 1000, exchange


def _closed_soon(dripper: Dripper) -> bool:
    """Whether the receiver saw every connection closed (polled briefly)."""
    deadline = time.monotonic() + SLACK
    while dripper.open_now():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked-request"])
@pytest.mark.parametrize("drip", DRIPS)
def test_a_dripping_or_silent_receiver_is_cut_at_the_deadline(drip: str, chunked: bool) -> None:
    with Dripper(drip, limit=RECEIVER_LIMIT) as dripper:
        exchange = _post(dripper.url(), chunked=chunked)

        _assert_timed_out(exchange)
        assert dripper.arrivals() == ["msg_deadline"]
        assert _closed_soon(dripper)


def test_a_kept_alive_connection_from_the_pool_is_cut_at_the_deadline() -> None:
    # The first request is answered at once and leaves its connection in the
    # pool; the second goes over that connection and is dripped.
    with Dripper("reused", limit=RECEIVER_LIMIT) as dripper:
        assert _post(dripper.url()).status_code == 200

        exchange = _post(dripper.url())

        _assert_timed_out(exchange)
        [connection] = dripper.connections
        assert connection.webhook_ids == ["msg_deadline", "msg_deadline"]
        assert _closed_soon(dripper)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked-request"])
def test_a_request_the_receiver_does_not_read_is_cut_at_the_deadline(chunked: bool) -> None:
    body = b"[" + b"0," * (16 << 20) + b"0]"  # 32 MB: more than the socket buffers hold
    with Dripper("unread", limit=RECEIVER_LIMIT) as dripper:
        exchange = _post(dripper.url(), body=body, chunked=chunked)

        _assert_timed_out(exchange)


@pytest.fixture
def tls_context(target_tls: Target, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """A server context with the TLS target's certificate, which the session trusts."""
    assert target_tls.certificate is not None
    monkeypatch.setattr(transport.session(), "verify", str(target_tls.certificate))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(target_tls.certificate, target_tls.certificate.parent / "key.pem")
    return context


@pytest.mark.parametrize("drip", ["body_close", "headers", "silent"])
def test_https_is_cut_at_the_deadline_in_the_handshake_and_after(
    tls_context: ssl.SSLContext, drip: str
) -> None:
    # "silent" over TLS answers no handshake at all.
    with Dripper(drip, limit=RECEIVER_LIMIT, ssl_context=tls_context) as dripper:
        exchange = _post(dripper.url(host="localhost"))

        _assert_timed_out(exchange)
        assert dripper.arrivals() == ([] if drip == "silent" else ["msg_deadline"])


def test_https_dripped_from_a_kept_alive_connection_is_cut(tls_context: ssl.SSLContext) -> None:
    with Dripper("reused", limit=RECEIVER_LIMIT, ssl_context=tls_context) as dripper:
        url = dripper.url(host="localhost")
        assert _post(url).status_code == 200

        _assert_timed_out(_post(url))
        assert len(dripper.connections) == 1


@pytest.fixture
def hanging_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A host name whose lookup blocks until the test ends."""
    host, release = "hangs.example.test", threading.Event()
    real = socket.getaddrinfo

    def getaddrinfo(name: Any, *args: Any, **kwargs: Any) -> Any:
        if name == host:
            release.wait(RECEIVER_LIMIT)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield host
    release.set()


def test_a_name_lookup_that_hangs_is_cut_at_the_deadline(hanging_dns: str) -> None:
    exchange = _post(f"http://{hanging_dns}:9/hook")

    _assert_timed_out(exchange)


def test_a_pooled_connection_outlives_the_deadline_of_the_try_that_pooled_it() -> None:
    with Dripper("reused", limit=RECEIVER_LIMIT) as dripper:
        assert _post(dripper.url()).status_code == 200
        time.sleep(TIMEOUT + 0.5)  # that try's deadline passes while the connection is pooled

        _assert_timed_out(_post(dripper.url()))  # "reused" drips its second reply ...

        [connection] = dripper.connections  # ... on the same, unharmed, connection
        assert len(connection.webhook_ids) == 2


def test_a_connection_given_back_before_the_deadline_is_out_of_its_reach() -> None:
    # What happens when urllib3 pools a connection as its reply is read and
    # the deadline strikes a moment later, before the try has ended.
    ours, peer = socket.socketpair()
    with ours, peer:
        attempt = transport._Attempt(deadline=time.monotonic() + 60)
        attempt.register(ours)

        assert attempt.release(ours)  # back to the pool
        attempt.expire()  # the watchdog, late
        attempt.end()

        ours.sendall(b"still open")
        assert peer.recv(64) == b"still open"


def test_a_connection_the_deadline_struck_is_not_given_back() -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        attempt = transport._Attempt(deadline=time.monotonic() + 60)
        attempt.register(ours)

        attempt.expire()

        assert not attempt.release(ours)
        assert peer.recv(64) == b""  # the peer sees it shut
        attempt.end()


def test_no_descriptor_is_left_behind() -> None:
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    with Dripper("body_close", limit=RECEIVER_LIMIT) as warm_up:  # the pool, the resolver
        _post(warm_up.url())
    before = open_descriptors()
    with Dripper("body_close", limit=RECEIVER_LIMIT) as dripper:
        for _ in range(3):
            _assert_timed_out(_post(dripper.url()))
    assert _closed_soon(dripper)

    assert open_descriptors() <= before


# --- the log of a try -----------------------------------------------------------


@pytest.mark.django_db
def test_the_try_is_logged_as_a_timeout_with_its_real_duration() -> None:
    with Dripper("body_close", limit=RECEIVER_LIMIT) as dripper:
        endpoint, _ = services.create_endpoint(url=dripper.url())
        delivery = send(endpoint, policy="chat_api_typing")  # one try, 2 s

        services.attempt_delivery(delivery_id=delivery.pk)

        attempt = DeliveryAttempt.objects.get(delivery=delivery)
        assert attempt.error == "timed out after 2 s" and attempt.status_code is None
        assert 2000 <= attempt.duration_ms <= (2 + SLACK) * 1000  # type: ignore[operator]
        delivery.refresh_from_db()
        assert delivery.status == Delivery.Status.FAILED and delivery.locked_until is None
        assert dripper.arrivals() == [delivery.webhook_id]


def test_the_lease_covers_the_deadline() -> None:
    from delivery.policies import LEASE_MARGIN_SECONDS, POLICIES

    for policy in POLICIES.values():
        assert policy.lease_seconds >= policy.timeout + SLACK
        assert policy.lease_seconds == policy.timeout + LEASE_MARGIN_SECONDS
