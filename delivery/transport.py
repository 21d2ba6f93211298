"""The one outbound HTTP client of the service (docs/delivery.md).

One pooled ``requests.Session`` per worker process, shared by its threads.
Its connections are made by ``GuardedConnection`` classes that resolve the
host once, check every address with ``delivery.ssrf`` and connect to a
checked address, keeping the URL's host for ``Host``, SNI and certificate
checks. Redirects are not followed, nothing is retried at this level
(retries are the policy's business), proxies and cookies are not used.

Every request has a hard deadline (its timeout), whatever the target does:
name resolution waits at most the time left, a connect gets the time left,
and a watchdog shuts every socket of the request at the deadline, which ends
a send, a TLS handshake or a read blocked on it at once. See ``_Attempt``.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.cookiejar import DefaultCookiePolicy
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection
from urllib3.util.timeout import Timeout

from delivery.ssrf import AddressRefused, check_address

if TYPE_CHECKING:
    from urllib3._base_connection import BaseHTTPConnection

logger = logging.getLogger(__name__)

USER_AGENT = "Switchboard-Webhooks/1.0"
MAX_REPLY_BYTES = 1024 * 1024  # read at most this much of a reply
POOL_MAXSIZE = 64  # connections kept per target host (≥ worker threads)
# Name lookups run here so that a request waits for one at most until its
# deadline. As many threads as connections per host: a lookup that hangs past
# its request's deadline holds a thread until the resolver gives up, and the
# lookups of live requests (one per delivery thread) must still find one.
RESOLVER_THREADS = POOL_MAXSIZE


# --- the deadline of one request --------------------------------------------


class _Attempt:
    """The sockets one request uses, so that its deadline can end them all.

    A socket is registered as a private ``os.dup`` of its descriptor.
    ``shutdown`` acts on the connection, not on the descriptor, so shutting
    the dup down ends a recv, send or TLS handshake blocked on the real
    socket at once — also after http.client has handed the socket of a
    ``Connection: close`` reply to the response, where the connection object
    no longer holds it. A descriptor of our own cannot have been closed and
    reused for something else meanwhile.

    The lock orders the watchdog against the request giving its sockets up
    (``release`` when a connection goes back to the pool, ``end`` when the
    request is over): after that the watchdog touches nothing, so a
    connection that went back to the pool healthy is never shut later.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # time.monotonic()
        self.expired = False  # the deadline struck while the request ran
        self._lock = threading.Lock()
        self._dups: dict[int, list[socket.socket]] = {}  # by the real descriptor
        self._over = False

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def register(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        try:
            dup = socket.socket(fileno=os.dup(fd))
        except OSError:
            return  # already closed: nothing to end
        with self._lock:
            if self._over:
                dup.close()
                return
            self._dups.setdefault(fd, []).append(dup)
            if self.expired:  # connected just after the deadline
                _shutdown(dup)

    def release(self, sock: socket.socket) -> bool:
        """Take ``sock`` out of the deadline's reach, as it goes back to the
        pool; False when the deadline has struck it (it must not be pooled)."""
        with self._lock:
            if self.expired:
                return False
            dups = self._dups.pop(sock.fileno(), [])
        for dup in dups:
            dup.close()
        return True

    def expire(self) -> None:
        """The watchdog: shut every socket of the request down."""
        with self._lock:
            if self._over:
                return
            self.expired = True
            for dups in self._dups.values():
                for dup in dups:
                    _shutdown(dup)

    def end(self) -> None:
        with self._lock:
            self._over = True
            dups = [dup for group in self._dups.values() for dup in group]
            self._dups.clear()
        for dup in dups:
            dup.close()  # our descriptor only; the connection lives on


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_local = threading.local()


def _current_attempt() -> _Attempt | None:
    attempt: _Attempt | None = getattr(_local, "attempt", None)
    return attempt


@contextlib.contextmanager
def _watched(attempt: _Attempt) -> Iterator[None]:
    """Run the block as ``attempt``: its sockets are shut at its deadline."""
    watchdog = threading.Timer(max(0.0, attempt.remaining()), attempt.expire)
    watchdog.daemon = True
    _local.attempt = attempt
    watchdog.start()
    try:
        yield
    finally:
        _local.attempt = None
        watchdog.cancel()
        attempt.end()


# --- guarded connections ----------------------------------------------------


_resolver_lock = threading.Lock()
_resolvers: dict[int, ThreadPoolExecutor] = {}


def _resolver() -> ThreadPoolExecutor:
    """This process's lookup threads (made after a fork, never shared across one)."""
    pid = os.getpid()
    with _resolver_lock:
        if pid not in _resolvers:
            _resolvers.clear()
            _resolvers[pid] = ThreadPoolExecutor(RESOLVER_THREADS, "delivery-resolver")
        return _resolvers[pid]


def _resolve(conn: HTTPConnection, attempt: _Attempt | None) -> list[Any]:
    """``getaddrinfo`` for the connection's host, waiting at most until the deadline.

    A lookup can block far longer than any timeout (a resolver that does not
    answer); it runs on a shared thread, and the request stops waiting for it
    at its deadline.
    """
    lookup = (
        conn._dns_host,
        conn.port,
        urllib3_connection.allowed_gai_family(),
        socket.SOCK_STREAM,
    )
    if attempt is None:
        return socket.getaddrinfo(*lookup)
    future = _resolver().submit(socket.getaddrinfo, *lookup)
    try:
        return future.result(timeout=max(0.0, attempt.remaining()))
    except TimeoutError as error:
        future.cancel()
        raise ConnectTimeoutError(conn, f"Resolving {conn.host} timed out.") from error


def _connect_checked(conn: HTTPConnection) -> socket.socket:
    """Resolve once, check every address, connect to a checked one."""
    attempt = _current_attempt()
    try:
        infos = _resolve(conn, attempt)
    except socket.gaierror as error:
        raise NameResolutionError(conn.host, conn, error) from error
    for info in infos:
        check_address(str(info[4][0]))
    last: Exception = NewConnectionError(conn, "no address to connect to")
    for info in infos:
        address = str(info[4][0])
        timeout = conn.timeout
        if attempt is not None:
            timeout = attempt.remaining()  # a connect gets the time left, no more
            if timeout <= 0:
                last = ConnectTimeoutError(conn, f"Connection to {conn.host} timed out.")
                break
        try:
            sock = urllib3_connection.create_connection(
                (address, conn.port),
                timeout,
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
        if attempt is not None:
            attempt.register(sock)  # before the TLS handshake, which the deadline may cut
        return sock
    raise last


class _GuardMixin:
    sock: socket.socket | None

    def _new_conn(self) -> socket.socket:
        return _connect_checked(self)  # type: ignore[arg-type]

    def request(self, *args: Any, **kwargs: Any) -> None:
        # A kept-alive connection is checked again: the guard may have been
        # switched on since it was made. And it is this request's now, for
        # the deadline to reach.
        if self.sock is not None:
            try:
                peer = self.sock.getpeername()[0]
            except OSError:
                pass  # closed under us; urllib3 reconnects through _new_conn
            else:
                check_address(str(peer))
                attempt = _current_attempt()
                if attempt is not None:
                    attempt.register(self.sock)
        super().request(*args, **kwargs)  # type: ignore[misc]


class GuardedHTTPConnection(_GuardMixin, HTTPConnection):
    pass


class GuardedHTTPSConnection(_GuardMixin, HTTPSConnection):
    pass


class _PoolMixin:
    def _put_conn(self, conn: BaseHTTPConnection | None) -> None:
        # urllib3 pools a connection as soon as its reply is read, while the
        # request (and its watchdog) still runs.
        attempt = _current_attempt()
        sock = getattr(conn, "sock", None)
        if conn is not None and sock is not None and attempt and not attempt.release(sock):
            conn.close()  # shut by the deadline: not reusable
        super()._put_conn(conn)  # type: ignore[misc]


class GuardedHTTPConnectionPool(_PoolMixin, HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class GuardedHTTPSConnectionPool(_PoolMixin, HTTPSConnectionPool):
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


def _bytes_once(body: bytes) -> Iterator[bytes]:
    # A generator makes requests use chunked transfer encoding.
    yield body


def _read_reply(response: requests.Response) -> bytes:
    received = bytearray()
    for chunk in response.iter_content(64 * 1024):
        received += chunk
        if len(received) >= MAX_REPLY_BYTES:
            break
    return bytes(received[:MAX_REPLY_BYTES])


def post(
    *, url: str, body: bytes, headers: Mapping[str, str], chunked: bool, timeout: float
) -> Exchange:
    """POST ``body`` to ``url`` once; never raises for network trouble.

    Connect, send, status line, headers and body together end by ``timeout``
    (the watchdog's deadline; a few milliseconds more for the shut sockets to
    unwind); a request cut there is a timeout, with its real duration.
    """
    started = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    host = urlsplit(url).hostname or url
    attempt = _Attempt(deadline=started + timeout)
    response: requests.Response | None = None
    try:
        with _watched(attempt):
            response = session().post(
                url,
                data=_bytes_once(body) if chunked else body,
                headers={"User-Agent": USER_AGENT, **headers},
                timeout=Timeout(connect=timeout, read=timeout),  # type: ignore[arg-type]
                allow_redirects=False,
                stream=True,
            )
            reply = _read_reply(response)
    except AddressRefused as refused:
        return Exchange(None, elapsed_ms(), error=str(refused), retryable=False)
    except Exception as error:
        if attempt.expired or _is_timeout(error):
            return Exchange(None, elapsed_ms(), error=f"timed out after {timeout:g} s")
        return _failure(error, elapsed_ms(), host=host)
    finally:
        if response is not None:
            if attempt.expired:
                response.raw.close()  # its socket was shut: never back to the pool
            response.close()
    if attempt.expired:
        # A reply read "to the end" because the deadline shut its socket
        # (a body without a length ends at EOF) is not a reply.
        return Exchange(None, elapsed_ms(), error=f"timed out after {timeout:g} s")
    return Exchange(
        status_code=response.status_code,
        duration_ms=elapsed_ms(),
        headers={k.lower(): v for k, v in response.headers.items()},
        body=reply,
    )


def _is_timeout(error: Exception) -> bool:
    return isinstance(error, requests.exceptions.Timeout) or any(
        isinstance(cause, TimeoutError) for cause in _chain(error)
    )


def _failure(error: Exception, duration_ms: int, *, host: str) -> Exchange:
    if isinstance(error, requests.exceptions.InvalidURL):
        return Exchange(None, duration_ms, error="invalid URL", retryable=False)
    if isinstance(error, requests.exceptions.RequestException):
        return Exchange(None, duration_ms, error=describe_connection_error(error, host=host))
    # A bug or an exotic failure: a failed try, not a lost one. The type only:
    # an exception's text may quote the URL, and its path may hold a token.
    logger.error(
        "delivery.request_error type=%s",
        type(error).__name__,
        extra={"event": "delivery.request_error"},
    )
    return Exchange(None, duration_ms, error=f"request failed: {type(error).__name__}")
