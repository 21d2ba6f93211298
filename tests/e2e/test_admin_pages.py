"""The admin in a real browser: the delivery log readable on a 1366 px
screen (no sideways scroll, status, tries and the last error first) and
usable on a 375 px phone; its screenshot for the README."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import services as agent_services
from channels_api.services import create_chat_api_channel
from delivery import services
from delivery.models import Delivery
from tests.delivery.target import Reply, Target, drive, send
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"  # tests.factories.AgentFactory


@pytest.fixture
def admin_page(chromium: Browser, web_process: Any, device: dict[str, Any]) -> Iterator[Page]:
    AgentFactory.create(email="admin@example.com", role="admin")
    context = chromium.new_context(**device, base_url=web_process.url)
    page = context.new_page()
    page.goto("/admin/login/")
    page.locator("#id_username").fill("admin@example.com")
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#site-name")).to_contain_text("Switchboard admin")
    yield page
    context.close()


def assert_no_sideways_scroll(page: Page) -> None:
    """Nothing of a list scrolls sideways: not the page, nor the box Django puts the table in."""
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    box = page.evaluate(
        """() => {
            const results = document.querySelector("#changelist-form .results");
            return {scroll: results.scrollWidth, client: results.clientWidth,
                    table: document.querySelector("#result_list").offsetWidth};
        }"""
    )
    assert box["scroll"] <= box["client"] and box["table"] <= box["client"], box


def test_the_delivery_log_reads_on_a_laptop_and_a_phone(
    admin_page: Page, target: Target, size: str, screenshots: Path
) -> None:
    endpoint, _secret = services.create_endpoint(url=target.url("/crm/a-rather-long/path"))
    # A long error with a long unbroken word: the list must wrap it, not widen.
    message = "upstream proxy timed out while reading the answer " * 6 + "x" * 120
    error = {"error": {"code": "upstream_timeout", "message": message}}
    target.respond(lambda request, index: Reply(502, json.dumps(error)))
    for number, event in enumerate(("chat_accepted", "chat_finished", "chat_updated")):
        delivery = send(
            endpoint,
            {"text": "hi"},
            event=event,
            policy="chat_api_message",
            subject=f"chat:{number}",
        )
        drive(delivery)
    assert Delivery.objects.filter(status=Delivery.Status.FAILED).count() == 3

    admin_page.goto("/admin/delivery/delivery/")
    expect(admin_page.locator("h1")).to_have_text("Delivery log")
    expect(admin_page.locator(".paginator")).to_contain_text("3 deliveries")
    headers = admin_page.locator("#result_list thead th").all_inner_texts()
    assert [h.strip().lower() for h in headers[1:4]] == ["status", "tries", "last error"]
    expect(admin_page.locator("td.field-tries").first).to_have_text("3")
    last_error = admin_page.locator("td.field-last_error_short span").first
    expect(last_error).to_contain_text("upstream_timeout: upstream proxy timed out")
    # The list shows the start; the whole error is on hover (and on the row's page).
    expect(last_error).to_have_attribute("title", f"upstream_timeout: {message}")
    expect(admin_page.locator("td.field-event_subject").first).to_contain_text("chat:2")
    if size == "laptop":
        assert_no_sideways_scroll(admin_page)
        admin_page.screenshot(path=screenshots / "admin-delivery-log.png", full_page=True)
    else:  # the table scrolls inside its box; the page itself does not
        assert admin_page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    # A row opens read-only, with the whole last error.
    admin_page.locator("#result_list tbody a").first.click()
    expect(admin_page.locator(".field-last_error")).to_contain_text("x" * 120)
    expect(admin_page.locator("input[name=_save]")).to_have_count(0)
    expect(admin_page.locator(".deletelink")).to_have_count(0)


@pytest.mark.parametrize("size", ["laptop"])
def test_the_agent_picker_has_its_label_beside_it(admin_page: Page) -> None:
    chat_api, _ = create_chat_api_channel(name="App", webhook_url="http://127.0.0.1:9/x")
    AgentFactory.create(name="Alice Agent")
    for url in (
        "/admin/channels_api/chatapichannel/add/",
        f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/",
        "/admin/devhooks/widgetchannel/add/",
        f"/admin/agents/channel/{chat_api.channel.pk}/change/",
    ):
        admin_page.goto(url)
        row = admin_page.locator(".form-row.field-agents")
        label, picker = row.get_by_text("Agents:", exact=True), row.locator(".selector")
        expect(picker).to_be_visible()
        label_box, picker_box = label.bounding_box(), picker.bounding_box()
        assert label_box is not None and picker_box is not None
        # On the picker's left, level with its top.
        assert label_box["x"] + label_box["width"] <= picker_box["x"], url
        assert abs(label_box["y"] - picker_box["y"]) < 20, url
        # Tied to it: a click on the label goes to the list of agents to pick from.
        label.click()
        expect(admin_page.locator("#id_agents_from")).to_be_focused()
        expect(admin_page.locator("#id_agents_from")).to_contain_text("Alice Agent")
        expect(admin_page.locator("#id_agents_from")).not_to_contain_text("admin@example.com")


def test_the_admin_is_the_services_with_its_names_and_one_place_per_channel_kind(
    admin_page: Page, size: str
) -> None:
    admin_page.goto("/admin/")
    expect(admin_page).to_have_title(re.compile(r"\| Switchboard admin$"))
    icon = admin_page.locator('link[rel="icon"]')
    assert admin_page.request.get(icon.get_attribute("href") or "").ok  # the favicon is served
    content = admin_page.locator("#content-main")
    for name in ("Delivery log", "API tokens", "Chat API channels", "Website widgets"):
        expect(content.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(content.get_by_role("link", name="Groups")).to_have_count(0)
    # Channels of every kind are listed in one place but made where their kind is.
    admin_page.goto("/admin/agents/channel/")
    expect(admin_page.get_by_role("link", name="Add channel")).to_have_count(0)
    admin_page.goto("/admin/channels_api/chatapichannel/add/")
    expect(admin_page.get_by_text("Webhook URL", exact=False).first).to_be_visible()
    if size == "laptop":  # the page does not scroll sideways
        assert admin_page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )


def test_the_chat_list_shows_the_agent_and_fits_a_laptop(admin_page: Page, size: str) -> None:
    channel, _ = create_chat_api_channel(
        name="Customer support for the northern region webshop", webhook_url="http://127.0.0.1:9/x"
    )
    alice = AgentFactory.create(name="Alice Agent-With-A-Rather-Long-Double-Name")
    channel.channel.agents.add(alice)
    for number in range(3):
        client = ClientFactory.create(
            channel=channel.channel,
            name=f"Maximiliane Konstantinopoulou-Wittgenstein {number}",
            email=f"maximiliane.konstantinopoulou-wittgenstein.{number}@example.com",
        )
        chat = agent_services.post_client_message(client=client, content=text("hello")).chat
    agent_services.accept_chat(chat=chat, agent=alice)

    admin_page.goto("/admin/agents/chat/")

    headers = admin_page.locator("#result_list thead th").all_inner_texts()
    assert "agent" in [header.strip().lower() for header in headers]
    agent_cells = admin_page.locator("td.field-agent")
    expect(agent_cells.filter(has_text=alice.name)).to_have_count(1)
    expect(agent_cells.filter(has_text=re.compile(r"^-$"))).to_have_count(2)  # they wait
    if size == "laptop":
        assert_no_sideways_scroll(admin_page)
    else:  # the table scrolls inside its box; the page itself does not
        assert admin_page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
