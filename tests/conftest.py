from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.db import IntegrityError, OperationalError
from django.test import TransactionTestCase
from rest_framework.test import APIClient

from agents import events
from agents.models import Agent
from agents.tokens import issue_token
from config.settings import redis_database_after
from tests.factories import AgentFactory
from tests.worker import Worker

# A PostgreSQL of a module's own under a real web process, for the modules
# that stop it (tests/reliability/outage.py).
pytest_plugins = ["tests.reliability.outage"]


@pytest.fixture
def agent(db: None) -> Agent:
    return AgentFactory.create(is_online=True)


@pytest.fixture
def api(agent: Agent) -> APIClient:
    """An API client signed in as ``agent`` with its token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return client


@pytest.fixture
def published() -> Iterator[list[events.Event]]:
    """Every event published while the test runs, in order."""
    seen: list[events.Event] = []
    kinds = [
        kind for kind in vars(events).values()
        if isinstance(kind, type) and issubclass(kind, events.Event) and kind is not events.Event
    ]  # fmt: skip
    for kind in kinds:
        events.subscribe(kind, seen.append)
    yield seen
    for kind in kinds:
        events.unsubscribe(kind, seen.append)


WORKER_BOT_REPLY_TIMEOUT = 3


@pytest.fixture(scope="session")
def celery_worker(
    django_db_setup: None, django_db_blocker: pytest.FixtureRequest
) -> Iterator[Worker]:
    """One real worker process for the session's integration tests."""
    from config.celery import app

    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        app.control.purge()
        # A bot's reply timeout short enough to be seen passing in a test.
        worker = Worker(env={"BOT_REPLY_TIMEOUT_SECONDS": str(WORKER_BOT_REPLY_TIMEOUT)}).start()
    yield worker
    worker.stop()


# --- a green run means every test ran -----------------------------------------
# .ci/run sets FAIL_ON_SKIP=1: a test that skips (a missing tool, no IPv6, …)
# then fails the run instead of passing it with a part of the suite unrun.
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):  # an xfail is no skip
        _skipped.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:  # a whole module skipped at import
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("FAIL_ON_SKIP") == "1" and _skipped and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if os.environ.get("FAIL_ON_SKIP") == "1" and _skipped:
        terminalreporter.section("tests that did not run (FAIL_ON_SKIP=1)", red=True)
        for nodeid in _skipped:
            terminalreporter.line(nodeid)


# --- a parallel run (pytest-xdist, docs/testing.md) ---------------------------
# `make test` runs the suite in several worker processes. pytest-django gives
# each its own test database on PostgreSQL; here each also gets its own VAR_DIR
# (the SQLite file, the filesystem broker, the cache, stored files) and its own
# two Redis databases (broker and cache), so the Celery worker and web server a
# test process starts serve that process's tests only. The variables are set in
# the worker process before Django reads its settings.


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    var_dir = Path(os.environ.get("VAR_DIR") or Path(__file__).resolve().parents[1] / "var")
    base_redis_url = os.environ.get("REDIS_URL", "")
    if base_redis_url and os.environ.get("REDIS_CACHE_URL"):
        raise pytest.UsageError("a parallel run derives each worker's cache: unset REDIS_CACHE_URL")
    for spec in specs:
        spec.env["VAR_DIR"] = str(var_dir / spec.id)
        if base_redis_url:
            # gw0 takes REDIS_URL's database and the next, gw1 the two after, …
            redis_url = base_redis_url
            for _ in range(2 * int(spec.id.removeprefix("gw"))):
                redis_url = redis_database_after(redis_url)
            spec.env["REDIS_URL"] = redis_url


# --- a run starts from an empty broker and cache ----------------------------
# A run makes a new test database, whose ids start again at 1, but Redis (or
# the embedded default's folders) keeps what an earlier run left: queued tasks
# with a countdown (a bot's reply timeout, a delivery's retry), stream leases,
# rate-limit counts and idempotency keys, each naming ids that now belong to
# other rows. The run owns its broker and cache databases (docs/testing.md)
# and empties them before its first test.


@pytest.fixture(scope="session", autouse=True)
def _empty_broker_and_cache() -> None:
    from django.conf import settings
    from django.core.cache import cache

    cache.clear()
    if settings.REDIS_URL:
        import redis

        with redis.Redis.from_url(settings.REDIS_URL) as broker:
            broker.flushdb()
        return
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    for folder in {options["data_folder_in"], options["control_folder"]}:
        for entry in Path(str(folder)).iterdir():
            if entry.is_file():
                entry.unlink()


# --- the flush after a transactional test -------------------------------------
# A transactional test ends with a flush of every table (on PostgreSQL the
# suite's deletes, tests/postgresql/), while the session's Celery worker or
# web process may still be at work on rows the test made (a delivery's retry,
# a page's last request). Two ways the flush then fails, and the test's rows
# would stay for the next test:
# - PostgreSQL finds the flush's locks and the worker's row locks in a
#   deadlock and ends the flush;
# - the worker inserts a row (a delivery's try) after the flush deleted that
#   table's rows and before it deleted the row it points to: the flush's
#   deferred foreign-key check refuses its commit.
# The worker's transaction is short, so the flush is tried again after it
# (and then deletes the late row too).

FLUSH_TRIES = 5
# Django's own (a private method, not in its type stubs).
_fixture_teardown = TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]


def _raced(error: CommandError) -> bool:
    """Whether the flush failed on a worker's concurrent work (above)."""
    cause = error.__cause__
    deadlock = isinstance(cause, OperationalError) and "deadlock detected" in str(cause)
    late_row = isinstance(cause, IntegrityError) and "violates foreign key constraint" in str(cause)
    return deadlock or late_row


def _fixture_teardown_past_deadlocks(self: TransactionTestCase) -> None:
    for attempt in range(1, FLUSH_TRIES + 1):
        try:
            _fixture_teardown(self)
            return
        except CommandError as error:  # flush wraps the database's error
            if not _raced(error) or attempt == FLUSH_TRIES:
                raise
            time.sleep(0.2 * attempt)


TransactionTestCase._fixture_teardown = _fixture_teardown_past_deadlocks  # type: ignore[attr-defined]
