"""A worker deciding an endpoint's slots does not hold up a web request that
enqueues to the same endpoint (the deadlock this once caused: a result
handler waiting for a chat's lock, the request holding that chat and waiting
for the endpoint)."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone
from psycopg.errors import DeadlockDetected

from delivery import services
from delivery.models import Delivery, DeliveryAttempt, Endpoint
from tests.delivery.target import Target, hold_slots, send

pytestmark = pytest.mark.django_db(transaction=True)


def _hold_endpoint(endpoint_id: int) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """A thread holding the endpoint's lock, as a worker does, from ``locked``
    until ``release`` is set."""
    locked, release = threading.Event(), threading.Event()

    def worker() -> None:
        try:
            with transaction.atomic():
                # As a try's claim and end change the count of its slots.
                Endpoint.objects.filter(pk=endpoint_id).update(in_flight=F("in_flight"))
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=worker)
    holder.start()
    return holder, locked, release


def test_enqueue_is_not_blocked_while_a_worker_holds_the_endpoint() -> None:
    endpoint, _ = services.create_endpoint(url="http://127.0.0.1:9/hook")
    holder, locked, release = _hold_endpoint(endpoint.pk)  # as a claim and a try's end do
    try:
        assert locked.wait(10)
        done = threading.Event()

        def web_request() -> None:
            try:
                with transaction.atomic():
                    services.enqueue(
                        endpoint=endpoint, purpose="test", event="e", body={}, policy="devhook"
                    )
                done.set()
            finally:
                connection.close()

        request = threading.Thread(target=web_request)
        request.start()
        if connection.vendor == "postgresql":
            # Row locks: committed while the worker still holds the endpoint's row.
            assert done.wait(5), "enqueue waited for the worker's endpoint lock"
        # (SQLite has one writer at a time: the request commits after the worker.)
    finally:
        release.set()
        holder.join(10)
    request.join(10)
    assert done.is_set()
    assert Delivery.objects.filter(endpoint=endpoint).count() == 1


def test_a_delivery_goes_to_wait_for_a_slot_while_a_try_holds_the_endpoint(
    settings: Any,
) -> None:
    """A burst's messages for a busy endpoint used to queue on its lock, and
    each try that freed a slot waited behind all of them (issue 28)."""
    settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = 2
    endpoint, _ = services.create_endpoint(url="http://127.0.0.1:9/hook")
    send = functools.partial(
        services.enqueue, endpoint=endpoint, purpose="test", event="e", body={}, policy="devhook"
    )
    with transaction.atomic():  # in flight before their messages go: a worker leaves them
        busy = [send(), send()]
        hold_slots(*busy)  # both slots in flight
    waiting = send()
    holder, locked, release = _hold_endpoint(endpoint.pk)  # as a try's end does
    done = threading.Event()

    def message() -> None:
        try:
            services.attempt_delivery(delivery_id=waiting.pk)
            done.set()
        finally:
            connection.close()

    try:
        assert locked.wait(10)
        claim = threading.Thread(target=message)
        claim.start()
        if connection.vendor == "postgresql":
            assert done.wait(5), "the waiting delivery's claim waited for the endpoint's lock"
        # (SQLite has one writer at a time: the claim commits after the holder.)
    finally:
        release.set()
        holder.join(10)
    claim.join(10)
    waiting.refresh_from_db()
    assert done.is_set() and waiting.waiting_for_slot and waiting.status == "pending"


@pytest.fixture
def _no_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deliveries' Celery messages are not sent: these tests make each
    try here, and a worker another module left running must not."""
    monkeypatch.setattr(services, "_dispatch_on_commit", lambda *args, **kwargs: None)


@pytest.mark.usefixtures("_no_messages")
def test_a_grown_limit_wakes_the_asleep_deliveries_no_other_transaction_holds(
    settings: Any,
) -> None:
    """Two tries ending together each woke the deliveries asleep for a slot
    in enqueue order, and each held a row the other woke (a delivery it was
    handing its own slot to): PostgreSQL ended one of them as a deadlock,
    and that try's outcome with it (scenario 3 of the benchmarks lost 17
    tries so, and every later reply of those chats slept). A row another
    transaction holds is passed over now, not waited for."""
    settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = 1
    endpoint, _ = services.create_endpoint(url="http://127.0.0.1:9/hook")
    busy = send(endpoint)
    hold_slots(busy)
    asleep = [send(endpoint, {"n": n}) for n in range(3)]
    for delivery in asleep:
        services.attempt_delivery(delivery_id=delivery.pk)  # every slot taken: asleep
    assert Delivery.objects.filter(waiting_for_slot=True).count() == 3
    first, held, third = asleep
    locked, release = threading.Event(), threading.Event()

    def handing_over() -> None:
        """As a try's end that hands its slot to ``held``: its row locked."""
        try:
            with transaction.atomic():
                Delivery.objects.select_for_update().get(pk=held.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=handing_over)
    holder.start()
    woken: list[int] = []
    done = threading.Event()

    def limit_grown() -> None:
        try:
            with transaction.atomic():
                services._wake_asleep(endpoint.pk, timezone.now(), 2)
            woken.extend(
                Delivery.objects.filter(pk__in=[d.pk for d in asleep], dispatched_at__isnull=False)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
            done.set()
        finally:
            connection.close()

    try:
        assert locked.wait(10)
        waker = threading.Thread(target=limit_grown)
        waker.start()
        if connection.vendor == "postgresql":
            assert done.wait(5), "waking the asleep waited for a row another transaction held"
            assert woken == [first.pk, third.pk]
        # (SQLite has one writer at a time and no row locks: all in order.)
    finally:
        release.set()
        holder.join(10)
    waker.join(10)
    assert done.is_set()
    if connection.vendor != "postgresql":
        assert woken == [first.pk, held.pk]


@pytest.mark.usefixtures("_no_messages")
def test_a_try_whose_outcome_postgresql_ended_as_a_deadlock_stores_it_again(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction PostgreSQL ends to break a deadlock (or a serialization
    failure) is run again: the try's outcome is stored, not lost until its
    lease runs out and the try is made a second time."""
    endpoint, _ = services.create_endpoint(url=target.url())
    delivery = send(endpoint)
    record = services._record
    ended: list[int] = []

    def deadlocked_once(*args: Any, **kwargs: Any) -> Any:
        if not ended:
            ended.append(1)
            with transaction.atomic():
                Delivery.objects.filter(pk=delivery.pk).update(last_error="rolled back")
                raise OperationalError("deadlock detected") from DeadlockDetected()
        return record(*args, **kwargs)

    monkeypatch.setattr(services, "_record", deadlocked_once)
    services.attempt_delivery(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert ended and delivery.status == "delivered" and delivery.last_error == ""
    assert len(target.received) == 1
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.finished_at is not None and attempt.status_code == 200


@pytest.mark.usefixtures("_no_messages")
def test_a_database_error_that_is_no_deadlock_is_not_run_again(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, _ = services.create_endpoint(url=target.url())
    delivery = send(endpoint)
    calls: list[int] = []

    def broken(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "_record", broken)
    with pytest.raises(OperationalError):
        services.attempt_delivery(delivery_id=delivery.pk)
    assert len(calls) == 1
