"""The web process: gunicorn managing uvicorn workers (settings in config/gunicorn.py).

A uvicorn worker keeps each connection as a few objects on its event loop, so
idle and slow clients hold no thread (gunicorn's gthread worker read request
headers on one of its few threads, with no overall limit). uvicorn closes a
kept-alive connection that stays idle, but not one whose request headers never
complete: a fresh connection that sends nothing, or a header line every few
seconds, stays open for ever. ``HeaderTimeoutH11Protocol`` closes it.

It also hands each request an ASGI extension, ``WRITE_NOW``: a function that
writes bytes to the open response's body at once, from any code on the
worker's event loop, without a trip through the application's task, Django's
response iterator and the request limits. The live streams' hub sends its
heartbeats to thousands of idle streams so (agents/streams.py; docs/
performance.md, "Live streams at 10,000").
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import environ
import h11
from gunicorn.glogging import Logger
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn_worker import UvicornWorker

from config.log_redaction import RedactSecrets

env = environ.Env()

# How long a client has to send a request's headers: from the moment the
# connection opens, or from the first byte of a later request on a kept-alive
# connection (between requests, gunicorn's keepalive closes an idle one).
HEADER_TIMEOUT_SECONDS = env.float("HTTP_HEADER_TIMEOUT_SECONDS", default=10.0)

# The scope's extension (``scope["extensions"][WRITE_NOW]``): a ``WriterNow``.
WRITE_NOW = "switchboard.write_now"


class WriterNow:
    """Writes ``data`` to a request's response body at once, as the
    application's next ``http.response.body`` would (the same framing: a
    chunk, for a response without a length), and says whether it did. It
    does not when the response has not started or is complete, the client
    has gone, or the client reads too slowly for what is already written
    (the application's own next write waits then too).

    Each of the application's writes reaches the transport whole and in one
    step on the event loop, so a write from here never lands inside one.
    Only for a response without a ``Content-Length`` (a stream): past a
    declared length h11 fails the connection. A chunk frames the same bytes
    the same way each time, so the last one h11 framed is reused for the
    same data: h11's ``send`` (some 16 µs) is most of a heartbeat's cost
    once it no longer goes through the application. One small object a
    request (slots, not a closure: 10,000 streams hold one each)."""

    __slots__ = ("cycle", "last")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self.cycle = cycle
        self.last: tuple[bytes, bytes] = (b"", b"")  # (data, the chunk h11 made of it)

    def __call__(self, data: bytes) -> bool:
        cycle = self.cycle
        if (
            not cycle.response_started
            or cycle.response_complete
            or cycle.disconnected
            or cycle.flow.write_paused
            or cycle.transport.is_closing()
            or cycle.scope["method"] == "HEAD"  # a body of none (uvicorn's send writes b"")
        ):
            return False
        last = self.last
        if last[0] == data and data:
            cycle.transport.write(last[1])
            return True
        framed = cycle.conn.send(h11.Data(data=data))
        if framed == b"%x\r\n%s\r\n" % (len(data), data):  # a chunk, not a counted body
            self.last = (data, framed)
        cycle.transport.write(framed)
        return True


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request headers
    are not complete within ``HEADER_TIMEOUT_SECONDS``."""

    header_timeout: ClassVar[float] = HEADER_TIMEOUT_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_received()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.header_timer is None and self.conn.their_state is h11.IDLE:
            self._await_headers()  # the first bytes of the next request
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a new request: its headers are complete
            self._headers_received()
            if self.cycle is not None:  # not an upgrade
                extensions: dict[str, Any] = self.cycle.scope.setdefault("extensions", {})
                extensions[WRITE_NOW] = WriterNow(self.cycle)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Bytes of a pipelined next request that came while this one was
        # answered start its clock now (data_received saw the old cycle).
        if (
            self.header_timer is None
            and self.conn.their_state is h11.IDLE
            and self.conn.trailing_data[0]
            and not self.transport.is_closing()
        ):
            self._await_headers()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._headers_received()
        super().handle_websocket_upgrade(event)

    def _await_headers(self) -> None:
        self.header_timer = self.loop.call_later(self.header_timeout, self._headers_timed_out)

    def _headers_received(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_timed_out(self) -> None:
        self.header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class Worker(UvicornWorker):
    """gunicorn's worker for config.asgi:application."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {
        "loop": "asyncio",
        "http": HeaderTimeoutH11Protocol,
        # Django's ASGI handler speaks HTTP only; without this uvicorn logs
        # that lifespan is unsupported at every start.
        "lifespan": "off",
    }


# Requests an open page makes by itself (the agent pages' live answers and
# streams): a line each would bury what a person reads in the log.
ROUTINE_PATHS = ("/agent/live", "/agent/stream", "/api/agent/v1/stream", "/visitor/")


class QuietRoutine(logging.Filter):
    """Drops access-log lines of routine requests that succeeded; a routine
    request that failed (4xx, 5xx) is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True  # not uvicorn's access line (client, method, path, version, status)
        path, status = str(args[2]), args[4]
        routine = path.startswith(ROUTINE_PATHS)
        return not (routine and isinstance(status, int) and status < 400)


class GunicornLogger(Logger):
    """gunicorn's logger with path secrets redacted from its error and access
    logs. The uvicorn worker logs through these same handlers."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                    handler.addFilter(RedactSecrets())
        for handler in self.access_log.handlers:
            if not any(isinstance(f, QuietRoutine) for f in handler.filters):
                handler.addFilter(QuietRoutine())
