"""The CRM panel in a real browser: a real local HTTP server plays the CRM.

The developer webhook points at it; the agent presses Reply, the CRM hears
``chat_accepted`` and answers, and the agent's side panel fills by the
page's live poll, without a reload (docs/webhooks.md, section 4).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from agents import services as chats
from agents.models import Agent, Channel, Chat
from delivery.models import Delivery
from devhooks.webhooks.services import PURPOSE, set_developer_webhook
from tests.delivery.target import Received, Reply, Target
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.worker import Worker

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"
LIVE = 2 * 3000  # ms: the page asks for changes once a second (docs/testing.md, margin)
CRM_LINK = "https://crm.example.com/card/7"
HOSTILE = "<script>alert(1)</script> 3 open"
ANSWER = {
    "result": "OK",
    "custom_data": [{"title": "Orders", "content": HOSTILE}],
    "contact_info": {"name": "Carla CRM", "email": "carla@example.com"},
    "enable_assign": True,
    "crm_link": CRM_LINK,
}


class Crm:
    """The CRM's server: answers ``chat_accepted`` with a reply of the test's
    choosing once the test lets it (``release``), every other event with ok."""

    def __init__(self, server: Target) -> None:
        self.server = server
        self.answer: Any = ANSWER
        self.gate = threading.Event()
        self.gate.set()
        server.respond(self._respond)

    def _respond(self, request: Received, index: int) -> Reply:
        event = json.loads(request.body)
        if event.get("event_name") != "chat_accepted":
            return Reply(200, '{"result": "ok"}', {"Content-Type": "application/json"})
        # Held (at most 4 s, under the policy's 5 s timeout) so the test can
        # look at the page before the answer arrives.
        self.gate.wait(4)
        return Reply(200, json.dumps(self.answer), {"Content-Type": "application/json"})

    def events(self, count: int) -> list[dict[str, Any]]:
        return [json.loads(request.body) for request in self.server.wait_for(count)]


@pytest.fixture
def crm(db: None) -> Iterator[Crm]:
    server = Target("127.0.0.1").start()
    set_developer_webhook(url=server.url("/switchboard"))
    crm = Crm(server)
    yield crm
    crm.gate.set()  # a held answer goes, so the server can stop
    server.stop()


@pytest.fixture
def cora(db: None) -> Agent:
    return AgentFactory.create(email="cora@example.com", name="Cora Agent", is_online=True)


@pytest.fixture
def queued_chat(cora: Agent) -> Chat:
    channel = ChannelFactory.create(name="Shop website", kind=Channel.Kind.WIDGET, agents=[cora])
    client = ClientFactory.create(channel=channel, name="Ann Lee", email="ann@example.com")
    return chats.post_client_message(client=client, content=text("Where is my order?")).chat


@pytest.fixture
def page(chromium: Browser, web_process: Any) -> Iterator[Page]:
    context = chromium.new_context(
        viewport={"width": 1366, "height": 800}, base_url=web_process.url
    )
    page = context.new_page()
    yield page
    context.close()


def sign_in(page: Page, email: str) -> None:
    page.goto("/agent/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def reply_to(page: Page, chat: Chat) -> None:
    page.goto(f"/agent/chats/{chat.pk}/")
    page.get_by_test_id("reply").click()
    expect(page.get_by_label("Reply to the client")).to_be_focused()  # the page's scripts ran


def final_delivery(event: str, timeout: float = 15) -> Delivery:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = Delivery.objects.filter(purpose=PURPOSE, event=event).first()
        if item is not None and item.is_final:
            return item
        time.sleep(0.1)
    raise AssertionError(f"no final {event} delivery within {timeout} s")


def watch_for_dialogs(page: Page) -> list[str]:
    seen: list[str] = []

    def record(dialog: Dialog) -> None:
        seen.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    return seen


def mark_page(page: Page) -> Callable[[], bool]:
    """A mark on this very page; gone if it was reloaded or left."""
    page.evaluate("window.__sameCrmPage = true")
    return lambda: page.evaluate("window.__sameCrmPage === true") is True


def test_the_crm_answer_fills_the_panel_live_and_assign_tells_the_crm(
    page: Page, crm: Crm, cora: Agent, queued_chat: Chat, celery_worker: Worker
) -> None:
    dialogs = watch_for_dialogs(page)
    crm.gate.clear()
    sign_in(page, cora.email)
    reply_to(page, queued_chat)

    # The CRM hears chat_accepted, with the chat's id as a number and the agent.
    [accepted] = crm.events(1)
    assert accepted["event_name"] == "chat_accepted"
    assert type(accepted["chat_id"]) is int and accepted["chat_id"] == queued_chat.pk
    assert accepted["agent"] == {
        "id": cora.pk,
        "name": "Cora Agent",
        "email": "cora@example.com",
        "phone": "",
    }

    # The page is open, and shows nothing of the CRM yet; then the CRM answers.
    panel = page.locator("#panel")
    expect(panel).to_contain_text("No CRM data for this chat.")
    same_page = mark_page(page)
    crm.gate.set()

    field = panel.locator(".crm .field").filter(has_text="Orders")
    expect(field).to_contain_text(HOSTILE, timeout=LIVE)  # the tags as text
    assert same_page(), "the panel filled by a reload, not by the live poll"
    assert panel.locator("script").count() == 0
    assert dialogs == []
    expect(panel).to_contain_text("Carla CRM")
    expect(panel).to_contain_text("carla@example.com")
    expect(panel).not_to_contain_text("No CRM data")
    crm_link = panel.get_by_role("link", name="Open in CRM")
    expect(crm_link).to_be_visible()
    expect(crm_link).to_have_attribute("href", CRM_LINK)
    assign = panel.get_by_test_id("crm-assign")
    expect(assign).to_be_visible()
    expect(assign).to_be_enabled()

    # The assign button comes before the custom fields, the CRM link under them.
    def top(locator: Any) -> float:
        box = locator.bounding_box()
        assert box is not None
        return float(box["y"])

    assert top(assign) < top(field) < top(crm_link)
    assert final_delivery("chat_accepted").status == Delivery.Status.DELIVERED

    # Assign: the CRM is asked to bind the client to the card of the crm_link.
    assign.click()
    [_accepted, assigned] = crm.events(2)
    assert assigned["event_name"] == "chat_assigned"
    assert assigned["chat_id"] == queued_chat.pk
    assert assigned["assign_to"] == CRM_LINK
    assert assigned["agent"]["id"] == cora.pk
    expect(panel.get_by_test_id("crm-assign")).to_contain_text("Assigned", timeout=LIVE)
    assert dialogs == []


def test_safe_url_hides_a_crm_link_to_another_domain(
    page: Page, crm: Crm, cora: Agent, queued_chat: Chat, celery_worker: Worker
) -> None:
    set_developer_webhook(url=crm.server.url("/switchboard"), safe_url_domains=["example.org"])
    sign_in(page, cora.email)
    reply_to(page, queued_chat)

    panel = page.locator("#panel")
    expect(panel).to_contain_text(HOSTILE, timeout=LIVE + 5000)
    expect(panel).to_contain_text("Carla CRM")
    assert final_delivery("chat_accepted").status == Delivery.Status.DELIVERED
    expect(panel.get_by_role("link", name="Open in CRM")).to_have_count(0)
    expect(page.locator(f'a[href="{CRM_LINK}"]')).to_have_count(0)
    assert Chat.objects.get(pk=queued_chat.pk).crm_link == ""


def test_a_failure_result_shows_nothing_and_fails_the_delivery(
    page: Page, crm: Crm, cora: Agent, queued_chat: Chat, celery_worker: Worker
) -> None:
    crm.answer = {"result": "FAILURE"}
    sign_in(page, cora.email)
    reply_to(page, queued_chat)

    item = final_delivery("chat_accepted")

    assert (item.status, item.last_error, item.attempts) == (
        Delivery.Status.FAILED,
        "result: FAILURE",
        1,
    )
    page.wait_for_timeout(2000)  # two polls after the answer was stored
    panel = page.locator("#panel")
    expect(panel).to_contain_text("No CRM data for this chat.")
    expect(panel.get_by_role("link", name="Open in CRM")).to_have_count(0)
    expect(panel.get_by_test_id("crm-assign")).to_have_count(0)
    chat = Chat.objects.get(pk=queued_chat.pk)
    assert (chat.custom_data, chat.contact_info, chat.crm_link, chat.enable_assign) == (
        [],
        {},
        "",
        False,
    )
    assert len(crm.server.received) == 1  # a refusal is not retried
