"""Slots held by open streams, as expiring leases (docs/live.md, "Limits").

``acquire(holder=…, limits={key: limit}, seconds=…)`` takes one slot under
every key for ``holder`` when each key has one free, else none; a slot
counts until its lease expires. An open stream's hub renews its leases
(``renew``) at each access check and the stream gives them back when it
ends (``release``): a process that died leaves slots that free themselves
once their leases expire, not counts that stay forever.

Where the slots live, as for ``agents.ratelimit``: with a Redis cache, a
sorted set per key (score: the expiry, on the Redis server's clock) changed
by one Lua script; else ``StreamLease`` rows, counted under a lock on the
key (PostgreSQL's advisory lock; SQLite's immediate transaction). While
Redis does not answer, the rows stand in for it (docs/operations.md, "When
Redis is down").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from functools import cache

import redis
from django.db import connection, transaction

from agents.models import StreamLease
from agents.ratelimit import redis_url

logger = logging.getLogger(__name__)

KEY_PREFIX = "switchboard:lease:"

# KEYS: the sorted sets; ARGV[1]: the holder, ARGV[2]: the lease in ms,
# ARGV[2 + i]: the limit of KEYS[i]. All slots or none.
_ACQUIRE = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lease = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ms)
  if redis.call('ZCARD', key) >= tonumber(ARGV[i + 2]) then
    return 0
  end
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, ms + lease, ARGV[1])
  redis.call('PEXPIRE', key, lease)
end
return 1
"""

# ARGV[1]: the lease in ms; ARGV[2]: "holder key" pairs, one a line. Only a
# slot still held is renewed (XX): a lapsed one is not taken back past the
# limit. The pairs go as one argument, not as KEYS and ARGV: a web process
# renews every slot of its streams at once, and redis-py took 87 ms of the
# process's processor time to pack 10,100 pairs as 20,200 arguments (5,050
# streams of a worker at 10,100, two slots each), every LIVE_ACCESS_SECONDS;
# the joined lines take 2 ms. On one Redis server, as this service uses it,
# a script may touch keys it was not given. A holder has no space.
_RENEW = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lease = tonumber(ARGV[1])
local extended = {}
for holder, key in string.gmatch(ARGV[2], '([^ \\n]+) ([^\\n]+)') do
  redis.call('ZADD', key, 'XX', ms + lease, holder)
  if not extended[key] then
    redis.call('PEXPIRE', key, lease)
    extended[key] = true
  end
end
return 1
"""


@cache
def _redis(url: str) -> redis.Redis:
    # A Redis that does not answer costs a second, not a hang.
    return redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0)


def _redis_down(doing: str, error: redis.RedisError) -> None:
    logger.warning("leases.redis_down: %s in the database (%r)", doing, error)


def acquire(*, holder: str, limits: dict[str, int], seconds: float) -> bool:
    """One slot under each key of ``limits`` for ``holder``, or none (``False``).

    While Redis does not answer, slots are taken in the database, as on the
    embedded default: the limits still hold across processes, less the
    slots taken in Redis before it went away."""
    if any(limit <= 0 for limit in limits.values()):
        return False
    keys = sorted(limits)  # one lock order for every caller
    url = redis_url()
    if url:
        script = _redis(url).register_script(_ACQUIRE)
        args: list[str | int] = [holder, int(seconds * 1000), *(limits[key] for key in keys)]
        try:
            return bool(script(keys=[KEY_PREFIX + key for key in keys], args=args))
        except redis.RedisError as error:
            _redis_down("slots taken", error)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for key in keys:
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [KEY_PREFIX + key])
        now = time.time()  # read under the locks
        StreamLease.objects.filter(expires__lte=now).delete()
        for key in keys:
            if StreamLease.objects.filter(key=key).count() >= limits[key]:
                return False
        StreamLease.objects.bulk_create(
            StreamLease(key=key, holder=holder, expires=now + seconds) for key in keys
        )
        return True


def renew(*, held: Iterable[tuple[str, str]], seconds: float) -> None:
    """Extend the leases of (key, holder) pairs still held: one call for all.

    The pairs are read once, into strings (which Python's garbage collector
    does not track: 10,000 streams' pairs kept as tuples made its full
    collections come sooner in a web process holding the streams)."""
    lines = [f"{holder} {KEY_PREFIX}{key}" for key, holder in held]
    if not lines:
        return
    url = redis_url()
    if url:
        script = _redis(url).register_script(_RENEW)
        try:
            script(args=[int(seconds * 1000), "\n".join(lines)])
            return
        except redis.RedisError as error:  # those taken in the database, then
            _redis_down("slots renewed", error)
    holders = {line.partition(" ")[0] for line in lines}
    now = time.time()  # as in Redis, a lapsed slot is not taken back
    StreamLease.objects.filter(holder__any_of=holders, expires__gt=now).update(
        expires=now + seconds
    )


def release(*, holder: str, keys: Iterable[str]) -> None:
    """Give back ``holder``'s slots."""
    url = redis_url()
    if url:
        try:
            with _redis(url).pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.zrem(KEY_PREFIX + key, holder)
                pipe.execute()
            return
        except redis.RedisError as error:  # one taken in Redis lapses there
            _redis_down("slots given back", error)
    StreamLease.objects.filter(holder=holder).delete()
