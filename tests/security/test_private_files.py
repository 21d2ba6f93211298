"""The files that hold credentials are their owner's only (0600), whichever
command makes them: the SQLite database and the demo's logins."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_migrate_makes_the_sqlite_database_owner_only(tmp_path: Path) -> None:
    # Given no database yet, and a umask that lets everyone read new files
    env = {"PATH": os.environ["PATH"], "VAR_DIR": str(tmp_path)}  # the embedded default

    # When the first command to touch the database is migrate
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(0o022),
        check=False,
    )

    # Then the database and SQLite's files beside it are readable by their owner only
    assert migrate.returncode == 0, migrate.stderr
    made = sorted(tmp_path.glob("switchboard.sqlite3*"))
    assert tmp_path / "switchboard.sqlite3" in made
    assert {path.name: mode_of(path) for path in made} == {path.name: 0o600 for path in made}


@pytest.mark.django_db
def test_seed_demo_writes_its_logins_owner_only(tmp_path: Path) -> None:
    # Given a demo.json an earlier run left readable by everyone
    demo = tmp_path / "demo.json"
    demo.write_text("{}")
    demo.chmod(0o644)
    out = StringIO()

    # When seed_demo writes it
    call_command("seed_demo", "--output", str(demo), stdout=out)

    # Then it holds what the command printed, for its owner only
    assert mode_of(demo) == 0o600
    assert json.loads(demo.read_text()) == json.loads(out.getvalue())
    assert "password" in demo.read_text()
