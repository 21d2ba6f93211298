"""A thread that carries an endpoint's tries on (docs/delivery.md, "Many in
flight") gives its thread back when the worker wants it: to a retry come
due, and to a warm shutdown.

A worker of two threads, both carrying on the tries of one busy endpoint
(its limit is the suite's 2), stands for the Procfile's 32 threads all
held by a burst to one integrator. What is asserted is when the requests
reach the receiver, and the rows.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from delivery import services
from delivery.models import Delivery, DeliveryAttempt
from tests.delivery.target import Received, Reply, Target, send
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

THREADS = 2
BURST = 100  # at 0.2 s a try over two slots: some 10 s of tries
BUSY_REPLY_SECONDS = 0.2


@pytest.fixture(scope="module")
def two_threads(celery_worker: Worker, django_db_blocker: Any) -> Iterator[Worker]:
    """In place of the session's worker, one of two threads with production's
    retry spacing (3 s for a Chat API message)."""
    with django_db_blocker.unblock():
        celery_worker.stop()
        worker = Worker(
            queues="delivery", concurrency=THREADS, env={"DELIVERY_RETRY_SCALE": "1"}
        ).start()
    yield worker
    with django_db_blocker.unblock():
        worker.stop()
        celery_worker.start()


@pytest.fixture(autouse=True)
def _real_spacing(settings: Any) -> None:
    settings.DELIVERY_RETRY_SCALE = 1  # this process agrees with the worker


@pytest.fixture(autouse=True)
def _quiet_worker(two_threads: Worker) -> Iterator[None]:
    """Leave the worker idle for the database flush after the test."""
    yield
    if two_threads.process is None or two_threads.process.poll() is not None:
        two_threads.start()
    wait_for(lambda: not Delivery.objects.filter(status="pending").exists(), timeout=60)


def _busy_or_failing(request: Received, index: int) -> Reply:
    if request.path == "/failing":
        return Reply(500)
    return Reply(200, delay=BUSY_REPLY_SECONDS)


def _delivered(deliveries: list[Delivery]) -> bool:
    pks = [d.pk for d in deliveries]
    return Delivery.objects.filter(pk__in=pks, status="delivered").count() == len(pks)


@pytest.mark.parametrize("chats", [0, 10], ids=["no-order", "ten-chats"])
def test_a_retry_come_due_does_not_wait_for_another_endpoints_tries(
    two_threads: Worker, target: Target, chats: int
) -> None:
    """With ``chats``, the burst is the replies of that many chats, each in
    its order: as each ends, its chat's next is woken by a message."""
    target.respond(_busy_or_failing)
    failing_endpoint, _ = services.create_endpoint(url=target.url("/failing"))
    busy_endpoint, _ = services.create_endpoint(url=target.url("/busy"))
    failing = send(failing_endpoint, policy="chat_api_message")  # tries due at 0, 3 and 6 s
    target.wait_for(1)

    burst = [
        send(busy_endpoint, {"n": n}, ordering_key=f"chat-{n % chats}" if chats else "")
        for n in range(BURST)
    ]
    wait_for(lambda: Delivery.objects.get(pk=failing.pk).is_final, timeout=40)

    failing.refresh_from_db()
    assert failing.status == Delivery.Status.FAILED and failing.last_error == "HTTP 500"
    # The starts as the worker recorded them (tests/delivery/test_policies.py).
    starts = DeliveryAttempt.objects.filter(delivery=failing).order_by("number")
    times = list(starts.values_list("started_at", flat=True))
    gaps = [round((b - a).total_seconds(), 2) for a, b in itertools.pairwise(times)]
    # Each retry came due while both threads carried the busy endpoint's
    # tries on; one of them gave way after its try. Before, a retry waited
    # for the busy endpoint's line to empty (some 10 s here, up to a minute).
    assert len(gaps) == 2 and all(2.9 <= gap <= 4.5 for gap in gaps), gaps
    tries = [r.at for r in target.received if r.path == "/failing"]
    busy_during = [r for r in target.received if r.path == "/busy" and tries[0] < r.at < tries[2]]
    assert len(busy_during) >= 10  # the burst went on meanwhile
    wait_for(lambda: _delivered(burst), timeout=60)


def test_a_warm_shutdown_does_not_wait_for_an_endpoints_line(
    two_threads: Worker, target: Target
) -> None:
    target.respond(_busy_or_failing)
    busy_endpoint, _ = services.create_endpoint(url=target.url("/busy"))
    burst = [send(busy_endpoint, {"n": n}) for n in range(BURST)]
    target.wait_for(6)  # both threads carry the line on

    assert two_threads.process is not None
    asked = time.monotonic()
    two_threads.process.terminate()  # SIGTERM: Celery's warm shutdown
    two_threads.process.wait(60)
    # The tries in flight ended; no thread took another. Before, the warm
    # shutdown waited for the line to empty (some 10 s here, up to a minute).
    assert time.monotonic() - asked < 4
    assert not _delivered(burst)

    two_threads.start()  # nothing was lost: the rest go out now
    wait_for(lambda: _delivered(burst), timeout=60)
    arrived = [r.headers["webhook-id"] for r in target.received]
    assert sorted(set(arrived)) == sorted(d.webhook_id for d in burst)
