"""Calls and offline messages in a real browser: they arrive on an open agent
page by themselves, and the agent works them off without leaving it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import time
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import services
from agents.models import Agent, Call, CallbackSettings, Channel, OfflineMessage
from tests.factories import AgentFactory, ChannelFactory, ClientFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"  # tests.factories.AgentFactory
LIVE = 2 * 3000  # ms: the pages promise changes within 2 s (docs/testing.md, margin)


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(email="alice@example.com", name="Alice Agent", is_online=True)


@pytest.fixture
def website(alice: Agent) -> Channel:
    channel = ChannelFactory.create(name="Website", kind=Channel.Kind.WIDGET, agents=[alice])
    CallbackSettings.objects.create(
        channel=channel,
        enabled=True,
        working_days=[1, 2, 3, 4, 5, 6, 7],
        opens_at=time(0),
        closes_at=time.max,
    )
    return channel


@pytest.fixture
def page(chromium: Browser, web_process: Any, alice: Agent, website: Channel) -> Iterator[Page]:
    context = chromium.new_context(
        viewport={"width": 1366, "height": 800}, base_url=web_process.url
    )
    page = context.new_page()
    page.goto("/agent/login/")
    page.get_by_label("Email").fill(alice.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    yield page
    context.close()


def test_an_agent_works_off_calls_and_offline_messages_live(page: Page, website: Channel) -> None:
    expect(page.get_by_test_id("call")).to_have_count(0)
    page.evaluate("window.notReloaded = true")  # gone if the page reloads

    # A visitor asks to be called back, another leaves a message (as the widget will).
    dana = ClientFactory.create(channel=website, name="Dana Smith")
    services.request_callback(channel=website, phone="+1 212 555 0100", client=dana)
    call = page.get_by_test_id("call")
    expect(call).to_contain_text("+12125550100", timeout=LIVE)
    expect(call).to_contain_text("Dana Smith")
    expect(call).to_contain_text("Waiting for an agent")
    expect(page.locator("#calls-count")).to_have_text("1")

    services.leave_offline_message(
        channel=website,
        name="Eli Jones",
        email="eli@example.com",
        message="Please write back about invoice 12",
        page_url="https://shop.example/pricing",
        page_title="Pricing",
    )
    offline = page.get_by_test_id("offline-message")
    expect(offline).to_contain_text("Please write back about invoice 12", timeout=LIVE)
    expect(offline).to_contain_text("eli@example.com")
    expect(offline.get_by_role("link", name="Pricing")).to_have_attribute(
        "href", "https://shop.example/pricing"
    )

    # The agent dials: connected, then ended with the recording.
    call.get_by_test_id("call-agent-connected").click()
    expect(call).to_contain_text("Agent connected", timeout=LIVE)
    expect(call.get_by_test_id("call-agent-connected")).to_have_count(0)
    recording = call.get_by_label("Recording URL")
    recording.fill("ftp://rec.example/dana.mp3")
    call.get_by_test_id("call-end").click()
    expect(page.locator("#notice")).to_contain_text("a recording URL is an http(s) URL")
    expect(call).to_contain_text("Agent connected")
    recording.fill("https://rec.example/dana.mp3")
    page.wait_for_timeout(1500)  # live updates meanwhile keep what was typed
    expect(recording).to_have_value("https://rec.example/dana.mp3")
    call.get_by_test_id("call-end").click()
    expect(call).to_contain_text("Ended", timeout=LIVE)
    expect(call.get_by_role("link", name="Recording")).to_have_attribute(
        "href", "https://rec.example/dana.mp3"
    )
    expect(call.get_by_test_id("call-end")).to_have_count(0)
    expect(page.locator("#calls-count")).to_have_text("0")
    ended = Call.objects.get()
    assert (ended.status, ended.record_url) == ("end", "https://rec.example/dana.mp3")

    # The message is answered by e-mail, and marked handled.
    offline.get_by_test_id("offline-handled").click()
    expect(offline).to_contain_text("Handled by Alice Agent", timeout=LIVE)
    expect(offline.get_by_test_id("offline-handled")).to_have_count(0)
    assert OfflineMessage.objects.get().handled_at is not None

    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("#notice")).to_be_hidden()
