"""One place for text rules (config/text.py): the limits by name, and one
function for text every column can keep, used by the core and by delivery."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents.content import scrub
from config.text import CLIENT_TEXT_LIMIT, TEXT_LIMIT, storable
from delivery import policies

ROOT = Path(__file__).resolve().parent.parent
APPS = ("agents", "channels_api", "bots", "devhooks", "delivery", "config")
# The text limit written as a bare number in code: it has a name
# (config/text.py); migrations keep the numbers they were made with.
BARE_LIMIT = re.compile(r"(?<![\w.])4_?000(?![\w.])")


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("a\x00b", "ab"),
        ("cut \ud83d emoji", "cut \ufffd emoji"),
        ("x\udc00y\x00", "x\ufffdy"),
        ("fine 👍", "fine 👍"),
        ({"k\x00": ["a\x00", {"b": "\udc00"}]}, {"k": ["a", {"b": "\ufffd"}]}),
        (42, 42),
    ],
)
def test_storable_drops_nul_and_replaces_half_surrogates(value: object, kept: object) -> None:
    assert storable(value) == kept


def test_the_core_and_delivery_keep_text_by_the_same_rule() -> None:
    assert scrub is storable
    assert policies.storable is storable


def test_the_limits_are_the_specs() -> None:
    assert (CLIENT_TEXT_LIMIT, TEXT_LIMIT) == (1000, 4000)


def test_the_text_limit_is_not_written_as_a_bare_number() -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts and path != ROOT / "config" / "text.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BARE_LIMIT.search(line.split("#")[0])
    ]
    assert bare == []
