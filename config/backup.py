"""Backups of the service's state and their restore (docs/operations.md, "Backups").

A backup is a folder::

    manifest.json      when it was taken, of which engine, the migrations
                       applied and every table's row count, all of one snapshot
    database.sqlite3   the embedded default: SQLite's online backup
    database.dump      PostgreSQL: pg_dump's custom format, of the same
                       snapshot the counts were read in
    media/             the stored files (MEDIA_ROOT), copied after the database

Both are taken while the service runs and writes: SQLite's backup API and a
PostgreSQL snapshot each give one consistent moment. Files are copied after
that moment, so every file a restored row names is there (a file is written
before the row that names it, and never changed after).

A restore goes into an empty database only, then checks every table's count
against the manifest and migrates the database to this release's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

MANIFEST = "manifest.json"
SQLITE_FILE = "database.sqlite3"
POSTGRES_FILE = "database.dump"
MEDIA = "media"
FORMAT = 1


class BackupError(Exception):
    """A backup or restore that cannot be done; the message says why."""


@dataclass(frozen=True)
class Result:
    folder: Path
    counts: dict[str, int]
    files: int

    @property
    def rows(self) -> int:
        return sum(self.counts.values())


# --- backup -------------------------------------------------------------------


def backup(folder: Path) -> Result:
    """Write a backup of the database and the stored files into ``folder``,
    which must not exist yet or be empty."""
    if folder.exists() and any(folder.iterdir()):
        raise BackupError(f"{folder} is not empty: give a new folder")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if _is_sqlite():
        counts, migrations = _backup_sqlite(folder / SQLITE_FILE)
    else:
        counts, migrations = _backup_postgres(folder / POSTGRES_FILE)
    files = _copy_files(_media_root(), folder / MEDIA)
    manifest = {
        "format": FORMAT,
        "taken": timezone.now().isoformat(),
        "engine": "sqlite" if _is_sqlite() else "postgresql",
        "migrations": migrations,
        "counts": counts,
        "files": files,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return Result(folder, counts, files)


def _backup_sqlite(target: Path) -> tuple[dict[str, int], list[list[str]]]:
    source = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]), timeout=30)
    copy = sqlite3.connect(str(target))
    try:
        # One step: the copy is of one moment, however much is written meanwhile.
        source.backup(copy)
    finally:
        source.close()
    try:
        return _sqlite_counts(copy), _applied(copy.execute)
    finally:
        copy.close()
        os.chmod(target, 0o600)  # password hashes and secrets, as the live file


def _backup_postgres(target: Path) -> tuple[dict[str, int], list[list[str]]]:
    import psycopg

    pg_dump = _tool("pg_dump")
    with (
        psycopg.connect(**_conninfo(), autocommit=False) as snapshot,
        snapshot.cursor() as cursor,
    ):
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        (snapshot_id,) = cursor.fetchone() or ("",)
        counts = {
            table: _count(cursor.execute, table) for table in _postgres_tables(cursor.execute)
        }
        migrations = _applied(cursor.execute)
        # pg_dump reads the same snapshot while this transaction holds it open.
        _run(
            [pg_dump, "--format=custom", "--no-owner", "--no-privileges",
             f"--snapshot={snapshot_id}", f"--file={target}", _database_name()],
        )  # fmt: skip
        snapshot.rollback()
    os.chmod(target, 0o600)
    return counts, migrations


# --- restore ------------------------------------------------------------------


def restore(folder: Path) -> Result:
    """Restore the backup in ``folder`` into this installation's database,
    which must be empty, and its files; then migrate to this release."""
    manifest = _read_manifest(folder)
    engine = "sqlite" if _is_sqlite() else "postgresql"
    if manifest["engine"] != engine:
        raise BackupError(
            f"the backup is of {manifest['engine']} and this installation runs {engine}: "
            "restore it into the same kind of database (docs/operations.md, 'Backups')"
        )
    _refuse_newer_release(manifest["migrations"])
    existing = connection.introspection.table_names()
    if existing:
        raise BackupError(
            f"the database {_database_name()} already has {len(existing)} tables: "
            "restore into a new, empty database"
        )
    connection.close()
    if engine == "sqlite":
        _restore_sqlite(folder / SQLITE_FILE)
    else:
        _restore_postgres(folder / POSTGRES_FILE)
    counts = _current_counts()
    differ = {
        table: (expected, counts.get(table))
        for table, expected in manifest["counts"].items()
        if counts.get(table) != expected
    }
    if differ:
        raise BackupError(f"the restored tables' counts differ from the backup's: {differ}")
    files = _copy_files(folder / MEDIA, _media_root())
    if files != manifest["files"]:
        raise BackupError(f"{files} files restored, the backup holds {manifest['files']}")
    call_command("migrate", interactive=False, verbosity=0)
    return Result(folder, counts, files)


def _restore_sqlite(source_file: Path) -> None:
    source = sqlite3.connect(f"file:{source_file}?mode=ro", uri=True)
    target = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]), timeout=30)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def _restore_postgres(dump: Path) -> None:
    _run(
        [_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
         "--single-transaction", f"--dbname={_database_name()}", str(dump)],
    )  # fmt: skip


def _read_manifest(folder: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        raise BackupError(f"{folder} holds no {MANIFEST}: not a backup") from None
    except ValueError as error:
        raise BackupError(f"{folder / MANIFEST} is not readable JSON: {error}") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{folder} is a backup of an unknown format {manifest.get('format')!r}")
    return manifest


def _refuse_newer_release(applied: list[list[str]]) -> None:
    """A backup whose database has migrations this code does not know is of a
    newer release: restoring it here would serve tables the code misreads."""
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    unknown = sorted(f"{app}.{name}" for app, name in applied if (app, name) not in known)
    if unknown:
        named = ", ".join(unknown[:5]) + (" …" if len(unknown) > 5 else "")
        raise BackupError(
            f"the backup is of a newer release (migrations this code does not have: {named}): "
            "restore it with that release"
        )


# --- both ---------------------------------------------------------------------


def _is_sqlite() -> bool:
    return str(settings.DATABASES["default"]["ENGINE"]).endswith("sqlite3")


def _database_name() -> str:
    return str(settings.DATABASES["default"]["NAME"])


def _conninfo() -> dict[str, Any]:
    db = settings.DATABASES["default"]
    params = {
        "dbname": db["NAME"],
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
    }
    return {key: value for key, value in params.items() if value is not None}


def _run(command: list[str]) -> None:
    """A PostgreSQL tool with this installation's connection in its environment."""
    info = _conninfo()
    env = {**os.environ}
    for key, variable in [("user", "PGUSER"), ("password", "PGPASSWORD"),
                          ("host", "PGHOST"), ("port", "PGPORT")]:  # fmt: skip
        if key in info:
            env[variable] = str(info[key])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BackupError(f"{Path(command[0]).name} failed: {done.stderr.strip()}")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            f"{name} is not on PATH: install PostgreSQL's client tools of the server's version"
        )
    return found


def _count(execute: Any, table: str) -> int:
    # The name is the database's own catalogue's, not input.
    row = execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()  # noqa: S608
    return int(row[0])


def _applied(execute: Any) -> list[list[str]]:
    rows = execute("SELECT app, name FROM django_migrations ORDER BY id").fetchall()
    return [[str(app), str(name)] for app, name in rows]


def _sqlite_counts(db: sqlite3.Connection) -> dict[str, int]:
    tables = [
        name
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {table: _count(db.execute, table) for table in sorted(tables)}


def _postgres_tables(execute: Any) -> list[str]:
    rows = execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    ).fetchall()
    return [str(name) for (name,) in rows]


def _current_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        # Django's cursor hands back the driver's, which fetches (both drivers).
        return {
            table: _count(cursor.execute, table)
            for table in sorted(connection.introspection.table_names(cursor))
        }


def _media_root() -> Path | None:
    """The stored files' folder; None when they live in a bucket, which is
    backed up by its provider's versioning (docs/operations.md, "Files")."""
    return None if settings.FILE_STORAGE_BUCKET else Path(settings.MEDIA_ROOT)


def _copy_files(source: Path | None, target: Path | None) -> int:
    if source is None or target is None or not source.is_dir():
        return 0
    copied = 0
    for path in _files(source):
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):  # erased meanwhile
            shutil.copy2(path, destination)
            copied += 1
    return copied


def _files(root: Path) -> Iterator[Path]:
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            yield Path(folder) / name
