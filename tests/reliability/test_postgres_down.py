"""PostgreSQL stopped under a running web process (issue 29, item 2).

A cluster of the module's own (``pg_server.py``; the fixtures are in
``outage.py``), migrated and seeded, serves a
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
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from config.postgresql.base import OutageAwarePool
from tests.reliability.endpoints import Answer, knock, requests_of
from tests.reliability.outage import CLIENT_TIMEOUT, DATABASE, run
from tests.reliability.pg_server import PostgresServer, wait_until
from tests.web.server import WebServer, free_port


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
def outage(outage_postgres: PostgresServer) -> Iterator[PostgresServer]:
    """PostgreSQL stopped for the test; started again whatever it asserted."""
    outage_postgres.stop()
    try:
        yield outage_postgres
    finally:
        if not outage_postgres.running():
            outage_postgres.start()


def test_every_endpoint_answers_503_with_retry_after_within_2_s_and_recovers_within_10_s(
    outage_web: WebServer, outage_seed: dict[str, Any], outage: PostgresServer
) -> None:
    secret = outage_seed["a2"].split("/")[1]

    down = knock_all(outage_web, outage_seed)

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
    log = outage_web.stderr()
    assert "database.unavailable method=POST path=/chat-api/" in log
    assert "database.unavailable method=GET path=/api/agent/v1/stream" in log
    assert secret not in log

    outage.start()
    recovered = wait_until(
        lambda: all(served(a) for a in knock_all(outage_web, outage_seed)), timeout=10
    )

    assert recovered is not None, [(a.name, a.status) for a in knock_all(outage_web, outage_seed)]
    print(f"\nslowest 503: {slowest:.2f} s; every endpoint served {recovered:.2f} s after return")


def test_a_request_answered_503_is_not_committed_when_the_database_returns(
    outage_web: WebServer, outage_seed: dict[str, Any], outage: PostgresServer
) -> None:
    """The baseline committed an A2 and an agent reply that had waited out
    the outage, after their clients had given up. Now a request waits at most
    the pool's time-out and is answered 503 with nothing written; its retry,
    with the same Idempotency-Key, is stored once."""
    a2_text, reply_text = f"a2-{uuid.uuid4().hex}", f"reply-{uuid.uuid4().hex}"
    a2_key, reply_key = uuid.uuid4().hex, uuid.uuid4().hex
    asked = requests_of(outage_seed)
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
        waiting = [pool.submit(knock, outage_web.base_url, n, r, CLIENT_TIMEOUT) for n, r in
                   (("A2", a2), ("reply", reply))]  # fmt: skip
        # It returns as soon as they are answered (before, they waited for it).
        wait(waiting, timeout=2.5)
        outage.start()
        answers = [future.result() for future in waiting]

    assert [(a.status, a.seconds < 2.0) for a in answers] == [(503, True), (503, True)]
    assert wait_until(lambda: served(knock(outage_web.base_url, "A1", asked["A1"])), timeout=10)
    time.sleep(1.0)  # what a late commit would need
    assert stored_texts(outage, a2_text, reply_text) == []

    # The clients retry with the same keys, twice each: stored once.
    retries = [knock(outage_web.base_url, n, r) for n, r in (("A2", a2), ("reply", reply)) * 2]

    assert [a.status for a in retries] == [200, 201, 200, 201]
    assert retries[1].json()["id"] == retries[3].json()["id"]
    assert stored_texts(outage, a2_text, reply_text) == [a2_text, reply_text]


def test_the_pool_waits_for_a_busy_server_but_not_for_one_out_of_reach(
    outage_postgres: PostgresServer,
) -> None:
    """config/postgresql/base.py: every connection lent is worth the pool's
    whole time-out; a server that refuses connections is given up on after
    ``outage_timeout``."""
    options: dict[str, Any] = {"timeout": 3.0, "outage_timeout": 0.5, "reconnect_timeout": 1.0}
    with OutageAwarePool(outage_postgres.url(DATABASE), min_size=1, max_size=1, **options) as busy:
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


def test_the_pool_tries_again_after_an_outage_longer_than_its_reconnect_timeout(
    outage_postgres: PostgresServer,
) -> None:
    """psycopg's pool gives up reconnecting after ``reconnect_timeout`` and
    tries again only for a request that waits; the pool that answered a known
    outage at once never waited, and answered 503 after the server's return
    (an agent page in the test above: 15 s and counting)."""
    options: dict[str, Any] = {"timeout": 3.0, "outage_timeout": 0.5, "reconnect_timeout": 1.0}
    with OutageAwarePool(outage_postgres.url(DATABASE), min_size=1, max_size=2, **options) as pool:
        pool.putconn(pool.getconn())
        outage_postgres.stop()
        try:
            pool.check()  # drops the connection the server closed
            refused_until = time.monotonic() + 4.0  # beyond the reconnect_timeout, twice
            while time.monotonic() < refused_until:
                with pytest.raises(PoolTimeout):
                    pool.getconn()
                time.sleep(0.1)
        finally:
            outage_postgres.start()
        back = wait_until(lambda: _borrows(pool), timeout=10)

    assert back is not None, pool.get_stats()
    print(f"\nthe pool lent a connection {back:.2f} s after the server's return")


# The TCP options of a connection the service opens, read from its socket.
SOCKET_OPTIONS = """
import django, json, socket
django.setup()
from django.db import connection
connection.ensure_connection()
raw = socket.socket(fileno=connection.connection.fileno())
try:
    print(json.dumps({name: raw.getsockopt(level, option) for name, level, option in (
        ("keepalive", socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        ("idle", socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        ("interval", socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        ("count", socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        ("user_timeout_ms", socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
    )}))
finally:
    raw.detach()
"""


@pytest.mark.parametrize("pooled", [False, True], ids=["worker", "web"])
def test_a_connection_finds_a_silent_server_dead_in_seconds_not_minutes(
    outage_env: dict[str, str], pooled: bool
) -> None:
    """A host that goes silent sends no reset: without keepalives and a TCP
    user timeout a query to it waits out the OS's 15 minutes of retransmits
    (config/settings.py, "database"). Dropping packets needs root over the
    machine's network, which the suite does not take: this checks that libpq
    set the options on the socket, for the web's pool and for a worker."""
    env = {**outage_env, "DATABASE_POOL": "true" if pooled else "false"}

    printed = run(env, "-c", SOCKET_OPTIONS)

    assert json.loads(printed.strip().splitlines()[-1]) == {
        "keepalive": 1, "idle": 10, "interval": 5, "count": 3, "user_timeout_ms": 10_000,
    }  # fmt: skip


def _borrows(pool: OutageAwarePool) -> bool:
    try:
        pool.putconn(pool.getconn())
    except PoolTimeout:
        return False
    return True
