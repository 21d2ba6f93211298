"""The agent pages in the agent's language, in a real browser
(docs/translating.md): the browser's Accept-Language, the agent's own
choice over it, the scripts' words from the catalogue, Arabic right to left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Agent
from channels_api.models import ChatApiChannel
from tests.e2e.test_agent_pages import PASSWORD, Integrator

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def german(chromium: Browser, web_process: Any) -> Iterator[Page]:
    """A browser set to German: it sends ``Accept-Language: de-DE``."""
    context = chromium.new_context(
        viewport={"width": 1366, "height": 800}, base_url=web_process.url, locale="de-DE"
    )
    yield context.new_page()
    context.close()


def sign_in(page: Page, *, email: str = "alice@example.com", button: str) -> None:
    page.goto("/agent/login/")
    page.locator('input[name="username"]').fill(email)
    page.locator('input[name="password"]').fill(PASSWORD)
    page.get_by_role("button", name=button, exact=True).click()
    expect(page.get_by_test_id("status")).to_be_visible()


def test_a_german_browser_gets_german_pages_and_scripts(
    german: Page, web_process: Any, chat_api: ChatApiChannel, alice: Agent, screenshots: Path
) -> None:
    Integrator(web_process.url, chat_api).post(
        {"id": "de-1", "name": "Jana"},
        {"type": "text", "text": "Hallo! Meine Bestellung ist noch nicht angekommen."},
    )
    german.goto("/agent/login/")
    expect(german.get_by_role("heading", level=1)).to_have_text("Anmelden")
    expect(german.get_by_role("link", name="Passwort vergessen?")).to_be_visible()
    sign_in(german, button="Anmelden")

    expect(german.locator("html")).to_have_attribute("lang", "de")
    expect(german.locator("#queue-title")).to_contain_text("Warteschlange")
    expect(german.get_by_test_id("status")).to_have_accessible_name(
        "Sie sind offline. Online gehen"
    )
    # The scripts' words come from the catalogue: the shortcuts' list, and
    # the queue's waiting time.
    german.keyboard.press("?")
    expect(german.locator("dialog.shortcuts h2")).to_have_text("Tastenkürzel")
    expect(german.locator("dialog.shortcuts")).to_contain_text("diese Liste")
    german.keyboard.press("Escape")
    wait = german.get_by_test_id("queued-chat").locator("time.wait")
    expect(wait).to_have_text("gerade eben")
    assert (wait.get_attribute("title") or "").startswith("wartet seit ")

    # The chat open, the reply box's words German too (the README's picture).
    german.get_by_test_id("queued-chat").click()
    expect(german.locator(".msg-client")).to_contain_text("Bestellung")
    german.get_by_test_id("reply").click()
    box = german.get_by_label("Antwort an den Kunden")
    # Focused by the page's scripts: before they ran, Enter would only add a line.
    expect(box).to_be_focused()
    box.fill("Guten Tag, Jana! Ich sehe sofort nach.")
    box.press("Enter")
    expect(german.locator(".msg-agent").last).to_contain_text("Ich sehe sofort nach")
    german.screenshot(path=screenshots / "agent-german.png")


def test_the_agents_choice_overrides_the_browser(german: Page, alice: Agent) -> None:
    sign_in(german, button="Anmelden")
    german.goto("/agent/settings/")
    german.get_by_label("Sprache dieser Seiten").select_option(label="Русский")
    german.get_by_role("button", name="Speichern", exact=True).click()

    expect(german.locator(".flash")).to_contain_text("Настройки сохранены.")
    expect(german.get_by_role("heading", level=1)).to_have_text("Настройки")
    expect(german.locator("html")).to_have_attribute("lang", "ru")
    alice.refresh_from_db()
    assert alice.language == "ru"
    german.goto("/agent/")
    expect(german.locator("#queue-title")).to_contain_text("Очередь")
    german.keyboard.press("?")
    expect(german.locator("dialog.shortcuts h2")).to_have_text("Сочетания клавиш")

    # Back to the browser's language: blank.
    german.goto("/agent/settings/")
    german.get_by_label("Язык этих страниц").select_option(value="")
    german.get_by_role("button", name="Сохранить", exact=True).click()
    expect(german.get_by_role("heading", level=1)).to_have_text("Einstellungen")


def test_arabic_pages_read_right_to_left(german: Page, alice: Agent) -> None:
    Agent.objects.filter(pk=alice.pk).update(language="ar")
    sign_in(german, button="Anmelden")  # the sign-in page follows the browser

    expect(german.locator("html")).to_have_attribute("dir", "rtl")
    expect(german.locator("html")).to_have_attribute("lang", "ar")
    expect(german.locator("#queue-title")).to_contain_text("قائمة الانتظار")
    assert german.evaluate("getComputedStyle(document.body).direction") == "rtl"
    # The layout follows: the lists, first in the page, stand on the right.
    lists = german.locator("#lists").bounding_box()
    pane = german.locator(".conversation").bounding_box()
    assert lists and pane and lists["x"] > pane["x"]
