"""The flush after a transactional test is tried again past a deadlock with
the session's worker or web process (tests/conftest.py), and only then."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.db import OperationalError
from django.test import TransactionTestCase

from tests import conftest


def flush_failing(times: int, cause: Exception, calls: list[int]) -> object:
    def flush(self: TransactionTestCase) -> None:
        calls.append(1)
        if len(calls) <= times:
            raise CommandError("Database couldn't be flushed.") from cause

    return flush


def test_a_deadlocked_flush_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    deadlock = OperationalError("deadlock detected\nDETAIL: Process 1 waits for …")
    monkeypatch.setattr(conftest, "_fixture_teardown", flush_failing(2, deadlock, calls))
    monkeypatch.setattr(conftest.time, "sleep", lambda seconds: None)

    conftest._fixture_teardown_past_deadlocks(TransactionTestCase())

    assert len(calls) == 3


@pytest.mark.parametrize(
    ("times", "cause"),
    [
        (1, OperationalError("server closed the connection unexpectedly")),
        (conftest.FLUSH_TRIES, OperationalError("deadlock detected")),
    ],
    ids=["another-error", "deadlocked-every-time"],
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
