"""A real local HTTP target that records what it received and when, and
shortcuts to enqueue and run deliveries in the test process."""

from __future__ import annotations

import itertools
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db.models import F
from django.utils import timezone
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response
from werkzeug.datastructures import Headers

from delivery import services
from delivery.models import Delivery, Endpoint

PURPOSE = "test.delivery"


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic() when the request arrived
    path: str
    headers: Headers  # case-insensitive
    body: bytes


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: str | bytes = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering


Responder = Callable[[Received, int], Reply]  # (request, index of the request) -> reply


class _Server(HTTPServer):
    """pytest-httpserver's server, whose thread looks for the stop every
    20 ms rather than every 500: a test that starts its own target no longer
    waits half a second in its teardown."""

    def thread_target(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=0.02)


class Target:
    """A threaded HTTP server on a loopback address, answering from a script.

    One server serves a whole session; ``reset`` starts a test afresh. Each
    test's URLs carry their own path prefix, so a late request of an earlier
    test is answered but not recorded.
    """

    def __init__(self, host: str, ssl_context: ssl.SSLContext | None = None) -> None:
        self.server = _Server(host=host, port=0, threaded=True, ssl_context=ssl_context)
        self.server.expect_request(re.compile(".*")).respond_with_handler(self._handle)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._generation = 0
        self.certificate: Path | None = None  # of an HTTPS target
        self.reset()

    def start(self) -> Target:
        self.server.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        self.server.clear()
        if self.server.is_running():
            self.server.stop()

    def reset(self) -> None:
        with self._lock:
            self._closing.set()  # wake handlers of the last test still sleeping
            self._closing = threading.Event()
            self._generation += 1
            self.prefix = f"/t{self._generation}"
            self.received: list[Received] = []
            self._replies: list[Reply] = []
            self._responder: Responder | None = None

    def url(self, path: str = "/hook") -> str:
        return self.server.url_for(self.prefix + path)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies`` in turn, then with 200."""
        self._replies = list(replies)

    def respond(self, responder: Responder) -> None:
        self._responder = responder

    def _handle(self, request: Request) -> Response:
        with self._lock:
            if not request.path.startswith(self.prefix + "/"):
                return Response("", status=200)  # a late request of an earlier test
            received = Received(
                at=time.monotonic(),
                path=request.path.removeprefix(self.prefix),
                headers=Headers(request.headers),
                body=request.get_data(),
            )
            index = len(self.received)
            self.received.append(received)
            if self._responder is not None:
                reply = self._responder(received, index)
            elif self._replies:
                reply = self._replies.pop(0)
            else:
                reply = Reply()
            closing = self._closing
        if reply.delay:
            closing.wait(reply.delay)
        return Response(reply.body, status=reply.status, headers=reply.headers)

    def wait_for(self, count: int, timeout: float = 20) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.received)} of {count} requests within {timeout}s")
            time.sleep(0.02)
        return self.received

    def gaps(self) -> list[float]:
        """Seconds between consecutive requests, from their arrival times."""
        times = [r.at for r in self.received]
        return [round(b - a, 2) for a, b in itertools.pairwise(times)]


@dataclass
class Outcomes:
    """What the owner's handlers heard, in order."""

    successes: list[tuple[int, Any]] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)


def send(
    endpoint: Endpoint, body: Any = None, *, policy: str = "devhook", **kwargs: Any
) -> Delivery:
    return services.enqueue(
        endpoint=endpoint,
        purpose=kwargs.pop("purpose", PURPOSE),
        event=kwargs.pop("event", "test_event"),
        body={"hello": "world"} if body is None else body,
        policy=policy,
        **kwargs,
    )


def hold_slots(*deliveries: Delivery) -> None:
    """As if a worker had each of them on the wire now: its lease taken and
    one of its endpoint's slots held (docs/delivery.md, "Many in flight")."""
    Delivery.objects.filter(pk__in=[d.pk for d in deliveries]).update(
        locked_until=timezone.now() + timedelta(seconds=30), holds_slot=True
    )
    for delivery in deliveries:
        Endpoint.objects.filter(pk=delivery.endpoint_id).update(in_flight=F("in_flight") + 1)


def lose_worker(delivery: Delivery) -> None:
    """As if the worker making its try had died and the lease had run out."""
    Delivery.objects.filter(pk=delivery.pk).update(
        locked_until=timezone.now() - timedelta(seconds=1)
    )


def slots_in_flight(endpoint: Endpoint) -> int:
    """The endpoint's count of slots held, after checking it against the
    deliveries that hold one."""
    counted = Endpoint.objects.get(pk=endpoint.pk).in_flight
    assert counted == Delivery.objects.filter(endpoint=endpoint, holds_slot=True).count()
    return counted


def drive(delivery: Delivery, *, max_tries: int = 10) -> Delivery:
    """Run the delivery's tries in this process until it ends.

    Each retry is made due at once (the waits are proven with a real worker
    in test_policies.py); what is tested here is what each try decides.
    """
    for _ in range(max_tries):
        delivery.refresh_from_db()
        if delivery.is_final:
            return delivery
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        services.attempt_delivery(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery
