"""Integration settings for developers: the command and the admin page."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client as Browser
from django.urls import reverse

from devhooks.models import EVENTS, IntegrationSettings
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

URL = "https://crm.example.com/hooks/switchboard"


def run(*args: str) -> Any:
    out = StringIO()
    call_command("set_developer_webhook", *args, stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


@pytest.fixture
def admin_browser() -> Browser:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    return browser


def secret_on(page: str) -> str:
    found = re.findall(r'<code class="signing-secret">(whsec_[^<]+)</code>', page)
    assert len(found) == 1, page
    return found[0]


def test_the_command_prints_url_events_and_the_secret_once() -> None:
    first = run(f"--url={URL}")
    assert first["url"] == URL and first["events"] == list(EVENTS)
    assert first["signing_secret"].startswith("whsec_")
    config = IntegrationSettings.load()
    assert config.endpoint is not None and config.endpoint.secret == first["signing_secret"]

    again = run(f"--url={URL}", "--event=chat_finished", "--event=call_event")
    assert again == {"url": URL, "events": ["chat_finished", "call_event"], "signing_secret": None}

    rotated = run(f"--url={URL}", "--rotate-secret")
    assert rotated["signing_secret"] not in (None, first["signing_secret"])
    assert rotated["events"] == list(EVENTS)


def test_safe_url_domains_switch_safe_url_on() -> None:
    run(f"--url={URL}", "--safe-url-domain=Example.com", "--safe-url-domain=shop.example.org")
    config = IntegrationSettings.load()
    assert config.safe_url and config.safe_url_domains == ["example.com", "shop.example.org"]
    assert config.link_allowed("https://crm.example.com/x")
    assert config.link_allowed("https://shop.example.org/")
    assert not config.link_allowed("https://example.com.evil.net/")
    assert not config.link_allowed("https://other.example.org/")

    run(f"--url={URL}", "--no-safe-url")
    assert not IntegrationSettings.load().safe_url


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url=ftp://crm.example.com/"], "http:// or https://"),
        (["--url=https://crm.example.com/", "--safe-url-domain=not a domain"], "not a domain"),
        (["--url= "], "give the webhook URL"),
    ],
)
def test_the_command_refuses_bad_input_and_changes_nothing(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not IntegrationSettings.objects.exists()


def test_an_unknown_event_is_refused() -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        run(f"--url={URL}", "--event=chat_started")


def form(**overrides: Any) -> dict[str, Any]:
    return {
        "webhook_url": URL,
        "send_events": "on",
        "event_names": list(EVENTS),
        "domains": "",
        **overrides,
    }


def test_the_admin_sets_the_webhook_and_shows_the_secret_once(admin_browser: Browser) -> None:
    listing = admin_browser.get(reverse("admin:devhooks_integrationsettings_changelist"))
    assert listing.status_code == 302 and listing["Location"].endswith("/add/")

    saved = admin_browser.post(listing["Location"], form(), follow=True)
    secret = secret_on(saved.content.decode())
    config = IntegrationSettings.load()
    assert config.endpoint is not None and config.endpoint.secret == secret
    assert config.url == URL and config.events == []  # all

    # Shown once: a reload of the secret page shows it no more.
    again = admin_browser.get(saved.redirect_chain[-1][0])
    assert secret not in again.content.decode()

    change = reverse("admin:devhooks_integrationsettings_change", args=[config.pk])
    assert admin_browser.get(reverse("admin:devhooks_integrationsettings_changelist"))[
        "Location"
    ].endswith(change)
    page = admin_browser.get(change).content.decode()
    assert URL in page and secret not in page


def test_the_admin_changes_events_safe_url_and_rotates(admin_browser: Browser) -> None:
    run(f"--url={URL}")
    config = IntegrationSettings.load()
    change = reverse("admin:devhooks_integrationsettings_change", args=[config.pk])

    kept = admin_browser.post(
        change,
        form(event_names=["chat_finished"], safe_url="on", domains="example.com\nexample.org"),
    )
    assert kept.status_code == 302 and "new-secret" not in kept["Location"]
    config = IntegrationSettings.load()
    assert config.events == ["chat_finished"] and config.safe_url
    assert config.safe_url_domains == ["example.com", "example.org"]

    old = config.endpoint.secret  # type: ignore[union-attr]
    rotated = admin_browser.post(change, form(rotate_secret="on"), follow=True)
    assert secret_on(rotated.content.decode()) != old


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"webhook_url": "javascript:alert(1)"}, "http:// or https://"),
        ({"domains": "exa mple.com"}, "is not a domain name"),
        ({"event_names": ["chat_started"]}, "Select a valid choice"),
    ],
)
def test_the_admin_refuses_bad_input(
    admin_browser: Browser, overrides: dict[str, Any], message: str
) -> None:
    add = reverse("admin:devhooks_integrationsettings_add")
    page = admin_browser.post(add, form(**overrides))
    assert page.status_code == 200 and message in page.content.decode()
    assert not IntegrationSettings.objects.exists()
