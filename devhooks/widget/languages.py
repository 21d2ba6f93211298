"""The widget's languages (docs/translating.md): one JSON catalogue per
language in static/widget/lang/, served one at a time, so a visitor's browser
downloads only its own language.

``WIDGET_LANGUAGES`` is Django's ``LANGUAGES`` (config/settings.py), the
agent pages' list too, with the codes spelt as BCP 47 (and ``<html lang>``)
spells them. English is a catalogue like the others: the script holds no
visitor-facing text of its own.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.conf import settings

CATALOGUES = Path(settings.BASE_DIR) / "static" / "widget" / "lang"
DEFAULT_LANGUAGE = "en"


def _tag(code: str) -> str:
    """Django's language code as a BCP 47 tag: pt-br → pt-BR."""
    language, _, region = code.partition("-")
    return f"{language}-{region.upper()}" if region else language


# Code (BCP 47, as <html lang> spells it) → the language's own name.
WIDGET_LANGUAGES: dict[str, str] = {_tag(code): str(name) for code, name in settings.LANGUAGES}
RIGHT_TO_LEFT = frozenset({"ar"})


@dataclass(frozen=True)
class Catalogue:
    plain: bytes
    gzipped: bytes
    version: str  # changes with the content: the URL's ?v= and the ETag


@cache
def _read(path: Path, modified: float) -> Catalogue:
    plain = path.read_bytes()
    version = hashlib.sha256(plain).hexdigest()[:12]
    return Catalogue(plain, gzip.compress(plain, compresslevel=9, mtime=0), version)


def catalogue(code: str) -> Catalogue | None:
    """The catalogue of a language the widget speaks, None for any other
    code (read again when its file changes)."""
    if code not in WIDGET_LANGUAGES:
        return None
    path = CATALOGUES / f"{code}.json"
    return _read(path, path.stat().st_mtime)


def versions() -> dict[str, str]:
    """Each language's catalogue version, for the script to ask for
    ``/widget/lang/<code>.json?v=<version>`` (cached for good)."""
    found = (catalogue(code) for code in WIDGET_LANGUAGES)
    return {code: c.version for code, c in zip(WIDGET_LANGUAGES, found, strict=True) if c}
