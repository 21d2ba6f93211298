"""Which database errors are an outage (config/database_down.py): only a
failure to reach the server is answered 503; an error the server answered
keeps its own answer (a serialization failure is retried by the code that
met it, a constraint is the caller's fault)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from django.db import DataError, IntegrityError, InterfaceError, OperationalError
from psycopg import errors as pg
from psycopg_pool import PoolTimeout

from config.database_down import is_connection_failure


def wrapped(django_error: type[Exception], cause: BaseException) -> Exception:
    """As Django's DatabaseErrorWrapper raises it: the driver's error as cause."""
    error = django_error(*cause.args)
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    "error",
    [
        wrapped(OperationalError, psycopg.OperationalError("connection refused")),
        wrapped(OperationalError, PoolTimeout("couldn't get a connection after 1.50 sec")),
        wrapped(OperationalError, pg.AdminShutdown("terminating connection")),
        wrapped(OperationalError, pg.CannotConnectNow("the database system is starting up")),
        wrapped(OperationalError, pg.ConnectionFailure("connection failure")),
        wrapped(InterfaceError, psycopg.InterfaceError("the connection is closed")),
    ],
    ids=["refused", "pool", "shutdown", "starting", "class 08", "closed"],
)
def test_a_server_out_of_reach_is_an_outage(error: Exception) -> None:
    assert is_connection_failure(error)


@pytest.mark.parametrize(
    "error",
    [
        wrapped(OperationalError, pg.SerializationFailure("could not serialize access")),
        wrapped(OperationalError, pg.DeadlockDetected("deadlock detected")),
        wrapped(OperationalError, pg.QueryCanceled("canceling statement due to statement timeout")),
        wrapped(IntegrityError, pg.UniqueViolation("duplicate key")),
        wrapped(DataError, pg.NumericValueOutOfRange("out of range")),
        wrapped(OperationalError, sqlite3.OperationalError("database is locked")),
        RuntimeError("no database at all"),
        None,
    ],
    ids=["serialization", "deadlock", "cancelled", "unique", "data", "sqlite", "other", "none"],
)
def test_an_error_the_server_answered_is_not(error: Exception | None) -> None:
    assert not is_connection_failure(error)
