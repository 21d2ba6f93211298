"""Request rates over a sliding window, exact under concurrency.

``admit(key=…, limit=…, window=…)`` says whether one more request counted
under ``key`` fits: at most ``limit`` requests are admitted in *any* span of
``window`` seconds (a sliding window, so no burst of twice the limit across
the edge of a fixed window), however many processes ask at the same moment.

The count lives where every web process sees it and is changed atomically:

- with a Redis cache, one Lua script per request on the Redis server (its
  clock, so web hosts with skewed clocks agree): drop the hits older than
  the window from a sorted set, count, add this one if it fits;
- else in the database: a row per admitted request, counted and added in
  one transaction under a lock on the key (SQLite's immediate transactions
  take the write lock up front; PostgreSQL takes an advisory lock).

While that Redis does not answer, each process counts on its own
(``admit_in_process``): a request that needs only PostgreSQL is still served
and still limited, by the limit per process rather than across them
(docs/operations.md, "When Redis is down").

docs/decisions.md says why and what it costs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from functools import cache

import redis
from django.conf import settings
from django.db import connection, transaction

from agents.models import RateLimitHit

logger = logging.getLogger(__name__)

KEY_PREFIX = "switchboard:rate:"

# KEYS[1]: the sorted set of admitted hits (score: microseconds), KEYS[2]: a
# counter that makes every member unique. ARGV: window in µs, limit.
_SLIDING_WINDOW = """
local now = redis.call('TIME')
local micros = tonumber(now[1]) * 1000000 + tonumber(now[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', micros - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
local ttl = math.ceil(window / 1000) + 1000
redis.call('ZADD', KEYS[1], micros, redis.call('INCR', KEYS[2]))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
"""


def redis_url() -> str:
    """The Redis database of the cache, or ``""`` when the cache is not Redis."""
    cache_settings = settings.CACHES["default"]
    if cache_settings["BACKEND"].endswith("RedisCache"):
        return str(cache_settings["LOCATION"])
    return ""


def admit(*, key: str, limit: int, window: float = 1.0) -> bool:
    """Count one request under ``key`` if it fits; ``False`` when it does not."""
    if limit <= 0:
        return False
    if redis_url():
        return admit_in_redis(key=key, limit=limit, window=window)
    return admit_in_database(key=key, limit=limit, window=window)


@cache
def _script(url: str) -> redis.commands.core.Script:
    # One client (and connection pool) per process and URL; redis-py makes
    # new connections after a fork. A Redis that does not answer costs a
    # request a second at most, not a hang.
    client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0)
    return client.register_script(_SLIDING_WINDOW)


def admit_in_redis(*, key: str, limit: int, window: float) -> bool:
    global _redis_down
    name = f"{{{KEY_PREFIX}{key}}}"  # one hash slot for both keys on a cluster
    try:
        admitted = _script(redis_url())(
            keys=[f"{name}:hits", f"{name}:seq"], args=[int(window * 1_000_000), limit]
        )
    except redis.RedisError as error:
        if not _redis_down:  # once per outage, not once per request
            logger.warning("ratelimit.redis_down: counting in this process (%r)", error)
        _redis_down = True
        return admit_in_process(key=key, limit=limit, window=window)
    if _redis_down:
        logger.warning("ratelimit.redis_back: counting in Redis again")
        _redis_down = False
    return bool(admitted)


# While Redis is down: key -> its window and the monotonic times of the hits
# this process admitted within it.
_redis_down = False
_hits_in_process: dict[str, tuple[float, deque[float]]] = {}
_hits_lock = threading.Lock()
_forgotten_at = 0.0


def admit_in_process(*, key: str, limit: int, window: float) -> bool:
    """The sliding window in this process's memory, the stand-in while Redis
    is down."""
    global _forgotten_at
    now = time.monotonic()
    with _hits_lock:
        if now - _forgotten_at > 60:  # once a minute, the keys past their window
            _forgotten_at = now
            for idle, (past, times) in list(_hits_in_process.items()):
                if not times or times[-1] <= now - past:
                    del _hits_in_process[idle]
        _, hits = _hits_in_process.setdefault(key, (window, deque()))
        while hits and hits[0] <= now - window:
            hits.popleft()
        if len(hits) >= limit:
            return False
        hits.append(now)
        return True


def admit_in_database(*, key: str, limit: int, window: float) -> bool:
    # Its own transaction when called alone (the inbound edge's case); inside
    # a caller's, part of it: no savepoint, as nothing here is caught to go on.
    with transaction.atomic(savepoint=False):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [KEY_PREFIX + key])
        now = time.time()  # read under the lock: hits are stored in the order admitted
        hits = RateLimitHit.objects.filter(key=key)
        hits.filter(at__lte=now - window).delete()
        if hits.count() >= limit:
            return False
        RateLimitHit.objects.create(key=key, at=now)
        return True


def forget_old_hits(*, older_than: float = 3600.0) -> int:
    """Delete database hits of keys no longer asked about; returns how many."""
    deleted, _ = RateLimitHit.objects.filter(at__lt=time.time() - older_than).delete()
    return deleted
