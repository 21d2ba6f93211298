"""Each policy's tries, counted and spaced by a real worker against a real server.

The spacing is measured from the arrival times of the requests the local
server received.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from delivery import services
from delivery.models import Delivery, DeliveryAttempt
from tests.delivery.target import Reply, Target, send
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def celery_worker(celery_worker: Worker, django_db_blocker: Any) -> Iterator[Worker]:
    """The session's worker, restarted with production's retry spacing for
    this module (the suite's is five times shorter: tests/settings.py)."""
    with django_db_blocker.unblock():
        celery_worker.stop()
        celery_worker.env["DELIVERY_RETRY_SCALE"] = "1"
        celery_worker.start()
    yield celery_worker
    with django_db_blocker.unblock():
        celery_worker.stop()
        del celery_worker.env["DELIVERY_RETRY_SCALE"]
        celery_worker.start()


@pytest.fixture(autouse=True)
def _real_spacing(settings: Any) -> None:
    settings.DELIVERY_RETRY_SCALE = 1  # this process agrees with the worker


def _final(delivery: Delivery, timeout: float = 20) -> Delivery:
    wait_for(lambda: Delivery.objects.get(pk=delivery.pk).is_final, timeout)
    delivery.refresh_from_db()
    return delivery


def _after_try(delivery: Delivery, number: int) -> Delivery:
    """The delivery once try ``number`` has ended and the next is scheduled."""

    def scheduled() -> Delivery | None:
        return Delivery.objects.filter(
            pk=delivery.pk, attempts=number, locked_until__isnull=True
        ).first()

    row = wait_for(scheduled)
    assert row is not None
    return row


def _gaps_between_starts(delivery: Delivery) -> list[float]:
    """Seconds from the start of each try to the start of the next, as the
    worker recorded them: the policy spaces tries from the previous start.
    (The receiver's arrival times add how long each request took to reach it,
    which on a loaded machine moved a gap by more than the 0.1 s margin.)"""
    starts = DeliveryAttempt.objects.filter(delivery=delivery).order_by("number")
    times = list(starts.values_list("started_at", flat=True))
    return [round((b - a).total_seconds(), 2) for a, b in itertools.pairwise(times)]


def test_chat_api_message_three_sends_three_seconds_apart(
    celery_worker: Worker, target: Target
) -> None:
    target.respond(lambda request, index: Reply(500))
    endpoint, _ = services.create_endpoint(url=target.url())

    delivery = _final(send(endpoint, policy="chat_api_message"))

    assert delivery.status == Delivery.Status.FAILED and delivery.last_error == "HTTP 500"
    assert len(target.received) == 3
    gaps = _gaps_between_starts(delivery)
    assert len(gaps) == 2 and all(2.9 <= gap <= 4.5 for gap in gaps), gaps
    told = (delivery.completed_at - delivery.created).total_seconds()  # type: ignore[operator]
    assert 6 <= told < 9


def test_chat_api_message_stops_at_the_first_success(celery_worker: Worker, target: Target) -> None:
    target.script(Reply(503), Reply(200, '{"ok": true}'))
    endpoint, _ = services.create_endpoint(url=target.url())

    delivery = _final(send(endpoint, policy="chat_api_message"))

    assert delivery.status == Delivery.Status.DELIVERED and delivery.reply_body == {"ok": True}
    assert len(target.received) == 2 and 2.9 <= _gaps_between_starts(delivery)[0] <= 4.5


def test_bot_event_two_retries(celery_worker: Worker, target: Target) -> None:
    target.respond(lambda request, index: Reply(502))
    endpoint, _ = services.create_endpoint(url=target.url())

    delivery = _final(send(endpoint, policy="bot_event"))

    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 3
    assert len(target.received) == 3
    gaps = _gaps_between_starts(delivery)
    assert len(gaps) == 2 and all(1.9 <= gap <= 3.5 for gap in gaps), gaps


def test_chat_api_typing_one_try_with_a_two_second_timeout(
    celery_worker: Worker, target: Target
) -> None:
    target.script(Reply(200, delay=4))
    endpoint, _ = services.create_endpoint(url=target.url())

    delivery = _final(send(endpoint, {"typing": True}, policy="chat_api_typing"))

    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 1
    assert delivery.last_error == "timed out after 2 s"
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert 1900 <= attempt.duration_ms <= 2600  # type: ignore[operator]
    assert len(target.received) == 1


def test_devhook_backs_off_over_hours(celery_worker: Worker, target: Target) -> None:
    target.respond(lambda request, index: Reply(500))
    endpoint, _ = services.create_endpoint(url=target.url())
    delivery = send(endpoint, policy="devhook")

    # Tries 1 and 2 on their own, about 5 s apart (±20 % jitter).
    target.wait_for(2, timeout=15)
    _after_try(delivery, 2)
    assert 4.0 <= _gaps_between_starts(delivery)[0] <= 6.5, _gaps_between_starts(delivery)

    # The longer waits sit in the database; fast-forward each and let the sweep send it.
    for tries, wait in [(2, 60), (3, 600), (4, 3600), (5, 6 * 3600)]:
        row = _after_try(delivery, tries)
        started = DeliveryAttempt.objects.get(delivery=delivery, number=tries).started_at
        gap = (row.next_attempt_at - started).total_seconds()  # type: ignore[operator]
        assert 0.8 * wait <= gap <= 1.2 * wait, (tries, gap)
        if wait > 60:
            assert row.dispatched_at is None  # no Celery countdown for a long wait
        Delivery.objects.filter(pk=delivery.pk).update(
            next_attempt_at=timezone.now(), dispatched_at=timezone.now() - timedelta(hours=1)
        )
        assert services.sweep_overdue() == 1
        target.wait_for(tries + 1)

    delivery = _final(delivery)
    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 6
    assert len(target.received) == 6
