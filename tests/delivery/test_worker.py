"""A real Celery worker: killed mid-delivery, a lost broker message, many in flight."""

from __future__ import annotations

import time
from typing import Any

import pytest

from config.celery import app
from delivery import services
from delivery.models import Delivery, DeliveryAttempt
from tests.delivery.target import Received, Reply, Target, send
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _sweep_until(predicate: Any, timeout: float) -> None:
    """Run the sweep (as beat would) until ``predicate`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not done within {timeout}s"
        services.sweep_overdue()
        time.sleep(0.5)


def test_a_delivery_survives_its_worker_being_killed(celery_worker: Worker, target: Target) -> None:
    # The first request hangs until the worker is dead; the second is answered.
    target.script(Reply(200, delay=60), Reply(200, '{"result": "ok"}'))
    endpoint, _ = services.create_endpoint(url=target.url())
    delivery = send(endpoint, policy="chat_api_message")
    target.wait_for(1)

    celery_worker.kill()  # SIGKILL in the middle of the request
    assert Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.PENDING
    celery_worker.start()
    # Once the dead try's lease runs out (3 s + 5 s) the sweep sends it again.
    _sweep_until(lambda: Delivery.objects.get(pk=delivery.pk).is_final, timeout=30)

    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.DELIVERED
    assert delivery.reply_body == {"result": "ok"}
    first, second = target.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery.webhook_id
    lost, done = DeliveryAttempt.objects.filter(delivery=delivery)
    assert lost.error == "no result: the worker was lost during this try"
    assert done.status_code == 200 and done.error == ""


def test_the_sweep_sends_a_delivery_whose_message_the_broker_lost(
    celery_worker: Worker, target: Target, settings: Any
) -> None:
    endpoint, _ = services.create_endpoint(url=target.url())
    celery_worker.stop()
    delivery = send(endpoint)  # committed: its message waits in the broker
    with app.connection_for_write() as connection:
        purged = connection.default_channel.queue_purge("delivery")
    assert purged == 1  # the message was there, and now it is gone
    celery_worker.start()
    time.sleep(1.5)
    assert target.received == []

    settings.DELIVERY_REDISPATCH_AFTER_SECONDS = 0  # don't wait the usual 30 s
    assert services.sweep_overdue() == 1

    wait_for(lambda: Delivery.objects.get(pk=delivery.pk).is_final)
    assert Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.DELIVERED
    assert len(target.received) == 1


def test_a_slow_target_does_not_hold_up_the_others(
    celery_worker: Worker, target: Target, settings: Any
) -> None:
    def reply(request: Received, index: int) -> Reply:
        # Slow, yet within the 5 s the devhook policy waits.
        return Reply(200, delay=3) if request.path == "/slow" else Reply(200)

    target.respond(reply)
    slow_endpoint, _ = services.create_endpoint(url=target.url("/slow"))
    fast_endpoint, _ = services.create_endpoint(url=target.url("/fast"))
    slow = [send(slow_endpoint, {"n": n}) for n in range(4)]
    cap = settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT
    target.wait_for(cap)  # as many requests in flight as one endpoint may have; the rest wait

    fast = send(fast_endpoint, {"n": "fast"})
    wait_for(lambda: Delivery.objects.get(pk=fast.pk).is_final, timeout=10)

    # The fast one is done while the slow ones are still waiting, for their answer or their turn.
    assert Delivery.objects.get(pk=fast.pk).status == Delivery.Status.DELIVERED
    assert Delivery.objects.filter(pk__in=[d.pk for d in slow], status="pending").count() == 4
    assert [r.path for r in target.received] == ["/slow"] * cap + ["/fast"]
    wait_for(lambda: not Delivery.objects.filter(status="pending").exists(), timeout=30)
