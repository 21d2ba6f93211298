"""Tries in flight, with real worker processes: one per delivery at a time,
at most DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT per endpoint, the others waiting
their turn in order, and a healthy receiver unaffected by dripping ones.

Two worker processes share the work, so the per-endpoint count holds across
processes (it lives in the database). What is asserted is what the receivers
observe — every connection, when it opened and closed, the webhook-id of each
request — and the rows; no timing tighter than a loaded machine allows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings

from delivery import services
from delivery.models import Delivery, DeliveryAttempt, Endpoint
from tests.delivery.dripper import Dripper
from tests.delivery.target import Target, send
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CAP = 2
# Threads per worker process: the session's worker has 8, the second one 2,
# ten threads in all.
THREADS = 2


@pytest.fixture(scope="module")
def workers(celery_worker: Worker, django_db_blocker: Any) -> Iterator[list[Worker]]:
    """Two worker processes: the session's and a second on the delivery
    queue. Both run with the default cap, which is CAP."""
    assert django_settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT == CAP
    with django_db_blocker.unblock():
        second = Worker(queues="delivery", concurrency=THREADS).start()
    yield [celery_worker, second]
    second.stop()


@pytest.fixture(autouse=True)
def _cap(settings: Any) -> None:
    settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = CAP  # this process agrees with the workers


@pytest.fixture
def drippers() -> Iterator[list[Dripper]]:
    started: list[Dripper] = []
    yield started
    for dripper in started:
        dripper.stop()


@pytest.fixture(autouse=True)
def _quiet_workers(drippers: list[Dripper]) -> Iterator[None]:
    """Leave the workers idle for the database flush after the test: a worker
    locking rows while the tables are truncated can deadlock the flush."""
    yield
    Delivery.objects.filter(status="pending").update(
        status="dropped", next_attempt_at=None, waiting_for_slot=False
    )
    for dripper in drippers:
        dripper.stop()  # the tries in flight end now
    wait_for(lambda: not DeliveryAttempt.objects.filter(finished_at__isnull=True).exists())
    Delivery.objects.all().delete()  # a retry's late message finds nothing to lock


def _dripper(drippers: list[Dripper], mode: str = "body_close", **options: Any) -> Dripper:
    dripper = Dripper(mode, **options).start()
    drippers.append(dripper)
    return dripper


def _final(delivery: Delivery, timeout: float) -> Delivery:
    wait_for(lambda: Delivery.objects.get(pk=delivery.pk).is_final, timeout)
    delivery.refresh_from_db()
    return delivery


def test_a_dripping_receiver_gets_three_tries_one_at_a_time_and_the_owner_is_told(
    workers: list[Worker], drippers: list[Dripper], settings: Any
) -> None:
    # The review's receiver: 200, Content-Length 100000, Connection: close,
    # then a byte every 0.5 s for up to 90 s.
    dripper = _dripper(drippers, interval=0.5, limit=90)
    endpoint, _ = services.create_endpoint(url=dripper.url())
    settings.DELIVERY_REDISPATCH_AFTER_SECONDS = 0  # the sweep at its most eager

    delivery = send(endpoint, policy="chat_api_message")
    deadline = time.monotonic() + 40
    while not Delivery.objects.get(pk=delivery.pk).is_final:  # beat's sweep, many times over
        assert time.monotonic() < deadline, "not final within 40 s"
        services.sweep_overdue()
        time.sleep(0.3)

    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.FAILED
    assert delivery.last_error == "timed out after 3 s"
    assert dripper.arrivals() == [delivery.webhook_id] * 3
    assert dripper.overlapping() == [] and dripper.most_open == 1
    attempts = DeliveryAttempt.objects.filter(delivery=delivery)
    assert [a.error for a in attempts] == ["timed out after 3 s"] * 3
    assert all(3000 <= a.duration_ms <= 4500 for a in attempts)  # type: ignore[operator]
    # Three sends 3 s apart, each cut at 3 s: told after about 9 s (the
    # review saw 43 s); the bound leaves room for a loaded machine.
    told = (delivery.completed_at - delivery.created).total_seconds()  # type: ignore[operator]
    assert told < 15, told


def test_a_healthy_receiver_is_served_while_dripping_ones_hold_their_slots(
    workers: list[Worker], drippers: list[Dripper], target: Target
) -> None:
    # Three dripping receivers with four deliveries each: 12 tries that would
    # hold 12 threads for 10 s each, more than the 10 of both workers.
    dripping = [_dripper(drippers, limit=60) for _ in range(3)]
    for dripper in dripping:
        endpoint, _ = services.create_endpoint(url=dripper.url())
        for n in range(4):
            send(endpoint, {"n": n}, policy="devhook")
    wait_for(lambda: all(len(d.open_now()) == CAP for d in dripping), timeout=30)
    waiting = Delivery.objects.filter(status="pending", waiting_for_slot=True)
    wait_for(lambda: waiting.count() == 3 * (4 - CAP))  # the rest wait their turn, asleep
    held = [c for d in dripping for c in d.open_now()]

    healthy_endpoint, _ = services.create_endpoint(url=target.url("/healthy"))
    healthy = [send(healthy_endpoint, {"n": n}, policy="devhook") for n in range(5)]
    target.wait_for(5, timeout=20)
    last_healthy = target.received[-1].at

    assert all(c.closed_at is None or c.closed_at > last_healthy for c in held)
    wait_for(lambda: all(Delivery.objects.get(pk=d.pk).is_final for d in healthy))
    assert {Delivery.objects.get(pk=d.pk).status for d in healthy} == {"delivered"}
    assert [d.most_open for d in dripping] == [CAP] * 3


def test_waiting_deliveries_are_tried_in_enqueue_order(
    workers: list[Worker], drippers: list[Dripper]
) -> None:
    receiver = _dripper(drippers, "slow", interval=3.0)  # 200 after 3 s
    endpoint, _ = services.create_endpoint(url=receiver.url())
    first = [send(endpoint, {"n": n}) for n in (1, 2)]
    wait_for(lambda: len(receiver.open_now()) == CAP, timeout=20)

    later = [send(endpoint, {"n": n}) for n in range(3, 9)]  # all slots are taken
    wait_for(lambda: Delivery.objects.filter(waiting_for_slot=True).count() == len(later))

    for delivery in first + later:
        assert _final(delivery, timeout=60).status == Delivery.Status.DELIVERED
    # The log's order of first tries (each try's row is written as it takes
    # its slot) is the order of enqueueing, a round of CAP tries at a time:
    # the CAP tries of a round end together and hand their slots on at the
    # same moment, so within a round either may write its row first.
    started = DeliveryAttempt.objects.filter(delivery__in=later, number=1).order_by("pk")
    order = [a.delivery_id for a in started]
    assert len(order) == len(later)
    rounds = [set(order[i : i + CAP]) for i in range(0, len(order), CAP)]
    assert rounds == [{d.pk for d in later[i : i + CAP]} for i in range(0, len(later), CAP)]
    assert receiver.most_open == CAP
    assert sorted(receiver.arrivals()) == sorted(d.webhook_id for d in first + later)


def test_an_endpoint_switched_off_fails_its_waiting_deliveries(
    workers: list[Worker], drippers: list[Dripper]
) -> None:
    dripper = _dripper(drippers, limit=60)
    endpoint, _ = services.create_endpoint(url=dripper.url())
    deliveries = [send(endpoint, {"n": n}, policy="devhook") for n in range(2 + 3)]
    wait_for(lambda: Delivery.objects.filter(waiting_for_slot=True).count() == 3, timeout=20)

    services.update_endpoint(endpoint=endpoint, active=False)
    dripper.stop()  # the tries in flight end; the freed slots wake the waiting ones

    failed = [_final(d, timeout=30) for d in deliveries[CAP:]]
    assert {d.last_error for d in failed} == {"endpoint is disabled"}
    assert len(dripper.first_arrivals()) == CAP
    assert Endpoint.objects.get(pk=endpoint.pk).active is False
