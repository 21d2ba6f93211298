"""The layout's import rule (docs/architecture.md, "Layout").

Integration apps import only the core (``agents``), ``delivery`` and
``config``, never each other: each stands on the core alone, so one can be
read, changed or left out without the others. The walk reads every module's
imports (``import x`` and ``from x import y``, at any depth, type-checking
blocks included) with ``ast``, so a new import that breaks the rule fails
here with its file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTEGRATION_APPS = ("channels_api", "bots", "devhooks")


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of each import in the file at ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def modules_of(app: str) -> Iterator[Path]:
    yield from sorted((ROOT / app).rglob("*.py"))


def test_the_walk_sees_imports_at_any_depth(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from bots.models import BotProvider\n"
        "def f():\n    import channels_api.services\n    from . import sibling\n"
    )

    assert list(imports_of(module)) == [
        (1, "os"),
        (2, "typing"),
        (4, "bots.models"),
        (6, "channels_api.services"),
    ]


def test_integration_apps_do_not_import_each_other() -> None:
    crossings = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for app in INTEGRATION_APPS
        for path in modules_of(app)
        for line, module in imports_of(path)
        if module.split(".")[0] in INTEGRATION_APPS and module.split(".")[0] != app
    ]

    assert crossings == []


def test_the_core_and_delivery_import_no_integration_app() -> None:
    """``agents`` hands apps no import: they hand it functions in ``ready()``;
    ``delivery`` imports no app at all."""
    crossings = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for app, forbidden in (
            ("agents", INTEGRATION_APPS),
            ("delivery", (*INTEGRATION_APPS, "agents")),
        )
        for path in modules_of(app)
        for line, module in imports_of(path)
        if module.split(".")[0] in forbidden
    ]

    assert crossings == []
