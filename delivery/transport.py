"""The one outbound HTTP client of the service (design.md §5).

One pooled ``requests.Session`` per worker process, shared by its threads.
Its connections are made by ``GuardedConnection`` classes that resolve the
host once, check every address with ``delivery.ssrf`` and connect to a
checked address, keeping the URL's host for ``Host``, SNI and certificate
checks. Redirects are not followed, nothing is retried at this level
(retries are the policy's business), proxies and cookies are not used.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.cookiejar import DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection
from urllib3.util.timeout import Timeout

from delivery.ssrf import AddressRefused, check_address

logger = logging.getLogger(__name__)

USER_AGENT = "Switchboard-Webhooks/1.0"
MAX_REPLY_BYTES = 1024 * 1024  # read at most this much of a reply
POOL_MAXSIZE = 64  # connections kept per target host (≥ worker threads)


# --- guarded connections ----------------------------------------------------


def _connect_checked(conn: HTTPConnection) -> socket.socket:
    """Resolve once, check every address, connect to a checked one."""
    host = conn._dns_host
    try:
        infos = socket.getaddrinfo(
            host, conn.port, urllib3_connection.allowed_gai_family(), socket.SOCK_STREAM
        )
    except socket.gaierror as error:
        raise NameResolutionError(conn.host, conn, error) from error
    for info in infos:
        check_address(str(info[4][0]))
    last: Exception = NewConnectionError(conn, "no address to connect to")
    for info in infos:
        address = str(info[4][0])
        try:
            sock = urllib3_connection.create_connection(
                (address, conn.port),
                conn.timeout,
                source_address=conn.source_address,
                socket_options=conn.socket_options,
            )
        except TimeoutError as error:
            last = ConnectTimeoutError(conn, f"Connection to {conn.host} timed out.")
            last.__cause__ = error
            continue
        except OSError as error:
            last = NewConnectionError(conn, f"Failed to establish a new connection: {error}")
            last.__cause__ = error
            continue
        try:
            # The socket is connected to the address we checked; assert it.
            check_address(str(sock.getpeername()[0]))
        except AddressRefused:
            sock.close()
            raise
        return sock
    raise last


class _GuardMixin:
    sock: socket.socket | None

    def _new_conn(self) -> socket.socket:
        return _connect_checked(self)  # type: ignore[arg-type]

    def request(self, *args: Any, **kwargs: Any) -> None:
        # A kept-alive connection is checked again: the guard may have been
        # switched on since it was made.
        if self.sock is not None:
            try:
                peer = self.sock.getpeername()[0]
            except OSError:
                pass  # closed under us; urllib3 reconnects through _new_conn
            else:
                check_address(str(peer))
        super().request(*args, **kwargs)  # type: ignore[misc]


class GuardedHTTPConnection(_GuardMixin, HTTPConnection):
    pass


class GuardedHTTPSConnection(_GuardMixin, HTTPSConnection):
    pass


class GuardedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class GuardedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": GuardedHTTPConnectionPool,
            "https": GuardedHTTPSConnectionPool,
        }


_session_lock = threading.Lock()
_sessions: dict[int, requests.Session] = {}


def session() -> requests.Session:
    """This process's pooled session (made after a fork, never shared across one)."""
    pid = os.getpid()
    current = _sessions.get(pid)
    if current is None:
        with _session_lock:
            current = _sessions.get(pid)
            if current is None:
                current = requests.Session()
                current.trust_env = False  # no proxies or .netrc from the environment
                current.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
                adapter = GuardedAdapter(
                    pool_connections=100, pool_maxsize=POOL_MAXSIZE, max_retries=0
                )
                current.mount("http://", adapter)
                current.mount("https://", adapter)
                _sessions.clear()
                _sessions[pid] = current
    return current


# --- one request ------------------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """What happened on the wire for one request."""

    status_code: int | None  # None: no response (see ``error``)
    duration_ms: int
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""  # at most MAX_REPLY_BYTES
    error: str = ""  # why there is no response
    retryable: bool = True  # for a missing response: may another try help?


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and everything it wraps (requests → urllib3 → socket)."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)
        for nxt in (*current.args, reason, current.__cause__, current.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def describe_connection_error(error: BaseException, *, host: str) -> str:
    """A short text for a person; never the URL (its path may hold a token)."""
    for cause in _chain(error):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS error: certificate verify failed: {cause.verify_message}"
        if isinstance(cause, ssl.SSLError):
            return f"TLS error: {cause.reason or 'handshake failed'}"
    for cause in _chain(error):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, NameResolutionError | socket.gaierror):
            return f"could not resolve host {host}"
        if isinstance(cause, ConnectionResetError):
            return "connection reset by the target"
        if isinstance(cause, http.client.RemoteDisconnected):
            return "connection closed without a response"
    if isinstance(error, requests.exceptions.SSLError):
        return "TLS error"
    for cause in _chain(error):
        if isinstance(cause, OSError) and cause.strerror:
            return f"connection failed: {cause.strerror.lower()}"
    return f"connection failed: {type(error).__name__}"


def _unexpected(error: Exception, duration_ms: int) -> Exchange:
    # The type only: an exception's text may quote the URL, and its path may hold a token.
    logger.error(
        "delivery.request_error type=%s",
        type(error).__name__,
        extra={"event": "delivery.request_error"},
    )
    return Exchange(None, duration_ms, error=f"request failed: {type(error).__name__}")


def _shut(response: requests.Response) -> None:
    """End a reply that is still being read: shut its socket down."""
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _bytes_once(body: bytes) -> Iterator[bytes]:
    # A generator makes requests use chunked transfer encoding.
    yield body


def post(
    *, url: str, body: bytes, headers: Mapping[str, str], chunked: bool, timeout: float
) -> Exchange:
    """POST ``body`` to ``url`` once; never raises for network trouble."""
    started = time.monotonic()
    deadline = started + timeout

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    timed_out = f"timed out after {timeout:g} s"
    host = urlsplit(url).hostname or url
    try:
        response = session().post(
            url,
            data=_bytes_once(body) if chunked else body,
            headers={"User-Agent": USER_AGENT, **headers},
            timeout=Timeout(connect=timeout, read=timeout, total=timeout),  # type: ignore[arg-type]
            allow_redirects=False,
            stream=True,
        )
    except AddressRefused as refused:
        return Exchange(None, elapsed_ms(), error=str(refused), retryable=False)
    except requests.exceptions.Timeout:
        return Exchange(None, elapsed_ms(), error=timed_out)
    except requests.exceptions.InvalidURL:
        return Exchange(None, elapsed_ms(), error="invalid URL", retryable=False)
    except requests.exceptions.RequestException as error:
        return Exchange(None, elapsed_ms(), error=describe_connection_error(error, host=host))
    except Exception as error:  # a bug or an exotic failure: a failed try, not a lost one
        return _unexpected(error, elapsed_ms())
    # A read blocks up to the timeout for each chunk; a target that drips a
    # byte now and then would keep the try alive far past it. At the deadline
    # the socket is shut, which ends a blocked read at once.
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _shut, (response,))
    watchdog.daemon = True
    watchdog.start()
    try:
        received = bytearray()
        for chunk in response.iter_content(64 * 1024):
            received += chunk
            if len(received) >= MAX_REPLY_BYTES:
                del received[MAX_REPLY_BYTES:]
                break
            if time.monotonic() > deadline:
                return Exchange(None, elapsed_ms(), error=timed_out)
    except requests.exceptions.RequestException as error:
        if time.monotonic() >= deadline or any(isinstance(c, TimeoutError) for c in _chain(error)):
            return Exchange(None, elapsed_ms(), error=timed_out)
        return Exchange(None, elapsed_ms(), error=describe_connection_error(error, host=host))
    except Exception as error:
        if time.monotonic() >= deadline:
            return Exchange(None, elapsed_ms(), error=timed_out)
        return _unexpected(error, elapsed_ms())
    finally:
        watchdog.cancel()
        response.close()
    return Exchange(
        status_code=response.status_code,
        duration_ms=elapsed_ms(),
        headers={k.lower(): v for k, v in response.headers.items()},
        body=bytes(received),
    )
