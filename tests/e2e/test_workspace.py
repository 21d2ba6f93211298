"""The agent workspace in a real browser, on a laptop (1366 x 800) and a phone
(375 x 740): the phone's chat, times in the agent's zone, the lists, Finish,
images that cannot load, notifications and the keyboard."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from agents import services
from agents.content import Content
from agents.models import Agent, CannedReply, Chat, Client, Department, Message
from channels_api.models import ChatApiChannel
from delivery.models import Delivery
from tests.e2e.test_agent_pages import sign_in
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LIVE = 2 * 3000  # ms: the pages promise changes within 2 s (docs/testing.md, margin)

# What the page asks the browser to show or play, recorded beside the real calls.
RECORDER = """
window.__shown = [];
window.__chimes = 0;
window.__hidden = false;
Object.defineProperty(document, "visibilityState", {
  configurable: true, get: () => (window.__hidden ? "hidden" : "visible"),
});
const RealNotification = window.Notification;
window.Notification = class extends RealNotification {
  constructor(title, options) { super(title, options); window.__shown.push([title, options.body]); }
};
Object.defineProperty(
  window.Notification, "permission", { get: () => RealNotification.permission },
);
window.Notification.requestPermission = (...a) => RealNotification.requestPermission(...a);
window.__asking = 0;  // the page's requests in flight
const realFetch = window.fetch;
window.fetch = function (...a) {
  window.__asking += 1;
  return realFetch.apply(this, a).finally(() => { window.__asking -= 1; });
};
window.__audio = [];  // the page's AudioContexts: it sounds only once one runs
const RealAudioContext = window.AudioContext;
window.AudioContext = class extends RealAudioContext {
  constructor(...a) { super(...a); window.__audio.push(this); }
};
const start = OscillatorNode.prototype.start;
OscillatorNode.prototype.start = function (...a) {
  window.__chimes += 1;
  return start.apply(this, a);
};
"""


@pytest.fixture
def page(
    request: pytest.FixtureRequest, chromium: Browser, web_process: Any, device: dict[str, Any]
) -> Iterator[Page]:
    """A test marked ``desktop_notifications`` runs in the desktop chromium:
    the headless shell has no ``Notification``."""
    browser = chromium
    if request.node.get_closest_marker("desktop_notifications"):
        browser = request.getfixturevalue("full_chromium")
    context = browser.new_context(
        **device, base_url=web_process.url, timezone_id="Asia/Tokyo", locale="en-GB"
    )
    context.grant_permissions(["notifications"])
    context.add_init_script(RECORDER)
    page = context.new_page()
    yield page
    context.close()


def customer(channel: ChatApiChannel, name: str, *messages: str) -> Chat:
    client = ClientFactory.create(channel=channel.channel, name=name)
    chat = None
    for value in messages:
        chat = services.post_client_message(client=client, content=text(value)).chat
    assert chat is not None
    return chat


# The page's first live answer has come (its notices start from there): a
# page being ready, not a promise of speed, so the wait is generous for a
# loaded machine (the live promises are the LIVE timeouts).
HEARD = "document.getElementById('workspace').dataset.heard === 'true'"
READY_SECONDS = 20


def heard(page: Page) -> None:
    until(page, HEARD, timeout=READY_SECONDS)


def may_sound(page: Page) -> None:
    """Touch the page, as a browser asks before a page makes sound, and wait
    until its audio runs: resuming it takes a moment, longer on a loaded
    machine, and a chime asked for before then is not played."""
    page.locator("body").click()
    until(page, "window.__audio.some((a) => a.state === 'running')", timeout=READY_SECONDS)


def until(page: Page, script: str, timeout: float = 8) -> None:
    """Wait until ``script`` is true in the page (wait_for_function would need
    'unsafe-eval', which the pages' CSP refuses)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(script):
        assert time.monotonic() < deadline, f"not true within {timeout} s: {script}"
        page.wait_for_timeout(100)


def in_view(page: Page, selector: str) -> bool:
    return bool(
        page.eval_on_selector(
            selector,
            "e => { const r = e.getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }",
        )
    )


def test_a_chat_opens_at_its_newest_message_with_the_reply_box_in_view(
    page: Page,
    alice: Agent,
    chat_api: ChatApiChannel,
    size: str,
    screenshots: Path,
) -> None:
    chat = customer(chat_api, "Ann Lee", *(f"message number {n}" for n in range(40)))
    services.accept_chat(chat=chat, agent=alice)
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")

    expect(page.locator(".msg").last).to_contain_text("message number 39")
    expect(page.locator("#reply-box")).to_be_visible()
    assert in_view(page, ".msg:last-child") and in_view(page, "#reply-box")
    head = page.locator(".chat-head").bounding_box()
    assert head is not None and head["height"] < (56 if size == "phone" else 80)  # one row
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    # The client panel: beside the chat on a laptop, a drawer on a phone.
    panel = page.locator("#panel")
    if size == "phone":
        expect(panel).to_be_hidden()
        page.get_by_role("button", name="Client details").click()
        expect(panel).to_be_visible()
        expect(panel).to_contain_text("Ann Lee")
        page.screenshot(path=screenshots / "phone-panel.png")
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        page.screenshot(path=screenshots / "phone-chat.png")
        # The menu holds the pages and Sign out.
        page.get_by_test_id("menu-toggle").click()
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()
        expect(page.get_by_role("link", name="History")).to_be_visible()
    else:
        expect(panel).to_be_visible()
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_times_are_the_agents_own_and_relative_where_it_helps(
    page: Page,
    alice: Agent,
    chat_api: ChatApiChannel,
) -> None:
    fresh = customer(chat_api, "Fresh", "hello")
    waiting = customer(chat_api, "Waiting", "anyone?")
    Chat.objects.filter(pk=waiting.pk).update(
        queued_at=timezone.now() - timedelta(minutes=5, seconds=10)
    )
    sign_in(page)  # the lists: beside the empty pane, or a phone's first screen

    fresh_item = page.get_by_test_id("queued-chat").filter(has_text="Fresh")
    expect(fresh_item.locator("time.wait")).to_have_text("just now")
    expect(page.get_by_test_id("queued-chat").filter(has_text="Waiting").locator("time.wait"))\
        .to_have_text("5 min")  # fmt: skip
    page.goto(f"/agent/chats/{fresh.pk}/")
    message = fresh.messages.get()
    tokyo = timezone.localtime(message.created, timezone=_tokyo())
    stamp = page.locator(".msg time")
    expect(stamp).to_have_text(tokyo.strftime("%H:%M"))
    assert str(tokyo.year) in (stamp.get_attribute("title") or "")

    # The history: the date and time each chat finished, in Tokyo too.
    services.finish_chat(chat=waiting)
    finished = timezone.localtime(Chat.objects.get(pk=waiting.pk).finished_at, timezone=_tokyo())
    page.goto("/agent/history/")
    ended = page.get_by_test_id("history-row").filter(has_text="Waiting").locator("time")
    expect(ended).to_have_text(  # e.g. "3 Jun 2026, 21:00" (UTC: 12:00)
        re.compile(rf"^{finished.day} \w+ {finished.year}, {finished:%H:%M}$")
    )
    assert str(finished.year) in (ended.get_attribute("title") or "")


def _tokyo() -> Any:
    from zoneinfo import ZoneInfo

    return ZoneInfo("Asia/Tokyo")


def test_lists_unread_counts_reply_and_finish(
    page: Page,
    alice: Agent,
    chat_api: ChatApiChannel,
    size: str,
) -> None:
    second = customer(chat_api, "Nina", "hello there")
    first = customer(chat_api, "Olga", "my first words")
    Chat.objects.filter(pk=second.pk).update(queued_at=timezone.now() - timedelta(minutes=12))
    sign_in(page)
    if size == "laptop":  # the lists beside the chat
        page.goto(f"/agent/chats/{first.pk}/")
        current = page.locator(".item.current")
        expect(current).to_contain_text("Olga")
        expect(current.locator("a")).to_have_attribute("aria-current", "page")
        expect(current.get_by_test_id("unread")).to_have_count(0)
    # (a phone: the lists are its first screen)
    # The queue: the longest-waiting client first, with how long she has waited.
    queue = page.get_by_test_id("queued-chat")
    expect(queue.first).to_contain_text("Nina")
    expect(queue.first.locator("time.wait")).to_have_text("12 min")
    expect(queue.nth(1)).to_contain_text("Olga")

    # Nina writes again: she keeps her place, with 2 unread and her last words.
    services.post_client_message(client=second.client, content=text("still waiting"))
    nina = queue.first
    expect(nina).to_contain_text("still waiting", timeout=LIVE)
    expect(nina).to_contain_text("Nina")
    expect(nina).not_to_contain_text("hello there")
    expect(nina.get_by_test_id("unread")).to_have_text("2")
    expect(queue.nth(1)).to_contain_text("Olga")
    if size == "phone":
        page.get_by_test_id("queued-chat").filter(has_text="Olga").locator("a").click()
        expect(page).to_have_url(re.compile(f"/agent/chats/{first.pk}/$"))

    # No Finish on a queued chat; Reply puts the cursor in the reply box.
    expect(page.get_by_test_id("finish")).to_have_count(0)
    page.get_by_test_id("reply").click()
    expect(page.locator("#reply-box")).to_be_focused()
    page.keyboard.type("Hello Olga")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-agent")).to_contain_text("Hello Olga", timeout=LIVE)

    # Finish asks first: "no" changes nothing, "yes" finishes.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_test_id("finish").click()
    page.wait_for_timeout(300)
    assert Chat.objects.get(pk=first.pk).state == Chat.State.ACTIVE
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("finish").click()
    expect(page.locator(".closed")).to_contain_text("This chat is finished")

    # Nina is answered elsewhere (the agent API's verbs): nothing of hers is unread.
    services.accept_chat(chat=second, agent=alice)
    services.post_agent_message(chat=second, agent=alice, content=text("Hello Nina"))
    mine = page.get_by_test_id("active-chat").filter(has_text="Nina")
    if size == "phone":
        page.goto("/agent/")  # the lists are the phone's other screen
    expect(mine).to_contain_text("You: Hello Nina", timeout=LIVE)
    expect(mine.get_by_test_id("unread")).to_have_count(0)


def test_an_image_that_cannot_load_shows_a_file_card_and_a_cut_text_says_so(
    page: Page,
    alice: Agent,
    chat_api: ChatApiChannel,
    web_process: Any,
) -> None:
    chat = customer(chat_api, "Pia", "look")
    gone = f"{web_process.url}/static/no-such-image.png"
    photo = {"file": gone, "file_name": "receipt.png", "file_size": 2048}
    services.post_client_message(client=chat.client, content=Content("photo", "", photo))
    services.post_client_message(
        client=chat.client, content=Content("text", "y" * 1000, {"text_cut_from": 1400})
    )
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")

    card = page.get_by_test_id("image-card")
    expect(card).to_be_visible()
    expect(card).to_contain_text("receipt.png")
    expect(page.locator(".msg a.image")).to_be_hidden()
    expect(page.get_by_test_id("cut-note")).to_contain_text("1400 characters")
    # Icons are inline SVG (a machine without an emoji font shows them too).
    expect(card.locator("svg")).to_have_count(1)
    assert page.locator("header svg, .chat-head svg").count() > 0
    emoji = re.compile("[\U0001f300-\U0001faff\u2b50\u2b55\u23f0-\u23fa]")
    assert not emoji.search(page.locator("body").inner_text())


def test_the_empty_pane_follows_the_agents_status(
    page: Page,
    alice: Agent,
    size: str,
) -> None:
    sign_in(page)
    hint = page.get_by_test_id("empty-hint")
    if size == "phone":  # one column: the lists first, no empty pane beside them
        expect(hint).to_be_hidden()
        expect(page.locator("#lists")).to_be_visible()
        return
    expect(hint).to_contain_text("You are offline")
    page.get_by_test_id("status").click()
    expect(page.get_by_test_id("empty-hint")).to_contain_text("You are online")


@pytest.mark.desktop_notifications
def test_notifications_for_new_chats_and_new_messages(
    page: Page,
    alice: Agent,
    chat_api: ChatApiChannel,
) -> None:
    mine = customer(chat_api, "Olga", "hi")
    services.accept_chat(chat=mine, agent=alice)
    sign_in(page)
    page.goto(f"/agent/chats/{mine.pk}/")
    may_sound(page)
    heard(page)  # no news yet
    assert page.evaluate("[window.__chimes, window.__shown.length]") == [0, 0]

    # A new chat in the queue sounds, even with the tab in sight.
    customer(chat_api, "Nina", "Is anyone there?")
    until(page, "window.__chimes > 0")
    assert page.evaluate("window.__shown") == []

    # The agent looks elsewhere: a message in my chat sounds and shows on the desktop.
    # (Once no request is in flight: one asked while in sight would mark it read.)
    settle(page)
    page.evaluate("window.__hidden = true")
    services.post_client_message(client=mine.client, content=text("Are you still there?"))
    until(page, "window.__shown.length > 0")
    assert page.evaluate("window.__shown") == [["Olga wrote", "Are you still there?"]]


def settle(page: Page) -> None:
    """Wait until the page has no request in flight, twice 300 ms apart (a
    live cue may ask again at once)."""
    for _ in range(2):
        until(page, "window.__asking === 0")
        page.wait_for_timeout(300)
    until(page, "window.__asking === 0")


def test_notifications_can_be_switched_off(
    page: Page,
    alice: Agent,
    chat_api: ChatApiChannel,
) -> None:
    Agent.objects.filter(pk=alice.pk).update(notify_sound=False, notify_desktop=False)
    sign_in(page)
    page.locator("body").click()
    heard(page)
    page.evaluate("window.__hidden = true")
    customer(chat_api, "Nina", "Is anyone there?")
    expect(page.get_by_test_id("queued-chat")).to_contain_text("Nina", timeout=LIVE)
    page.wait_for_timeout(500)
    assert page.evaluate("[window.__chimes, window.__shown.length]") == [0, 0]


def test_the_keyboard_alone(page: Page, alice: Agent, chat_api: ChatApiChannel) -> None:
    chat = customer(chat_api, "Kim", "keyboard please")
    sign_in(page)
    page.goto("/agent/")

    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("j")  # the first chat of the lists
    page.wait_for_url(f"**/agent/chats/{chat.pk}/")
    page.keyboard.press("r")  # Reply
    expect(page.locator("#reply-box")).to_be_focused()
    page.keyboard.type("Typed without a mouse")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-agent")).to_contain_text("Typed without a mouse", timeout=LIVE)
    page.keyboard.press("Escape")  # out of the reply box
    page.once("dialog", lambda dialog: dialog.accept())
    page.keyboard.press("f")
    expect(page.locator(".closed")).to_contain_text("This chat is finished")
    assert Chat.objects.get(pk=chat.pk).state == Chat.State.FINISHED

    # Focus is visible, and controls without words have a name.
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    for control, name in ((".panel-toggle", "Client details"), (".back", "Back to the lists")):
        expect(page.locator(control)).to_have_attribute("aria-label", name)
    expect(page.get_by_test_id("status")).to_have_accessible_name("You are offline. Go online")
    assert Client.objects.count() == 1


@pytest.mark.worker
def test_a_note_and_a_transfer_with_the_client_never_told(
    chromium: Browser, page: Page, alice: Agent, chat_api: ChatApiChannel, target: Any,
    web_process: Any, size: str, device: dict[str, Any], screenshots: Path, celery_worker: Any,
) -> None:  # fmt: skip
    bob = AgentFactory.create(email="bob@example.com", name="Bob Agent", is_online=True)
    carl = AgentFactory.create(name="Carl Agent", is_online=True)
    chat_api.channel.agents.add(bob, carl)
    old = customer(chat_api, "Ann Lee", "last week's question")
    services.finish_chat(chat=old)
    chat = services.post_client_message(client=old.client, content=text("my refund?")).chat
    services.accept_chat(chat=chat, agent=alice)
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")

    # A reply reaches the integrator (the worker delivers): what follows could.
    # (Sent without typing, so that no late typein blurs the count below.)
    services.post_agent_message(chat=chat, agent=alice, content=text("Let me look"))
    expect(page.locator(".msg-agent .d-delivered")).to_be_visible(timeout=10_000)
    sent = [json.loads(r.body)["message"] for r in target.received]
    assert [m.get("text") for m in sent if m["type"] == "text"] == ["Let me look"]
    deliveries = Delivery.objects.count()

    # A note: in the reply box's Note mode, shown apart, sent nowhere.
    page.get_by_test_id("note-mode").check()
    expect(page.locator("#composer")).to_have_class(re.compile("is-note"))
    page.locator("#reply-box").fill("VIP customer: refund approved")
    page.keyboard.press("Enter")
    note = page.locator(".msg-note")
    expect(note).to_contain_text("VIP customer: refund approved", timeout=LIVE)
    expect(note).to_contain_text("Internal note")
    assert note.evaluate("n => getComputedStyle(n).backgroundColor") != page.locator(
        ".msg-agent"
    ).evaluate("n => getComputedStyle(n).backgroundColor")

    # The client's earlier chat, read-only.
    if size == "phone":
        page.get_by_role("button", name="Client details").click()
    earlier = page.get_by_test_id("earlier-chats")
    expect(earlier).to_contain_text("Finished")
    expect(earlier).to_contain_text("last week's question")
    if size == "phone":
        page.keyboard.press("Escape")

    # Bob's page is open: the transfer reaches him live.
    bob_context = chromium.new_context(**device, base_url=web_process.url)
    bob_page = bob_context.new_page()
    sign_in(bob_page, "bob@example.com")
    heard(bob_page)
    # A second tab of Bob's is on the chat itself, Alice's for now.
    bob_on_chat = bob_context.new_page()
    bob_on_chat.goto(f"/agent/chats/{chat.pk}/")
    expect(bob_on_chat.locator(".closed")).to_contain_text("Another agent answers this chat")
    heard(bob_on_chat)
    page.get_by_test_id("transfer").click()
    hand_to = page.get_by_label("Hand this chat to")
    hand_to.select_option(label="Bob Agent")
    page.get_by_label("Note for them (only agents see it)").fill("Promised a call back today")
    form = page.locator(".transfer-form").bounding_box()
    assert form is not None and form["x"] >= 0
    assert form["x"] + form["width"] <= device["viewport"]["width"]  # all of it on the screen
    page.screenshot(path=screenshots / f"transfer{'-phone' if size == 'phone' else ''}.png")
    # Carl went offline since the page was drawn: refused, said above the
    # page, the panel still open with the note.
    services.set_agent_status(agent=carl, online=False)
    hand_to.select_option(label="Carl Agent")
    page.get_by_test_id("transfer-submit").click()
    expect(page.locator("#notice")).to_contain_text("Carl Agent is offline", timeout=LIVE)
    hand_to.select_option(label="Bob Agent")
    page.get_by_test_id("transfer-submit").click()

    expect(page.locator("#composer")).to_have_count(0, timeout=LIVE)  # no longer mine
    expect(bob_on_chat.locator("#reply-box")).to_be_visible(timeout=LIVE)  # now his
    expect(bob_page.locator("#notice")).to_contain_text(
        "Alice Agent transferred Ann Lee's chat to you: Promised a call back today", timeout=LIVE
    )
    bob_page.get_by_test_id("active-chat").click()
    expect(bob_page.locator(".msg-note").last).to_contain_text("Promised a call back today")
    expect(bob_page.locator(".msg-system").last).to_contain_text(
        "Alice Agent transferred the chat to Bob Agent."
    )
    expect(bob_page.locator("#reply-box")).to_be_visible()
    bob_context.close()
    # Nothing more was queued for the client's integrator, nor received by it.
    assert Delivery.objects.count() == deliveries
    page.wait_for_timeout(500)  # a delivery the worker had would have arrived by now
    assert [json.loads(r.body)["message"] for r in target.received] == sent
    assert Chat.objects.get(pk=chat.pk).agents.get() == bob

    # The earlier chat opens from the card, read-only.
    if size == "phone":
        page.get_by_role("button", name="Client details").click()
    page.get_by_test_id("earlier-chats").get_by_role("link").first.click()
    page.wait_for_url(f"**/agent/chats/{old.pk}/")
    expect(page.locator(".closed")).to_contain_text("This chat is finished")
    expect(page.locator("#composer")).to_have_count(0)
    expect(page.get_by_test_id("transfer")).to_have_count(0)


def test_a_transfer_to_a_department_puts_the_chat_back_in_the_queue(
    page: Page, alice: Agent, chat_api: ChatApiChannel, size: str
) -> None:
    Department.objects.create(name="Billing")
    chat = customer(chat_api, "Ann Lee", "a question about my invoice")
    services.accept_chat(chat=chat, agent=alice)
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")

    page.get_by_test_id("transfer").click()
    page.get_by_label("Hand this chat to").select_option(label="Billing")
    page.get_by_label("Note for them (only agents see it)").fill("Invoice 2026-114")
    page.get_by_test_id("transfer-submit").click()

    expect(page.locator("#composer")).to_have_count(0, timeout=LIVE)  # no longer mine
    expect(page.get_by_test_id("reply")).to_be_visible()  # queued: anyone may take it
    chat.refresh_from_db()
    assert (chat.state, chat.department and chat.department.name) == ("queued", "Billing")
    expect(page.locator(".msg-note").last).to_contain_text("Invoice 2026-114")
    if size == "phone":
        page.locator(".back").click()
    expect(page.get_by_test_id("queued-chat").filter(has_text="Ann Lee")).to_contain_text("Billing")


def test_canned_replies_from_the_reply_box_and_the_settings_page(
    page: Page, alice: Agent, chat_api: ChatApiChannel, size: str, screenshots: Path
) -> None:
    chat = customer(chat_api, "Ann Lee", "hello?")
    services.accept_chat(chat=chat, agent=alice)
    CannedReply.objects.create(shortcut="goodbye", text="Bye {client.name}!")  # shared (admins')
    sign_in(page)

    # Alice keeps a personal reply with a placeholder.
    page.goto("/agent/canned/")
    page.get_by_label("Shortcut").fill("greeting")
    page.get_by_label("Text").fill("Hi {{client.name}}, {{ agent.name }} here, thanks for waiting!")
    page.get_by_role("button", name="Add reply").click()
    rows = page.get_by_test_id("canned-reply")
    expect(rows.filter(has_text="/greeting")).to_contain_text("Only me")
    shared_row = rows.filter(has_text="/goodbye")  # an admin's: listed, not Alice's to change
    expect(shared_row).to_contain_text("Everyone")
    expect(shared_row.get_by_role("link", name="Edit /goodbye")).to_have_count(0)

    # In the chat, "/gre" lists it; the keyboard picks it; Enter then sends.
    page.goto(f"/agent/chats/{chat.pk}/")
    box = page.locator("#reply-box")
    box.click()
    box.press_sequentially("/gre")
    option = page.get_by_test_id("canned-option").first
    expect(option).to_contain_text("/greeting")
    expect(box).to_have_attribute("aria-expanded", "true")
    expect(option).to_contain_text("mine")
    page.screenshot(path=screenshots / f"canned-replies{'-phone' if size == 'phone' else ''}.png")
    page.keyboard.press("ArrowDown")  # one option: stays on it
    page.keyboard.press("Enter")
    expect(box).to_have_value("Hi Ann Lee, Alice Agent here, thanks for waiting!")
    expect(page.get_by_test_id("canned-option")).to_have_count(0)
    page.keyboard.press("Enter")
    expect(page.locator(".msg-agent")).to_contain_text(
        "Hi Ann Lee, Alice Agent here, thanks for waiting!", timeout=LIVE
    )
    # The shared one is everyone's: listed, not "mine", its placeholder filled too.
    box.press_sequentially("/good")
    shared = page.get_by_test_id("canned-option").first
    expect(shared).to_contain_text("/goodbye")
    expect(shared).not_to_contain_text("mine")
    page.keyboard.press("Enter")
    expect(box).to_have_value("Bye Ann Lee!")
    box.fill("")

    # Settings: name, photo, a new token shown once.
    page.goto("/agent/settings/")
    page.get_by_label("Name (clients see it beside your replies)").fill("Alice Smith")
    page.get_by_label("Photo URL (your avatar in clients' chats)").fill("https://cdn.example/a.png")
    page.get_by_label("Desktop notifications while the tab is hidden").uncheck()
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".flash")).to_contain_text("Your settings are saved.")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("new-token-button").click()
    expect(page.get_by_test_id("new-token")).to_have_text(re.compile("^[0-9a-f]{40}$"))
    page.reload()
    expect(page.get_by_test_id("new-token")).to_have_count(0)
    alice.refresh_from_db()
    assert (alice.name, alice.photo_url, alice.notify_desktop) == (
        "Alice Smith", "https://cdn.example/a.png", False
    )  # fmt: skip
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_files_from_the_reply_box(
    page: Page, alice: Agent, chat_api: ChatApiChannel, size: str, tmp_path: Path
) -> None:
    import io

    from PIL import Image

    chat = customer(chat_api, "Ann Lee", "can you send the label?")
    services.accept_chat(chat=chat, agent=alice)
    image = tmp_path / "label.png"
    buffer = io.BytesIO()
    Image.new("RGB", (640, 320), (200, 30, 30)).save(buffer, format="PNG")
    image.write_bytes(buffer.getvalue())
    pdf = tmp_path / "invoice.pdf"
    pdf.write_bytes(b"%PDF-1.4\n%%EOF\n")
    svg = tmp_path / "evil.svg"
    svg.write_bytes(b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")

    # The file input is hidden: its label shows the keyboard's focus, on a phone too.
    page.locator("#reply-box").focus()
    page.keyboard.press("Tab")  # Send
    page.keyboard.press("Tab")
    expect(page.get_by_test_id("attach")).to_be_focused()
    attach = page.locator("label.attach")
    expect(attach).to_be_visible()
    assert attach.evaluate("label => getComputedStyle(label).outlineStyle") != "none"

    page.get_by_test_id("attach").set_input_files(str(image))
    photo = page.locator(".msg-agent img.thumb")
    expect(photo).to_be_visible(timeout=LIVE)
    page.wait_for_function(
        "img => img.complete && img.naturalWidth === 320", arg=photo.element_handle()
    )
    page.get_by_test_id("attach").set_input_files(str(pdf))
    expect(page.locator(".msg-agent .file").last).to_contain_text("invoice.pdf", timeout=LIVE)
    page.get_by_test_id("attach").set_input_files(str(svg))
    expect(page.locator("#notice")).to_contain_text("cannot be sent")
    assert list(
        Message.objects.filter(chat=chat, author="agent").values_list("type", flat=True)
    ) == [
        "photo",
        "document",
    ]


ANDROID_CHROME = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.6778.135 Mobile Safari/537.36"
)
# Too long for a line of the card; each part between "@" and dots fits one.
LONG_EMAIL = "maximiliane.konstantinopoulou@customer-service.example-corporation.co.uk"

# The first character of each line the address is laid out in, once it is
# laid out in more than one (the live updates may redraw the card meanwhile).
LINE_STARTS = """() => {
  const element = document.querySelector('[data-testid="client-email"]');
  if (!element || !element.isConnected) return null;
  const starts = [];
  let top = null;
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getClientRects()[0];
      if (!box || !node.data[i].trim()) continue;
      if (top === null || box.top > top + 2) { starts.push(node.data[i]); top = box.top; }
    }
  }
  return starts.length > 1 ? starts : null;
}"""


def test_the_visitor_card_names_the_browser_and_shows_only_what_is_known(
    page: Page, alice: Agent, chat_api: ChatApiChannel, size: str
) -> None:
    chat = customer(chat_api, "Ann Lee", "hello?")
    Client.objects.filter(pk=chat.client_id).update(
        email=LONG_EMAIL,
        visitor_data={
            "user_agent": ANDROID_CHROME,
            "ip_addr": "203.0.113.7",
            "geoip": {"city": "", "region": "", "country": "", "country_code": ""},
        },
    )
    sign_in(page)
    page.goto(f"/agent/chats/{chat.pk}/")
    if size == "phone":
        page.get_by_role("button", name="Client details").click()

    browser = page.get_by_test_id("visitor-browser")
    expect(browser).to_have_text("Chrome 131 on Android")
    expect(browser).to_have_attribute("title", ANDROID_CHROME)  # the raw string on hover
    expect(page.locator(".panel")).to_contain_text("203.0.113.7")
    expect(page.locator(".panel dt", has_text="Location")).to_have_count(0)  # nothing known

    email = page.get_by_test_id("client-email")
    expect(email).to_have_text(LONG_EMAIL)  # copied whole, no break characters in it
    expect(email).to_be_visible()
    starts = page.wait_for_function(LINE_STARTS).json_value()  # too long for one line
    assert all(start in "@." for start in starts[1:]), starts  # never inside a word


def test_what_happens_in_a_chat_the_page_does_not_show_asks_nothing(
    chromium: Browser, web_process: Any, alice: Agent, chat_api: ChatApiChannel
) -> None:
    # Bob shares Alice's channel: his chat's messages and typing reach her
    # page's stream, but change nothing on it (static/agent/app.js, elsewhere).
    bob = AgentFactory.create(email="bob@example.com", name="Bob Agent")
    chat_api.channel.agents.add(bob)
    opened = services.accept_chat(chat=customer(chat_api, "Olga", "Hello"), agent=alice)
    other = services.accept_chat(chat=customer(chat_api, "Pavel", "Hi"), agent=alice)
    bobs = services.accept_chat(chat=customer(chat_api, "Rita", "Hey"), agent=bob)
    context = chromium.new_context(
        viewport={"width": 1366, "height": 800}, base_url=web_process.url
    )
    context.add_init_script(RECORDER)
    page = context.new_page()
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "/agent/live" in r.url else None)
    try:
        sign_in(page)
        page.goto(f"/agent/chats/{opened.pk}/")
        heard(page)
        settle(page)
        before = len(polls)
        services.post_client_message(client=bobs.client, content=text("For Bob"))
        services.set_client_typing(chat=bobs, typing=True)
        # A message in my other chat asks: its line in my list changes.
        services.post_client_message(client=other.client, content=text("Still there?"))
        item = page.locator(f"#lists [data-chat-id='{other.pk}'] .preview")
        expect(item).to_have_text("Still there?", timeout=LIVE)
        settle(page)
        assert len(polls) - before == 1, polls[before:]
    finally:
        context.close()
