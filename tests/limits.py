"""The rate limits' counters in tests: a Redis counter outlives the test
database, so a test that counts from zero starts its keys afresh."""

from __future__ import annotations

import redis

from agents import ratelimit


def forget_rate(key: str) -> None:
    """A Redis counter outlives the test database: start this key afresh."""
    if ratelimit.redis_url():
        store = redis.Redis.from_url(ratelimit.redis_url())
        for name in store.keys(f"{{{ratelimit.KEY_PREFIX}{key}}}:*"):
            store.delete(name)
