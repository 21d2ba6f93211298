"""agents.idempotency: a key is acted on once per scope, and only when the
change it guards commits."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from agents import idempotency
from agents.models import IdempotencyKey


class Refused(Exception):
    pass


@pytest.mark.django_db
def test_a_key_is_claimed_once_per_scope() -> None:
    with transaction.atomic():
        first = idempotency.claim(scope="chat-api:1", key="k")
        again = idempotency.claim(scope="chat-api:1", key="k")
        elsewhere = idempotency.claim(scope="bot-api:1", key="k")
        # A False leaves the caller's transaction usable.
        assert IdempotencyKey.objects.count() == 2

    assert (first, again, elsewhere) == (True, False, True)
    assert idempotency.seen(scope="chat-api:1", key="k")
    assert not idempotency.seen(scope="chat-api:2", key="k")


@pytest.mark.django_db
def test_a_rolled_back_change_does_not_keep_its_key() -> None:
    with pytest.raises(Refused), transaction.atomic():
        assert idempotency.claim(scope="s", key="k")
        raise Refused

    assert not idempotency.seen(scope="s", key="k")
    with transaction.atomic():
        assert idempotency.claim(scope="s", key="k")


@pytest.mark.django_db(transaction=True)
def test_a_claim_outside_a_transaction_is_a_mistake() -> None:
    with pytest.raises(TransactionManagementError):
        idempotency.claim(scope="s", key="k")
    assert not IdempotencyKey.objects.exists()


@pytest.mark.django_db
def test_old_keys_are_forgotten(settings: Any) -> None:
    with transaction.atomic():
        idempotency.claim(scope="s", key="old")
        idempotency.claim(scope="s", key="new")
    IdempotencyKey.objects.filter(key="old").update(
        created=timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS + 1)
    )

    assert idempotency.forget_old_keys() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("first_commits", "second_claims"), [(True, False), (False, True)])
def test_a_concurrent_retry_waits_for_the_first(first_commits: bool, second_claims: bool) -> None:
    """The second claim waits while the first request's transaction runs, and
    is answered by how it ends: seen when it commits, new when it rolls back."""
    claimed, finish = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                results["first"] = idempotency.claim(scope="s", key="k")
                claimed.set()
                finish.wait(10)
                if not first_commits:
                    raise Refused
        except Refused:
            pass
        finally:
            claimed.set()
            connection.close()

    def second() -> None:
        try:
            with transaction.atomic():
                results["second"] = idempotency.claim(scope="s", key="k")
                results["second_done_at"] = time.monotonic()
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert claimed.wait(10)
    threads[1].start()
    time.sleep(0.5)  # the second claim is waiting now
    finished_at = time.monotonic()
    finish.set()
    for thread in threads:
        thread.join(20)

    assert results["first"] is True
    assert results["second"] is second_claims
    assert results["second_done_at"] >= finished_at  # it did wait for the first
    assert IdempotencyKey.objects.filter(scope="s", key="k").count() == 1
