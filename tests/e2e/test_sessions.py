"""The settings page's Sessions and API token in a real browser, on a laptop
and a phone (docs/agent-pages.md, "Settings")."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent
from tests.e2e.test_agent_pages import PASSWORD, sign_in
from tests.e2e.test_passwords import fits_the_screen

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIREFOX = "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0"


def test_the_agent_signs_out_another_session_and_then_all_others(
    page: Page,
    chromium: Browser,
    web_process: Any,
    alice: Agent,
) -> None:
    others = [chromium.new_context(base_url=web_process.url, user_agent=FIREFOX) for _ in "ab"]
    phones = [context.new_page() for context in others]
    sign_in(phones[0], "alice@example.com", PASSWORD)
    sign_in(page, "alice@example.com", PASSWORD)

    page.goto("/agent/settings/")
    listed = page.get_by_test_id("session")
    expect(listed).to_have_count(2)
    mine = listed.filter(has=page.get_by_test_id("this-session"))
    expect(mine.get_by_role("button", name="Sign out")).to_have_count(0)
    other = listed.filter(has_text="Firefox 133 on Android")
    expect(other).to_contain_text("last seen")
    assert fits_the_screen(page)

    other.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text("That session is signed out.")).to_be_visible()
    expect(listed).to_have_count(1)
    phones[0].goto("/agent/")
    expect(phones[0].get_by_role("heading", name="Sign in")).to_be_visible()

    # Two more elsewhere, then every other one at once (the page asks first).
    for phone in phones:
        sign_in(phone, "alice@example.com", PASSWORD)
    page.reload()
    expect(listed).to_have_count(3)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("sign-out-others").click()
    expect(page.get_by_text("Signed out 2 other sessions.")).to_be_visible()
    expect(listed).to_have_count(1)
    for phone in phones:
        phone.goto("/agent/")
        expect(phone.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto("/agent/")
    expect(page.get_by_test_id("status")).to_be_visible()  # still signed in here
    for context in others:
        context.close()


def test_the_api_token_is_shown_and_revoked(page: Page, alice: Agent) -> None:
    sign_in(page, "alice@example.com", PASSWORD)
    page.goto("/agent/settings/")
    expect(page.get_by_test_id("token-state")).to_have_text("You have no token.")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("new-token-button").click()
    expect(page.get_by_test_id("new-token")).to_be_visible()
    expect(page.get_by_test_id("token-state")).to_contain_text("never used")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("revoke-token-button").click()
    expect(page.get_by_text("Your API token is revoked.")).to_be_visible()
    expect(page.get_by_test_id("token-state")).to_have_text("You have no token.")
    assert fits_the_screen(page)
