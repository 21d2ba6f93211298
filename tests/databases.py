"""A new, empty database of the suite's engine beside the test database, and
``manage.py`` run against one in a process of its own: for tests of what
operators run on a whole installation (tests/test_backup.py restores into
one, tests/test_upgrade.py migrates one under another release).

On SQLite it is a file in its own VAR_DIR; on PostgreSQL a database named
after the test database with a suffix, made anew and dropped by ``drop()``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.db import connection

from tests import worker
from tests.worker import ROOT


def manage(
    *args: str, database_url: str, var_dir: Path, root: Path = ROOT, **env: str
) -> subprocess.CompletedProcess[str]:
    """``manage.py`` of the checkout ``root`` on ``database_url``, VAR_DIR ``var_dir``."""
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=root, capture_output=True, text=True,
        env={**os.environ, "DATABASE_URL": database_url, "VAR_DIR": str(var_dir), **env},
        timeout=300, check=False,
    )  # fmt: skip


class NewDatabase:
    def __init__(self, var_dir: Path, suffix: str) -> None:
        var_dir.mkdir(parents=True, exist_ok=True)
        self.var_dir = var_dir
        self.sqlite = connection.vendor == "sqlite"
        self.name = "" if self.sqlite else f"{connection.settings_dict['NAME']}_{suffix}"
        if self.sqlite:
            self.url = f"sqlite:///{var_dir / 'switchboard.sqlite3'}"
            return
        self.url = worker.test_database_url().rsplit("/", 1)[0] + f"/{self.name}"
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{self.name}"')
            cursor.execute(f'CREATE DATABASE "{self.name}"')

    def manage(self, *args: str, root: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
        return manage(*args, database_url=self.url, var_dir=self.var_dir, root=root, **env)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """``sql`` (``?`` placeholders) read from this database."""
        if self.sqlite:
            with contextlib.closing(sqlite3.connect(self.var_dir / "switchboard.sqlite3")) as db:
                return db.execute(sql, params).fetchall()
        import psycopg

        suite = connection.settings_dict
        with psycopg.connect(
            dbname=self.name, user=suite["USER"], password=suite["PASSWORD"] or None,
            host=suite["HOST"] or "127.0.0.1", port=suite["PORT"] or 5432,
        ) as pg:  # fmt: skip
            return pg.execute(sql.replace("?", "%s"), params).fetchall()

    def drop(self) -> None:
        if not self.sqlite:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
