"""window.svc_api and the svc_on* callbacks in a real browser (spec C2), on
host pages served from another origin than the service's: an ordinary page,
one with a strict Content-Security-Policy, one that calls svc_api through
the pre-load stub before the script has loaded, and pages for which the
service cannot be reached."""

# The fixtures imported from test_widget are parameters of the tests here.
# ruff: noqa: F811

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, expect

from agents import services
from agents.content import Content
from agents.models import Agent, Call, CallbackSettings, Chat, Client, Department, OfflineMessage
from delivery.models import Delivery
from devhooks.models import STUB, WidgetChannel
from devhooks.webhooks.services import PURPOSE, set_developer_webhook
from tests.e2e.host_pages import HostSite
from tests.e2e.test_widget import (  # noqa: F401 (fixtures)
    PASSWORD,
    RECORDER,
    alice,
    calls,
    site,
    visitor,
    wait_loaded,
    widget,
)
from tests.web.server import free_port

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T = TypeVar("T")
LIVE = 2 * 5000  # ms: what the live stream may take (docs/testing.md, margin)
BLUE = "rgb(31, 111, 235)"  # the widget's default colour, #1f6feb

# Loaded first on every page: CSP violations and where the content stood
# before the widget came.
PROBE = """window.violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
window.box = () => {
  const r = document.getElementById('content').getBoundingClientRect();
  return [r.x, r.y, r.width, r.height];
};
document.addEventListener('DOMContentLoaded', () => { window.box0 = window.box(); });
"""
STRICT_CSP = (
    "default-src 'self'; script-src 'self' {service}; connect-src {service}; "
    "style-src 'self'; img-src 'self'"
)


# --- helpers --------------------------------------------------------------------


def script_url(service: str, widget: WidgetChannel) -> str:
    return f"{service}/widget/{widget.widget_id}.js"


def api_page(
    site: HostSite,
    src: str | None,
    *,
    path: str = "/shop",
    head: tuple[str, ...] = (),
    csp: str = "",
) -> str:
    """A site page: the probe, the recorder, the page's own ``head`` scripts
    (files), its content, and the widget's tag (``src``) at the end."""
    site.script("/probe.js", PROBE)
    site.script("/record.js", RECORDER)
    site.pages["/favicon.ico"] = ("image/x-icon", "", {})
    scripts = "".join(f'<script src="{s}"></script>' for s in ("/probe.js", "/record.js", *head))
    tag = f'<script src="{src}" async></script>' if src else ""
    body = (
        f"<!doctype html><html><head><title>Shop</title>{scripts}</head>"
        f"<body><h1>Our shop</h1><p id='content'>Things for sale.</p>{tag}</body></html>"
    )
    headers = {"Content-Security-Policy": csp} if csp else {}
    return site.page(path, body, **headers)


@contextmanager
def browser_context(chromium: Browser) -> Iterator[BrowserContext]:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield context
    finally:
        context.close()


def opened(context: BrowserContext, url: str, *, loaded: bool = True) -> tuple[Page, list[str]]:
    """A page at ``url`` and the errors thrown into its code."""
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    if loaded:
        wait_loaded(page)
    return page, errors


def api(page: Page, expression: str) -> Any:
    return page.evaluate(f"() => svc_api.{expression}")


def wait_calls(page: Page, name: str, count: int = 1) -> list[Any]:
    page.wait_for_function(
        "([name, count]) => window.calls.filter((c) => c[0] === name).length >= count",
        arg=[name, count],
        timeout=LIVE,
    )
    return calls(page, name)


def visitor_number(page: Page) -> list[Any]:
    return list(
        page.evaluate(
            "() => new Promise((done) => svc_api.getVisitorNumber((err, n) => done([err, n])))"
        )
    )


def callback_enabled(page: Page) -> Any:
    return page.evaluate("() => new Promise((done) => svc_api.isCallbackEnabled(done))")


def eventually(check: Callable[[], T | None], timeout: float = 5) -> T:
    """The first true answer of ``check`` (which reads the database)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {check}")
        time.sleep(0.05)


def send(page: Page, text: str) -> None:
    page.get_by_test_id("svc-input").fill(text)
    page.get_by_test_id("svc-send").click()
    expect(page.locator("[data-author=client]").last).to_have_text(text)


def the_chat(widget: WidgetChannel) -> Chat:
    return eventually(lambda: Chat.objects.filter(channel=widget.channel).first())


def sign_in(context: BrowserContext, service: str, email: str) -> Page:
    page = context.new_page()
    page.goto(f"{service}/agent/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    return page


# --- the ordinary page: svc_api ----------------------------------------------------


def test_contact_info_visitor_numbers_custom_data_and_user_token(
    visitor: BrowserContext, chromium: Browser, web_process: Any, site: HostSite,
    widget: WidgetChannel,
) -> None:  # fmt: skip
    page, errors = opened(visitor, api_page(site, script_url(web_process.url, widget)))
    nothing = {"client_name": None, "email": None, "phone": None, "description": None}
    assert api(page, "getContactInfo()") == nothing
    assert api(page, "chatMode()") == "online"

    failed = api(page, "setContactInfo({email: 'not-an-address'})")
    assert failed == {"result": "fail", "reason": "not-an-address is not a valid e-mail address"}
    contact = {
        "name": "Ann Lee", "email": "ann@example.com", "phone": "+442079460000",
        "description": "Wants a refund",
    }  # fmt: skip
    assert page.evaluate("(c) => svc_api.setContactInfo(c)", contact) == {"result": "ok"}
    known = {**contact, "client_name": "Ann Lee"}
    del known["name"]
    assert api(page, "getContactInfo()") == known

    not_array = {"result": "fail", "reason": "Custom data must be array."}
    assert api(page, "setCustomData({content: 'x'})") == not_array
    assert api(page, "setCustomData('x')") == not_array
    eleven = api(page, "setCustomData(Array.from({length: 11}, (_, i) => ({content: 'c' + i})))")
    assert eleven["result"] == "fail"
    fields = [
        {"content": "<b>VIP</b>", "title": "Account", "link": "https://shop.example.com/a/1",
         "key": "Plan"},
        {"content": "3 orders", "key": "History"},
    ]  # fmt: skip
    assert page.evaluate("(f) => svc_api.setCustomData(f)", fields) == {"result": "ok"}

    assert api(page, "setUserToken('')") == {"result": "fail", "token": False}
    assert api(page, "setUserToken({})") == {"result": "fail", "token": {}}
    assert api(page, "setUserToken('u-42')") == {"result": "ok", "token": "u-42"}

    # The first visitor of the installation; what was set before it existed
    # reaches it.
    assert visitor_number(page) == [None, 1]
    client = Client.objects.get(channel=widget.channel)
    assert client.visitor_number == 1
    client = eventually(lambda: Client.objects.filter(pk=client.pk, user_token="u-42").first())
    eventually(lambda: Client.objects.filter(pk=client.pk, name="Ann Lee").first())
    client.refresh_from_db()
    assert (client.email, client.phone, client.description) == (
        "ann@example.com", "+442079460000", "Wants a refund",
    )  # fmt: skip
    assert client.visitor_data["custom_data"] == [
        {"content": "<b>VIP</b>", "title": "Account", "link": "https://shop.example.com/a/1",
         "key": "Plan"},
        {"content": "3 orders", "title": "", "link": "", "key": "History"},
    ]  # fmt: skip
    assert api(page, "getContactInfo()") == known
    assert visitor_number(page) == [None, 1]  # the same visitor asks again

    with browser_context(chromium) as other:
        second, second_errors = opened(other, api_page(site, script_url(web_process.url, widget)))
        assert visitor_number(second) == [None, 2]
        assert api(second, "getContactInfo()") == nothing
        assert second_errors == []
    assert errors == []


def test_a_chat_calls_back_the_page_and_its_data_reach_the_agent(
    visitor: BrowserContext, chromium: Browser, web_process: Any, site: HostSite,
    widget: WidgetChannel, alice: Agent,
) -> None:  # fmt: skip
    set_developer_webhook(url="https://crm.example.com/switchboard")
    landing = api_page(site, script_url(web_process.url, widget)) + "?utm_source=news"
    page, errors = opened(visitor, landing)
    assert api(page, "setUserToken('crm-7')") == {"result": "ok", "token": "crm-7"}
    api(page, "open()")
    send(page, "Hello")
    assert wait_calls(page, "svc_onMessageSent") == ["Hello"]
    chat = the_chat(widget)
    assert wait_calls(page, "svc_onClientStartChat") == [{"chat_id": chat.pk}]
    send(page, "Anyone there?")
    assert calls(page, "svc_onMessageSent") == ["Hello"]  # the first message only

    with browser_context(chromium) as agents:
        desk = sign_in(agents, web_process.url, alice.email)
        desk.goto(f"{web_process.url}/agent/chats/{chat.pk}/")
        custom = [{"key": "Plan", "content": "<b>VIP</b>", "title": "Account"}]
        assert page.evaluate("(f) => svc_api.setCustomData(f)", custom) == {"result": "ok"}
        panel = desk.get_by_test_id("site-data")
        expect(panel).to_contain_text("Plan: <b>VIP</b>", timeout=LIVE)  # as text
        expect(panel.locator("b")).to_have_count(0)
        api(page, "setCustomData([{key: 'Plan', content: 'Gold'}])")
        expect(panel).to_contain_text("Plan: Gold", timeout=LIVE)
        expect(panel).not_to_contain_text("VIP")

    services.accept_chat(chat=chat, agent=alice)
    wait_calls(page, "svc_onAccept")
    assert calls(page, "svc_onAccept") == [None]
    services.post_agent_message(chat=chat, agent=alice, content=Content("text", "Hi Ann", {}))
    assert wait_calls(page, "svc_onMessageReceived") == [
        {"text": "Hi Ann", "author": "agent", "sender_name": "Alice Agent"}
    ]
    delivery = Delivery.objects.get(purpose=PURPOSE, event="chat_accepted")
    payload = json.loads(delivery.body)
    assert payload["user_token"] == "crm-7"
    assert payload["chat_id"] == chat.pk
    assert payload["session"]["utm_json"]["source"] == "news"
    assert errors == []


def test_open_close_introduction_and_calls(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    page, errors = opened(visitor, api_page(site, script_url(web_process.url, widget)))
    assert calls(page, "svc_onLoadCallback") == [None]
    assert calls(page, "svc_onChangeState") == ["label"]
    before = page.evaluate("window.box0")

    assert api(page, "open()") == {"result": "ok"}
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    assert calls(page, "svc_onOpen") == [None]
    assert calls(page, "svc_onChangeState") == ["label", "chat"]
    size = calls(page, "svc_onResizeCallback")[-1]
    assert size["width"] > 300 and size["height"] > 300
    assert page.evaluate("window.box()") == before  # the page's content did not move
    assert api(page, "close()") == {"result": "ok"}
    expect(page.get_by_test_id("svc-window")).to_be_hidden()
    assert calls(page, "svc_onClose") == [None]
    assert calls(page, "svc_onChangeState") == ["label", "chat", "label"]
    assert calls(page, "svc_onResizeCallback")[-1]["width"] < size["width"]
    assert api(page, "close()") == {"result": "ok"}
    assert calls(page, "svc_onClose") == [None]  # it was closed already

    # The contact form in the widget, of a visitor the service knows.
    assert visitor_number(page) == [None, 1]
    api(page, "open()")
    page.get_by_test_id("svc-introduce").click()
    form = page.get_by_test_id("svc-contact")
    form.get_by_label("Name").fill("Bob Stone")
    form.get_by_label("E-mail").fill("bob@example.com")
    form.get_by_label("Phone").fill("+15550001111")
    form.get_by_role("button", name="Save").click()
    assert wait_calls(page, "svc_onIntroduction") == [
        {"name": "Bob Stone", "email": "bob@example.com", "phone": "+15550001111"}
    ]
    assert api(page, "getContactInfo()") == {
        "client_name": "Bob Stone", "email": "bob@example.com", "phone": "+15550001111",
        "description": None,
    }  # fmt: skip
    expect(page.get_by_test_id("svc-input")).to_be_visible()
    client = Client.objects.get(channel=widget.channel)
    assert (client.name, client.email) == ("Bob Stone", "bob@example.com")
    api(page, "close()")

    # A callback: the form, then an agent ends the call.
    assert callback_enabled(page) == {"result": "ok"}
    assert api(page, "open({start: 'call'})") == {"result": "ok"}
    assert calls(page, "svc_onChangeState")[-1] == "call"
    call_form = page.get_by_test_id("svc-call")
    expect(call_form).to_be_visible()
    wrong = {"result": "fail", "reason": "Wrong phone number format"}
    assert api(page, "startCall('12')") == wrong
    assert api(page, "startCall(5551234567)") == wrong
    call_form.get_by_label("Phone").fill("+1 555 123 4567")
    call_form.get_by_role("button", name="Call me back").click()
    assert wait_calls(page, "svc_onCallStart") == [None]
    assert calls(page, "svc_onChangeState")[-1] == "chat"
    call = Call.objects.get(client=client)
    assert (call.phone, call.status) == ("+15551234567", Call.Status.START)
    busy = {"reason": "Callback unavaiable"}  # no result key; spelled as the spec spells it
    assert callback_enabled(page) == busy
    assert api(page, "startCall('+15551234567')") == {"result": "fail", "reason": busy["reason"]}
    services.record_call_progress(call=call, agent=alice, status=Call.Status.END)
    assert wait_calls(page, "svc_onCallEnd") == [{"result": "ok"}]

    # Another call, right away (the widget knows the first one is over), which fails.
    assert api(page, "startCall('+15557654321')") == {"result": "ok"}
    wait_calls(page, "svc_onCallStart", 2)
    second = eventually(lambda: Call.objects.filter(phone="+15557654321").first())
    services.record_call_progress(
        call=second, agent=alice, status=Call.Status.ERROR, reason="No answer"
    )
    assert wait_calls(page, "svc_onCallEnd", 2)[-1] == {"result": "fail", "reason": "No answer"}
    assert callback_enabled(page) == {"result": "ok"}

    # Refused by the service after the widget let it go: svc_onCallEnd says why.
    CallbackSettings.objects.filter(channel=widget.channel).update(enabled=False)
    assert callback_enabled(page) == {"reason": "Callback disabled"}
    CallbackSettings.objects.filter(channel=widget.channel).update(enabled=True)
    assert callback_enabled(page) == {"result": "ok"}
    CallbackSettings.objects.filter(channel=widget.channel).update(enabled=False)
    assert api(page, "startCall('+15550002222')") == {"result": "ok"}
    assert wait_calls(page, "svc_onCallEnd", 3)[-1] == {
        "result": "fail", "reason": "Callback disabled",
    }  # fmt: skip
    assert errors == []


def test_offline_mode_offline_messages_and_callback_availability(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    Agent.objects.filter(pk=alice.pk).update(is_online=False)
    CallbackSettings.objects.filter(channel=widget.channel).update(enabled=False)
    page, errors = opened(visitor, api_page(site, script_url(web_process.url, widget)))
    assert api(page, "chatMode()") == "offline"

    disabled = {"reason": "Callback disabled"}
    assert callback_enabled(page) == disabled  # no result key
    assert api(page, "startCall('+15551234567')") == {"result": "fail", **disabled}
    assert api(page, "open({start: 'call'})") == {"result": "fail", **disabled}
    assert calls(page, "svc_onOpen") == []
    CallbackSettings.objects.filter(channel=widget.channel).update(enabled=True, working_days=[])
    assert callback_enabled(page) == {"reason": "Callback unavaiable"}

    assert api(page, "open()") == {"result": "ok"}
    expect(page.get_by_test_id("svc-offline")).to_be_visible()
    assert api(page, "sendOfflineMessage({})") == {"result": "fail", "error": "Write a message."}
    assert api(page, "sendOfflineMessage({message: 'Hi'})") == {
        "result": "fail",
        "error": "Give an e-mail address or a phone number so that we can answer.",
    }
    assert api(page, "sendOfflineMessage({message: 'Hi', email: 'nope'})") == {
        "result": "fail", "error": "nope is not a valid e-mail address",
    }  # fmt: skip
    assert api(page, "sendOfflineMessage({message: 'Hi', phone: '12'})") == {
        "result": "fail", "error": "Wrong phone number format",
    }  # fmt: skip
    message = {
        "name": "Cid", "email": "cid@example.com", "phone": "+15550003333",
        "description": "Retailer", "message": "Call me tomorrow",
    }  # fmt: skip
    assert page.evaluate("(m) => svc_api.sendOfflineMessage(m)", message) == {"result": "ok"}
    left = eventually(lambda: OfflineMessage.objects.filter(channel=widget.channel).first())
    assert (left.name, left.email, left.phone, left.description, left.message) == (
        "Cid", "cid@example.com", "+15550003333", "Retailer", "Call me tomorrow",
    )  # fmt: skip
    assert left.page_url.endswith("/shop")
    assert errors == []


def test_rules_and_proactive_invitations(
    chromium: Browser, web_process: Any, site: HostSite, widget: WidgetChannel
) -> None:
    src = script_url(web_process.url, widget)
    shop, about = api_page(site, src, path="/shop"), api_page(site, src, path="/about")
    rules = {
        "invitations": [
            {"text": "Free shipping today!", "after_seconds": 1, "url_contains": "/shop"},
            {"text": "Questions about us?", "after_seconds": 2, "url_contains": "/about"},
        ]
    }
    with browser_context(chromium) as context:
        page, errors = opened(context, shop)
        assert api(page, "setRules('x')")["result"] == "fail"
        assert page.evaluate("(r) => svc_api.setRules(r)", rules) == {"result": "ok"}
        invitation = page.get_by_test_id("svc-invitation")
        expect(invitation).to_have_text("Free shipping today!", timeout=LIVE)
        expect(page.get_by_test_id("svc-window")).to_be_visible()
        assert calls(page, "svc_onOpen") == [None]
        send(page, "Really free?")
        chat = the_chat(widget)
        assert chat.client.invite_text == "Free shipping today!"
        assert errors == []

    with browser_context(chromium) as context:
        page, errors = opened(context, about)
        page.evaluate("(r) => svc_api.setRules(r)", rules)
        # The /about rule shows after 2 s; by then the /shop one (1 s) had its time.
        expect(page.get_by_test_id("svc-invitation")).to_have_text(
            "Questions about us?", timeout=LIVE
        )
        expect(page.get_by_text("Free shipping today!")).to_have_count(0)
        assert errors == []


def test_show_proactive_invitation_with_a_department(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel
) -> None:
    sales = Department.objects.create(name="Sales")
    widget.departments.add(sales)
    page, errors = opened(visitor, api_page(site, script_url(web_process.url, widget)))
    assert api(page, "showProactiveInvitation('')")["result"] == "fail"
    text = "Need help choosing a size?"
    shown = page.evaluate("([t, d]) => svc_api.showProactiveInvitation(t, d)", [text, sales.pk])
    assert shown == {"result": "ok"}
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    expect(page.get_by_test_id("svc-invitation")).to_have_text(text)
    assert calls(page, "svc_onOpen") == [None]
    assert calls(page, "svc_onChangeState")[-1] == "chat"
    send(page, "Yes, an M or an L?")
    chat = the_chat(widget)
    assert chat.client.invite_text == text
    assert chat.department == sales
    assert errors == []


def test_unread_count_utm_page_title_colour_and_clear_history(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    shop = api_page(site, script_url(web_process.url, widget))
    page, errors = opened(visitor, shop + "?utm_source=news&utm_medium=email&utm_campaign=spring")
    assert api(page, "getUtm()") == {"source": "news", "medium": "email", "campaign": "spring"}
    label = page.get_by_test_id("svc-label")
    assert label.evaluate("(el) => getComputedStyle(el).backgroundColor") == BLUE

    api(page, "open()")
    send(page, "Is it in stock?")
    api(page, "close()")
    chat = the_chat(widget)
    assert api(page, "sendPageTitle('Checkout', true, 'https://shop.example.com/checkout')") == {
        "result": "ok"
    }
    api(page, "open()")  # which tells the service the page again
    api(page, "close()")
    assert visitor_number(page) == [None, 1]  # requests go in order: those have been answered
    assert chat.client.visitor_data["utm_json"]["campaign"] == "spring"
    client = Client.objects.get(pk=chat.client_id)
    assert client.visitor_data["page"] == {
        "url": "https://shop.example.com/checkout", "title": "Checkout",
    }  # fmt: skip
    services.accept_chat(chat=chat, agent=alice)
    assert api(page, "getUnreadMessagesCount()") == 0
    for text in ("Yes.", "Two left."):
        services.post_agent_message(chat=chat, agent=alice, content=Content("text", text, {}))
    page.wait_for_function("svc_api.getUnreadMessagesCount() === 2", timeout=LIVE)
    expect(page.get_by_test_id("svc-badge")).to_have_text("2")
    assert [c["text"] for c in calls(page, "svc_onMessageReceived")] == ["Yes.", "Two left."]
    api(page, "open()")
    assert api(page, "getUnreadMessagesCount()") == 0
    expect(page.get_by_test_id("svc-badge")).to_be_hidden()
    api(page, "close()")

    assert api(page, "setWidgetColor('red')")["result"] == "fail"
    assert api(page, "setWidgetColor('#ff0000', '#000000')") == {"result": "ok"}
    assert label.evaluate("(el) => getComputedStyle(el).backgroundColor") == "rgb(255, 0, 0)"
    assert label.evaluate("(el) => getComputedStyle(el).color") == "rgb(0, 0, 0)"

    # clearHistory while the old visitor's state is on its way (open() asks
    # for it): the answer that comes after is not shown.
    held: list[Route] = []
    page.route("**/v1/session", lambda route: held.append(route), times=1)
    api(page, "open()")
    while not held:  # the route's handler runs while Playwright waits
        page.wait_for_timeout(20)
    assert api(page, "clearHistory()") == {"result": "ok"}
    held[0].continue_()
    assert visitor_number(page) == [None, 2]  # a new visitor, asked after that answer
    expect(page.get_by_test_id("svc-msg")).to_have_count(0)
    page.reload()
    wait_loaded(page)
    api(page, "open()")
    expect(page.get_by_test_id("svc-input")).to_be_visible()
    expect(page.get_by_test_id("svc-msg")).to_have_count(0)
    assert visitor_number(page) == [None, 2]
    assert Client.objects.count() == 2
    assert errors == []


THROWS = """window.svc_onOpen = () => {
  window.calls.push(['svc_onOpen', null]);
  throw new Error('a bug of the page');
};
window.svc_onMessageSent = () => { throw new Error('another bug of the page'); };
"""


def test_destroy_init_and_a_callback_that_throws(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel
) -> None:
    site.script("/throws.js", THROWS)
    url = api_page(site, script_url(web_process.url, widget), head=("/throws.js",))
    page, errors = opened(visitor, url)

    assert page.evaluate("svc_destroy()") == {"result": "ok"}
    expect(page.locator("#svc-widget")).to_have_count(0)
    assert calls(page, "svc_onWidgetDestroy") == [None]
    assert page.evaluate("svc_init()") == {"result": "ok"}
    wait_calls(page, "svc_onLoadCallback", 2)
    expect(page.get_by_test_id("svc-label")).to_be_visible()
    expect(page.locator("#svc-widget")).to_have_count(1)

    assert api(page, "open()") == {"result": "ok"}  # svc_onOpen throws
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    assert calls(page, "svc_onOpen") == [None]
    assert calls(page, "svc_onChangeState")[-1] == "chat"  # the next callback still ran
    send(page, "Still works?")  # svc_onMessageSent throws
    wait_calls(page, "svc_onClientStartChat")
    assert the_chat(widget).messages.count() == 1
    assert errors == []


def test_what_happens_before_a_new_visitors_stream_opens_is_not_lost(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    """The first message makes the visitor; its stream opens after that. An
    agent (or a bot) that answers in between is still heard."""
    page, errors = opened(visitor, api_page(site, script_url(web_process.url, widget)))
    held: list[Route] = []
    page.route("**/visitor/*/stream*", lambda route: held.append(route), times=1)
    api(page, "open()")
    send(page, "Quick!")  # the stream's request waits in ``held``
    chat = the_chat(widget)
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=Content("text", "Here", {}))
    while not held:  # the route's handler runs while Playwright waits
        page.wait_for_timeout(20)
    held[0].continue_()
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent", timeout=LIVE)
    expect(page.locator("[data-author=agent]")).to_contain_text("Here", timeout=LIVE)
    assert wait_calls(page, "svc_onAccept") == [None]
    assert [c["text"] for c in wait_calls(page, "svc_onMessageReceived")] == ["Here"]
    assert errors == []


# --- a strict Content-Security-Policy -----------------------------------------------


def test_a_page_with_a_strict_csp(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    csp = STRICT_CSP.format(service=web_process.url)
    console: list[str] = []
    page = visitor.new_page()
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(api_page(site, script_url(web_process.url, widget), csp=csp))
    # No wait_for_function here: its polling evaluates a string, which this
    # page's policy forbids. svc_onLoadCallback runs as the label appears.
    label = page.get_by_test_id("svc-label")
    expect(label).to_be_visible()
    assert calls(page, "svc_onLoadCallback") == [None]
    assert page.locator("#svc-widget").evaluate("(el) => getComputedStyle(el).position") == "fixed"
    assert label.evaluate("(el) => getComputedStyle(el).backgroundColor") == BLUE
    assert label.evaluate("(el) => getComputedStyle(el).borderRadius") == "24px"

    label.click()
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    send(page, "Hello from a strict page")
    chat = the_chat(widget)
    services.accept_chat(chat=chat, agent=alice)
    expect(page.get_by_test_id("svc-who")).to_have_text("Alice Agent", timeout=LIVE)
    services.post_agent_message(chat=chat, agent=alice, content=Content("text", "Welcome", {}))
    expect(page.locator("[data-author=agent]")).to_contain_text("Welcome", timeout=LIVE)
    assert page.evaluate("window.box()") == page.evaluate("window.box0")

    assert page.evaluate("window.violations") == []
    assert [line for line in console if "Content Security Policy" in line] == []
    assert [line for line in console if line.startswith("error")] == []
    assert errors == []


# --- calls made before the script has loaded ----------------------------------------

STUB_JS = STUB.removeprefix("<script>").removesuffix("</script>")
EARLY = """svc_api.setUserToken('early-token');
svc_api.setCustomData([{key: 'Cart', content: '2 items'}]);
svc_api.open();
window.queued = svc_api.q.map((c) => c[0]);
"""
LATE = """setTimeout(() => {
  const tag = document.createElement('script');
  tag.src = %s;
  tag.async = true;
  document.body.appendChild(tag);
}, 1000);
"""


def test_calls_before_the_script_loads_are_queued_and_run_in_order(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    set_developer_webhook(url="https://crm.example.com/switchboard")
    site.script("/stub.js", STUB_JS)
    site.script("/early.js", EARLY)
    site.script("/late.js", LATE % json.dumps(script_url(web_process.url, widget)))
    url = api_page(site, None, head=("/stub.js", "/early.js", "/late.js"))
    page, errors = opened(visitor, url, loaded=False)
    assert page.evaluate("window.queued") == [
        "setUserToken", "setCustomData", "open",
    ]  # fmt: skip
    wait_loaded(page)
    expect(page.get_by_test_id("svc-window")).to_be_visible()
    assert calls(page, "svc_onOpen") == [None]
    assert calls(page, "svc_onChangeState") == ["chat"]  # not 'label' with the window open
    assert page.evaluate("svc_api.__switchboard") is True

    send(page, "Queued hello")
    chat = the_chat(widget)
    client = eventually(lambda: Client.objects.filter(user_token="early-token").first())
    assert client.pk == chat.client_id
    eventually(lambda: Client.objects.filter(visitor_data__has_key="custom_data").first())
    client.refresh_from_db()
    assert client.visitor_data["custom_data"] == [
        {"key": "Cart", "content": "2 items", "title": "", "link": ""}
    ]
    services.accept_chat(chat=chat, agent=alice)
    delivery = Delivery.objects.get(purpose=PURPOSE, event="chat_accepted")
    assert json.loads(delivery.body)["user_token"] == "early-token"
    assert errors == []


# --- the service cannot be reached --------------------------------------------------

EARLY_OPEN = (
    "svc_api.open();\nsvc_api.getVisitorNumber((err, n) => { window.number = [err, n]; });\n"
)


def test_an_unreachable_service_leaves_the_page_alone(
    visitor: BrowserContext, site: HostSite, widget: WidgetChannel
) -> None:
    site.script("/stub.js", STUB_JS)
    site.script("/early.js", EARLY_OPEN)
    nowhere = f"http://127.0.0.1:{free_port()}/widget/{widget.widget_id}.js"
    page, errors = opened(
        visitor, api_page(site, nowhere, head=("/stub.js", "/early.js")), loaded=False
    )
    page.wait_for_load_state("load")  # the script's request has failed
    expect(page.locator("#svc-widget")).to_have_count(0)
    assert page.evaluate("window.box()") == page.evaluate("window.box0")
    assert page.evaluate("window.calls") == []
    assert errors == []


def test_a_service_that_answers_no_request_leaves_the_page_alone(
    visitor: BrowserContext, web_process: Any, site: HostSite, widget: WidgetChannel
) -> None:
    page = visitor.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.route("**/v1/**", lambda route: route.abort())
    with page.expect_event("requestfailed", lambda r: "/v1/session" in r.url):
        page.goto(api_page(site, script_url(web_process.url, widget)))
    # Requests go one at a time: when this answer comes, the first has failed.
    err, number = visitor_number(page)
    assert err and number is None
    assert api(page, "close()") == {"result": "fail", "reason": "The widget has not loaded"}
    assert api(page, "startCall('+15551234567')")["result"] == "fail"
    api(page, "open()")
    expect(page.locator("#svc-widget")).to_have_count(0)
    assert page.evaluate("window.box()") == page.evaluate("window.box0")
    assert page.evaluate("window.calls") == []
    assert errors == []
