"""The widget's languages (docs/translating.md): every catalogue complete
against English, served one at a time with a version, and the language a
chat started in kept with it."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import pytest
from django.core.management import CommandError
from django.test import Client as Browser

from agents.models import Agent, Chat
from config.api_errors import CODES
from devhooks.models import WidgetChannel
from devhooks.widget import languages
from devhooks.widget import services as widget_services
from devhooks.widget.services import WidgetError, create_widget_channel
from tests.devhooks.widget.test_admin_and_commands import admin_browser, form, run  # noqa: F401
from tests.devhooks.widget.test_api import (  # noqa: F401 (fixtures)
    Visitor,
    alice,
    billing,
    generous_limits,
    vera,
    widget,
)
from tests.worker import ROOT

pytestmark = pytest.mark.django_db

SCRIPT = ROOT / "static" / "widget" / "widget.js"
PLACEHOLDER = re.compile(r"\{(\w+)\}")
# CLDR's plural categories of each language (cardinal, ordinal), as
# Intl.PluralRules names them; tests/e2e/test_widget_languages.py checks this
# table against the browser's.
PLURALS = {
    "en": ({"one", "other"}, {"one", "two", "few", "other"}),
    "ru": ({"one", "few", "many", "other"}, {"other"}),
    "de": ({"one", "other"}, {"other"}),
    "es": ({"one", "many", "other"}, {"other"}),
    "fr": ({"one", "many", "other"}, {"one", "other"}),
    "pt-BR": ({"one", "many", "other"}, {"other"}),
    "ar": ({"zero", "one", "two", "few", "many", "other"}, {"other"}),
}


def catalogue(code: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((languages.CATALOGUES / f"{code}.json").read_text())
    return found


def placeholders(value: str | dict[str, str]) -> set[str]:
    forms = value.values() if isinstance(value, dict) else [value]
    return {name for text in forms for name in PLACEHOLDER.findall(text)}


def test_the_languages_are_the_catalogues_on_disk() -> None:
    on_disk = {path.stem for path in languages.CATALOGUES.glob("*.json")}
    assert on_disk == set(languages.WIDGET_LANGUAGES) == set(PLURALS)


@pytest.mark.parametrize("code", list(languages.WIDGET_LANGUAGES))
def test_a_catalogue_has_every_english_entry_and_no_other(code: str) -> None:
    english, other = catalogue("en"), catalogue(code)
    assert sorted(set(english) - set(other)) == [], "missing"
    assert sorted(set(other) - set(english)) == [], "extra"


@pytest.mark.parametrize("code", list(languages.WIDGET_LANGUAGES))
def test_each_entry_has_englishs_placeholders(code: str) -> None:
    english, other = catalogue("en"), catalogue(code)
    wrong = {
        key: (placeholders(english[key]), placeholders(value))
        for key, value in other.items()
        if placeholders(value) != placeholders(english.get(key, ""))
    }
    assert wrong == {}


@pytest.mark.parametrize("code", list(languages.WIDGET_LANGUAGES))
def test_plural_entries_have_the_languages_categories_each_with_its_number(code: str) -> None:
    english, other = catalogue("en"), catalogue(code)
    cardinal, ordinal = PLURALS[code]
    for key, value in other.items():
        assert isinstance(value, dict) == isinstance(english[key], dict), key
        if not isinstance(value, dict):
            assert value.strip(), key
            continue
        assert set(value) == (ordinal if key.endswith(".ordinal") else cardinal), key
        # A form may say its number in words ("one minute"), but "other" (any
        # number) must show it: {n}, and the sentence's other placeholders.
        assert placeholders(value["other"]) == placeholders(english[key]), key
        assert all(text.strip() for text in value.values()), key


@pytest.mark.parametrize("code", list(languages.WIDGET_LANGUAGES))
def test_the_direction_is_the_languages(code: str) -> None:
    assert catalogue(code)["dir"] == ("rtl" if code in languages.RIGHT_TO_LEFT else "ltr")


def test_the_script_says_every_english_entry_and_asks_for_no_other() -> None:
    script = SCRIPT.read_text()
    english = catalogue("en")
    # Every key is written whole in the script (no key is built from parts):
    # an entry nothing says is found here.
    unused = [key for key in english if f"'{key}'" not in script]
    assert unused == []
    asked = set(re.findall(r"\bt\('([^']+)'", script))
    named = set(re.findall(r"'([a-z_]+(?:\.[a-z_]+)+)'", script))
    named -= set(re.findall(r"\bon\('([^']+)'", script))  # the live stream's events
    assert asked and named
    assert sorted((asked | named) - set(english)) == []
    # No catalogue holds markup: the script writes text, never HTML.
    for code in languages.WIDGET_LANGUAGES:
        assert "<" not in json.dumps(catalogue(code), ensure_ascii=False), code


# --- serving ------------------------------------------------------------------------


def test_a_catalogue_is_served_gzipped_with_its_version() -> None:
    browser = Browser()
    version = languages.versions()["ru"]
    answer = browser.get(f"/widget/lang/ru.json?v={version}", HTTP_ACCEPT_ENCODING="gzip")
    assert answer.status_code == 200
    assert answer["Content-Encoding"] == "gzip"
    assert answer["Content-Type"] == "application/json; charset=utf-8"
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert json.loads(gzip.decompress(answer.content)) == catalogue("ru")
    assert answer["ETag"] == f'"{version}"'
    # The version is in the URL: a new catalogue is a new URL, so this one is kept.
    assert answer["Cache-Control"] == "public, max-age=31536000, immutable"

    again = browser.get("/widget/lang/ru.json", HTTP_IF_NONE_MATCH=f'"{version}"')
    assert again.status_code == 304 and again.content == b""

    stale = browser.get("/widget/lang/ru.json?v=old")
    assert stale.status_code == 200 and "Content-Encoding" not in stale
    assert stale["Cache-Control"] == "public, max-age=300"
    assert json.loads(stale.content) == catalogue("ru")


def test_each_language_has_its_own_version() -> None:
    versions = languages.versions()
    assert list(versions) == list(languages.WIDGET_LANGUAGES)
    assert len(set(versions.values())) == len(versions)


@pytest.mark.parametrize("code", ["xx", "PT-br", "..%2Fsettings", "en.json"])
def test_a_language_the_widget_does_not_speak_is_not_found(code: str) -> None:
    answer = Browser().get(f"/widget/lang/{code}.json")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"


# --- the channel's language -----------------------------------------------------------


def test_the_config_names_the_channels_language_and_every_catalogue(
    widget: WidgetChannel,  # noqa: F811
) -> None:
    config = Visitor(widget).ok("session")["config"]
    assert (config["language"], config["languages"]) == ("en", languages.versions())

    WidgetChannel.objects.filter(pk=widget.pk).update(language="pt-BR")
    assert Visitor(widget).ok("session")["config"]["language"] == "pt-BR"


def test_the_default_title_and_waiting_text_are_the_widgets_to_translate(
    alice: Agent,  # noqa: F811
) -> None:
    plain = create_widget_channel(name="Plain", agent_emails=[alice.email])
    config = Visitor(plain).ok("session")["config"]
    # What an older script shows stays; the script of today says its own words.
    assert (config["title"], config["own_title"]) == ("Chat with us", "")
    assert (config["waiting_text"], config["own_waiting_text"]) == (
        "An agent will answer shortly.",
        "",
    )


def test_the_command_sets_the_language_and_refuses_one_it_does_not_speak(
    alice: Agent,  # noqa: F811
) -> None:
    _, made = run("--name", "Berlin shop", "--language", "de")
    assert WidgetChannel.objects.get(channel_id=made["id"]).language == "de"
    _, plain = run("--name", "Shop")
    assert WidgetChannel.objects.get(channel_id=plain["id"]).language == "en"

    with pytest.raises(CommandError, match="invalid choice: 'xx'"):
        run("--name", "Nowhere", "--language", "xx")
    with pytest.raises(WidgetError, match="not 'xx'"):
        create_widget_channel(name="Nowhere", language="xx")
    assert WidgetChannel.objects.count() == 2


def test_the_admin_edits_the_language_with_the_widgets_settings(
    admin_browser: Browser,  # noqa: F811
    widget: WidgetChannel,  # noqa: F811
) -> None:
    change = f"/admin/devhooks/widgetchannel/{widget.pk}/change/"
    assert 'name="language"' in admin_browser.get(change).content.decode()

    admin_browser.post(change, form(name="Shop", title="Talk to us", language="ar"))
    widget.refresh_from_db()
    assert widget.language == "ar"

    refused = admin_browser.post(change, form(name="Shop", title="Talk to us", language="xx"))
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    widget.refresh_from_db()
    assert widget.language == "ar"


# --- the chat's language ------------------------------------------------------------------


def test_a_chat_keeps_the_language_its_first_message_came_in(vera: Visitor) -> None:  # noqa: F811
    vera.ok("message", text="Hallo", language="de")
    vera.ok("message", text="Hello again", language="en")  # a setLocale later

    assert Chat.objects.get().language == "de"


@pytest.mark.parametrize("sent", [None, "", "xx", 7, ["de"]])
def test_a_chat_without_a_language_the_widget_speaks_has_none(
    vera: Visitor,  # noqa: F811
    sent: Any,
) -> None:
    body = {} if sent is None else {"language": sent}
    vera.ok("message", text="Hi", **body)

    assert Chat.objects.get().language == ""


# --- refusals -----------------------------------------------------------------------
# The service answers a visitor in English (the wire's); the widget says each
# code a visitor may meet in the visitor's language (docs/translating.md).

VIEWS = ROOT / "devhooks" / "widget" / "views.py"
SERVICES = ROOT / "devhooks" / "widget" / "services.py"


def codes_the_visitor_endpoints_answer() -> set[str]:
    """Every error code of the visitor's actions, read from the server's code:
    the statuses its view refuses with (their codes as ``config/api_errors.py``
    names them), its rate limit, and the codes its verbs name."""
    view = VIEWS.read_text().split("def _visitor_action(", 1)[1]
    statuses = {int(status) for status in re.findall(r"inbound\.refuse\((\d+)", view)}
    statuses |= {400} if "inbound.json_of(" in view else set()  # a body that is no JSON
    statuses |= {429} if "inbound.throttle(" in view else set()
    named = set(re.findall(r"\bcode=([A-Z_]+)", SERVICES.read_text()))
    return {CODES[status] for status in statuses} | {
        getattr(widget_services, name) for name in named
    }


def test_the_script_says_every_code_a_visitor_can_meet_in_every_language() -> None:
    codes = codes_the_visitor_endpoints_answer()
    assert codes == {"invalid_request", "not_found", "too_many_requests", "consent_required"}
    table = re.search(r"var ERRORS = \{([^}]*)\}", SCRIPT.read_text())
    assert table, "the script's table of refusals"
    said = dict(re.findall(r"(\w+): '([\w.]+)'", table.group(1)))
    assert said == {code: f"error.{code}" for code in codes}
    for language in languages.WIDGET_LANGUAGES:
        missing = [code for code in codes if not catalogue(language).get(f"error.{code}")]
        assert missing == [], language


def test_each_code_is_one_a_visitor_really_meets(
    widget: WidgetChannel,  # noqa: F811
    vera: Visitor,  # noqa: F811
    settings: Any,
) -> None:
    met = {
        refusal["error"]["code"]
        for refusal in (
            vera.http.post(
                f"/widget/{widget.widget_id}/v1/nothing", "{}", content_type="text/plain"
            ).json(),
            vera.http.post(vera.url("message"), "{not json", content_type="text/plain").json(),
        )
    }
    WidgetChannel.objects.filter(pk=widget.pk).update(
        consent_text="We keep chats.", consent_version=2
    )
    met.add(vera.post("message", text="Hi").json()["error"]["code"])
    settings.WIDGET_ADDRESS_RATE_LIMIT = 1
    vera.post("session")
    limited = vera.post("session")
    assert limited.status_code == 429
    met.add(limited.json()["error"]["code"])
    assert met == codes_the_visitor_endpoints_answer()
