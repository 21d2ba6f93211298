"""A worker deciding an endpoint's slots does not hold up a web request that
enqueues to the same endpoint (the deadlock this once caused: a result
handler waiting for a chat's lock, the request holding that chat and waiting
for the endpoint)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from delivery import services
from delivery.models import Delivery

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_is_not_blocked_while_a_worker_holds_the_endpoint() -> None:
    endpoint, _ = services.create_endpoint(url="http://127.0.0.1:9/hook")
    locked, release = threading.Event(), threading.Event()

    def worker() -> None:
        try:
            with transaction.atomic():
                services._lock_endpoint(endpoint.pk)  # as _claim and _record do
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=worker)
    holder.start()
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
