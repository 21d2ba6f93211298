"""A worker deciding an endpoint's slots does not hold up a web request that
enqueues to the same endpoint (the deadlock this once caused: a result
handler waiting for a chat's lock, the request holding that chat and waiting
for the endpoint)."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F

from delivery import services
from delivery.models import Delivery, Endpoint
from tests.delivery.target import hold_slots

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
