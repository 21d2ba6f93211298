"""The Content-Security-Policy in a real browser: every kind of page the
service renders works under it, with no violation reported, signed in as
staff; the admin's copy buttons copy and Swagger UI shows its operations."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from agents import services
from agents.content import Content
from agents.models import Agent, Chat
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"  # tests.factories.AgentFactory
# Collects every violation the page reports, from the first script on.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(
    `${event.violatedDirective} blocked ${event.blockedURI || "inline"} ` +
    `at ${event.sourceFile || document.location.pathname}:${event.lineNumber}`
  );
});
"""


class Watched:
    """A page whose CSP violations (events and console errors) are collected."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.console: list[str] = []
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            self.console.append(message.text)

    def open(self, path: str) -> Page:
        answer = self.page.goto(path)
        assert answer is not None and answer.status < 400, (path, answer and answer.status)
        assert "script-src 'self'" in answer.headers["content-security-policy"], path
        return self.page

    def assert_clean(self, where: str) -> None:
        self.page.wait_for_load_state("networkidle")
        seen = self.page.evaluate("window.__violations")
        assert seen == [] and self.console == [], (where, seen, self.console)


@pytest.fixture
def staff(db: None) -> Agent:
    return AgentFactory.create(email="admin@example.com", name="Ada Admin", role="admin")


@pytest.fixture
def chat_api(staff: Agent) -> ChatApiChannel:
    return create_chat_api_channel(
        name="Mobile app", webhook_url="https://chat.example.com/hook", agents=[staff]
    )[0]


@pytest.fixture
def chat(chat_api: ChatApiChannel) -> Chat:
    client = ClientFactory.create(channel=chat_api.channel, name="Ann Lee")
    services.post_client_message(client=client, content=text("Where is my parcel?"))
    photo = Content("photo", "", {"file": "https://cdn.example/box.jpg", "file_name": "box.jpg"})
    return services.post_client_message(client=client, content=photo).chat


@pytest.fixture
def browser(chromium: Browser, web_process: Any) -> Iterator[Watched]:
    context = chromium.new_context(
        base_url=web_process.url, permissions=["clipboard-read", "clipboard-write"]
    )
    context.add_init_script(WATCH)
    yield Watched(context.new_page())
    context.close()


def admin_sign_in(browser: Watched) -> None:
    page = browser.open("/admin/login/")
    browser.assert_clean("admin sign-in")
    page.locator("#id_username").fill("admin@example.com")
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#site-name")).to_be_visible()


def test_the_agent_pages_run_under_the_policy(browser: Watched, staff: Agent, chat: Chat) -> None:
    page = browser.open("/agent/login/")
    browser.assert_clean("agent sign-in")
    page.get_by_label("Email").fill("admin@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()

    page = browser.open(f"/agent/chats/{chat.pk}/")
    expect(page.locator(".msg-client").first).to_contain_text("Where is my parcel?")
    page.get_by_test_id("reply").click()
    # Focused by the page's scripts: before they ran, Enter would only add a line.
    expect(page.get_by_label("Reply to the client")).to_be_focused()
    page.get_by_label("Reply to the client").fill("Let me check")
    page.get_by_label("Reply to the client").press("Enter")
    expect(page.locator(".msg-agent")).to_contain_text("Let me check")
    page.wait_for_timeout(1500)  # a live poll or two
    browser.assert_clean("workspace")

    browser.open("/agent/history/")
    browser.assert_clean("history")

    # The reports page: its charts are SVG drawn by the server, its one script
    # adds the browser's time zone (a second load).
    page = browser.open("/agent/reports/")
    expect(page).to_have_url(re.compile(r"tz="))
    expect(page.locator("svg.chart[role=img]")).to_have_count(3)
    browser.assert_clean("reports")


def test_the_admin_runs_under_the_policy(
    browser: Watched, staff: Agent, chat: Chat, chat_api: ChatApiChannel
) -> None:
    admin_sign_in(browser)
    for path in [
        "/admin/",
        "/admin/channels_api/chatapichannel/",
        "/admin/channels_api/chatapichannel/add/",
        f"/admin/agents/agent/{staff.pk}/change/",
        f"/admin/agents/chat/{chat.pk}/change/",
        "/admin/delivery/delivery/",
        "/admin/axes/accessattempt/",
    ]:
        browser.open(path)
        browser.assert_clean(path)

    # The channel's page: copy buttons and the two-box agent picker.
    page = browser.open(f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/")
    expect(page.locator(".selector")).to_be_visible()  # FilteredSelectMultiple drew itself
    copy = page.locator('button[data-copy="endpoint-url"]')
    copy.click()
    expect(copy).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    # The web process builds the URL from its own PUBLIC_URL (tests/web/server.py).
    path = chat_api.endpoint_url.split("/", 3)[3]
    assert copied == f"{page.url.split('/admin/')[0]}/{path}"
    browser.assert_clean("channel page")

    # A new endpoint: the signing-secret page, whose button copies the secret.
    page = browser.open("/admin/delivery/endpoint/add/")
    page.locator("#id_url").fill("https://crm.example.com/hook")
    page.locator('input[name="_save"]').click()
    secret = page.locator("code.signing-secret").inner_text()
    assert secret.startswith("whsec_")
    # A click before the page's scripts ran would copy nothing (copy.js is
    # loaded at the end of the page); a person cannot click that fast.
    page.wait_for_load_state("load")
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == secret
    browser.assert_clean("secret page")


def test_swagger_ui_renders_its_operations_under_the_policy(browser: Watched, staff: Agent) -> None:
    admin_sign_in(browser)
    page = browser.open("/api/docs/")

    expect(page.locator(".opblock").first).to_be_visible(timeout=10_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any(path.endswith("/chats/{chat_id}/accept") for path in paths), paths
    # The Chat Channel API beside it: A1, A2 and the A3 request the integrator receives.
    summaries = " ".join(page.locator(".opblock-summary-description").all_inner_texts())
    for a in ("A1:", "A2:", "A3"):
        assert a in summaries, (a, summaries)
    assert any(path.endswith("/{public_id}/status") for path in paths), paths
    browser.assert_clean("swagger ui")


def test_the_locked_sign_in_page_runs_under_the_policy(browser: Watched, staff: Agent) -> None:
    page = browser.open("/agent/login/")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        page.get_by_label("Email").fill("admin@example.com")
        page.get_by_label("Password").fill("wrong password")
        page.get_by_role("button", name="Sign in").click()
        # The click returns before the answer arrives: wait for it, the refusal
        # or the lock, before looking (and before leaving the page).
        expect(page.locator("p.error, [data-testid=signin-locked]")).to_be_visible()
        if page.get_by_test_id("signin-locked").count():
            break
        page = browser.open("/agent/login/")

    expect(page.get_by_test_id("signin-locked")).to_contain_text("Sign-in is locked for")
    browser.assert_clean("locked sign-in")
