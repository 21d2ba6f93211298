"""PostgreSQL stopped under a running web process (issue 29, item 2).

A cluster of the module's own (``pg_server.py``), migrated and seeded, serves a
real web process (gunicorn, as the Procfile starts it, DEBUG off as in
production). Stopping it must not hang a request nor give a 500: every
endpoint that needs the database answers 503 with the error body and
``Retry-After`` within 2 s (config/database_down.py); a request answered so
is not committed when the database returns; and the service is back by
itself within 10 s of its return. The web process has no Redis and a
``VAR_DIR`` of its own, so what it queues reaches no worker of the suite;
the module runs the same on the embedded default run, whatever the suite's
own database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from psycopg_pool import PoolTimeout

from config.postgresql.base import OutageAwarePool
from tests.reliability.endpoints import Answer, knock, requests_of
from tests.reliability.pg_server import PostgresServer, wait_until
from tests.web.server import WebServer, free_port
from tests.worker import ROOT

# The ports this project's fault tests may give their own PostgreSQL.
PORTS = range(5481, 5486)
DATABASE = "switchboard"
# A client's patience: longer than the promised 2 s, shorter than the old hang.
CLIENT_TIMEOUT = 8.0


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer(PORTS)
    try:
        server.start()
        server.execute(f"CREATE DATABASE {DATABASE}")
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def web_env(postgres: PostgresServer) -> dict[str, str]:
    """The web process's settings: production's (DEBUG off), its own database,
    no Redis, its own VAR_DIR (broker and cache folders)."""
    var_dir = Path(settings.VAR_DIR) / f"pg-down-{uuid.uuid4().hex[:8]}"
    var_dir.mkdir()
    return {
        "DATABASE_URL": postgres.url(DATABASE),
        "REDIS_URL": "",
        "VAR_DIR": str(var_dir),
        "DEBUG": "false",
        "SECRET_KEY": f"reliability-{uuid.uuid4().hex}{uuid.uuid4().hex}",
        "ALLOWED_HOSTS": "127.0.0.1",
        # The seeded channels' webhooks point at 127.0.0.1 (nothing is sent).
        "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
    }


def run(env: dict[str, str], *command: str) -> str:
    done = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def seed(web_env: dict[str, str]) -> dict[str, Any]:
    run(web_env, "manage.py", "migrate", "--noinput", "-v0")
    printed = run(web_env, "-m", "tests.reliability.seed")
    return dict(json.loads(printed.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def web(web_env: dict[str, str], seed: dict[str, Any]) -> Iterator[WebServer]:
    server = WebServer()
    server.env.update(web_env)
    yield server.start()
    server.stop()


def knock_all(web: WebServer, seed: dict[str, Any], **extra: dict[str, Any]) -> list[Answer]:
    """Every endpoint once, at the same time (each request waits on its own)."""
    asked = {**requests_of(seed), **extra}
    with ThreadPoolExecutor(max_workers=len(asked)) as pool:
        futures = [
            pool.submit(knock, web.base_url, name, request, CLIENT_TIMEOUT)
            for name, request in asked.items()
        ]
        return [future.result() for future in futures]


def served(answer: Answer) -> bool:
    """Answered as with the database up (B2's event names no chat: 404)."""
    return answer.status is not None and answer.status < 500


def stored_texts(postgres: PostgresServer, *texts: str) -> list[str]:
    with psycopg.connect(postgres.url(DATABASE)) as connection:
        rows = connection.execute(
            "SELECT text FROM agents_message WHERE text = ANY(%s) ORDER BY id", [list(texts)]
        ).fetchall()
    return [row[0] for row in rows]


@pytest.fixture
def outage(postgres: PostgresServer) -> Iterator[PostgresServer]:
    """PostgreSQL stopped for the test; started again whatever it asserted."""
    postgres.stop()
    try:
        yield postgres
    finally:
        if not postgres.running():
            postgres.start()


def test_every_endpoint_answers_503_with_retry_after_within_2_s_and_recovers_within_10_s(
    web: WebServer, seed: dict[str, Any], outage: PostgresServer
) -> None:
    secret = seed["a2"].split("/")[1]

    down = knock_all(web, seed)

    for answer in down:
        assert answer.status == 503, (answer.name, answer.status, answer.body[:200])
        assert answer.seconds < 2.0, (answer.name, answer.seconds)
        assert answer.headers["Retry-After"] == "5", answer.name
        if answer.name == "agent page":
            assert b"Traceback" not in answer.body and b"database" in answer.body
        else:
            assert answer.json() == {
                "error": {
                    "code": "service_unavailable",
                    "message": "the database is not reachable; retry shortly",
                }
            }, answer.name
    slowest = max(answer.seconds for answer in down)
    # A request that waited leaves a line naming it, its path's secret redacted.
    log = web.stderr()
    assert "database.unavailable method=POST path=/chat-api/" in log
    assert "database.unavailable method=GET path=/api/agent/v1/stream" in log
    assert secret not in log

    outage.start()
    recovered = wait_until(lambda: all(served(a) for a in knock_all(web, seed)), timeout=10)

    assert recovered is not None, [(a.name, a.status) for a in knock_all(web, seed)]
    print(f"\nslowest 503: {slowest:.2f} s; every endpoint served {recovered:.2f} s after return")


def test_a_request_answered_503_is_not_committed_when_the_database_returns(
    web: WebServer, seed: dict[str, Any], outage: PostgresServer
) -> None:
    """The baseline committed an A2 and an agent reply that had waited out
    the outage, after their clients had given up. Now a request waits at most
    the pool's time-out and is answered 503 with nothing written; its retry,
    with the same Idempotency-Key, is stored once."""
    a2_text, reply_text = f"a2-{uuid.uuid4().hex}", f"reply-{uuid.uuid4().hex}"
    a2_key, reply_key = uuid.uuid4().hex, uuid.uuid4().hex
    asked = requests_of(seed)
    a2 = {
        **asked["A2"],
        "json": {"sender": {"id": "u-1"}, "message": {"type": "text", "text": a2_text}},
        "headers": {"Idempotency-Key": a2_key},
    }
    reply = {
        **asked["agent API reply"],
        "json": {"type": "text", "text": reply_text},
        "headers": {**asked["agent API reply"]["headers"], "Idempotency-Key": reply_key},
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        # Sent while it is down.
        waiting = [pool.submit(knock, web.base_url, n, r, CLIENT_TIMEOUT) for n, r in
                   (("A2", a2), ("reply", reply))]  # fmt: skip
        # It returns as soon as they are answered (before, they waited for it).
        wait(waiting, timeout=2.5)
        outage.start()
        answers = [future.result() for future in waiting]

    assert [(a.status, a.seconds < 2.0) for a in answers] == [(503, True), (503, True)]
    assert wait_until(lambda: served(knock(web.base_url, "A1", asked["A1"])), timeout=10)
    time.sleep(1.0)  # what a late commit would need
    assert stored_texts(outage, a2_text, reply_text) == []

    # The clients retry with the same keys, twice each: stored once.
    retries = [knock(web.base_url, n, r) for n, r in (("A2", a2), ("reply", reply)) * 2]

    assert [a.status for a in retries] == [200, 201, 200, 201]
    assert retries[1].json()["id"] == retries[3].json()["id"]
    assert stored_texts(outage, a2_text, reply_text) == [a2_text, reply_text]


def test_the_pool_waits_for_a_busy_server_but_not_for_one_out_of_reach(
    postgres: PostgresServer,
) -> None:
    """config/postgresql/base.py: every connection lent is worth the pool's
    whole time-out; a server that refuses connections is given up on after
    ``outage_timeout``."""
    options: dict[str, Any] = {"timeout": 3.0, "outage_timeout": 0.5, "reconnect_timeout": 1.0}
    with OutageAwarePool(postgres.url(DATABASE), min_size=1, max_size=1, **options) as busy:
        held = busy.getconn()
        started = time.monotonic()
        with pytest.raises(PoolTimeout):
            busy.getconn()
        waited_busy = time.monotonic() - started
        busy.putconn(held)
    nowhere = f"postgres://postgres@127.0.0.1:{free_port()}/{DATABASE}"
    with OutageAwarePool(nowhere, min_size=1, max_size=1, open=False, **options) as down:
        started = time.monotonic()
        with pytest.raises(PoolTimeout):
            down.getconn()
        waited_down = time.monotonic() - started

    assert waited_busy >= 2.9
    assert waited_down < 1.5
