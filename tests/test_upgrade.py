"""Upgrades without downtime (docs/operations.md, "Upgrades").

The previous release's web process keeps serving A1 and A2 while this
release's ``migrate`` runs against its database: no request may fail. The
previous release is the commit before the newest one that brought
migrations, taken from this repository's history with ``git archive``.

Beside it, every migration newer than the ones already released before this
rule must be one an older release can run beside (``test_new_migrations_…``).
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.db.migrations import Migration
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import (
    AddField,
    AlterField,
    CreateModel,
    DeleteModel,
    RemoveField,
    RenameField,
    RenameModel,
)
from django.db.migrations.state import ProjectState
from django.db.models import NOT_PROVIDED

from tests.databases import NewDatabase
from tests.web.server import WebServer
from tests.worker import ROOT

# Released before the rule: the newest migration of each app that an older
# release could not always run beside (agents 0028/0029 add NOT NULL columns
# without a database default: the release before them fails to insert a chat
# or an agent while they are applied). Everything after must obey it.
RULED_AFTER = {
    "agents": "0029",
    "bots": "0002",
    "channels_api": "0004",
    "delivery": "0004",
    "devhooks": "0007",
}
# The "remove" step of add → use → remove: a column or table this code no
# longer uses and the previous release did not use either, named here with the
# release that stopped using it. Empty today.
CONTRACTIONS: dict[tuple[str, str], str] = {}


def git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def previous_release() -> str:
    """The commit before the newest one (along main's first parents) that
    brought migrations — added a migration file, not changed one — : the
    release this one's migrations upgrade."""
    if git("rev-parse", "--is-shallow-repository") == "true":
        git("fetch", "--quiet", "--unshallow")
    newest = git(
        "log", "--first-parent", "-1", "--diff-filter=A", "--format=%H", "--", "*/migrations/0*.py"
    )
    return git("rev-parse", f"{newest}^1")


def export(revision: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run(database: NewDatabase, root: Path, *args: str, **env: str) -> str:
    """``manage.py`` of the checkout ``root`` on ``database``; what it printed."""
    done = database.manage(*args, root=root, **env)
    assert done.returncode == 0, f"{root.name}: manage.py {' '.join(args)}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def database(tmp_path: Path, transactional_db: None) -> Iterator[NewDatabase]:
    made = NewDatabase(tmp_path / "var", "upgrade")
    yield made
    made.drop()


def migrations_of(root: Path) -> set[str]:
    return {f"{path.parent.parent.name}.{path.stem}" for path in root.glob("*/migrations/0*.py")}


def test_the_previous_release_serves_a1_and_a2_while_this_release_migrates(
    tmp_path: Path, database: NewDatabase
) -> None:
    old = export(previous_release(), tmp_path / "previous")
    new_migrations = migrations_of(ROOT) - migrations_of(old)
    assert new_migrations  # the previous release is the one before the newest migrations

    run(database, old, "migrate", "--noinput")
    web = WebServer(root=old, DATABASE_URL=database.url, VAR_DIR=str(database.var_dir))
    made = run(
        database, old, "create_chat_api_channel", "--name", "Upgrading app",
        "--webhook-url", "http://127.0.0.1:9/integrator", PUBLIC_URL=web.base_url,
    )  # fmt: skip
    channel = json.loads(made)
    web.start()
    stop = threading.Event()
    answers: Counter[str] = Counter()
    during: list[float] = []

    def traffic(lane: int) -> None:
        with requests.Session() as session:
            n = 0
            while not stop.is_set():
                n += 1
                status = session.get(channel["status_url"], timeout=30)
                body = {"sender": {"id": f"u{lane}-{n}"}, "message": {"type": "text", "text": "hi"}}
                sent = session.post(channel["endpoint_url"], json=body, timeout=30)
                answers[f"A1 {status.status_code}"] += 1
                answers[f"A2 {sent.status_code}"] += 1
                during.append(time.monotonic())

    lanes = [threading.Thread(target=traffic, args=(lane,)) for lane in range(3)]
    try:
        for lane in lanes:
            lane.start()
        while len(during) < 6:
            stop.wait(0.05)
        started = time.monotonic()
        migrated = run(database, ROOT, "migrate", "--noinput")
        ended = time.monotonic()
        settled = len(during)
        while len(during) < settled + 6:
            stop.wait(0.05)
    finally:
        stop.set()
        for lane in lanes:
            lane.join(30)
        web.stop()

    print(f"\napplied {sorted(new_migrations)} in {ended - started:.1f} s; answers {dict(answers)}")
    for name in new_migrations:
        assert f"Applying {name}" in migrated, name
    assert set(answers) == {"A1 200", "A2 200"}, answers
    assert sum(started <= at <= ended for at in during) >= 1  # served while migrating
    assert "Traceback" not in web.stderr(), web.stderr()[-3000:]
    run(database, ROOT, "migrate", "--check")


def test_new_migrations_can_run_beside_the_previous_release() -> None:
    """Add, then use, then remove: a migration after RULED_AFTER adds only
    columns the previous release's INSERTs can leave out (nullable, or with a
    database default: Django's ``default`` lives in Python only) and removes,
    renames or tightens nothing but what CONTRACTIONS names."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    problems = [
        f"{app}.{name}: {problem}"
        for (app, name), migration in sorted(loader.disk_migrations.items())
        if app in RULED_AFTER and name[:4] > RULED_AFTER[app]
        and (app, name) not in CONTRACTIONS
        for problem in breaks(migration, loader.project_state((app, name), at_end=False))
    ]  # fmt: skip
    assert not problems, "\n".join(problems)


def breaks(migration: Migration, before: ProjectState) -> Iterator[str]:
    """What in ``migration`` the release before it could not run beside."""
    created = {op.name.lower() for op in migration.operations if isinstance(op, CreateModel)}
    for op in migration.operations:
        if isinstance(op, AddField) and op.model_name not in created:
            field = op.field
            if not (field.null or field.many_to_many or field.db_default is not NOT_PROVIDED):
                yield f"{op.model_name}.{op.name} added NOT NULL without db_default"
        elif isinstance(op, AlterField):
            was = before.models[migration.app_label, op.model_name].fields[op.name]
            if was.null and not op.field.null:
                yield f"{op.model_name}.{op.name} made NOT NULL"
        elif isinstance(op, RemoveField | DeleteModel | RenameField | RenameModel):
            yield f"{type(op).__name__} {op.describe()}: the previous release still uses it"
