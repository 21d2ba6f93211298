"""Two-factor sign-in in a real browser: the set-up from the settings page
(on a laptop and a phone), a sign-in with the app's code, a sign-in with a
recovery code (docs/agent-pages.md, "Two-factor sign-in")."""

from __future__ import annotations

import time
from base64 import b32decode
from collections.abc import Iterator
from typing import Any

import pytest
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from agents import second_factor
from agents.models import Agent
from tests.e2e.test_agent_pages import PASSWORD, sign_in
from tests.e2e.test_passwords import fits_the_screen
from tests.limits import forget_rate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _fresh_rates() -> None:
    forget_rate("second-factor:*")  # a Redis count outlives the test database


@pytest.fixture
def laptop(chromium: Browser, web_process: Any) -> Iterator[Page]:
    context = chromium.new_context(base_url=web_process.url)
    yield context.new_page()
    context.close()


def app_code(secret: str) -> str:
    """What an authenticator app given the set-up key ``secret`` shows now."""
    return f"{TOTP(b32decode(secret)).token():06d}"


def wrong_then_right(page: Page, field: str, button: str, secret: str) -> None:
    """A mistyped code, refused; then the app's code."""
    page.get_by_label(field).fill("000000")
    page.get_by_role("button", name=button).click()
    expect(page.get_by_text("That code is not right")).to_be_visible()
    time.sleep(1)  # django-otp's wait after a wrong code
    page.get_by_label(field).fill(app_code(secret))
    page.get_by_role("button", name=button).click()


def password_step(page: Page, email: str = "alice@example.com") -> None:
    page.goto("/agent/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()


def test_two_factor_sign_in_is_set_up_from_the_settings_page(page: Page, alice: Agent) -> None:
    refused: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            refused.append(message.text)

    page.on("console", on_console)
    sign_in(page)
    page.goto("/agent/settings/")
    card = page.get_by_test_id("two-factor")
    expect(card).to_contain_text("Off: your password alone signs you in.")
    card.get_by_role("button", name="Set up two-factor sign-in").click()

    expect(page.get_by_role("heading", name="Set up two-factor sign-in")).to_be_visible()
    qr = page.get_by_test_id("second-factor-qr").locator("svg")
    expect(qr).to_be_visible()
    box = qr.bounding_box()
    assert box is not None and box["width"] >= 150 and box["height"] >= 150
    assert fits_the_screen(page)
    secret = page.get_by_test_id("second-factor-secret").inner_text().replace(" ", "")

    wrong_then_right(
        page, "The six-digit code the app shows now", "Turn on two-factor sign-in", secret
    )

    expect(page.get_by_text("Two-factor sign-in is on.")).to_be_visible()
    codes = page.get_by_test_id("recovery-codes").locator("li")
    expect(codes).to_have_count(second_factor.RECOVERY_CODES)
    expect(page.get_by_test_id("two-factor")).to_contain_text("10 recovery codes left.")
    assert fits_the_screen(page)
    device = TOTPDevice.objects.get(user=alice, confirmed=True)
    assert second_factor.secret_text(device).replace(" ", "") == secret
    page.reload()
    expect(page.get_by_test_id("recovery-codes")).to_have_count(0)  # shown once
    assert refused == []


def test_signing_in_with_a_code_from_the_app(laptop: Page, alice: Agent) -> None:
    enrolled = second_factor.enrol_for_command(agent=alice)
    secret = second_factor.secret_text(enrolled.device).replace(" ", "")
    password_step(laptop)
    expect(laptop.get_by_role("link", name="Settings")).to_have_count(0)  # no way round it
    laptop.goto("/agent/settings/")
    expect(laptop.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()

    wrong_then_right(laptop, "Code", "Verify", secret)

    expect(laptop.get_by_role("heading", name="Settings")).to_be_visible()
    assert laptop.url.endswith("/agent/settings/")  # where the agent was going
    expect(laptop.get_by_test_id("two-factor")).to_contain_text("On: signing in asks for a code")
    laptop.goto("/agent/")
    expect(laptop.get_by_test_id("status")).to_be_visible()


def test_signing_in_with_a_recovery_code_works_once(laptop: Page, alice: Agent) -> None:
    codes = second_factor.enrol_for_command(agent=alice).recovery_codes
    password_step(laptop)
    laptop.get_by_label("Code").fill(codes[0])
    laptop.get_by_role("button", name="Verify").click()
    expect(laptop.get_by_text("You used a recovery code: 9 left.")).to_be_visible()
    expect(laptop.get_by_test_id("status")).to_be_visible()
    assert laptop.url.endswith("/agent/")

    laptop.get_by_role("button", name="Sign out").click()
    expect(laptop.get_by_role("heading", name="Sign in")).to_be_visible()
    password_step(laptop)
    laptop.get_by_label("Code").fill(codes[0])
    laptop.get_by_role("button", name="Verify").click()
    expect(laptop.get_by_text("That code is not right.")).to_be_visible()
    assert "/agent/login/code" in laptop.url
