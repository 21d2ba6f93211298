"""The rate limits' counters in tests: a Redis counter outlives the test
database, so a test that counts from zero starts its keys afresh. And what
a query budget adds by database (the rate limit's rows, an outbox row's link)."""

from __future__ import annotations

import redis
from django.db import connection

from agents import ratelimit


def forget_rate(key: str) -> None:
    """A Redis counter outlives the test database: start this key afresh."""
    if ratelimit.redis_url():
        store = redis.Redis.from_url(ratelimit.redis_url())
        for name in store.keys(f"{{{ratelimit.KEY_PREFIX}{key}}}:*"):
            store.delete(name)


def rate_limit_statements(admits: int = 1) -> int:
    """The statements ``admits`` rate-limit checks add to a request's count:
    none with Redis; with the hits as rows (the embedded default), each
    deletes the old hits, counts and inserts (on PostgreSQL after an
    advisory lock), in its own transaction, which no savepoint stands for."""
    if ratelimit.redis_url():
        return 0
    return admits * (4 if connection.vendor == "postgresql" else 3)


def link_statements() -> int:
    """An outbox row and its owner's link to it are one statement on
    PostgreSQL (``delivery.services._insert``), two elsewhere."""
    return 0 if connection.vendor == "postgresql" else 1
