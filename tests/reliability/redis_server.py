"""A redis-server of the test's own, to stop and start again mid-test.

The suite's Redis (``REDIS_URL``) is shared with the rest of the run and is
never stopped. A fault test starts its own on a port of 6391-6395 (the first
free one, so parallel test processes each get theirs), with its data in the
test's folder and the append-only file on, as production runs it
(docs/operations.md, "When Redis is down"): a restart keeps what was
queued, and the messages workers hold unacknowledged.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

PORTS = range(6391, 6396)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class RedisServer:
    def __init__(self, folder: Path) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("a fault test needs redis-server on PATH")
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = next((port for port in PORTS if _free(port)), 0)
        if not self.port:
            raise RuntimeError(f"no free port in {PORTS} for a test's redis-server")
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 10) -> RedisServer:
        """Start, or start again on the same port with the same data. A first
        start whose port another process took meanwhile takes the next."""
        first, taken = self.process is None, set()
        while not self._started(timeout):
            taken.add(self.port)
            self.port = next((p for p in PORTS if p not in taken and _free(p)), 0)
            if not first or not self.port:
                raise RuntimeError(f"redis-server did not start:\n{self.log()}")
        return self

    def _started(self, timeout: float) -> bool:
        command = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.folder), "--save", "", "--appendonly", "yes",
            "--appendfsync", "always", "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        with (self.folder / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # the port was taken, say
                return False
            with contextlib.suppress(redis.RedisError), redis.Redis(port=self.port) as client:
                if client.ping():
                    return True
            time.sleep(0.05)
        self.stop()
        return False

    def stop(self) -> None:
        """SIGTERM: Redis closes every connection and exits, its data on disk."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log(self) -> str:
        return (self.folder / "redis.log").read_text(errors="replace")
