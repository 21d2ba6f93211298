"""A real Celery worker process for integration tests.

It runs ``celery -A config worker`` against the broker of this test run
(Redis with ``REDIS_URL``, else the filesystem transport under ``VAR_DIR``)
and the test database, so it sees what the tests commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import connection

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    host = f"{auth}@" if auth else ""
    host += f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    return f"postgres://{host}/{db['NAME']}"


class Worker:
    def __init__(
        self,
        *,
        queues: str = "default,delivery",
        concurrency: int = 8,
        env: dict[str, str] | None = None,
    ) -> None:
        self.queues = queues
        self.env = env or {}
        self.concurrency = concurrency
        self.name = f"test-{uuid.uuid4().hex[:8]}@%h"
        self.log_path = Path(settings.VAR_DIR) / f"worker-{uuid.uuid4().hex[:8]}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> Worker:
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "VAR_DIR": str(settings.VAR_DIR),
            **self.env,
        }
        command = [
            sys.executable, "-m", "celery", "-A", "config", "worker",
            "-Q", self.queues, "-P", "threads", "-c", str(self.concurrency),
            "-n", self.name, "-l", "INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        log = self.log_path.open("ab")  # a restarted worker adds to the log
        # ... so it is ready when this start's part of the log says so.
        started_at = log.tell()
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if b" ready." in self.log_path.read_bytes()[started_at:]:
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"celery worker did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the worker dies mid-task, acknowledging nothing."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(predicate: Callable[[], T], timeout: float = 20, interval: float = 0.1) -> T:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
