"""A live stream read as a browser's EventSource reads it, for tests over
the real web server (the agents' streams and the visitor's)."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
from dataclasses import dataclass
from typing import Any

import requests

from tests.worker import wait_for


@dataclass
class Event:
    id: int
    kind: str
    data: dict[str, Any]


class Reader:
    """Reads one stream in a thread, as a browser's EventSource would."""

    def __init__(self, url: str, **headers: str) -> None:
        self.response = requests.get(url, headers=headers, stream=True, timeout=(5, 30))
        self.events: queue.Queue[Event] = queue.Queue()
        self.comments: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        if self.response.status_code == 200:
            # It hears what happens from here on (and what it missed before).
            wait_for(lambda: "connected" in self.comments, timeout=10)

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            for raw in self.response.iter_lines(decode_unicode=True):
                line = raw or ""
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                elif not line:
                    if "data" in fields:
                        self.events.put(
                            Event(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                        )
                    fields = {}
                else:
                    name, _, value = line.partition(": ")
                    fields[name] = value
        except (requests.RequestException, AttributeError, ValueError):
            pass  # closed by the test

    def next(self, timeout: float = 10) -> Event:
        return self.events.get(timeout=timeout)

    def until(self, kind: str, timeout: float = 10) -> Event:
        while True:
            event = self.next(timeout)
            if event.kind == kind:
                return event

    def quiet(self, seconds: float = 1.5) -> list[Event]:
        """Whatever arrives within ``seconds`` (nothing, usually)."""
        try:
            return [self.next(seconds)]
        except queue.Empty:
            return []

    def ended(self, timeout: float = 10) -> bool:
        """Whether the service closed the stream within ``timeout``."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def drain(self) -> list[Event]:
        """Every event read and not yet taken."""
        heard = []
        while not self.events.empty():
            heard.append(self.events.get_nowait())
        return heard

    def close(self) -> None:
        """Hang up at once, as a browser closing its EventSource does. A plain
        ``close()`` waits for the reading thread's pending read, which ends
        only when the service next writes (its heartbeat): the service would
        hold the stream, and its slot, until then. Shutting the socket down
        sends the hang-up now and wakes the reader."""
        with contextlib.suppress(AttributeError, OSError):
            # urllib3's response -> http.client's -> its buffered socket file.
            self.response.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]
        self.response.close()
