"""A worker holding a scheduled task lives through a Redis restart and runs it.

The baseline of issue 29: Redis went away while a worker held a task with a
countdown (a delivery's retry, a bot's reply check); the worker put its
unacknowledged messages back, failed on "'NoneType' object has no attribute
'hostname'" and exited for good (config/redis_broker.py says why).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
from django.db import transaction
from django.utils import timezone
from kombu import Connection

from delivery import services, tasks
from delivery.models import Delivery
from tests.delivery.target import Target, send
from tests.reliability.redis_server import RedisServer
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

COUNTDOWN = 6.0


def test_a_worker_holding_a_scheduled_task_survives_a_redis_restart_and_runs_it(
    redis_server: RedisServer, target: Target
) -> None:
    broker = redis.Redis.from_url(redis_server.url())
    worker = Worker(
        queues="delivery",
        concurrency=2,
        env={"REDIS_URL": redis_server.url(0), "REDIS_CACHE_URL": redis_server.url(1)},
    ).start()
    try:
        endpoint, _ = services.create_endpoint(url=target.url())
        with transaction.atomic():
            delivery = send(endpoint)
            # Due with the countdown's message: the message its commit sends
            # to the suite's broker, which the suite's worker may hold, finds
            # it not due yet and leaves it.
            due = timezone.now() + timedelta(seconds=COUNTDOWN)
            Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=due)
        with Connection(redis_server.url()) as connection:
            sent_at = time.monotonic()
            tasks.deliver.apply_async((delivery.pk,), countdown=COUNTDOWN, connection=connection)
        # The worker has taken it and holds it until it is due.
        wait_for(lambda: broker.hlen("unacked") == 1 and broker.llen("delivery") == 0, 5)

        redis_server.stop()
        wait_for(lambda: "Connection to broker lost" in worker.log(), 5)
        time.sleep(0.5)  # the worker tries to put the message back meanwhile
        redis_server.start()
        assert "Unrecoverable error" not in worker.log(), worker.log()

        received = target.wait_for(1, timeout=COUNTDOWN + 10)
        assert worker.process is not None and worker.process.poll() is None, worker.log()
        assert time.monotonic() - sent_at >= COUNTDOWN - 0.5  # when it was due, not before
        assert received[0].headers["webhook-id"] == delivery.webhook_id
        wait_for(lambda: Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.DELIVERED)
    finally:
        worker.stop()
        broker.close()
