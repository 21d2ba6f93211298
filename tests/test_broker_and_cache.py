"""The cache and the Celery broker are kept apart: clearing the cache (on
Redis, FLUSHDB) loses no queued work."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from config.settings import redis_database
from delivery import services, tasks
from delivery.models import Delivery
from tests.delivery.target import Target
from tests.worker import Worker, wait_for


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


def test_the_cache_never_lives_in_the_brokers_redis_database() -> None:
    if not settings.REDIS_URL:
        assert settings.CELERY_BROKER_URL == "filesystem://"
        assert settings.CACHES["default"]["BACKEND"].endswith("FileBasedCache")
        return
    cache_database = redis_database(settings.CACHES["default"]["LOCATION"])
    assert cache_database != redis_database(settings.CELERY_BROKER_URL)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_cache_clear_loses_no_queued_delivery(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given a delivery whose Celery message waits in the broker on a queue no
    worker reads yet, when the cache is cleared, then a worker started
    afterwards still delivers it. No beat runs in the tests, so the sweep
    cannot rescue a lost message: only the broker's copy can carry it."""
    queue = f"held-{uuid.uuid4().hex[:8]}"
    publish = tasks.deliver.apply_async

    def publish_to_held_queue(*args: Any, **options: Any) -> Any:
        return publish(*args, **{**options, "queue": queue})

    monkeypatch.setattr(tasks.deliver, "apply_async", publish_to_held_queue)
    endpoint, _ = services.create_endpoint(url=target.url())
    with transaction.atomic():
        delivery = services.enqueue(
            endpoint=endpoint, purpose="test.broker", event="e", body={"n": 1}, policy="devhook"
        )
    broker = redis.Redis.from_url(settings.REDIS_URL) if settings.REDIS_URL else None
    if broker is not None:
        assert broker.llen(queue) == 1

    cache.set("something", "cached")
    cache.clear()

    assert cache.get("something") is None
    if broker is not None:
        assert broker.llen(queue) == 1
    worker = Worker(queues=queue, concurrency=2).start()
    try:
        [received] = target.wait_for(1, timeout=30)
        assert received.headers["webhook-id"] == delivery.webhook_id
        wait_for(lambda: Delivery.objects.get(pk=delivery.pk).status == "delivered")
    finally:
        worker.stop()
