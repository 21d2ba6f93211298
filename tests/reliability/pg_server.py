"""A PostgreSQL server of a test's own, to stop and start under a running service.

The machine's PostgreSQL serves everyone's tests and is never stopped; a
fault test starts this one instead (``initdb`` into a temporary folder as
the ``postgres`` user, on a port of its own) and stops it as an outage
would. It runs whatever database the suite itself uses, so the fault tests
run on the embedded default run too.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

SYSTEM_USER = "postgres"


def _as_postgres(*command: str, timeout: float = 60) -> str:
    done = subprocess.run(
        ["runuser", "-u", SYSTEM_USER, "--", *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


class PostgresServer:
    """One PostgreSQL cluster, in a folder that goes with it, on the first of
    ``ports`` it could take (``start``)."""

    def __init__(self, ports: range, *, durable_commits: bool = False) -> None:
        """``durable_commits``: a commit waits for its WAL to be written
        (``synchronous_commit``), so that a stop with ``-m immediate`` (a
        crash) keeps every commit a client was told of. Off, the last
        fraction of a second's commits may be lost, which a test that counts
        what was stored across a restart would see."""
        self.ports = ports
        self.durable_commits = durable_commits
        self.port = ports[0]
        self.started_once = False
        self.root = Path(tempfile.mkdtemp(prefix="pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        shutil.chown(self.root, SYSTEM_USER, SYSTEM_USER)
        _as_postgres(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "--no-sync", "--no-instructions", "-E", "UTF8", "--locale", "C",
        )  # fmt: skip

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start on the port it had, or on its first start on the first free
        one: another test process may hold a port, or take it at the same time."""
        if self.started_once:
            self._start()
            return
        for port in self.ports:
            self.port = port
            try:
                self._start()
            except RuntimeError:
                continue
            self.started_once = True
            return
        raise RuntimeError(f"no port of {self.ports} was free:\n{self.log.read_text()}")

    def _start(self) -> None:
        # No durability asked of a test's throwaway cluster against the
        # machine's crash: fsync off. A server's crash loses no commit with
        # ``durable_commits`` (the WAL is written, if not flushed to disk).
        synchronous_commit = "on" if self.durable_commits else "off"
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            f"-c fsync=off -c synchronous_commit={synchronous_commit} -c full_page_writes=off"
        )
        _as_postgres(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start"
        )

    def stop(self) -> None:
        """As an operator's or a crash's stop: open sessions are cut, not waited for."""
        _as_postgres("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def running(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def execute(self, sql: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as connection:
            connection.execute(sql)

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            if (self.data / "postmaster.pid").exists():
                self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def wait_until(check: object, timeout: float, step: float = 0.1) -> float | None:
    """Seconds until ``check()`` is true, None when it was not within ``timeout``."""
    assert callable(check)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(step)
    return None
