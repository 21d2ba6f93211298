"""The visitor's side of the website widget in a real browser, with the rest
of the service behind it: an agent answering in the agent pages, a bot with
Markdown and buttons, the offline and callback forms, custom data reaching
the agent's panel, keyboard-only use, a phone, and the README's screenshots.

Host pages come from ``tests.e2e.host_pages`` on another origin than the
service's; the service is the real web process (``web_process``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
import requests
from django.conf import settings
from playwright.sync_api import Browser, BrowserContext, Locator, Page, Route, expect

from agents import services
from agents.content import Content
from agents.models import Agent, Call, Chat, Client, Message, OfflineMessage
from agents.selectors import calls_for_agent
from bots.services import attach_bot, create_bot_provider
from delivery.models import Delivery
from devhooks.models import WidgetChannel
from devhooks.webhooks.services import set_developer_webhook
from tests.e2e.host_pages import HostSite
from tests.e2e.test_widget import (  # noqa: F401 (fixtures)
    LIVE,
    PASSWORD,
    RECORDER,
    alice,
    calls,
    host_page,
    site,
    visitor,
    wait_loaded,
    widget,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BOT_TOKEN = "widget-bot-token-0123"
SHADOW = "document.querySelector('#svc-widget').shadowRoot"

# The WCAG 2 contrast ratio of each piece of text the widget shows, against
# the first opaque background behind it (the page's white when none);
# decorations hidden from screen readers aside.
CONTRAST = """(root) => {
  const rgb = (value) => {
    const m = value.match(/rgba?\\(([\\d.]+),\\s*([\\d.]+),\\s*([\\d.]+)(?:,\\s*([\\d.]+))?/);
    return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : null;
  };
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let node = el; node; node = node.parentElement || (node.getRootNode().host || null)) {
      const c = rgb(getComputedStyle(node).backgroundColor);
      if (c && c[3] === 1) return c;
    }
    return [255, 255, 255, 1];
  };
  const out = [];
  root.querySelectorAll('*').forEach((el) => {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length || el.closest('[aria-hidden=true]')) return;
    const fg = lum(rgb(getComputedStyle(el).color)), bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    out.push([el.textContent.trim().slice(0, 40), Math.round(ratio * 100) / 100]);
  });
  return out;
}"""


# --- helpers --------------------------------------------------------------------


@pytest.fixture
def agent_page(chromium: Browser, web_process: Any, alice: Agent) -> Iterator[Page]:  # noqa: F811
    """Alice, signed in to the agent pages in a browser of her own."""
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


def shop_page(
    host: HostSite, service: str, channel: WidgetChannel, *, head: str = "", body: str = ""
) -> str:
    """A host page like ``host_page``, with what a test adds to its head and body."""
    host.script("/record.js", RECORDER)
    html = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Shop</title>"
        f"{head}<script src='/record.js'></script></head>"
        f"<body><h1>Our shop</h1>{body}"
        f'<script src="{service}/widget/{channel.widget_id}.js" async></script>'
        "</body></html>"
    )
    return host.page("/shop", html)


class Stream:
    """Watches the widget's live stream from the browser's side (DevTools'
    network events): ``wait_open`` returns once its first bytes came, when
    the server hands it every later event."""

    def __init__(self, page: Page) -> None:
        self.page, self.ids, self.open = page, set[str](), False
        cdp = page.context.new_cdp_session(page)
        cdp.on("Network.requestWillBeSent", self._request)
        cdp.on("Network.dataReceived", self._data)
        cdp.send("Network.enable")

    def _request(self, event: dict[str, Any]) -> None:
        if "/visitor/" in event["request"]["url"] and "/stream" in event["request"]["url"]:
            self.ids.add(event["requestId"])

    def _data(self, event: dict[str, Any]) -> None:
        self.open = self.open or event["requestId"] in self.ids

    def wait_open(self, timeout: float = LIVE) -> None:
        waited = 0
        while not self.open:
            assert waited < timeout, "the widget's stream did not open"
            self.page.wait_for_timeout(20)  # lets Playwright hand on the events
            waited += 20


def watch(page: Page) -> list[str]:
    """The page's uncaught errors."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def say(page: Page, text: str) -> None:
    box = page.get_by_test_id("svc-input")
    box.fill(text)
    box.press("Enter")
    expect(page.locator("[data-author=client]").last).to_have_text(text, timeout=LIVE)


def shadow(page: Page, script: str) -> Any:
    """``script`` evaluated with ``root`` the widget's shadow root."""
    return page.evaluate(f"(() => {{ const root = {SHADOW}; return {script}; }})()")


def snap(page: Page, element: Locator, path: Path, margin: int = 16) -> None:
    """A screenshot of ``element`` and a little of the page around it."""
    box = element.bounding_box()
    assert box is not None
    size = page.viewport_size
    assert size is not None
    x, y = max(0, box["x"] - margin), max(0, box["y"] - margin)
    width = min(size["width"] - x, box["width"] + 2 * margin)
    height = min(size["height"] - y, box["height"] + 2 * margin)
    page.screenshot(path=path, clip={"x": x, "y": y, "width": width, "height": height})


def chat_of(widget: WidgetChannel) -> Chat:  # noqa: F811
    return Chat.objects.select_related("client").get(channel=widget.channel)


# --- 1. a chat with an agent --------------------------------------------------------


def test_a_full_chat_with_an_agent_in_the_agent_pages(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, agent_page: Page,  # noqa: F811
) -> None:  # fmt: skip
    set_developer_webhook(url="https://crm.example.com/hook")
    url = host_page(site, web_process.url, widget) + "?utm_source=news&utm_campaign=spring"
    page = visitor.new_page()
    errors, stream = watch(page), Stream(page)
    page.goto(url)
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()
    say(page, "Hello, is my parcel on its way?")
    stream.wait_open()

    # Alice sees the chat in her queue, live, and takes it.
    agent = agent_page
    queued = agent.get_by_test_id("queued-chat")
    expect(queued).to_contain_text("Hello, is my parcel on its way?", timeout=LIVE)
    queued.click()
    agent.get_by_test_id("reply").click()
    reply = agent.get_by_label("Reply to the client")
    expect(reply).to_be_focused()  # the page's scripts ran: Enter sends
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent", timeout=LIVE)
    expect(page.get_by_test_id("svc-messages")).to_contain_text("Alice Agent joined the chat")

    # The visitor types: Alice sees it; the message ends it.
    box = page.get_by_test_id("svc-input")
    box.press_sequentially("Ordered on Monday", delay=10)
    expect(agent.locator("#client-typing")).to_be_visible(timeout=LIVE)
    box.press("Enter")
    expect(agent.locator(".msg-client").last).to_contain_text("Ordered on Monday", timeout=LIVE)
    expect(agent.locator("#client-typing")).to_be_hidden(timeout=LIVE)

    # Alice types: the visitor sees it, then her answer, live.
    reply.press_sequentially("Let me check", delay=10)
    expect(page.get_by_test_id("svc-typing")).to_be_visible(timeout=LIVE)
    reply.press("Enter")
    answer = page.locator("[data-author=agent]")
    expect(answer).to_contain_text("Let me check", timeout=LIVE)
    expect(answer).to_contain_text("Alice Agent")
    expect(page.get_by_test_id("svc-typing")).to_be_hidden()

    # Alice finishes the chat: the visitor rates it.
    agent.once("dialog", lambda dialog: dialog.accept())  # Finish asks first
    agent.get_by_test_id("finish").click()
    expect(agent.locator(".closed")).to_contain_text("This chat is finished")
    rate = page.get_by_test_id("svc-rate")
    expect(rate).to_be_visible(timeout=LIVE)
    rate.locator("[data-rating=positive]").click()
    expect(page.get_by_test_id("svc-messages")).to_contain_text("Thank you for your rating.")
    expect(rate).to_be_hidden()
    chat = chat_of(widget)
    assert (chat.state, chat.rating) == (Chat.State.FINISHED, "positive")
    assert [m.text for m in chat.messages.filter(author=Message.Author.CLIENT)] == [
        "Hello, is my parcel on its way?",
        "Ordered on Monday",
    ]

    # The CRM heard chat_accepted with the visitor's session.
    accepted = json.loads(Delivery.objects.get(event="chat_accepted").body)
    assert accepted["chat_id"] == chat.pk
    assert accepted["widget_id"] == widget.widget_id
    assert accepted["page"] == {"url": url, "title": "Shop"}
    session = accepted["session"]
    assert session["utm_json"] == {
        "source": "news",
        "campaign": "spring",
        "content": "",
        "medium": "",
        "term": "",
    }
    assert session["ip_addr"] == "127.0.0.1"
    assert session["user_agent"] == page.evaluate("navigator.userAgent")
    assert errors == []


# --- 2. a bot ---------------------------------------------------------------------


def test_a_bot_answers_in_markdown_and_with_buttons(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, screenshots: Path,  # noqa: F811
) -> None:  # fmt: skip
    # B1 goes to a provider nobody serves here (no worker runs): the bot's
    # answers come in over B2, as a provider sends them.
    provider = create_bot_provider(
        name="Acme bots", endpoint_url="https://bots.example.com/b1", display_name="Acme Bot"
    )
    attach_bot(channel=widget.channel, provider=provider, token=BOT_TOKEN)
    page = visitor.new_page()
    errors, stream = watch(page), Stream(page)
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    say(page, "I want a refund")
    stream.wait_open()
    chat = chat_of(widget)
    assert chat.state == Chat.State.BOT

    def bot_says(message: dict[str, Any]) -> None:
        answer = requests.post(
            f"{web_process.url}/webhooks/{provider.provider_id}/{BOT_TOKEN}",
            json={
                "event": "BOT_MESSAGE",
                "chat_id": chat.pk,
                "client_id": chat.client_id,
                "message": message,
            },
            timeout=5,
        )
        assert answer.json() == {"result": "ok"}, answer.text

    # Markdown: bold and a link.
    bot_says(
        {
            "type": "MARKDOWN",
            "content": "**Refunds** take [five days](https://example.com/refunds).",
        }
    )
    said = page.locator("[data-author=bot]").last
    expect(said).to_contain_text("Refunds take five days.", timeout=LIVE)
    expect(said).to_contain_text("Acme Bot (bot)")
    expect(said.locator("strong")).to_have_text("Refunds")
    link = said.get_by_role("link", name="five days")
    expect(link).to_have_attribute("href", "https://example.com/refunds")
    expect(link).to_have_attribute("target", "_blank")
    assert "noopener" in (link.get_attribute("rel") or "").split()

    # Buttons: a click sends its text as the visitor's message.
    bot_says(
        {
            "type": "BUTTONS",
            "text": "Which order?",
            "buttons": [{"text": "Order A-1"}, {"text": "Order B-2"}],
        }
    )
    choices = page.get_by_test_id("svc-choice")
    expect(choices).to_have_text(["Order A-1", "Order B-2"], timeout=LIVE)
    choices.first.click()
    expect(page.locator("[data-author=client]").last).to_have_text("Order A-1", timeout=LIVE)
    sent = chat.messages.filter(author=Message.Author.CLIENT).order_by("id")
    assert [m.text for m in sent] == ["I want a refund", "Order A-1"]
    assert chat_of(widget).state == Chat.State.BOT

    # Alice takes over: the visitor sees her join and answer, under the bot's messages.
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(
        chat=chat, agent=alice, content=Content("text", "Hi, I'm Alice: A-1 is refunded.", {})
    )
    expect(page.locator("[data-author=agent]")).to_contain_text("A-1 is refunded", timeout=LIVE)
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent")
    page.get_by_test_id("svc-input").fill("Great, thanks!")
    page.mouse.move(0, 0)
    snap(page, page.get_by_test_id("svc-window"), screenshots / "widget-chat.png")

    # The next chat opens with the bot again; markup in its Markdown stays text.
    services.finish_chat(chat=chat, agent=alice)
    expect(page.get_by_test_id("svc-rate")).to_be_visible(timeout=LIVE)
    page.get_by_test_id("svc-new-chat").click()
    say(page, "One more question")
    chat = Chat.objects.get(channel=widget.channel, state=Chat.State.BOT)
    attack = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    bot_says({"type": "MARKDOWN", "content": f"Ask **away**. {attack}"})
    said = page.locator("[data-author=bot]").last
    expect(said).to_contain_text(f"Ask away. {attack}", timeout=LIVE)  # as text
    expect(said.locator("strong")).to_have_text("away")
    assert shadow(page, "root.querySelectorAll('script, img, [onerror]').length") == 0
    assert page.evaluate("window.pwned") is None
    assert errors == []


# --- 3. agents offline --------------------------------------------------------------


def test_agents_offline_the_offline_form(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, screenshots: Path,  # noqa: F811
) -> None:  # fmt: skip
    services.set_agent_status(agent=alice, online=False)
    url = host_page(site, web_process.url, widget)
    page = visitor.new_page()
    errors = watch(page)
    page.goto(url)
    wait_loaded(page)
    assert page.evaluate("svc_api.chatMode()") == "offline"
    page.get_by_test_id("svc-label").click()
    form = page.get_by_test_id("svc-offline")
    expect(form).to_be_visible()
    expect(page.get_by_test_id("svc-who")).to_have_text("We are offline")
    expect(page.get_by_test_id("svc-input")).to_have_count(0)
    snap(page, page.get_by_test_id("svc-window"), screenshots / "widget-offline.png")

    form.get_by_label("Name").fill("Ann Lee")
    form.get_by_label("Message").fill("Do you ship to Norway?")
    send = form.get_by_role("button", name="Send")
    status = form.get_by_role("status")
    # Refused by the widget before sending, in the visitor's language (the server
    # refuses them too; a refusal only the server makes: test_widget_languages).
    for bad in ("ann-at-example.com", "ann@example..com"):
        form.get_by_label("E-mail").fill(bad)
        send.click()
        expect(status).to_contain_text(bad)
        expect(status).to_contain_text("is not a valid e-mail address")
        expect(status).to_have_class("status error")
    assert OfflineMessage.objects.count() == 0
    assert Client.objects.count() == 0  # not even a visitor

    form.get_by_label("E-mail").fill("ann@example.com")
    send.click()
    expect(page.get_by_test_id("svc-window")).to_contain_text(
        "Thank you. We will get back to you.", timeout=LIVE
    )
    expect(form).to_have_count(0)
    left = OfflineMessage.objects.get()
    assert (left.channel_id, left.name, left.email, left.message) == (
        widget.channel_id,
        "Ann Lee",
        "ann@example.com",
        "Do you ship to Norway?",
    )
    assert (left.page_url, left.page_title) == (url, "Shop")

    # Without the offline form the window only says so.
    widget.offline_form = False
    widget.save(update_fields=["offline_form"])
    page.reload()
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    window = page.get_by_test_id("svc-window")
    expect(window).to_contain_text("Our agents are offline. Please come back later.")
    expect(window.locator("form")).to_have_count(0)
    expect(page.get_by_test_id("svc-offline")).to_have_count(0)
    assert errors == []


# --- 4. a callback request -----------------------------------------------------------


def test_a_callback_request_reaches_the_agents_calls(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, agent_page: Page,  # noqa: F811
) -> None:  # fmt: skip
    page = visitor.new_page()
    errors = watch(page)
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    assert page.evaluate("svc_api.open({start: 'call'})") == {"result": "ok"}
    form = page.get_by_test_id("svc-call")
    expect(form).to_be_visible()
    phone = form.get_by_label("Phone")
    expect(phone).to_be_focused()
    assert calls(page, "svc_onChangeState")[-1] == "call"

    phone.fill("12")
    form.get_by_role("button", name="Call me back").click()
    expect(form.get_by_role("status")).to_have_text("Wrong phone number format")
    assert Call.objects.count() == 0

    phone.fill("+1 212 555 0100")
    form.get_by_role("button", name="Call me back").click()
    page.wait_for_function("window.calls.some(c => c[0] === 'svc_onCallStart')")
    expect(page.get_by_test_id("svc-messages")).to_contain_text(
        "We will call you back at +1 212 555 0100."
    )
    call = Call.objects.get()
    assert (call.channel_id, call.phone, call.status) == (
        widget.channel_id,
        "+12125550100",
        Call.Status.START,
    )
    assert call.client is not None and call.client.channel_id == widget.channel_id
    assert list(calls_for_agent(agent=alice)) == [call]
    shown = agent_page.get_by_test_id("call")
    expect(shown).to_contain_text("+12125550100", timeout=LIVE)
    expect(shown).to_contain_text("Waiting for an agent")
    expect(agent_page.locator("#calls-count")).to_have_text("1")
    assert errors == []


# --- 5. custom data and the contact form in the agent's panel -----------------------------


def test_custom_data_and_the_contact_form_reach_the_agents_panel_escaped_and_live(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    agent_page: Page,
) -> None:  # fmt: skip
    set_developer_webhook(url="https://crm.example.com/hook")
    page = visitor.new_page()
    errors = watch(page)
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    say(page, "Where is order A-1?")
    agent = agent_page
    agent.get_by_test_id("queued-chat").click()
    expect(agent.locator(".msg-client")).to_contain_text("Where is order A-1?")
    expect(agent.get_by_test_id("site-data")).to_have_count(0)
    agent.evaluate("window.notReloaded = true")

    fields = [
        {
            "title": "Order",
            "key": "Number",
            "content": "<img src=x onerror=alert(1)>A-1",
            "link": "https://example.com/o/1",
        }
    ]
    assert page.evaluate("(f) => svc_api.setCustomData(f)", fields) == {"result": "ok"}
    site_data = agent.get_by_test_id("site-data")
    expect(site_data).to_contain_text("From the site", timeout=LIVE)
    expect(site_data).to_contain_text("Order")
    expect(site_data).to_contain_text("Number: <img src=x onerror=alert(1)>A-1")
    link = site_data.get_by_role("link", name="<img src=x onerror=alert(1)>A-1")
    expect(link).to_have_attribute("href", "https://example.com/o/1")
    expect(site_data.locator("img")).to_have_count(0)
    assert agent.evaluate("document.querySelectorAll('#panel img').length") == 0

    # The contact form: the agent sees who it is, the CRM hears chat_updated.
    page.get_by_test_id("svc-introduce").click()
    contact = page.get_by_test_id("svc-contact")
    contact.get_by_label("Name").fill("Ann <b>Lee</b>")
    contact.get_by_label("E-mail").fill("ann@example.com")
    contact.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("svc-input")).to_be_visible(timeout=LIVE)
    panel = agent.locator("#panel")
    expect(panel).to_contain_text("Ann <b>Lee</b>", timeout=LIVE)
    expect(panel).to_contain_text("ann@example.com")
    expect(panel.locator("b")).to_have_count(0)
    updated = json.loads(Delivery.objects.filter(event="chat_updated").latest("id").body)
    assert updated["visitor"]["name"] == "Ann <b>Lee</b>"
    assert updated["visitor"]["email"] == "ann@example.com"
    assert agent.evaluate("window.notReloaded") is True
    assert errors == []
    # The page hears what the visitor typed (docs/widget.md: {name, email,
    # phone}), and nothing more: not the visitor's secret token.
    assert calls(page, "svc_onIntroduction") == [
        {"name": "Ann <b>Lee</b>", "email": "ann@example.com", "phone": ""}
    ]


# --- 6. keyboard only, screen readers, contrast ---------------------------------------------


def test_keyboard_only_screen_readers_and_contrast(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, screenshots: Path,  # noqa: F811
) -> None:  # fmt: skip
    page = visitor.new_page()
    errors, stream = watch(page), Stream(page)
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    label = page.get_by_test_id("svc-label")
    page.mouse.move(0, 0)
    snap(page, label, screenshots / "widget-label.png", margin=40)
    shown = page.evaluate(f"({CONTRAST})({SHADOW})")
    assert [text for text, _ratio in shown] == ["Talk to us"]
    assert all(ratio >= 4.5 for _text, ratio in shown), shown

    def focused() -> str:
        """The widget's element with the focus, by its test id ('' for none)."""
        return str(
            page.evaluate(
                "document.activeElement && document.activeElement.id === 'svc-widget'"
                " && document.activeElement.shadowRoot.activeElement"
                " ? document.activeElement.shadowRoot.activeElement.dataset.testid || '?' : ''"
            )
        )

    # Tab from the top of the page reaches the label.
    for _ in range(5):
        page.keyboard.press("Tab")
        if focused() == "svc-label":
            break
    assert focused() == "svc-label"
    expect(label).to_have_attribute("aria-expanded", "false")

    # Enter opens it with the focus in the message box; Enter sends; Tab
    # goes on to Send and back.
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    expect(label).to_have_attribute("aria-expanded", "true")
    assert focused() == "svc-input"
    page.keyboard.type("Typed with the keyboard only")
    page.keyboard.press("Enter")
    expect(page.locator("[data-author=client]")).to_have_text("Typed with the keyboard only")
    assert focused() == "svc-input"
    assert chat_of(widget).messages.get().text == "Typed with the keyboard only"
    page.keyboard.press("Tab")
    assert focused() == "svc-send"
    page.keyboard.press("Shift+Tab")
    assert focused() == "svc-input"

    # New messages arrive in a polite live region, and every text is readable.
    log = page.get_by_test_id("svc-messages")
    expect(log).to_have_attribute("role", "log")
    expect(log).to_have_attribute("aria-live", "polite")
    expect(page.get_by_test_id("svc-window")).to_have_attribute("role", "dialog")
    chat = chat_of(widget)
    stream.wait_open()
    services.accept_chat(chat=chat, agent=alice)
    expect(log).to_contain_text("Alice Agent joined the chat", timeout=LIVE)
    services.post_agent_message(
        chat=chat, agent=alice, content=Content("text", "Hello! How can I help?", {})
    )
    expect(log.locator("[data-author=agent]")).to_contain_text("How can I help?", timeout=LIVE)
    services.set_agent_typing(chat=chat, agent=alice, typing=True)
    expect(page.get_by_test_id("svc-typing")).to_be_visible(timeout=LIVE)
    shown = page.evaluate(f"({CONTRAST})({SHADOW})")
    texts = [text for text, _ratio in shown]
    for text in (
        "Typed with the keyboard only",  # the visitor's: on the widget's colour
        "Alice Agent joined the chat",  # a note
        "Alice Agent",  # the agent's name, in the header and over the message
        "Hello! How can I help?",
        "typing\u2026",
        "Send",
    ):
        assert text in texts, (text, texts)
    assert all(ratio >= 4.5 for _text, ratio in shown), shown
    assert focused() == "svc-input"  # live messages leave the focus where it is

    # Esc closes it, and the focus goes back to the label.
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("svc-window")).to_be_hidden()
    expect(label).to_have_attribute("aria-expanded", "false")
    assert focused() == "svc-label"
    assert calls(page, "svc_onClose") == [None]
    assert errors == []


# --- 7. a phone --------------------------------------------------------------------------


def test_on_a_phone_the_window_fills_the_screen(
    chromium: Browser, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    screenshots: Path,
) -> None:  # fmt: skip
    context = chromium.new_context(
        viewport={"width": 375, "height": 667}, is_mobile=True, has_touch=True
    )
    try:
        page = context.new_page()
        errors = watch(page)
        long_page = "".join(f"<p>Product {n}: things for sale.</p>" for n in range(80))
        page.goto(
            shop_page(
                site,
                web_process.url,
                widget,
                head="<meta name='viewport' content='width=device-width, initial-scale=1'>",
                body=long_page,
            )
        )
        wait_loaded(page)
        overflow = "getComputedStyle(document.documentElement).overflow"
        assert page.evaluate(overflow) == "visible"
        page.evaluate("window.scrollTo(0, 300)")
        page.get_by_test_id("svc-label").tap()
        window = page.get_by_test_id("svc-window")
        expect(window).to_be_visible()
        box = window.bounding_box()
        assert box is not None
        got = (box["x"], box["y"], box["width"], box["height"])
        assert all(abs(a - b) <= 1 for a, b in zip(got, (0, 0, 375, 667), strict=True)), box
        assert page.evaluate(overflow) == "hidden"

        def font_sizes() -> dict[str, float]:
            """Each field the widget shows now, and its text's size in px."""
            found = shadow(
                page,
                "[...root.querySelectorAll('input, textarea, select')].map(el =>"
                " [el.name || el.dataset.testid, parseFloat(getComputedStyle(el).fontSize)])",
            )
            return {name: size for name, size in found}

        sizes = font_sizes()
        assert set(sizes) == {"svc-input", "svc-department", "svc-comment-text"}, sizes
        assert min(sizes.values()) >= 16, sizes
        say(page, "Hello from my phone")
        page.mouse.wheel(0, 600)  # over the window: the page behind stays put
        assert page.evaluate("window.scrollY") == 300
        page.screenshot(path=screenshots / "widget-phone.png")

        page.get_by_test_id("svc-introduce").tap()
        expect(page.get_by_test_id("svc-contact")).to_be_visible()
        sizes = font_sizes()
        assert set(sizes) == {"name", "email", "phone"}, sizes
        assert min(sizes.values()) >= 16, sizes

        page.get_by_test_id("svc-close").tap()
        expect(window).to_be_hidden()
        assert page.evaluate(overflow) == "visible"
        assert page.evaluate("document.documentElement.style.overflow") == ""
        assert page.evaluate("window.scrollY") == 300

        page.evaluate("svc_api.open({start: 'call'})")
        expect(page.get_by_test_id("svc-call")).to_be_visible()
        sizes = font_sizes()
        assert set(sizes) == {"phone"} and sizes["phone"] >= 16, sizes
        assert page.evaluate(overflow) == "hidden"
        page.evaluate("svc_api.close()")
        assert page.evaluate(overflow) == "visible"
        assert errors == []
    finally:
        context.close()


# --- 8. proactive invitations -------------------------------------------------------------


def next_turn(page: Page) -> None:
    """Wait until the timers the page has set to fire now have fired."""
    page.evaluate("new Promise(resolve => setTimeout(resolve, 0))")


def test_a_proactive_invitation_shows_once_a_session_and_its_answer_is_kept(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    widget.rules = {"invitations": [{"text": "Need help choosing a size?", "after_seconds": 1}]}
    widget.save(update_fields=["rules"])
    url = shop_page(site, web_process.url, widget, body="<input id='search' aria-label='Search'>")

    # Shown by itself a second after the page loads; closed, it does not
    # come back on the next page.
    page = visitor.new_page()
    errors = watch(page)
    page.goto(url)
    wait_loaded(page)
    page.locator("#search").press_sequentially("boo")  # the visitor is busy on the page
    expect(page.get_by_test_id("svc-invitation")).to_have_text(
        "Need help choosing a size?", timeout=LIVE
    )
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    focus_after_invitation = page.evaluate("document.activeElement.id")
    assert calls(page, "svc_onOpen") == [None]
    page.get_by_test_id("svc-close").click()
    expect(page.get_by_test_id("svc-window")).to_be_hidden()
    page.reload()
    wait_loaded(page)
    page.wait_for_timeout(1200)  # past the rule's second: nothing comes
    expect(page.get_by_test_id("svc-window")).to_be_hidden()
    assert calls(page, "svc_onOpen") == []

    # In another tab (another session) it shows again; the answer keeps it for agents.
    other = visitor.new_page()
    errors += watch(other)
    other.goto(url)
    wait_loaded(other)
    expect(other.get_by_test_id("svc-invitation")).to_be_visible(timeout=LIVE)
    other.get_by_test_id("svc-input").focus()
    say(other, "Yes, for the boots")
    chat = chat_of(widget)
    assert chat.client.invite_text == "Need help choosing a size?"
    assert chat.messages.get().text == "Yes, for the boots"
    assert errors == []
    # An invitation the visitor did not ask for leaves the focus where the
    # visitor was typing (WCAG 3.2.2: no change of context on its own).
    assert focus_after_invitation == "search"


# --- 9. live messages on a shared Redis server ------------------------------------------------


def test_the_visitor_sees_its_own_chat_only_when_another_deployment_shares_the_redis_server(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    """Redis pub/sub channels belong to the server, not to a database number:
    another deployment (or test run) with its REDIS_URL on another database
    of the same server publishes on the same channel. Its events, with ids
    and client ids of its own database, must not reach this visitor (nor
    hide this deployment's events that happen to have the same ids: the
    hub hands on an event id once).
    (In the embedded default the hub reads its own table: no Redis at all.)"""
    page = visitor.new_page()
    errors, stream = watch(page), Stream(page)
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    say(page, "Hello?")
    stream.wait_open()
    chat = chat_of(widget)
    services.accept_chat(chat=chat, agent=alice)
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent", timeout=LIVE)

    if settings.REDIS_URL:
        # One event of another deployment's, for a visitor with this one's
        # client id; an id no database here has yet, so that nobody else's
        # events are hidden by it.
        message = {
            "id": 10**15,
            "author": "agent",
            "type": "text",
            "text": "Another deployment's chat",
            "sender_name": "Somebody else",
            "created": "2026-01-01T00:00:00+00:00",
        }
        foreign = {
            "id": 10**15,
            "kind": "message",
            "channel_id": widget.channel_id,
            "client_id": chat.client_id,
            "for_client": True,
            "data": {"chat_id": chat.pk, "state": "active", "message": message},
        }
        other = redis.Redis.from_url(urlunsplit(urlsplit(settings.REDIS_URL)._replace(path="/3")))
        # Another installation on the same Redis server publishes on its own channel.
        other.publish("switchboard:live:another-installation", json.dumps(foreign))
        other.close()
    services.post_agent_message(
        chat=chat, agent=alice, content=Content("text", "The real answer", {})
    )
    # Published after the foreign event: once it is shown, so is that one if it leaked.
    expect(page.get_by_test_id("svc-messages")).to_contain_text("The real answer", timeout=LIVE)
    agent_said = page.locator("[data-author=agent]")
    assert agent_said.all_inner_texts() == ["Alice Agent\nThe real answer"]
    assert errors == []


def test_an_answer_that_comes_before_the_stream_opens_is_not_lost(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    """The first message makes the visitor, and only then can the widget open
    its stream. An agent (or a bot) that answers before the stream is open
    (a slow network, a quick bot) must still be seen: here the stream's
    request is held back until the answer is in."""
    page = visitor.new_page()
    errors = watch(page)
    held: list[Route] = []
    page.route("**/visitor/*/stream*", lambda route: held.append(route))
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    say(page, "Anybody there?")
    # The stream is asked for once the message's answer is in (a visitor
    # exists): on a loaded machine that may take a while.
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)  # the route's handler gets its turn meanwhile
    assert len(held) == 1
    chat = chat_of(widget)
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=Content("text", "Yes, me!", {}))
    held[0].continue_()
    expect(page.locator("[data-author=agent]")).to_contain_text("Yes, me!", timeout=LIVE)
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent")
    assert errors == []
