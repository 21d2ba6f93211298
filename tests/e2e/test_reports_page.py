"""The reports page in a browser (docs/reports.md, "The reports page"), on a
laptop and a phone: it takes the browser's time zone, the range and a filter
change the figures, and on a phone nothing scrolls the page sideways (wide
tables scroll within their box). The README's screenshots come from here."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, expect

from agents.models import Agent
from tests.agents.test_reports import chat_at
from tests.factories import AgentFactory, ChannelFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"  # tests.factories.AgentFactory


def test_the_reports_page_and_its_filters(
    chromium: Browser, web_process: Any, device: dict[str, Any], size: str, screenshots: Path
) -> None:
    ann, bob = AgentFactory.create(name="Ann Agent"), AgentFactory.create(name="Bob Agent")
    sue = AgentFactory.create(email="sue@example.com", name="Sue Lead", role=Agent.Role.SUPERVISOR)
    channel = ChannelFactory.create(name="Shop", agents=[ann, bob, sue])
    now = timezone.now()
    for hours, agent, answered in ((2, ann, 40), (26, ann, 200), (50, bob, 700), (75, bob, 30)):
        chat_at(channel, now - timedelta(hours=hours), accepted=10, answered=answered,
                finished=900, by=agent, rating="positive")  # fmt: skip
    chat_at(channel, now - timedelta(hours=28), finished=60)  # missed
    chat_at(channel, now - timedelta(days=20), accepted=5, answered=9, finished=90, by=ann)
    context = chromium.new_context(**device, base_url=web_process.url, timezone_id="Asia/Tokyo")
    page = context.new_page()
    page.goto("/agent/login/")
    page.get_by_label("Email").fill(sue.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("status")).to_be_visible()

    # The first load asks again in the browser's zone.
    page.goto("/agent/reports/")
    expect(page).to_have_url(re.compile(r"tz=Asia%2FTokyo"))
    chats = page.get_by_test_id("figure-chats").get_by_test_id("figure-now")
    page.get_by_test_id("period-30d").click()
    expect(chats).to_have_text("6")
    page.get_by_test_id("period-7d").click()
    expect(chats).to_have_text("5")
    expect(page.get_by_test_id("period-7d")).to_have_attribute("aria-current", "true")

    # An agent filter: Ann's chats only, in the figures and the tables.
    page.get_by_test_id("filter-agent").select_option(label="Ann Agent")
    page.get_by_test_id("apply").click()
    expect(chats).to_have_text("2")
    expect(page.get_by_test_id("agent-row")).to_have_count(1)
    expect(page.get_by_test_id("agent-row")).to_contain_text("Ann Agent")
    expect(page.locator("svg.chart[role=img]")).to_have_count(3)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    page.get_by_test_id("filter-agent").select_option(label="All")
    page.get_by_test_id("apply").click()
    expect(chats).to_have_text("5")
    page.screenshot(path=screenshots / f"reports-{size}.png", full_page=True)
    context.close()
