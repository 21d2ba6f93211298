"""The adaptive in-flight limit of an endpoint (issue 28): grown by one with
each quick success, halved by a time-out, a connection error, a 408, 429 or
5xx, within 1 and DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT.

The tries run here, in this process, one after the other (test_slots.py's
way); "in flight" is a lease taken by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from delivery import services
from delivery.models import Delivery, Endpoint
from delivery.policies import limit_after
from delivery.transport import Exchange
from tests.delivery.target import Reply, Target, hold_slots, send

pytestmark = pytest.mark.django_db

CEILING = 64


def _after(limit: int, exchange: Exchange) -> int:
    return limit_after(limit, exchange, ceiling=CEILING, quick_seconds=1.0)


@pytest.mark.parametrize(
    ("limit", "exchange", "expected"),
    [
        (2, Exchange(200, 100), 3),  # a quick success: one more
        (CEILING, Exchange(204, 100), CEILING),  # never above the ceiling
        (200, Exchange(200, 100), CEILING),  # a ceiling lowered since
        (10, Exchange(200, 1500), 10),  # a slow success: as it was
        (10, Exchange(None, 3000, error="timed out after 3 s"), 5),
        (10, Exchange(None, 1, error="connection refused"), 5),
        (10, Exchange(503, 50), 5),
        (10, Exchange(429, 50), 5),
        (1, Exchange(500, 50), 1),  # never below one
        (10, Exchange(400, 50), 10),  # a refusal says nothing about load
        (10, Exchange(None, 1, error="private address", retryable=False), 10),
    ],
)
def test_the_limit_after_one_try(limit: int, exchange: Exchange, expected: int) -> None:
    assert _after(limit, exchange) == expected


@pytest.fixture(autouse=True)
def _ceiling(settings: Any) -> None:
    settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = CEILING


def _limit(endpoint: Endpoint) -> int:
    endpoint.refresh_from_db()
    return endpoint.in_flight_limit


def _try(*deliveries: Delivery) -> None:
    for delivery in deliveries:
        services.attempt_delivery(delivery_id=delivery.pk)


def test_a_new_endpoint_starts_at_two(endpoint: Endpoint) -> None:
    assert _limit(endpoint) == 2


def test_a_healthy_endpoint_s_limit_grows_under_a_burst(target: Target, endpoint: Endpoint) -> None:
    burst = [send(endpoint, {"n": n}) for n in range(20)]

    _try(*burst)

    assert len(target.received) == 20
    assert _limit(endpoint) == 22


def test_a_failing_endpoint_s_limit_falls_to_one(target: Target, endpoint: Endpoint) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(in_flight_limit=CEILING)
    target.respond(lambda request, index: Reply(503))

    _try(*[send(endpoint, {"n": n}) for n in range(8)])

    assert _limit(endpoint) == 1


def test_an_endpoint_that_refuses_connections_falls_to_one(db: None) -> None:
    closed, _ = services.create_endpoint(url="http://127.0.0.1:9/hook")  # discard: nobody listens
    Endpoint.objects.filter(pk=closed.pk).update(in_flight_limit=16)

    _try(*[send(closed, {"n": n}) for n in range(5)])

    assert _limit(closed) == 1


def test_a_grown_limit_lets_more_tries_start(target: Target, endpoint: Endpoint) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(in_flight_limit=5)
    busy = [send(endpoint, {"n": n}) for n in range(4)]
    hold_slots(*busy)  # four in flight
    fifth, sixth = send(endpoint, {"n": 5}), send(endpoint, {"n": 6})

    _try(fifth)  # the fifth slot; its quick success makes a sixth, which its thread takes
    _try(sixth)

    assert [json.loads(r.body)["n"] for r in target.received] == [5, 6]
    assert _limit(endpoint) == 7


def test_the_ceiling_bounds_a_limit_stored_higher(
    target: Target, endpoint: Endpoint, settings: Any
) -> None:
    settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = 2
    Endpoint.objects.filter(pk=endpoint.pk).update(in_flight_limit=50)
    busy = [send(endpoint, {"n": n}) for n in range(2)]
    hold_slots(*busy)
    third = send(endpoint, {"n": 3})

    _try(third)

    assert target.received == []
    third.refresh_from_db()
    assert third.waiting_for_slot
