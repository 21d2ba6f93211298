"""A receiver that answers slowly, a byte now and then, on raw sockets.

It records what a peer observes: every connection, when it was opened, the
``webhook-id`` of each request on it, and when the sender closed it. The
HTTP server of ``target.py`` cannot drip a reply, nor hold one back halfway
through the status line; this one can, in each of the ways ``DRIPS`` names.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
X_DRIP = b"X-Drip: a\r\n"


def _bytewise(data: Iterator[int]) -> Iterator[bytes]:
    return (bytes([b]) for b in data)


def _drip(mode: str) -> tuple[bytes, Iterator[bytes]]:
    """What to send at once, then what to send one piece per interval."""
    if mode == "body_close":  # the review's finding: the socket goes to the response
        head = OK_HEAD + b"Content-Length: 100000\r\nConnection: close\r\n\r\n"
        return head, itertools.repeat(b" ")
    if mode in ("body", "reused"):  # keep-alive
        return OK_HEAD + b"Content-Length: 100000\r\n\r\n", itertools.repeat(b" ")
    if mode == "chunked":
        return OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", itertools.repeat(b"1\r\n \r\n")
    if mode == "status_line":
        return b"", _bytewise(itertools.chain(b"HTTP/1.1 200 OK\r\n", itertools.cycle(X_DRIP)))
    if mode == "headers":
        return b"HTTP/1.1 200 OK\r\n", _bytewise(itertools.cycle(X_DRIP))
    if mode == "silent":  # reads the request, never answers
        return b"", iter(())
    raise ValueError(mode)


DRIPS = ["body_close", "body", "chunked", "status_line", "headers", "silent"]


@dataclass
class Connection:
    opened_at: float  # time.monotonic()
    webhook_ids: list[str] = field(default_factory=list)  # one per request read
    closed_at: float | None = None  # when the sender's close was seen

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


class Dripper:
    """A listening socket whose every reply drips (see ``DRIPS``).

    Modes besides ``DRIPS``: ``reused`` answers the first request of a
    connection at once (so it is pooled) and drips the next one on it;
    ``unread`` never reads, so a large request cannot be sent; ``slow`` is
    no dripper: it answers 200 after ``interval`` seconds and closes.
    """

    def __init__(
        self,
        mode: str = "body_close",
        *,
        interval: float = 0.25,
        limit: float = 60.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if mode not in (*DRIPS, "reused", "unread", "slow"):
            raise ValueError(mode)
        self.mode, self.interval, self.limit = mode, interval, limit
        self.ssl_context = ssl_context
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.listener.settimeout(0.1)
        self.port: int = self.listener.getsockname()[1]
        self.connections: list[Connection] = []
        self.most_open = 0  # the most connections open at once
        self._sockets: dict[int, socket.socket] = {}  # by index in connections
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def start(self) -> Dripper:
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            for sock in self._sockets.values():
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(5)
        self.listener.close()

    def __enter__(self) -> Dripper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what was seen ------------------------------------------------------

    def open_now(self) -> list[Connection]:
        with self._lock:
            self._notice_closes()
            return [c for c in self.connections if c.is_open]

    def arrivals(self) -> list[str]:
        """The webhook-id of every request, in the order the requests came."""
        with self._lock:
            return [i for c in self.connections for i in c.webhook_ids]

    def first_arrivals(self) -> list[str]:
        """Each webhook-id once, in the order of its first request."""
        return list(dict.fromkeys(self.arrivals()))

    def overlapping(self) -> list[tuple[Connection, Connection]]:
        """Pairs of connections that carried one webhook-id and were open at once."""
        with self._lock:
            self._notice_closes()
            pairs = []
            for first, second in itertools.combinations(self.connections, 2):
                if not set(first.webhook_ids) & set(second.webhook_ids):
                    continue
                if first.closed_at is None or first.closed_at > second.opened_at:
                    pairs.append((first, second))
            return pairs

    # --- serving --------------------------------------------------------------

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.setblocking(True)
            with self._lock:
                # A sender that closed one connection before opening this one
                # has its close waiting in the kernel already: count it first,
                # however late the thread serving that connection runs.
                self._notice_closes()
                record = Connection(opened_at=time.monotonic())
                self._sockets[len(self.connections)] = sock
                self.connections.append(record)
                self.most_open = max(self.most_open, sum(c.is_open for c in self.connections))
            self._spawn(self._serve, record, sock)

    def _notice_closes(self) -> None:
        if self.ssl_context is not None:
            return  # TLS hides it; the serving thread records the close
        for index, sock in self._sockets.items():
            record = self.connections[index]
            if record.is_open and _peer_closed(sock):
                record.closed_at = time.monotonic()

    def _closed(self, record: Connection) -> None:
        with self._lock:
            if record.closed_at is None:
                record.closed_at = time.monotonic()

    def _serve(self, record: Connection, sock: socket.socket) -> None:
        try:
            if self.ssl_context is not None and self.mode not in ("silent", "unread"):
                sock = self.ssl_context.wrap_socket(sock, server_side=True)
                with self._lock:
                    self._sockets[self.connections.index(record)] = sock
            self._converse(record, sock)
        except (OSError, ValueError):
            pass
        finally:
            self._closed(record)
            with contextlib.suppress(OSError):
                sock.close()

    def _converse(self, record: Connection, sock: socket.socket) -> None:
        started = time.monotonic()
        if self.mode == "unread" or (self.mode == "silent" and self.ssl_context):
            # Not a byte read: a large request stays unsent; a TLS handshake unanswered.
            self._stop.wait(self.limit)
            return
        rest = self._read_request(record, sock, b"")
        if self.mode == "slow":
            self._stop.wait(self.interval)
            sock.sendall(OK_HEAD + b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
            return
        if self.mode == "reused":
            sock.sendall(OK_HEAD + b"Content-Length: 2\r\n\r\n{}")
            self._read_request(record, sock, rest)
        head, pieces = _drip(self.mode)
        if head:
            sock.sendall(head)
        while not self._stop.is_set() and time.monotonic() - started < self.limit:
            readable, _, _ = select.select([sock], [], [], self.interval)
            if readable:
                if not sock.recv(65536):
                    return  # the sender closed
                continue  # more of a request we are not answering
            piece = next(pieces, None)
            if piece is not None:
                sock.sendall(piece)

    def _read_request(self, record: Connection, sock: socket.socket, buffer: bytes) -> bytes:
        """Read one request; returns what came after it."""
        while b"\r\n\r\n" not in buffer:
            buffer += _recv(sock)
        head, _, rest = buffer.partition(b"\r\n\r\n")
        headers = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        with self._lock:
            record.webhook_ids.append(headers.get("webhook-id", ""))
        if headers.get("transfer-encoding") == "chunked":
            while b"0\r\n\r\n" not in rest:
                rest += _recv(sock)
            return rest.partition(b"0\r\n\r\n")[2]
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            rest += _recv(sock)
        return rest[length:]


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    if not data:
        raise ConnectionResetError("closed by the sender")
    return data


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the sender's close is waiting to be read (without reading it)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
