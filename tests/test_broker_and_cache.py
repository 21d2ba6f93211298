"""The cache and the Celery broker are kept apart: clearing the cache (on
Redis, FLUSHDB) loses no queued work."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
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
        assert settings.CELERY_BROKER_URL == "switchboard-filesystem://localhost//"
        assert settings.CACHES["default"]["BACKEND"].endswith("FileBasedCache")
        return
    cache_database = redis_database(settings.CACHES["default"]["LOCATION"])
    assert cache_database != redis_database(settings.CELERY_BROKER_URL)


def queued(broker: redis.Redis, queue: str) -> int:
    """Messages waiting on ``queue``: kombu keeps one list per priority
    step, named after the queue (delivery/services.py, ``PRIORITY_*``)."""
    return sum(broker.llen(key) for key in broker.keys(f"{queue}*"))


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
        assert queued(broker, queue) == 1

    cache.set("something", "cached")
    cache.clear()

    assert cache.get("something") is None
    if broker is not None:
        assert queued(broker, queue) == 1
    worker = Worker(queues=queue, concurrency=2).start()
    try:
        [received] = target.wait_for(1, timeout=30)
        assert received.headers["webhook-id"] == delivery.webhook_id
        wait_for(lambda: Delivery.objects.get(pk=delivery.pk).status == "delivered")
    finally:
        worker.stop()


def test_the_embedded_broker_never_shows_a_half_written_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kombu's own filesystem transport made the file first and wrote it
    after; a worker that read it in between stopped with a JSONDecodeError."""
    from kombu import Connection
    from kombu.transport import filesystem

    from config import broker

    seen_while_writing: list[list[str]] = []
    real = broker.dumps

    def watching(payload: Any) -> str:  # called as the message is being written
        names = os.listdir(tmp_path)
        seen_while_writing.append(
            [n for n in names if n.endswith(".msg") and not (tmp_path / n).stat().st_size]
        )
        return str(real(payload))

    monkeypatch.setattr(broker, "dumps", watching)
    monkeypatch.setattr(filesystem, "dumps", watching)  # the same check fails kombu's own
    options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),  # kombu's default is ./control
    }
    with Connection(f"{broker.ALIAS}://", transport_options=options) as connection:
        queue = connection.SimpleQueue("jobs")
        queue.put({"n": 1})
        queue.put({"n": 2})
        got = []
        for _ in range(2):
            message = queue.get(timeout=1)
            message.ack()
            got.append(message.payload)
        assert sorted(got, key=lambda body: body["n"]) == [{"n": 1}, {"n": 2}]
        queue.close()
    # No empty message file was in the folder while a message was written.
    assert seen_while_writing and all(empty == [] for empty in seen_while_writing)
    left = [n for n in os.listdir(tmp_path) if n.endswith((".msg", ".part"))]
    assert left == []


def test_the_embedded_broker_hands_out_a_lower_priority_number_first(tmp_path: Path) -> None:
    """As kombu's Redis transport does: a delivery's retry (priority 0)
    before new deliveries' first messages (3, 6) published earlier."""
    from kombu import Connection

    from config import broker

    options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
    }
    with Connection(f"{broker.ALIAS}://", transport_options=options) as connection:
        queue = connection.SimpleQueue("ordered-jobs")
        for n, priority in enumerate((6, 3, 6, 0, 3)):
            queue.put({"n": n}, priority=priority)
        got = []
        for _ in range(5):
            message = queue.get(timeout=1)
            message.ack()
            got.append(message.payload["n"])
        queue.close()
    assert got == [3, 1, 4, 0, 2]  # by priority, then in the order published
