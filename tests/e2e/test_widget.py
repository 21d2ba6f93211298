"""The website widget in a real browser, on host pages served from another
origin than the service's (docs/widget.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agents import services
from agents.content import Content
from agents.models import Agent, Chat
from devhooks.models import WidgetChannel
from devhooks.widget import services as widgets
from tests.e2e.conftest import record_network
from tests.e2e.host_pages import HostSite, host_site
from tests.factories import AgentFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"  # tests.factories.AgentFactory
LIVE = 2 * 5000  # ms (docs/testing.md, margin)

# Every callback the page may declare records its call, in order.
CALLBACKS = [
    "svc_onLoadCallback",
    "svc_onOpen",
    "svc_onMessageSent",
    "svc_onAccept",
    "svc_onClose",
    "svc_onIntroduction",
    "svc_onResizeCallback",
    "svc_onCallStart",
    "svc_onCallEnd",
    "svc_onChangeState",
    "svc_onClientStartChat",
    "svc_onMessageReceived",
    "svc_onWidgetDestroy",
]
RECORD = "window.{} = (arg) => window.calls.push([{}, arg === undefined ? null : arg]);\n"
RECORDER = "window.calls = [];\n" + "".join(
    RECORD.format(name, json.dumps(name)) for name in CALLBACKS
)


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(email="alice@example.com", name="Alice Agent", is_online=True)


@pytest.fixture
def widget(alice: Agent) -> WidgetChannel:
    return widgets.create_widget_channel(
        name="Website", agent_emails=[alice.email], callback=True, title="Talk to us"
    )


@pytest.fixture
def site() -> Iterator[HostSite]:
    with host_site() as running:
        yield running


@pytest.fixture
def visitor(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[BrowserContext]:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    record_network(context, request.node)
    yield context
    context.close()


def host_page(site: HostSite, service: str, widget: WidgetChannel, *, csp: str = "") -> str:
    """An ordinary site page: the recorder, some content, the widget's tag."""
    site.script("/record.js", RECORDER)
    body = (
        "<!doctype html><html><head><title>Shop</title>"
        '<script src="/record.js"></script></head>'
        "<body><h1>Our shop</h1><p id='content'>Things for sale.</p>"
        f'<script src="{service}/widget/{widget.widget_id}.js" async></script>'
        "</body></html>"
    )
    headers = {"Content-Security-Policy": csp} if csp else {}
    return site.page("/shop", body, **headers)


def calls(page: Page, name: str) -> list[Any]:
    return [arg for called, arg in page.evaluate("window.calls") if called == name]


def wait_loaded(page: Page) -> None:
    page.wait_for_function("window.calls.some(c => c[0] === 'svc_onLoadCallback')")


def test_a_visitor_chats_with_an_agent_and_a_reload_keeps_the_history(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    page = visitor.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    label = page.get_by_test_id("svc-label")
    expect(label).to_contain_text("Talk to us")
    assert page.evaluate("svc_api.chatMode()") == "online"

    assert page.evaluate("svc_api.open()") == {"result": "ok"}
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    assert calls(page, "svc_onOpen") == [None]
    page.get_by_test_id("svc-input").fill("Where is my order?")
    page.get_by_test_id("svc-input").press("Enter")
    expect(page.get_by_test_id("svc-msg")).to_have_text(["Where is my order?"])
    page.wait_for_function("window.calls.some(c => c[0] === 'svc_onMessageSent')")

    chat = Chat.objects.get(channel=widget.channel)
    assert chat.state == Chat.State.QUEUED
    services.accept_chat(chat=chat, agent=alice)
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent", timeout=LIVE)
    services.set_agent_typing(chat=chat, agent=alice, typing=True)
    expect(page.get_by_test_id("svc-typing")).to_be_visible(timeout=LIVE)
    services.post_agent_message(
        chat=chat, agent=alice, content=Content("text", "It ships today.", {})
    )
    expect(page.locator("[data-author=agent]")).to_contain_text("It ships today.", timeout=LIVE)
    expect(page.get_by_test_id("svc-typing")).to_be_hidden()
    assert len(calls(page, "svc_onAccept")) == 1
    assert len(calls(page, "svc_onMessageSent")) == 1  # the first message only
    page.get_by_test_id("svc-input").fill("Thanks!")
    page.get_by_test_id("svc-send").click()
    expect(page.locator("[data-author=client]")).to_have_count(2)
    assert len(calls(page, "svc_onMessageSent")) == 1

    page.reload()
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    expect(page.get_by_test_id("svc-msg")).to_contain_text(
        ["Where is my order?", "It ships today.", "Thanks!"]
    )
    assert errors == []
