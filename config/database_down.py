"""When PostgreSQL cannot be reached: a 503 with ``Retry-After`` at once, never a hang or a 500.

Every request that needs the database and cannot get a connection — the
server is stopped, restarting, refusing connections (the web process's pool
gives up on it after ``DATABASE_OUTAGE_SECONDS``, config/postgresql/base.py),
or every connection stayed lent for ``DATABASE_POOL_TIMEOUT_SECONDS`` —
ends here, in one place: an API path (and the visitor's stream) gets the
error body ``{"error": {"code": "service_unavailable", ...}}``, a page a
plain 503 page, both with ``Retry-After``, and the log one warning line
naming the request (docs/operations.md, "When PostgreSQL is down").

Two doors lead here. ``DatabaseUnavailable.process_exception`` takes what
a view raises (DRF's views re-raise what their handler does not know);
``config.errors.handler500`` takes what a middleware raised before any view
ran (a page's session or user read). Only a failure to reach the database
counts: an error the database answered — a serialization failure the code
retries, a constraint, a statement cancelled — is no outage and stays what
it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

from config.api_errors import error_response
from config.errors import is_api_path

logger = logging.getLogger("config.database")

# Seconds a client is asked to wait: the pool reconnects within about two
# seconds of the database's return (settings.py, "database").
RETRY_AFTER_SECONDS = 5
MESSAGE = "the database is not reachable; retry shortly"
# SQLSTATEs of a server that is going away or not taking connections yet:
# admin_shutdown, crash_shutdown, cannot_connect_now. Class 08 is the
# connection exceptions; a failure with no SQLSTATE never reached a server.
_GOING_AWAY = frozenset({"57P01", "57P02", "57P03"})
# Paths that answer in the error body besides config.errors.API_PREFIXES.
_JSON_PATHS = ("/visitor/",)


def is_connection_failure(error: BaseException | None) -> bool:
    """Whether ``error`` is the database being out of reach (PostgreSQL only).

    SQLite's errors are no outage of a server (a locked file waits its own
    time-out), so the embedded default keeps its answers.
    """
    if not isinstance(error, OperationalError | InterfaceError):
        return False
    cause = error.__cause__
    if type(cause).__module__.split(".")[0] not in ("psycopg", "psycopg_pool"):
        return False
    sqlstate = getattr(cause, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _GOING_AWAY


def unavailable(request: HttpRequest, error: BaseException) -> HttpResponse:
    """The 503 for ``request``, logged in one line."""
    logger.warning(
        "database.unavailable method=%s path=%s error=%s",
        request.method,
        request.path,
        str(error).splitlines()[0] if str(error) else type(error).__name__,
    )
    if is_api_path(request.path) or request.path.startswith(_JSON_PATHS):
        response: HttpResponse = error_response(503, MESSAGE)
    else:
        response = HttpResponse(
            "Service unavailable: the database is not reachable. Retry shortly.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailable:
    """Middleware: a view's connection failure is answered ``unavailable``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, error: Exception) -> HttpResponse | None:
        return unavailable(request, error) if is_connection_failure(error) else None
