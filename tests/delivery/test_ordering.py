"""Deliveries with one ordering key reach their endpoint in the order enqueued."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery import services
from delivery.models import Delivery, Endpoint
from tests.delivery.target import Received, Reply, Target, drive, send
from tests.worker import Worker, wait_for


def _numbers(target: Target) -> list[int]:
    return [json.loads(r.body)["n"] for r in target.received]


@pytest.mark.django_db
def test_a_later_delivery_waits_for_the_earlier_one(target: Target, endpoint: Endpoint) -> None:
    first = send(endpoint, {"n": 1}, ordering_key="chat:1")
    second = send(endpoint, {"n": 2}, ordering_key="chat:1")

    services.attempt_delivery(delivery_id=second.pk)  # its message came first

    second.refresh_from_db()
    assert target.received == [] and second.status == Delivery.Status.PENDING
    assert second.next_attempt_at > timezone.now()  # type: ignore[operator]

    # When the first ends, the thread whose try freed the slot sends the
    # second itself; the second's wake-up message then finds it done.
    services.attempt_delivery(delivery_id=first.pk)
    assert _numbers(target) == [1, 2]
    services.attempt_delivery(delivery_id=second.pk)
    assert _numbers(target) == [1, 2]


@pytest.mark.django_db
def test_other_keys_and_other_endpoints_do_not_wait(target: Target, endpoint: Endpoint) -> None:
    other_endpoint, _ = services.create_endpoint(url=target.url("/other"))
    first = send(endpoint, {"n": 1}, ordering_key="chat:1")
    in_flight = timezone.now() + timedelta(seconds=30)  # pending: a try in flight elsewhere
    Delivery.objects.filter(pk=first.pk).update(locked_until=in_flight)
    other_key = send(endpoint, {"n": 2}, ordering_key="chat:2")
    other_target = send(other_endpoint, {"n": 3}, ordering_key="chat:1")
    no_key = send(endpoint, {"n": 4})

    for delivery in (other_key, other_target, no_key):
        services.attempt_delivery(delivery_id=delivery.pk)

    assert sorted(_numbers(target)) == [2, 3, 4]  # none waited for the first


@pytest.mark.django_db
def test_a_failed_delivery_ends_and_lets_the_next_go(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(400))
    first = send(endpoint, {"n": 1}, ordering_key="chat:1", policy="chat_api_message")
    second = send(endpoint, {"n": 2}, ordering_key="chat:1", policy="chat_api_message")

    assert drive(first).status == Delivery.Status.FAILED
    assert drive(second).status == Delivery.Status.DELIVERED
    assert _numbers(target) == [1, 2]


@pytest.mark.django_db
def test_a_typing_notification_gone_stale_behind_a_message_is_dropped(
    target: Target, endpoint: Endpoint
) -> None:
    message = send(endpoint, {"n": 1}, ordering_key="chat:1", policy="chat_api_message")
    typing = send(endpoint, {"n": 2}, ordering_key="chat:1", policy="chat_api_typing")
    services.attempt_delivery(delivery_id=typing.pk)  # waits for the message
    Delivery.objects.filter(pk=typing.pk).update(expires_at=timezone.now())

    drive(message)
    typing = drive(typing)

    assert typing.status == Delivery.Status.DROPPED
    assert _numbers(target) == [1]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_order_is_kept_through_retries_by_a_real_worker(
    celery_worker: Worker, target: Target
) -> None:
    # Message 1 fails every try (bot_event: 3 tries 2 s apart); 2-4 wait, then go in order.
    def reply(request: Received, index: int) -> Reply:
        return Reply(500) if json.loads(request.body)["n"] == 1 else Reply(200)

    target.respond(reply)
    endpoint, _ = services.create_endpoint(url=target.url())
    other = send(endpoint, {"n": 0}, ordering_key="chat:2", policy="bot_event")
    sent = [
        send(endpoint, {"n": n}, ordering_key="chat:1", policy="bot_event") for n in (1, 2, 3, 4)
    ]

    wait_for(lambda: Delivery.objects.filter(status=Delivery.Status.PENDING).count() == 0, 20)

    in_key_order = [n for n in _numbers(target) if n != 0]
    assert in_key_order == [1, 1, 1, 2, 3, 4]
    assert _numbers(target)[0] in (0, 1)  # the other chat did not wait for chat 1
    statuses = [Delivery.objects.get(pk=d.pk).status for d in sent]
    assert statuses == ["failed", "delivered", "delivered", "delivered"]
    assert Delivery.objects.get(pk=other.pk).status == Delivery.Status.DELIVERED
