"""A visitor-typed address in a real browser, on a laptop and a phone: the
visitor confirms it through the mailed link's page, and an agent confirms
another from the chat page's client card (docs/transcripts.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents import services
from agents.models import Agent, ClientAddress, Mail
from devhooks.widget import services as widgets
from tests.e2e.test_agent_pages import sign_in
from tests.limits import forget_rate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_visitor_confirms_the_address_through_the_mailed_link(
    chromium: Browser, device: dict[str, Any], web_process: Any, alice: Agent
) -> None:
    forget_rate("confirm-address*")  # earlier runs' links to confirm, in Redis
    widget = widgets.create_widget_channel(name="Acme shop", agent_emails=[alice.email])
    visitor, _token = widgets.new_visitor(widget, {})
    widgets.set_contact(visitor, {"name": "Cy", "email": "cy@example.com"})
    [path] = re.findall(r"/mail/confirm/\S+", Mail.objects.get(to="cy@example.com").text)
    context = chromium.new_context(**device, base_url=web_process.url)
    page = context.new_page()

    page.goto(path)
    expect(page.get_by_role("heading")).to_have_text("Confirm your e-mail address")
    expect(page.get_by_test_id("confirm-address")).to_contain_text("cy@example.com")
    assert not ClientAddress.objects.get().trusted  # opening the link confirms nothing
    button = page.get_by_role("button", name="Confirm")
    box = button.bounding_box()
    assert box is not None and box["x"] + box["width"] <= device["viewport"]["width"]
    button.click()

    expect(page.get_by_role("heading")).to_have_text("Address confirmed")
    assert ClientAddress.objects.get().trusted
    page.goto(path)  # the link works once
    expect(page.get_by_role("heading")).to_have_text("Link not valid")
    context.close()


def test_an_agent_confirms_the_clients_address_on_the_chat_page(
    chromium: Browser, device: dict[str, Any], size: str, web_process: Any, alice: Agent
) -> None:
    widget = widgets.create_widget_channel(name="Acme shop", agent_emails=[alice.email])
    visitor, _token = widgets.new_visitor(widget, {})
    chat = widgets.send_message(widget, visitor, "hello").chat
    widgets.set_contact(visitor, {"email": "dee@example.com"})
    services.set_agent_status(agent=alice, online=True)
    services.accept_chat(chat=chat, agent=alice)
    context = chromium.new_context(**device, base_url=web_process.url)
    page = context.new_page()
    sign_in(page)

    page.goto(f"/agent/chats/{chat.pk}/")
    if size == "phone":
        page.get_by_role("button", name="Client details").click()
    expect(page.get_by_test_id("email-unconfirmed")).to_contain_text("dee@example.com")
    page.get_by_test_id("confirm-email").click()

    expect(page.get_by_test_id("confirm-email")).to_have_count(0)
    address = ClientAddress.objects.get()
    assert address.trusted and address.confirmed_by == alice
    context.close()
