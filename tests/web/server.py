"""The real web process for tests: gunicorn with config/gunicorn.py, as the Procfile starts it.

It serves the test database (``test_database_url()``) and this run's
``VAR_DIR``, so it sees what tests commit (``django_db(transaction=True)``).
Its stdout (the access log) and stderr (gunicorn's and Django's logs) go to
files the tests read.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests
from django.conf import settings

from tests.worker import ROOT, test_database_url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class WebServer:
    def __init__(self, workers: int = 1, root: Path = ROOT, **env: str) -> None:
        """``workers``: gunicorn's worker processes. Production runs one per
        core (config/gunicorn.py); a test server has one unless its test is
        about several (each is a Django of its own to start: a second of
        processor time on a suite bound by its two cores). ``root``: the
        checkout it serves (another release's, in tests/test_upgrade.py)."""
        self.env = {"WEB_CONCURRENCY": str(workers), **env}
        self.root = root
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        name = f"web-{uuid.uuid4().hex[:8]}"
        self.stdout_path = Path(settings.VAR_DIR) / f"{name}.out"
        self.stderr_path = Path(settings.VAR_DIR) / f"{name}.err"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> WebServer:
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "VAR_DIR": str(settings.VAR_DIR),
            "LOG_LEVEL": "INFO",
            # The URLs the service builds (an agent's file) lead back to it.
            "PUBLIC_URL": self.base_url,
            **self.env,
        }
        command = [
            sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py",
            "config.asgi:application", "--bind", f"127.0.0.1:{self.port}",
        ]  # fmt: skip
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(command, cwd=self.root, env=env, stdout=out, stderr=err)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                requests.get(f"{self.base_url}/agent/login/", timeout=5)
                return self
            # Still booting: refused, or accepted and not answered yet (a loaded machine).
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the web server did not start:\n{self.stderr()}")

    @property
    def url(self) -> str:
        """As Django's ``live_server`` names it."""
        return self.base_url

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def kill(self) -> None:
        """End the workers and then the master at once, as a crash would:
        nothing they hold is given back."""
        assert self.process is not None
        for pid in self._workers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait(10)

    def _workers(self) -> list[int]:
        assert self.process is not None
        workers = []
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError, IndexError):
                # The parent's pid is the second field after the command's "(name)".
                parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                if entry.name.isdigit() and int(parent) == self.process.pid:
                    workers.append(int(entry.name))
        return workers

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
