"""A PostgreSQL cluster of the module's own (``pg_server.py``), migrated and
seeded, under a real web process (gunicorn, as the Procfile starts it, DEBUG
off as in production): the fixtures of the modules that stop it
(tests/reliability/test_postgres_down.py, tests/e2e/test_connection_notice.py).
The web process has no Redis and a ``VAR_DIR`` of its own, so what it queues
reaches no worker of the suite; the modules run the same on the embedded
default run, whatever the suite's own database. Each module that imports the
fixtures gets a cluster of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.reliability.pg_server import PostgresServer
from tests.web.server import WebServer
from tests.worker import ROOT

# The ports this project's fault tests may give their own PostgreSQL.
PORTS = range(5481, 5486)
DATABASE = "switchboard"
# A client's patience: longer than the promised 2 s, shorter than the old hang.
CLIENT_TIMEOUT = 8.0


@pytest.fixture(scope="module")
def outage_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer(PORTS)
    try:
        server.start()
        server.execute(f"CREATE DATABASE {DATABASE}")
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def outage_env(outage_postgres: PostgresServer) -> dict[str, str]:
    """The web process's settings: production's (DEBUG off), its own database,
    no Redis, its own VAR_DIR (broker and cache folders)."""
    var_dir = Path(settings.VAR_DIR) / f"pg-down-{uuid.uuid4().hex[:8]}"
    var_dir.mkdir()
    return {**production_env(outage_postgres.url(DATABASE), var_dir), "REDIS_URL": ""}


def production_env(database_url: str, var_dir: Path) -> dict[str, str]:
    """The settings of a fault test's processes: production's (DEBUG off), a
    database and VAR_DIR of the test's own; the seeded channels' webhooks
    point at 127.0.0.1."""
    return {
        "DATABASE_URL": database_url,
        "VAR_DIR": str(var_dir),
        "DEBUG": "false",
        "SECRET_KEY": f"reliability-{uuid.uuid4().hex}{uuid.uuid4().hex}",
        "ALLOWED_HOSTS": "127.0.0.1",
        "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
    }


def run(env: dict[str, str], *command: str, timeout: float = 180) -> str:
    """``python *command`` with ``env`` over this process's environment; its output."""
    done = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def outage_seed(outage_env: dict[str, str]) -> dict[str, Any]:
    run(outage_env, "manage.py", "migrate", "--noinput", "-v0")
    printed = run(outage_env, "-m", "tests.reliability.seed")
    return dict(json.loads(printed.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def outage_web(outage_env: dict[str, str], outage_seed: dict[str, Any]) -> Iterator[WebServer]:
    server = WebServer()
    server.env.update(outage_env)
    yield server.start()
    server.stop()
