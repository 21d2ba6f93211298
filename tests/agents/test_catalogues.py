"""The agent pages' translation catalogues (locale/, docs/translating.md):
every language has both, every entry is translated with the msgid's
placeholders, the committed .mo files are their .po compiled, and the
templates and scripts say nothing the catalogues do not hold."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.utils.translation import to_locale

ROOT = Path(settings.BASE_DIR)
LOCALE = ROOT / "locale"
DOMAINS = ("django", "djangojs")
LANGUAGES = [code for code, _ in settings.LANGUAGES if code != "en"]
CATALOGUES = [
    LOCALE / to_locale(code) / "LC_MESSAGES" / f"{domain}.po"
    for code in LANGUAGES
    for domain in DOMAINS
]
# How many forms a count takes (CLDR): one, few, many in Russian; zero, one,
# two, few, many, other in Arabic.
PLURAL_FORMS = {"ru": 3, "ar": 6, "de": 2, "es": 2, "fr": 2, "pt-br": 2}
# python-format (%(name)s, %s, %d), brace-format ({name}) placeholders, and
# the canned replies' variables ({{client.name}}).
PLACEHOLDER = re.compile(r"%\((\w+)\)[sdif]|%[sdif]|\{\{\s*[\w.]+\s*\}\}|\{(\w*)\}")

# The pages whose every word goes through the catalogue; docs/translating.md
# lists the ones still to do.
TRANSLATED_TEMPLATES = [
    "templates/signin_locked_message.html",
    *(
        f"templates/agents/{name}.html"
        for name in (
            "base",
            "login",
            "signin_code",
            "signin_locked",
            "password_forgot",
            "password_sent",
            "password_reset",
            "workspace",
            "settings",
            "history",
            "canned",
            "team",
            "_team",
            "_reassign",
            "reports",
            "second_factor",
            "_lists",
            "_chat_item",
            "_chat_head",
            "_composer",
            "_messages",
            "_message",
            "_delivery",
            "_note_box",
            "_panel",
            "_call",
            "_offline_message",
            "_label_chip",
            "_when",
            "confirm_address",
        )
    ),
    # The mails (agents.languages says in which language each is written).
    *(
        f"templates/agents/mail/{name}"
        for name in (
            "transcript.txt",
            "transcript.html",
            "confirm_address.txt",
            "password_reset.txt",
        )
    ),
]


def _name(path: Path) -> str:
    return str(path.relative_to(LOCALE))


def _placeholders(text: str) -> list[str]:
    return sorted(match.group(0) for match in PLACEHOLDER.finditer(text))


def test_every_language_of_the_pages_has_both_catalogues() -> None:
    assert LANGUAGES == ["ru", "de", "es", "fr", "pt-br", "ar"]
    files = [*CATALOGUES, *(path.with_suffix(".mo") for path in CATALOGUES)]
    missing = [_name(path) for path in files if not path.exists()]
    assert not missing


@pytest.mark.parametrize("path", CATALOGUES, ids=_name)
def test_every_entry_is_translated_with_the_msgids_placeholders(path: Path) -> None:
    catalogue = polib.pofile(str(path))
    code = next(code for code in LANGUAGES if to_locale(code) == path.parts[-3])
    assert f"nplurals={PLURAL_FORMS[code]};" in catalogue.metadata["Plural-Forms"]
    wrong = []
    for entry in catalogue:
        if entry.obsolete:
            wrong.append(f"obsolete: {entry.msgid!r}")
            continue
        if entry.fuzzy:
            wrong.append(f"fuzzy: {entry.msgid!r}")
        if entry.msgid_plural:
            expected = _placeholders(entry.msgid_plural)
            forms = [entry.msgstr_plural.get(n, "") for n in range(PLURAL_FORMS[code])]
            if _placeholders(entry.msgid) != expected:
                wrong.append(f"singular and plural differ: {entry.msgid!r}")
        else:
            expected = _placeholders(entry.msgid)
            forms = [entry.msgstr]
        for form in forms:
            if not form.strip():
                wrong.append(f"untranslated: {entry.msgid!r}")
            elif _placeholders(form) != expected:
                wrong.append(f"placeholders {_placeholders(form)} for {expected}: {entry.msgid!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", CATALOGUES, ids=_name)
def test_each_committed_mo_is_its_po_compiled(path: Path, tmp_path: Path) -> None:
    # A fresh machine has Python only (no msgfmt): the .mo files are
    # committed, and must say what their .po says.
    compiled = tmp_path / "fresh.mo"
    polib.pofile(str(path)).save_as_mofile(str(compiled))

    def entries(mo: Path) -> dict[tuple[str, str, str], object]:
        return {
            (entry.msgctxt or "", entry.msgid, entry.msgid_plural or ""): (
                dict(entry.msgstr_plural) if entry.msgid_plural else entry.msgstr
            )
            for entry in polib.mofile(str(mo))
        }

    committed = entries(path.with_suffix(".mo"))
    assert committed == entries(compiled)
    assert len(committed) > 1


def _msgids(domain: str) -> set[str]:
    catalogue = polib.pofile(str(LOCALE / "de" / "LC_MESSAGES" / f"{domain}.po"))
    return {entry.msgid for entry in catalogue}


def test_every_phrase_the_templates_translate_is_in_the_catalogue() -> None:
    # makemessages needs xgettext, which a fresh machine lacks; this catches
    # a phrase marked and never extracted (it would show in English).
    known = _msgids("django")
    said = {
        match.group(1)
        for path in [*ROOT.glob("templates/**/*.html"), *ROOT.glob("templates/**/*.txt")]
        if "admin" not in path.parts
        for match in re.finditer(r'{% translate "([^"]+)"', path.read_text())
    }
    assert said, "the templates translate something"
    assert sorted(said - known) == []


def test_every_phrase_the_scripts_translate_is_in_the_catalogue() -> None:
    known = _msgids("djangojs")
    said = {
        match.group(1)
        for path in ROOT.glob("static/agent/*.js")
        for match in re.finditer(r'gettext\("([^"]+)"\)', path.read_text())
    }
    assert len(said) > 20
    assert sorted(said - known) == []


class _Words(HTMLParser):
    """Text and the attributes people read, left in a template once every
    tag, variable and translated phrase is taken out."""

    READ = {
        "title",
        "aria-label",
        "placeholder",
        "alt",
        "label",
        "data-confirm",
        "data-reply-placeholder",
        "data-note-placeholder",
    }

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_data(self, data: str) -> None:
        self._check(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in self.READ and value:
                self._check(value)

    def _check(self, text: str) -> None:
        # Letters in any script; the product's name is not translated.
        words = re.sub(r"Switchboard|https://…/me\.png", "", text)
        if re.search(r"[^\W\d_]", words):
            self.found.append(text.strip())


_TRANSLATED = re.compile(
    r"{% blocktranslate.*?%}.*?{% endblocktranslate %}|{% translate .*?%}|{%.*?%}|{{.*?}}|{#.*?#}",
    re.DOTALL,
)


@pytest.mark.parametrize("template", TRANSLATED_TEMPLATES)
def test_the_translated_templates_say_nothing_outside_the_catalogue(template: str) -> None:
    words = _Words()
    words.feed(_TRANSLATED.sub("", (ROOT / template).read_text()))
    assert words.found == []
