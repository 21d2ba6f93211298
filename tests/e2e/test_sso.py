"""Single sign-on in a real browser, on a laptop and a phone: "Sign in with
…" on the sign-in page, the real provider's own sign-in form
(tests/oidc_provider/), and back on the agent pages, signed in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent, AuditEntry
from tests.e2e.conftest import record_network
from tests.factories import AgentFactory
from tests.oidc_provider.people import ALICE, DAVE, PASSWORD, Person
from tests.oidc_provider.server import PROVIDER_NAME, Provider
from tests.web.server import WebServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def service(django_db_setup: None) -> Iterator[WebServer]:
    """The real web process configured for a real provider, both started
    once for the module."""
    server = WebServer()
    with Provider(redirect_uris=[f"{server.url}/agent/sso/callback/"]) as provider:
        server.env.update(provider.service_settings())
        server.start()
        yield server
        server.stop()


@pytest.fixture
def page(
    chromium: Browser, service: WebServer, device: dict[str, Any], request: pytest.FixtureRequest
) -> Iterator[Page]:
    context = chromium.new_context(**device, base_url=service.url)
    record_network(context, request.node)
    yield context.new_page()
    context.close()


def sign_in_at_the_provider(page: Page, person: Person) -> None:
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    expect(page.get_by_role("heading", name="Test provider")).to_be_visible()
    page.get_by_label("Provider username").fill(person.username)
    page.get_by_label("Provider password").fill(PASSWORD)
    page.get_by_role("button", name="Continue").click()


def test_an_agent_signs_in_with_the_provider_and_lands_where_next_pointed(
    page: Page, alice: Agent
) -> None:
    page.goto("/agent/login/?next=/agent/history/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    sign_in_at_the_provider(page, ALICE)

    expect(page.get_by_test_id("status")).to_be_visible()  # signed in
    assert urlsplit(page.url).path == "/agent/history/"
    entry = AuditEntry.objects.get(action="signin.succeeded")
    assert (entry.actor, entry.detail) == (alice, {"via": "single sign-on"})


@pytest.mark.parametrize("size", ["laptop"])
def test_an_address_no_agent_has_is_told_so_on_the_sign_in_page(page: Page) -> None:
    page.goto("/agent/login/")

    sign_in_at_the_provider(page, DAVE)

    expect(page.get_by_text("No agent signs in with dave@example.com.")).to_be_visible()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert urlsplit(page.url).path == "/agent/login/"
    assert not Agent.objects.filter(email=DAVE.email).exists()


@pytest.mark.parametrize("size", ["laptop"])
def test_an_admin_signs_in_to_the_admin_with_the_provider(page: Page) -> None:
    AgentFactory.create(email=ALICE.email, role="admin")
    page.goto("/admin/")  # to the admin's own sign-in page
    # Under the admin's own form, not over its button.
    log_in = page.get_by_role("button", name="Log in").bounding_box()
    sso = page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").bounding_box()
    assert log_in and sso and sso["y"] >= log_in["y"] + log_in["height"]

    sign_in_at_the_provider(page, ALICE)

    expect(page.locator("#site-name")).to_contain_text("Switchboard admin")
    expect(page.get_by_role("link", name="Audit log")).to_be_visible()
    assert urlsplit(page.url).path == "/admin/"
