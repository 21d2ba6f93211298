"""The service as production starts it, for the benchmarks: the Procfile's
processes (its ``web``, ``worker`` and ``delivery`` lines, run as written by
bash with the virtualenv's scripts first on the PATH), on a free port, with
their logs in a directory of the caller's, and what they cost (CPU, memory).

``beat`` is left out: the periodic sweep re-enqueues lost deliveries and no
benchmark loses one; its schedule file is one path per machine.

A ``Node`` stands for one machine of a deployment of several (scenario 7,
bench/scale_out.py): its processes run on its CPUs only (``taskset -c``) and
its Celery workers carry its name (``-n <process>.<node>@<host>``), as the
workers of two machines would; the nodes share the database and Redis.

Each scenario gets a database of its own (``scenario_env``): on PostgreSQL
(DATABASE_URL set) ``<DATABASE_URL's name>_<scenario>``, dropped and made
anew; else a fresh SQLite file under a temporary VAR_DIR. REDIS_URL's
database, when set, is emptied before each scenario: give the benchmark one
of its own.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import requests

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def procfile() -> dict[str, str]:
    """The Procfile's commands by process name."""
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(
        (name.strip(), command.strip())
        for name, _, command in (line.partition(":") for line in lines)
        if command
    )


def database_url(url: str, name: str) -> str:
    """``url`` with its database name suffixed ``_<name>``."""
    base, _, database = url.rpartition("/")
    database, _, options = database.partition("?")
    return f"{base}/{database}_{name}" + (f"?{options}" if options else "")


def fresh_database(url: str, template_url: str) -> None:
    """Drop and create the PostgreSQL database ``url`` names, as a copy of the
    migrated database ``template_url`` (made, or migrated, when a migration is
    missing from it: a fresh migrate takes a minute here)."""
    import psycopg
    from psycopg import sql

    base, _, database = url.rpartition("/")
    database = database.partition("?")[0]
    template = template_url.rpartition("/")[2].partition("?")[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as server:
        if not server.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [template]
        ).fetchone():
            server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(template)))
    migrate(template_url)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as server:
        server.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        server.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(database), sql.Identifier(template)
            )
        )


def migrate(url: str) -> None:
    """``manage.py migrate`` on the database ``url`` when it lacks a migration;
    looked at once a run (BENCH_MIGRATED, which the processes a scenario
    spawns inherit)."""
    if os.environ.get("BENCH_MIGRATED") == url:
        return
    env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
    check = [PY, "manage.py", "migrate", "--check"]
    if subprocess.run(check, cwd=ROOT, env=env, capture_output=True).returncode:
        subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                       check=True, capture_output=True)  # fmt: skip
    os.environ["BENCH_MIGRATED"] = url


def empty_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def scenario_env(name: str, var: str, **settings: str) -> dict[str, str]:
    """The environment of one scenario: its own database (made anew), VAR_DIR
    ``var``, production's settings (DEBUG off: with it on, every database
    connection keeps its last 9,000 queries, which a process's memory would
    show) but loopback receivers allowed, quiet logs, and ``settings``."""
    env = {
        **os.environ,
        "VAR_DIR": var,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        **settings,
    }
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = database_url(os.environ["DATABASE_URL"], name)
        fresh_database(env["DATABASE_URL"], database_url(os.environ["DATABASE_URL"], "template"))
    if os.environ.get("REDIS_URL"):
        empty_redis(os.environ["REDIS_URL"])
    return env


def backend(env: dict[str, str]) -> str:
    database = "PostgreSQL" if env.get("DATABASE_URL") else "SQLite"
    return database + (" + Redis" if env.get("REDIS_URL") else " (embedded broker)")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Node:
    """One machine's share of a deployment: ``name`` makes its Celery
    workers' names its own; ``cpus`` (``taskset -c``'s list, e.g. ``"0"``)
    are the only CPUs its processes run on, any when empty."""

    name: str
    cpus: str = ""


def per_core(process: str) -> tuple[str, ...]:
    """One instance of the Procfile's ``process`` for each CPU of this machine,
    as docs/operations.md runs the delivery worker: ``delivery.1``,
    ``delivery.2``, ... (a Service runs each as ``process``)."""
    return tuple(f"{process}.{n}" for n in range(1, (os.cpu_count() or 1) + 1))


def command_line(process: str, command: str, node: Node | None = None) -> str:
    """The Procfile's ``command`` of ``process`` as bash runs it: as written,
    or on ``node``'s CPUs; a Celery worker named after its process (an
    instance of ``per_core``'s) and node."""
    worker = command.startswith("celery ") and " worker " in command
    if node is None:
        named = worker and "." in process
        return f"exec {command}" + (f" -n {process}@%h" if named else "")
    if worker:
        command += f" -n {process}.{node.name}@%h"
    return f"exec taskset -c {node.cpus} {command}" if node.cpus else f"exec {command}"


class Service:
    """The Procfile's ``processes`` running with ``env``, on ``node`` when
    given; ``web`` listens on ``base``, a free port. Use as a context
    manager, or call ``stop()``. With ``wait=False`` it returns once the
    processes are started: ``ready()`` waits for them (several nodes start
    side by side)."""

    def __init__(
        self,
        env: dict[str, str],
        logs: Path,
        processes: Iterable[str] = ("web",),
        node: Node | None = None,
        wait: bool = True,
        port: int | None = None,
    ) -> None:
        """``port``: the web process's, else a free one."""
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logs = logs
        logs.mkdir(parents=True, exist_ok=True)
        commands = procfile()
        env = {
            **env,
            "PATH": f"{Path(PY).parent}{os.pathsep}{env.get('PATH', '')}",
            "PORT": str(self.port),
            "GUNICORN_CMD_ARGS": f"--bind 127.0.0.1:{self.port} --log-level warning",
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name in processes:
                log = logs / f"{name}.log"
                self.processes[name] = subprocess.Popen(
                    ["bash", "-c", command_line(name, commands[name.partition(".")[0]], node)],
                    cwd=ROOT, env=env,
                    stdout=log.open("wb"), stderr=subprocess.STDOUT,
                )  # fmt: skip
            if wait:
                self.ready()
        except BaseException:
            self.stop()
            raise

    def ready(self) -> None:
        """Wait until every process has started (raise if one did not)."""
        try:
            for name in self.processes:
                self._wait_ready(name)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, name: str) -> None:
        process, log = self.processes[name], self.logs / f"{name}.log"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{name} stopped:\n{log.read_text()[-3000:]}")
            if name == "web":
                try:
                    requests.get(f"{self.base}/agent/login/", timeout=5)
                    return
                except requests.RequestException:
                    pass
            elif (b"beat: Starting" if name == "beat" else b" ready.") in log.read_bytes():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not start:\n{log.read_text()[-3000:]}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pids(self, names: Iterable[str] | None = None) -> list[int]:
        """The processes ``names`` (all by default) and their descendants."""
        found: list[int] = []
        todo = [self.processes[n].pid for n in (names or self.processes)]
        while todo:
            pid = todo.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                with contextlib.suppress(OSError):  # gone meanwhile
                    todo += map(int, task.read_text().split())
        return found

    def cpu_seconds(self, names: Iterable[str] | None = ("web",)) -> float:
        total = 0
        for pid in self.pids(names):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / TICKS

    def rss_bytes(self, names: Iterable[str] | None = ("web",)) -> int:
        total = 0
        for pid in self.pids(names):
            with contextlib.suppress(OSError):
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        return total

    def cpu_percent(self, seconds: float) -> float:
        """The web process's CPU over ``seconds`` of wall time, in % of one core."""
        before = self.cpu_seconds()
        time.sleep(seconds)
        return 100 * (self.cpu_seconds() - before) / seconds

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
