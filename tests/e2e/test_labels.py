"""Labels in a real browser, on a laptop (docs/agent-pages.md, "Labels"): an
agent labels a chat from the side panel and sees the chips, coloured under
the CSP; a label set elsewhere shows on the open page without a reload."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import services
from agents.models import Agent
from channels_api.models import ChatApiChannel
from tests.e2e.test_agent_pages import sign_in
from tests.e2e.test_csp import WATCH
from tests.factories import ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LIVE = 2 * 3000  # ms: the pages promise changes within 2 s (docs/testing.md, margin)


@pytest.fixture
def page(chromium: Browser, web_process: Any, devices: dict[str, dict[str, Any]]) -> Iterator[Page]:
    context = chromium.new_context(**devices["laptop"], base_url=web_process.url)
    context.add_init_script(WATCH)
    page = context.new_page()
    yield page
    context.close()


def test_an_agent_labels_a_chat_and_sees_the_chips(
    page: Page, alice: Agent, chat_api: ChatApiChannel
) -> None:
    services.create_label(name="billing", colour="#1f77b4")
    services.create_label(name="vip", colour="#d62728")
    client = ClientFactory.create(channel=chat_api.channel, name="Ann Lee")
    chat = services.post_client_message(client=client, content=text("My invoice?")).chat
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")
    labels = page.get_by_test_id("labels")
    expect(labels).to_contain_text("No labels.")

    labels.get_by_test_id("edit-labels").click()
    labels.get_by_role("checkbox", name="billing").check()
    labels.get_by_test_id("save-labels").click()

    chips = page.get_by_test_id("chat-labels")
    expect(chips).to_have_text("billing", timeout=LIVE)
    assert chips.locator("circle").get_attribute("fill") == "#1f77b4"
    assert [label.name for label in chat.labels.all()] == ["billing"]
    # Another agent (here the service) adds one: the open page shows it.
    services.set_chat_labels(chat=chat, agent=alice, names=["billing", "vip"])
    expect(chips.get_by_test_id("label-chip")).to_have_text(["billing", "vip"], timeout=LIVE)
    assert page.evaluate("window.__violations") == []
