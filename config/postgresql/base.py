"""Django's PostgreSQL backend with a connection pool that fails fast when
the server is out of reach (docs/operations.md, "When PostgreSQL is down").

The web process borrows connections from psycopg's pool. A request that
finds none free waits for one, and two waits look alike to the pool: the
server is up and every connection is lent (a burst: worth waiting for, up to
``DATABASE_POOL_TIMEOUT_SECONDS``), or the server refuses every new
connection (an outage: no connection is coming, and a request that waited
would be committed after its client gave up). ``OutageAwarePool`` waits in
steps of ``outage_timeout`` seconds and gives up at the end of a step when
the pool's latest connection attempts all failed and none succeeded; the
request is then answered 503 (``config.database_down``).
"""

from __future__ import annotations

from time import monotonic
from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base
from psycopg import Connection
from psycopg_pool import ConnectionPool, PoolTimeout


class OutageAwarePool(ConnectionPool[Connection[Any]]):
    def __init__(self, *args: Any, outage_timeout: float = 0.5, **kwargs: Any) -> None:
        self._made = 0  # connections the server accepted (``_connect``), before any is made
        super().__init__(*args, **kwargs)
        self.outage_timeout = outage_timeout
        self.refused = False  # the server's last answer to a connection attempt
        self.refused_at = 0.0  # when a wait last found it so
        self._seen = (0, 0)  # connections made and attempts failed when last looked

    def getconn(self, timeout: float | None = None) -> Connection[Any]:
        if (
            self.refused
            and self._connects() == self._seen
            and monotonic() - self.refused_at < self.reconnect_timeout
        ):
            # A known outage and no attempt ended since: answer now. Waiting
            # a step would hold one of the process's few request threads
            # each, and a burst would queue behind them for seconds. Only
            # while the pool may still be trying, though: psycopg's pool
            # gives up reconnecting after ``reconnect_timeout`` and tries
            # again only for a request that waits, so one then waits a step,
            # or the process would answer 503 long after the server is back.
            raise PoolTimeout("the server refuses connections")
        deadline = monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            before = self._connects()
            step = max(0.0, min(self.outage_timeout, deadline - monotonic()))
            try:
                return super().getconn(timeout=step)
            except PoolTimeout:
                if self._out_of_reach(before) or monotonic() >= deadline:
                    raise

    def _out_of_reach(self, before: tuple[int, int]) -> bool:
        """Whether the server refuses connections: the attempts that ended
        during this wait all failed; when none ended, what was seen last (a
        request waiting out an outage gives up at its first step, whether
        or not the pool tried in it)."""
        made, failed = self._connects()
        for since in (before, self._seen):
            if made > since[0] or failed > since[1]:
                self.refused = made == since[0]
                break
        self._seen = (made, failed)
        if self.refused:
            self.refused_at = monotonic()
        return self.refused

    def _connect(self, timeout: float | None = None) -> Connection[Any]:
        connection = super()._connect(timeout)
        self._made += 1
        return connection

    def _connects(self) -> tuple[int, int]:
        """Connections the pool has made, and attempts that failed, so far.

        Counted as each attempt ends: psycopg_pool's own count of attempts
        grows as one starts, so an attempt still on its way at the end of a
        wait, or one that began before it and failed in it, looked like a
        success, and a request waited another step during an outage (2 s
        instead of 0.5: test_postgres_down's promise failed now and then).
        """
        return self._made, self.get_stats().get("connections_errors", 0)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> OutageAwarePool | None:
        """Django's pool (its options, configure and health check), of the class above."""
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None
        pools: dict[str, ConnectionPool[Any]] = self._connection_pools  # type: ignore[attr-defined]
        if self.alias not in pools:
            params = {**self.get_connection_params(), "autocommit": True}
            checks = self.settings_dict["CONN_HEALTH_CHECKS"]
            pool = OutageAwarePool(
                kwargs=params,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=ConnectionPool.check_connection if checks else None,
                **({} if options is True else options),
            )
            # As Django does: threads that raced here share the first pool made.
            pools.setdefault(self.alias, pool)
        made = pools[self.alias]
        assert isinstance(made, OutageAwarePool)
        return made
