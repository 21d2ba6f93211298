"""`manage.py check --deploy` is clean with the production settings that
docs/operations.md lists, and with no more than those."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# docs/operations.md, "Production settings", with real values for the "..." there.
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "PUBLIC_URL": "https://chat.example.com",
    "ALLOWED_HOSTS": "chat.example.com",
    "DATABASE_URL": "postgres://switchboard:secret@db.internal:5432/switchboard",
    "REDIS_URL": "redis://redis.internal:6379/0",
}


def documented_variables() -> set[str]:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Production settings", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return set(re.findall(r"^([A-Z_]+)=", block, flags=re.MULTILINE))


def test_the_documented_production_settings_pass_check_deploy() -> None:
    assert documented_variables() == set(PRODUCTION)

    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=PRODUCTION,  # exactly these: nothing from the test run's environment
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert check.returncode == 0, check.stdout + check.stderr
    assert "System check identified no issues" in check.stdout


def test_the_development_default_is_what_check_deploy_warns_about(tmp_path: Path) -> None:
    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={"VAR_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert check.returncode != 0
    for warning in ("security.W008", "security.W012", "security.W016", "security.W018"):
        assert warning in check.stderr + check.stdout
