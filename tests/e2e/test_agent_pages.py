"""The agent pages in a real browser: the whole working day of an agent.

A live server, a real Celery worker delivering to a real integrator server,
and Chromium. The same tests save the README's screenshots.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, Page, Request, expect

from agents import services
from agents.models import Agent, Chat
from bots.services import attach_bot, create_bot_provider
from channels_api.models import ChatApiChannel
from tests.delivery.target import Reply, Target
from tests.factories import AgentFactory, ClientFactory, text
from tests.worker import Worker

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PASSWORD = "agent-password"
LIVE = 2 * 3000  # ms: the pages promise changes within 2 s (docs/testing.md, margin)


class Integrator:
    """The integrator's server, over real HTTP to the live server."""

    def __init__(self, live_url: str, chat_api: ChatApiChannel) -> None:
        path = chat_api.endpoint_url.split("/", 3)[3]
        self.endpoint = f"{live_url}/{path}"

    def status(self) -> str:
        return requests.get(f"{self.endpoint}/status", timeout=5).text

    def post(self, sender: dict[str, Any], message: dict[str, Any]) -> None:
        answer = requests.post(
            self.endpoint, json={"sender": sender, "message": message}, timeout=5
        )
        assert answer.status_code == 200, answer.text


@pytest.fixture
def page(chromium: Browser, web_process: Any) -> Iterator[Page]:
    context = chromium.new_context(
        viewport={"width": 1366, "height": 800}, base_url=web_process.url
    )
    page = context.new_page()
    yield page
    context.close()


def sign_in(page: Page, email: str = "alice@example.com", password: str = PASSWORD) -> None:
    page.goto("/agent/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("status")).to_be_visible()  # Sign out is in the menu on a phone
    assert page.url.endswith("/agent/")


def test_an_agents_day(
    page: Page, web_process: Any, chat_api: ChatApiChannel, target: Target,
    celery_worker: Worker, screenshots: Path,
) -> None:  # fmt: skip
    integrator = Integrator(web_process.url, chat_api)
    page.goto("/agent/login/")
    page.screenshot(path=screenshots / "login.png")
    sign_in(page)

    # Go online: the integrator's status turns 1.
    assert integrator.status() == "0"
    page.get_by_test_id("status").click()
    expect(page.get_by_test_id("status")).to_have_text("Online")
    assert integrator.status() == "1"

    # A customer writes through the Chat API: the queue shows it live, with a badge.
    integrator.post(
        {"id": 501, "name": "Ann Lee", "email": "ann@example.com", "invite": "Need help?"},
        {"type": "text", "text": "My order #1234 has not arrived"},
    )
    queued = page.get_by_test_id("queued-chat")
    expect(queued).to_contain_text("Ann Lee", timeout=LIVE)
    expect(queued).to_contain_text("My order #1234 has not arrived")
    expect(page).to_have_title("(1) Switchboard", timeout=LIVE)
    page.screenshot(path=screenshots / "queue.png")

    # Open it and press Reply.
    queued.click()
    expect(page.locator(".msg-client")).to_contain_text("My order #1234 has not arrived")
    expect(page.locator(".invite")).to_contain_text("Need help?")
    page.get_by_test_id("reply").click()
    expect(page.get_by_label("Reply to the client")).to_be_focused()  # the page's scripts ran

    # The customer types: the agent sees it.
    integrator.post({"id": 501}, {"type": "typein"})
    expect(page.locator("#client-typing")).to_be_visible(timeout=LIVE)
    integrator.post({"id": 501}, {"type": "typeout"})
    expect(page.locator("#client-typing")).to_be_hidden(timeout=LIVE)

    # The agent types (the integrator hears typein) and answers.
    box = page.get_by_label("Reply to the client")
    box.type("Sorry to hear that! Let me check", delay=5)
    target.wait_for(1)
    assert json.loads(target.received[0].body)["message"] == {"type": "typein"}
    box.press("Enter")
    mine = page.locator(".msg-agent").last
    expect(mine).to_contain_text("Let me check", timeout=LIVE)
    expect(mine.locator(".d-delivered")).to_be_visible(timeout=10_000)
    replies = [json.loads(r.body) for r in target.received]
    kinds = [r["message"]["type"] for r in replies]
    assert kinds == ["typein", "typeout", "text"]  # typing ends, then the message
    assert replies[-1]["message"]["text"] == "Sorry to hear that! Let me check"
    assert replies[-1]["recipient"] == {"id": 501}

    # A new message from the customer arrives live.
    integrator.post(
        {"id": 501},
        {
            "type": "photo",
            "file": "https://cdn.example/box.jpg",
            "file_name": "box.jpg",
            "file_size": 20480,
        },
    )
    expect(page.locator(".msg-client").last).to_contain_text("box.jpg", timeout=LIVE)

    # The integrator's server fails: the agent sees why, and retries.
    def down_for_messages(request: Any, index: int) -> Reply:
        is_text = json.loads(request.body)["message"]["type"] == "text"
        return Reply(500, "maintenance") if is_text else Reply()

    target.respond(down_for_messages)
    box.fill("Your parcel is on its way")
    box.press("Enter")
    failed = page.locator(".msg-agent").last
    expect(failed.get_by_test_id("delivery-failed")).to_contain_text(
        "not delivered", timeout=20_000
    )
    expect(failed.get_by_test_id("delivery-failed")).to_contain_text("500")
    sends = [r for r in target.received if b"parcel" in r.body]
    assert len(sends) == 3  # three sends, then the agent is told
    page.screenshot(path=screenshots / "chat.png")
    target.respond(lambda request, index: Reply())
    failed.get_by_test_id("retry").click()
    expect(failed.locator(".d-delivered")).to_be_visible(timeout=10_000)
    assert json.loads(target.received[-1].body)["message"]["text"] == "Your parcel is on its way"

    # Finish (the page asks first): the chat goes to the history.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("finish").click()
    expect(page.locator(".closed")).to_contain_text("This chat is finished")
    assert Chat.objects.get().state == Chat.State.FINISHED
    page.goto("/agent/history/?q=ann")
    expect(page.get_by_test_id("history-row")).to_contain_text("Ann Lee")
    page.screenshot(path=screenshots / "history.png")


def test_phone_layout(
    chromium: Browser, web_process: Any, chat_api: ChatApiChannel, alice: Agent
) -> None:
    context = chromium.new_context(
        viewport={"width": 390, "height": 844}, base_url=web_process.url, is_mobile=True
    )
    page = context.new_page()
    Integrator(web_process.url, chat_api).post(
        {"id": "p-1", "name": "Phone User"}, {"type": "text", "text": "Hi from my phone"}
    )
    sign_in(page)
    page.get_by_test_id("queued-chat").click()
    expect(page.locator(".msg-client")).to_contain_text("Hi from my phone")
    expect(page.locator(".lists")).to_be_hidden()
    page.locator(".back").click()
    expect(page.get_by_test_id("queued-chat")).to_be_visible()
    context.close()


def test_an_agent_only_sees_its_channels(
    chromium: Browser, web_process: Any, chat_api: ChatApiChannel
) -> None:
    AgentFactory.create(email="bob@example.com", name="Bob")
    Integrator(web_process.url, chat_api).post(
        {"id": 1, "name": "Secret Customer"}, {"type": "text", "text": "hi"}
    )
    context = chromium.new_context(base_url=web_process.url)
    page = context.new_page()
    sign_in(page, "bob@example.com")
    page.wait_for_timeout(1500)  # a live poll or two
    expect(page.get_by_text("Secret Customer")).to_have_count(0)
    chat = Chat.objects.get()
    assert page.goto(f"/agent/chats/{chat.pk}/").status == 404  # type: ignore[union-attr]
    context.close()


def test_an_open_page_holds_one_stream_and_asks_only_when_told(
    page: Page, alice: Agent, chat_api: ChatApiChannel
) -> None:
    asked: list[str] = []

    def count(request: Request) -> None:
        if "/agent/live" in request.url or "/agent/stream" in request.url:
            asked.append(request.url.split("?")[0].rsplit("/", 1)[1])

    page.on("request", count)
    sign_in(page)
    page.wait_for_timeout(4000)
    # One stream, and one catch-up as it opens: an idle page asks nothing more.
    assert asked == ["stream", "live"], asked

    client = ClientFactory.create(channel=chat_api.channel, name="Nora")
    services.post_client_message(client=client, content=text("Are you there?"))
    expect(page.get_by_test_id("queued-chat")).to_contain_text("Are you there?", timeout=LIVE)
    assert asked.count("stream") == 1 and asked.count("live") >= 2, asked


def test_a_bot_chat_shows_live_and_the_agent_takes_it_over(
    page: Page, web_process: Any, chat_api: ChatApiChannel, target: Target,
    celery_worker: Worker,
) -> None:  # fmt: skip
    provider_server = Target("127.0.0.1").start()
    try:
        provider = create_bot_provider(
            name="Acme bots", endpoint_url=provider_server.url("/bot"), display_name="Acme Bot"
        )
        attach_bot(channel=chat_api.channel, provider=provider, token="e2e-bot-token-0123")
        sign_in(page)
        page.get_by_test_id("status").click()
        expect(page.get_by_test_id("status")).to_have_text("Online")

        # A customer writes: the bot has the chat, and the agent sees it live, read-only.
        Integrator(web_process.url, chat_api).post(
            {"id": 601, "name": "Bo Chen"}, {"type": "text", "text": "Where is my refund?"}
        )
        with_bot = page.get_by_test_id("bot-chat")
        expect(with_bot).to_contain_text("Bo Chen", timeout=LIVE)
        expect(page.get_by_test_id("queued-chat")).to_have_count(0)
        provider_server.wait_for(1)
        asked = json.loads(provider_server.received[0].body)
        assert asked["event"] == "CLIENT_MESSAGE"
        with_bot.click()
        expect(page.locator(".closed")).to_contain_text("A bot answers this chat")

        # The bot answers: the open chat shows it under the bot's name.
        answer = requests.post(
            f"{web_process.url}/webhooks/{provider.provider_id}/e2e-bot-token-0123",
            json={
                "event": "BOT_MESSAGE",
                "id": asked["id"],
                "client_id": asked["client_id"],
                "chat_id": asked["chat_id"],
                "message": {"type": "TEXT", "text": "Refunds take 5 days."},
            },
            timeout=5,
        )
        assert answer.json() == {"result": "ok"}
        bot_message = page.locator(".msg-bot").last
        expect(bot_message).to_contain_text("Refunds take 5 days.", timeout=LIVE)
        expect(bot_message.locator(".author")).to_contain_text("Acme Bot")

        # Reply takes it over: the composer appears and the bot is told.
        page.get_by_test_id("reply").click()
        expect(page.get_by_label("Reply to the client")).to_be_focused()
        expect(page.get_by_test_id("bot-chat")).to_have_count(0, timeout=LIVE)
        provider_server.wait_for(2)
        assert json.loads(provider_server.received[1].body)["event"] == "AGENT_JOINED"
        assert Chat.objects.get().state == Chat.State.ACTIVE
    finally:
        provider_server.stop()
