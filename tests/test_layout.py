"""The layout's import rules (docs/architecture.md, "Layout"), read from the
source with ``ast``: every ``import`` anywhere in a module counts, those
inside functions too.

- The two halves of the Developer API reach each other only through
  ``devhooks.models`` and ``devhooks.visitor_data``: the widget
  (devhooks/widget/) and the webhooks (devhooks/webhooks/) can be read, and
  changed, one without the other.
- The integration apps (channels_api, bots, devhooks) import only the core
  (``agents``), ``delivery`` and ``config``, never each other; ``agents``
  imports no integration app, and ``delivery`` no app at all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worker import ROOT

HALVES = ("devhooks.widget", "devhooks.webhooks")
SHARED = ("devhooks.models", "devhooks.visitor_data")
INTEGRATION_APPS = ("channels_api", "bots", "devhooks")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str = "") -> Iterator[str]:
    """Every name the module at ``path`` (named ``name``, by default from its
    place in the repository) imports, in full: ``from a.b import c`` is
    ``a.b.c``; relative imports resolved."""
    package = (name or module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            # ``from devhooks.widget import services`` imports devhooks.widget.services.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def modules(*apps: str) -> Iterator[tuple[str, Path]]:
    for app in apps:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield module_name(path), path


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def app_of(name: str) -> str:
    return name.split(".")[0]


def half_of(name: str) -> str | None:
    return next((half for half in HALVES if within(name, half)), None)


def reaches_other_half(importer: str, imported: str) -> bool:
    """Whether a module of one half imports devhooks outside its own half,
    other than the shared modules."""
    own = half_of(importer)
    if own is None or not within(imported, "devhooks") or within(imported, own):
        return False
    return not any(within(imported, shared) for shared in SHARED)


def cross_app_imports() -> set[tuple[str, str]]:
    found = set()
    for importer, path in modules(*INTEGRATION_APPS):
        for imported in imports(path):
            other = app_of(imported)
            if other in INTEGRATION_APPS and other != app_of(importer):
                found.add((importer, imported))
    return found


def test_the_halves_of_devhooks_reach_each_other_only_through_the_shared_modules() -> None:
    crossings = [
        f"{importer} imports {imported}"
        for importer, path in modules("devhooks")
        for imported in imports(path)
        if reaches_other_half(importer, imported)
    ]
    assert crossings == []


def test_the_walk_sees_the_imports_it_judges() -> None:
    """Not a rule that holds because nothing was read: the widget's verbs do
    import the shared module, and an import of the other half is caught."""
    widget_services = ROOT / "devhooks" / "widget" / "services.py"
    assert "devhooks.visitor_data.clean_custom_data" in set(imports(widget_services))
    assert half_of("devhooks.widget.views") == "devhooks.widget"
    assert reaches_other_half("devhooks.widget.views", "devhooks.webhooks.services.send")
    assert reaches_other_half("devhooks.webhooks.payloads", "devhooks.widget.geoip")
    assert reaches_other_half("devhooks.widget.demo", "devhooks.apps")
    assert not reaches_other_half("devhooks.widget.views", "devhooks.models.WidgetChannel")
    assert not reaches_other_half("devhooks.webhooks.services", "devhooks.visitor_data.safe_link")
    assert not reaches_other_half("devhooks.admin", "devhooks.widget.admin")


@pytest.mark.parametrize(
    ("name", "source", "imported"),
    [
        ("devhooks.widget.views", "from .services import send", "devhooks.widget.services.send"),
        ("devhooks.widget.views", "from ..webhooks import services", "devhooks.webhooks.services"),
        ("devhooks.widget", "from . import geoip", "devhooks.widget.geoip"),
        ("bots.demo", "import channels_api.services", "channels_api.services"),
        ("bots.demo", "def f():\n    from channels_api import admin", "channels_api.admin"),
    ],
)
def test_relative_plain_and_late_imports_are_read(
    tmp_path: Path, name: str, source: str, imported: str
) -> None:
    path = tmp_path / ("__init__.py" if name == "devhooks.widget" else "module.py")
    path.write_text(source + "\n")
    assert imported in set(imports(path, name))


def test_integration_apps_import_none_of_each_other() -> None:
    assert sorted(cross_app_imports()) == []


def test_the_core_and_delivery_import_no_integration_app() -> None:
    """``agents`` takes functions from the apps in their ``ready()`` instead;
    ``delivery`` imports no app at all."""
    crossings = [
        f"{importer} imports {imported}"
        for importer, path in modules("agents", "delivery")
        for imported in imports(path)
        if app_of(imported) in INTEGRATION_APPS
        or (app_of(importer) == "delivery" and app_of(imported) == "agents")
    ]
    assert crossings == []
