"""Slots: at most the endpoint's limit of tries in flight; the others wait
asleep and get a slot one at a time, in enqueue order.

Each try runs here, in this process, one after the other; "in flight" is a
lease and a slot taken by hand (``hold_slots``). test_in_flight.py shows the
same with real workers. Each test ends with the endpoint's count of slots
checked against the deliveries that hold one.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from delivery import services
from delivery.models import Delivery, Endpoint
from tests.delivery.target import Target, hold_slots, lose_worker, send, slots_in_flight

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cap(settings: Any) -> None:
    settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = 2


def _try(*deliveries: Delivery) -> None:
    for delivery in deliveries:
        services.attempt_delivery(delivery_id=delivery.pk)


def _numbers(target: Target) -> list[int]:
    return [json.loads(r.body)["n"] for r in target.received]


def _asleep(delivery: Delivery) -> bool:
    delivery.refresh_from_db()
    return (
        delivery.waiting_for_slot
        and delivery.dispatched_at is None
        and delivery.next_attempt_at > timezone.now() + timedelta(seconds=50)  # type: ignore[operator]
    )


def test_a_delivery_waits_asleep_while_its_endpoint_has_no_free_slot(
    target: Target, endpoint: Endpoint, settings: Any
) -> None:
    busy = [send(endpoint, {"n": n}) for n in (1, 2)]
    hold_slots(*busy)
    waiting = send(endpoint, {"n": 3})

    _try(waiting)

    assert target.received == [] and _asleep(waiting)
    settings.DELIVERY_REDISPATCH_AFTER_SECONDS = 0
    assert services.sweep_overdue() == 0  # no message goes round while it waits


def test_other_endpoints_do_not_wait(target: Target, endpoint: Endpoint) -> None:
    hold_slots(*[send(endpoint, {"n": n}) for n in (1, 2)])
    other, _ = services.create_endpoint(url=target.url("/other"))

    _try(send(other, {"n": 3}))

    assert _numbers(target) == [3]


def test_the_thread_that_frees_a_slot_carries_on_with_those_waiting_in_order(
    target: Target, endpoint: Endpoint
) -> None:
    one, two = send(endpoint, {"n": 1}), send(endpoint, {"n": 2})
    hold_slots(one, two)
    three, four = send(endpoint, {"n": 3}), send(endpoint, {"n": 4})
    _try(four, three)  # their messages came in any order
    assert _asleep(three) and _asleep(four)

    lose_worker(one)  # its try's worker was lost; due again, in the slot it holds
    _try(one)  # an earlier delivery goes before those waiting ...

    # ... and its slot then goes to three, then four, in this same call.
    assert _numbers(target) == [1, 3, 4]
    assert not Delivery.objects.filter(waiting_for_slot=True).exists()
    assert slots_in_flight(endpoint) == 1  # two's


def test_a_slot_held_past_its_lease_goes_to_the_first_waiting_delivery(
    target: Target, endpoint: Endpoint
) -> None:
    one, two = send(endpoint, {"n": 1}), send(endpoint, {"n": 2})
    hold_slots(one, two)
    three, four = send(endpoint, {"n": 3}), send(endpoint, {"n": 4})
    _try(three, four)
    lose_worker(two)  # a slot frees without a try being recorded

    Delivery.objects.filter(pk=four.pk).update(next_attempt_at=timezone.now())
    _try(four)  # the sweep's re-check of a later one comes first: not its turn ...

    # ... three takes the slot, then hands it on in enqueue order: to two,
    # due again as its lease ran out, then to four.
    assert _numbers(target) == [3, 2, 4]
    assert slots_in_flight(endpoint) == 1  # one's


def test_a_new_delivery_does_not_jump_the_queue(target: Target, endpoint: Endpoint) -> None:
    one, two = send(endpoint, {"n": 1}), send(endpoint, {"n": 2})
    hold_slots(one, two)
    three = send(endpoint, {"n": 3})
    _try(three)
    Delivery.objects.filter(pk=two.pk).update(holds_slot=False)  # its try ended ...
    Endpoint.objects.filter(pk=endpoint.pk).update(in_flight=1)  # ... as three went to wait

    late = send(endpoint, {"n": 4})
    _try(late)  # a slot is free, but three waits for it

    assert _numbers(target) == [3, 4]  # three first, then its slot goes to the late one
    assert slots_in_flight(endpoint) == 1


def test_a_message_that_finds_a_free_slot_takes_it(target: Target, endpoint: Endpoint) -> None:
    hold_slots(send(endpoint, {"n": 1}))

    _try(send(endpoint, {"n": 2}))

    assert _numbers(target) == [2]
    assert slots_in_flight(endpoint) == 1


def test_a_waiting_typing_notification_sleeps_no_longer_than_it_stays_fresh(
    target: Target, endpoint: Endpoint
) -> None:
    hold_slots(*[send(endpoint, {"n": n}) for n in (1, 2)])
    typing = send(endpoint, {"n": 3}, policy="chat_api_typing")

    _try(typing)

    typing.refresh_from_db()
    assert typing.waiting_for_slot and typing.next_attempt_at == typing.expires_at


def test_a_waiting_delivery_that_goes_stale_lets_the_next_one_go(
    target: Target, endpoint: Endpoint
) -> None:
    one, two = send(endpoint, {"n": 1}), send(endpoint, {"n": 2})
    hold_slots(one, two)
    typing = send(endpoint, {"n": 3}, policy="chat_api_typing")
    message = send(endpoint, {"n": 4})
    _try(typing, message)
    lose_worker(one)
    stale = timezone.now()
    Delivery.objects.filter(pk=typing.pk).update(expires_at=stale, next_attempt_at=stale)

    _try(typing)  # sent by the sweep at its expiry

    typing.refresh_from_db()
    assert typing.status == Delivery.Status.DROPPED and not typing.waiting_for_slot
    # The message behind it took the lost worker's slot, then handed it to
    # the lost try's delivery, due again.
    assert _numbers(target) == [4, 1]
    assert slots_in_flight(endpoint) == 1


def test_redeliver_starts_afresh_out_of_the_queue(target: Target, endpoint: Endpoint) -> None:
    delivery = send(endpoint, {"n": 1})
    Delivery.objects.filter(pk=delivery.pk).update(status="failed", waiting_for_slot=True)

    services.redeliver(delivery=delivery)

    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.PENDING and not delivery.waiting_for_slot


def test_a_slot_freed_a_moment_before_a_retry_is_due_does_not_bring_it_forward(
    target: Target, endpoint: Endpoint
) -> None:
    """The try that frees a slot hands it to the first delivery in line. A
    retry due within EARLY_TOLERANCE (0.5 s: the leeway of a message that
    comes early) counted as in line and went at once, not after its delay
    (CI: a failing integrator's tries 0.23 s and 0.09 s apart, against 0.6 s)."""
    retry = send(endpoint, {"n": 1})
    Delivery.objects.filter(pk=retry.pk).update(
        next_attempt_at=timezone.now() + timedelta(seconds=0.3), dispatched_at=timezone.now()
    )

    with transaction.atomic():
        handed_over = services._hand_over(endpoint.pk, timezone.now())

    assert handed_over is None
    retry.refresh_from_db()
    assert retry.next_attempt_at > timezone.now()  # type: ignore[operator]
