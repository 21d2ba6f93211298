"""The flush after a transactional test is tried again past a deadlock with
the session's worker or web process, or past a row the worker inserted
during the flush (tests/conftest.py), and only then."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.db import IntegrityError, OperationalError
from django.test import TransactionTestCase

from tests import conftest


def flush_failing(times: int, cause: Exception, calls: list[int]) -> object:
    def flush(self: TransactionTestCase) -> None:
        calls.append(1)
        if len(calls) <= times:
            raise CommandError("Database couldn't be flushed.") from cause

    return flush


@pytest.mark.parametrize(
    "cause",
    [
        OperationalError("deadlock detected\nDETAIL: Process 1 waits for …"),
        IntegrityError(
            'update or delete on table "delivery_delivery" violates foreign key constraint '
            '"delivery_deliveryatt_delivery_id_f298a498_fk_delivery_" on table '
            '"delivery_deliveryattempt"'
        ),
    ],
    ids=["deadlock", "a-try-inserted-during-the-flush"],
)
def test_a_flush_that_raced_the_worker_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, cause: Exception
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(conftest, "_fixture_teardown", flush_failing(2, cause, calls))
    monkeypatch.setattr(conftest.time, "sleep", lambda seconds: None)

    conftest._fixture_teardown_past_deadlocks(TransactionTestCase())

    assert len(calls) == 3


@pytest.mark.parametrize(
    ("times", "cause"),
    [
        (1, OperationalError("server closed the connection unexpectedly")),
        (1, IntegrityError('duplicate key value violates unique constraint "x"')),
        (conftest.FLUSH_TRIES, OperationalError("deadlock detected")),
    ],
    ids=["another-error", "another-integrity-error", "deadlocked-every-time"],
)
def test_any_other_failure_and_the_last_try_fail_the_test(
    monkeypatch: pytest.MonkeyPatch, times: int, cause: Exception
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(conftest, "_fixture_teardown", flush_failing(times, cause, calls))
    monkeypatch.setattr(conftest.time, "sleep", lambda seconds: None)

    with pytest.raises(CommandError):
        conftest._fixture_teardown_past_deadlocks(TransactionTestCase())

    assert len(calls) == times
