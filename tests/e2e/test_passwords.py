"""Passwords in a real browser, on a laptop and a phone: a forgotten one
reset through the link the worker mails, and a change on the settings page
that signs the agent's other sessions out."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent, Mail
from tests.e2e.test_agent_pages import PASSWORD, sign_in
from tests.limits import forget_rate
from tests.worker import Worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW = "quiet-harbour-lantern"


@pytest.fixture(autouse=True)
def _fresh_rates() -> None:
    forget_rate("password-*")  # a Redis count outlives the test database


def fits_the_screen(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def sent_mail_to(address: str, timeout: float = 30) -> Mail:
    """The outbox row the worker wrote and sent (to the file backend)."""
    deadline = time.monotonic() + timeout
    while True:
        mail = Mail.objects.filter(to=address, status=Mail.Status.SENT).first()
        if mail is not None:
            return mail
        assert time.monotonic() < deadline, list(Mail.objects.values("to", "status"))
        time.sleep(0.2)


def test_a_forgotten_password_is_reset_from_the_sign_in_page(
    page: Page, alice: Agent, celery_worker: Worker
) -> None:
    page.goto("/agent/login/")
    page.get_by_role("link", name="Forgot password?").click()
    page.get_by_label("Email").fill("alice@example.com")
    page.get_by_role("button", name="Mail me a link").click()
    expect(page.get_by_test_id("reset-sent")).to_contain_text("If an agent signs in with that")
    assert fits_the_screen(page)

    mail = sent_mail_to("alice@example.com")
    found = re.search(r"https?://[^/\s]+(/agent/password/reset/\S+/)", mail.text)
    assert found, mail.text
    page.goto(found.group(1))
    expect(page.get_by_role("heading", name="Choose a new password")).to_be_visible()
    assert "set-password" in page.url  # the token left the address bar
    assert fits_the_screen(page)

    page.get_by_label("New password", exact=True).fill("password")
    page.get_by_label("New password again").fill("password")
    page.get_by_role("button", name="Set the new password").click()
    expect(page.get_by_text("This password is too common.")).to_be_visible()
    page.get_by_label("New password", exact=True).fill(NEW)
    page.get_by_label("New password again").fill(NEW)
    page.get_by_role("button", name="Set the new password").click()

    expect(page.get_by_text("Your new password is set: sign in with it.")).to_be_visible()
    sign_in(page, "alice@example.com", NEW)


def test_changing_the_password_on_the_settings_page_signs_out_the_other_sessions(
    page: Page, chromium: Browser, web_process: Any, alice: Agent
) -> None:
    other = chromium.new_context(base_url=web_process.url)
    elsewhere = other.new_page()
    sign_in(elsewhere, "alice@example.com", PASSWORD)
    sign_in(page, "alice@example.com", PASSWORD)

    page.goto("/agent/settings/")
    form = page.get_by_test_id("password-form")
    form.get_by_label("Current password").fill("not-my-password")
    form.get_by_label("New password", exact=True).fill(NEW)
    form.get_by_label("New password again").fill(NEW)
    form.get_by_role("button", name="Change password").click()
    expect(page.get_by_text("Your current password is not right.")).to_be_visible()
    assert fits_the_screen(page)

    form.get_by_label("Current password").fill(PASSWORD)
    form.get_by_label("New password", exact=True).fill(NEW)
    form.get_by_label("New password again").fill(NEW)
    form.get_by_role("button", name="Change password").click()

    expect(page.get_by_text("Your password is changed")).to_be_visible()
    page.goto("/agent/")
    expect(page.get_by_test_id("status")).to_be_visible()  # still signed in here
    elsewhere.goto("/agent/")
    expect(elsewhere.get_by_role("heading", name="Sign in")).to_be_visible()
    assert "/agent/login/" in elsewhere.url
    other.close()
