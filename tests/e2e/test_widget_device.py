"""The widget as a visitor sees it on a laptop and on a phone (the ``device``
fixture): the end of a chat, a host page wider than the phone's screen, and
the times on messages (docs/widget.md)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import services
from agents.content import Content
from agents.models import Agent, Chat, Mail, Message
from devhooks.models import WidgetChannel
from tests.e2e.host_pages import HostSite
from tests.e2e.test_widget import LIVE, alice, site, wait_loaded, widget  # noqa: F401 (fixtures)
from tests.e2e.test_widget_experience import Stream, say, shop_page, watch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VISITOR_ZONE = "Asia/Tokyo"
VIEWPORT = "<meta name='viewport' content='width=device-width, initial-scale=1'>"
# Where an element is against what the visitor can see (the visual viewport),
# in the layout viewport's CSS pixels, as getBoundingClientRect measures.
IN_SIGHT = """(el) => {
  const r = el.getBoundingClientRect(), v = window.visualViewport;
  return {left: r.left - v.offsetLeft, top: r.top - v.offsetTop,
          right: v.offsetLeft + v.width - r.right, bottom: v.offsetTop + v.height - r.bottom,
          width: r.width, height: r.height};
}"""


@pytest.fixture
def page(chromium: Browser, device: dict[str, Any]) -> Iterator[Page]:
    # A visitor far from the server's UTC: times show in the visitor's zone.
    context = chromium.new_context(**device, timezone_id=VISITOR_ZONE, locale="en-GB")
    yield context.new_page()
    context.close()


def in_sight(page: Page, test_id: str) -> dict[str, float]:
    """The element's margins to the edges of the visible screen (>= 0: in sight)."""
    found: dict[str, float] = page.get_by_test_id(test_id).evaluate(IN_SIGHT)
    return found


def fully_in_sight(margins: dict[str, float]) -> bool:
    return all(margins[side] >= -1 for side in ("left", "top", "right", "bottom"))


# --- the end of a chat -------------------------------------------------------------


def test_an_ended_chat_says_so_keeps_its_messages_readable_and_offers_a_new_chat(
    page: Page, size: str, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, screenshots: Path,  # noqa: F811
) -> None:  # fmt: skip
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()
    say(page, "Can I change my delivery address?")
    chat = Chat.objects.get(channel=widget.channel)
    services.accept_chat(chat=chat, agent=alice)
    for n in range(1, 7):
        text = f"Step {n}: open your orders, choose the parcel and press Change address."
        services.post_agent_message(chat=chat, agent=alice, content=Content("text", text, {}))
    last = "Done! Anything else? Have a good day."
    services.post_agent_message(chat=chat, agent=alice, content=Content("text", last, {}))
    said = page.locator("[data-author=agent]").last
    expect(said).to_have_text(f"Alice Agent{last}", timeout=LIVE)

    # Alice finishes: the header and the window say the chat has ended, and
    # the message box gives way to the rating and "Start a new chat".
    services.finish_chat(chat=chat, agent=alice)
    end = page.get_by_test_id("svc-end")
    expect(end).to_be_visible(timeout=LIVE)
    expect(page.get_by_test_id("svc-who")).to_have_text("The chat has ended")
    expect(end).to_contain_text("The chat has ended.")
    expect(page.get_by_test_id("svc-input")).to_be_hidden()
    expect(page.get_by_test_id("svc-rate")).to_be_visible()

    # The last message is whole in sight, above the rating.
    messages = page.get_by_test_id("svc-messages").bounding_box()
    said_box = said.bounding_box()
    rating = end.bounding_box()
    assert messages and said_box and rating
    bottom = said_box["y"] + said_box["height"]
    assert said_box["y"] >= messages["y"] - 1, (said_box, messages)
    assert bottom <= messages["y"] + messages["height"] + 1, (said_box, messages)
    assert bottom <= rating["y"] + 1, (said_box, rating)
    assert fully_in_sight(in_sight(page, "svc-end"))

    # Icons are drawn (SVG), not emoji a machine may have no font for.
    window = page.get_by_test_id("svc-window")
    for where in (
        page.get_by_test_id("svc-rate").locator("[data-rating=positive]"),
        page.get_by_test_id("svc-rate").locator("[data-rating=negative]"),
        page.get_by_test_id("svc-close"),
    ):
        drawn = where.locator("svg")
        expect(drawn).to_be_visible()
        box = drawn.bounding_box()
        assert box and box["width"] >= 16 and box["height"] >= 16, box
    text = window.inner_text()
    assert not [c for c in text if ord(c) >= 0x2190], text  # no arrows, symbols nor emoji
    if size == "laptop":
        page.mouse.move(0, 0)
        window.screenshot(path=screenshots / "widget-ended.png")

    page.get_by_test_id("svc-rate").locator("[data-rating=positive]").click()
    expect(page.get_by_test_id("svc-messages")).to_contain_text("Thank you for your rating.")
    expect(page.get_by_test_id("svc-rate")).to_be_hidden()
    expect(end).to_be_visible()

    # A word beside the rating, if the visitor likes: it reaches the agents.
    expect(page.get_by_test_id("svc-comment-text")).to_be_focused()
    page.get_by_test_id("svc-comment-text").fill("Quick and <b>kind</b>")
    page.get_by_test_id("svc-comment-send").click()
    expect(page.get_by_test_id("svc-messages")).to_contain_text("Thank you for your comment.")
    expect(page.get_by_test_id("svc-comment")).to_be_hidden()
    chat.refresh_from_db()
    assert (chat.rating, chat.rating_comment) == ("positive", "Quick and <b>kind</b>")

    # A new chat: the message box is back, and the next message opens a chat.
    page.get_by_test_id("svc-new-chat").click()
    expect(end).to_be_hidden()
    expect(page.get_by_test_id("svc-input")).to_be_focused()
    expect(page.get_by_test_id("svc-who")).to_have_text("We are online")
    say(page, "One more thing")
    expect(page.get_by_test_id("svc-end")).to_be_hidden()
    assert Chat.objects.filter(channel=widget.channel, state=Chat.State.QUEUED).count() == 1
    assert errors == []


def test_the_launcher_is_drawn_not_an_emoji(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    label = page.get_by_test_id("svc-label")
    expect(label).to_have_text("Talk to us")
    drawn = label.locator("svg")
    expect(drawn).to_be_visible()
    box = drawn.bounding_box()
    assert box and box["width"] >= 16 and box["height"] >= 16, box


# --- a host page wider than the screen ------------------------------------------------

# Many real sites overflow on a phone: a line of code, a wide table. The page
# is then wider than the screen and the browser's layout viewport with it.
WIDE = (
    '<h2>Install</h2><p><code>&lt;script src="https://chat.example.com/widget/'
    'Hk2mV9xQ0aB7cD1e.js" async&gt;&lt;/script&gt;</code></p>'
    + "".join(f"<p>Product {n}: things for sale.</p>" for n in range(40))
)


def test_on_a_page_wider_than_the_screen_the_widget_stays_in_sight(
    page: Page, size: str, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    screenshots: Path,
) -> None:  # fmt: skip
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT, body=WIDE))
    wait_loaded(page)
    if size == "phone":  # the page is wider than the screen, as on many real sites
        assert page.evaluate("document.documentElement.scrollWidth > visualViewport.width")
    page.evaluate("window.scrollTo(0, 200)")

    launcher = in_sight(page, "svc-label")
    assert fully_in_sight(launcher), launcher
    assert launcher["right"] <= 24 and launcher["bottom"] <= 24, launcher  # in its corner
    if size == "phone":
        page.screenshot(path=screenshots / "widget-phone-launcher.png")

    page.get_by_test_id("svc-label").click()
    window = in_sight(page, "svc-window")
    assert fully_in_sight(window), window
    close = in_sight(page, "svc-close")
    assert fully_in_sight(close), close
    if size == "phone":  # the whole screen, no more
        assert all(abs(window[side]) <= 1 for side in ("left", "top", "right", "bottom")), window
    expect(page.get_by_test_id("svc-input")).to_be_visible()
    assert fully_in_sight(in_sight(page, "svc-input"))
    page.get_by_test_id("svc-close").click()
    expect(page.get_by_test_id("svc-window")).to_be_hidden()
    assert fully_in_sight(in_sight(page, "svc-label"))
    assert errors == []


# --- the on-screen keyboard -------------------------------------------------------------

KEYBOARD = 330  # CSS px a phone's on-screen keyboard takes from the bottom of the screen
NEXT_FRAMES = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


@pytest.mark.parametrize("body", ["", WIDE], ids=["fitting-page", "wide-page"])
def test_on_a_phone_the_reply_box_stays_above_the_on_screen_keyboard(
    chromium: Browser, devices: dict[str, dict[str, Any]], web_process: Any,
    site: HostSite, widget: WidgetChannel, body: str,  # noqa: F811
) -> None:  # fmt: skip
    phone = devices["phone"]
    context = chromium.new_context(**phone)
    try:
        page = context.new_page()
        errors = watch(page)
        page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT, body=body))
        wait_loaded(page)
        page.get_by_test_id("svc-label").tap()
        reply = page.get_by_test_id("svc-input")
        reply.tap()
        expect(reply).to_be_focused()

        # The keyboard opens: the screen's visible part loses its lower part,
        # as DevTools' device emulation shows it (the visual viewport resizes
        # and says so).
        screen = phone["viewport"]
        page.evaluate(
            "window.resizes = 0; visualViewport.addEventListener('resize', () => window.resizes++)"
        )
        cdp = context.new_cdp_session(page)
        metrics = {
            "width": screen["width"],
            "deviceScaleFactor": phone["device_scale_factor"],
            "mobile": True,
        }
        cdp.send(
            "Emulation.setDeviceMetricsOverride",
            {**metrics, "height": screen["height"] - KEYBOARD},
        )
        page.wait_for_function(
            f"window.resizes > 0 && visualViewport.height <= {screen['height'] - KEYBOARD}",
            timeout=LIVE,
        )
        page.evaluate(NEXT_FRAMES)

        # The reply box is whole above the keyboard, the header and its
        # close button still in sight, and the focus stayed in the box.
        for part in ("svc-input", "svc-send", "svc-close"):
            margins = in_sight(page, part)
            assert fully_in_sight(margins), (part, margins)
        window = in_sight(page, "svc-window")
        assert all(abs(window[side]) <= 1 for side in ("left", "top", "right", "bottom")), window
        expect(reply).to_be_focused()
        say(page, "Typed above the keyboard")

        # The keyboard closes: the window fills the whole screen again.
        cdp.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": screen["height"]})
        page.wait_for_function(f"visualViewport.height >= {screen['height'] - 1}", timeout=LIVE)
        page.evaluate(NEXT_FRAMES)
        window = in_sight(page, "svc-window")
        assert all(abs(window[side]) <= 1 for side in ("left", "top", "right", "bottom")), window
        assert window["height"] >= screen["height"] - 1, window
        assert errors == []
    finally:
        context.close()


# --- a refused visitor ------------------------------------------------------------------


def test_a_blacklisted_visitor_is_told_the_chat_is_not_available_and_the_widget_stops_asking(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    errors = watch(page)
    # The page's timers run on a clock the test can move forward (it runs on
    # its own meanwhile): the retries the widget no longer makes are looked
    # for over 6.5 s of its time without waiting them out.
    page.clock.install()
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()
    stream = Stream(page)
    say(page, "Hello")
    stream.wait_open()
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if r.url.startswith(web_process.url) else None)

    # Blacklisted: the service ends the visitor's stream and refuses it (403).
    chat = Chat.objects.get(channel=widget.channel)
    services.blacklist_client(chat=chat, agent=alice, reason="spam")

    expect(page.get_by_test_id("svc-unavailable")).to_have_text(
        "Sorry, this chat is not available.", timeout=LIVE * 2
    )
    expect(page.get_by_test_id("svc-who")).to_have_text("Not available")
    expect(page.get_by_test_id("svc-input")).to_have_count(0)
    assert any("/stream" in url for url in asked), asked

    # No more tries: the refusal does not change by asking again (it was
    # retried every 5 s), and opening the window again asks nothing either.
    seen = len(asked)
    page.clock.run_for(6500)
    page.evaluate("svc_api.close(); svc_api.open()")
    expect(page.get_by_test_id("svc-unavailable")).to_be_visible()
    page.wait_for_timeout(500)
    assert asked[seen:] == []
    assert errors == []


# --- times on messages, and a word while the chat waits --------------------------------

SHOWN_TIME = "(el) => getComputedStyle(el, '::after').content.replace(/\"/g, '')"


def test_messages_show_their_time_and_the_first_one_the_channels_waiting_text(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    widget.waiting_text = "We answer within five minutes."
    widget.save(update_fields=["waiting_text"])
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()
    say(page, "Do you sell gift cards?")
    waiting = page.get_by_test_id("svc-waiting")
    expect(waiting).to_have_text("We answer within five minutes.")
    say(page, "For 50 euros?")
    expect(waiting).to_have_count(1)  # after the first message only

    chat = Chat.objects.get(channel=widget.channel)
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=Content("text", "We do.", {}))
    expect(page.locator("[data-author=agent]")).to_contain_text("We do.", timeout=LIVE)

    def shown() -> list[str]:
        return [t.evaluate(SHOWN_TIME) for t in page.locator("[data-testid=svc-msg] time").all()]

    def expected() -> list[str]:
        zone = ZoneInfo(VISITOR_ZONE)
        sent = Message.objects.filter(chat=chat, author__in=["client", "agent"])
        return [m.created.astimezone(zone).strftime("%H:%M") for m in sent.order_by("id")]

    # The agent's message and the visitor's own, each with its time in the visitor's zone.
    assert shown() == expected(), (shown(), expected())
    for time in page.locator("[data-testid=svc-msg] time").all():
        box = time.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0
    # A reload shows the times the service kept.
    page.reload()
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    expect(page.get_by_test_id("svc-msg")).to_have_count(3)
    assert shown() == expected(), (shown(), expected())
    assert errors == []


# --- the pre-chat form ---------------------------------------------------------------


def test_the_pre_chat_form_asks_what_the_channel_wants_before_the_first_message(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    widget.prechat_name = WidgetChannel.Ask.REQUIRED
    widget.prechat_email = WidgetChannel.Ask.OPTIONAL
    widget.save(update_fields=["prechat_name", "prechat_email"])
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()

    # Asked first: a name (required) and an e-mail (optional); no phone, no message box.
    form = page.get_by_test_id("svc-prechat")
    expect(form).to_be_visible()
    expect(form.get_by_label("Name")).to_be_focused()
    expect(form.get_by_label("E-mail")).to_be_visible()
    expect(form.get_by_label("Phone")).to_have_count(0)
    expect(page.get_by_test_id("svc-input")).to_have_count(0)
    expect(page.get_by_test_id("svc-introduce")).to_be_hidden()  # the form asks already
    assert fully_in_sight(in_sight(page, "svc-prechat"))
    start = form.get_by_role("button", name="Start the chat")
    start.click()
    expect(form.get_by_role("status")).to_have_text("Give your name.")
    form.get_by_label("Name").fill("Ann Lee")
    form.get_by_label("E-mail").fill("ann-at-example.com")
    start.click()
    expect(form.get_by_role("status")).to_contain_text("is not a valid e-mail address")
    assert not Chat.objects.exists()

    form.get_by_label("E-mail").fill("ann@example.com")
    start.click()
    expect(page.get_by_test_id("svc-input")).to_be_focused(timeout=LIVE)
    say(page, "Is the blue one in stock?")
    chat = Chat.objects.select_related("client").get(channel=widget.channel)
    assert (chat.client.name, chat.client.email) == ("Ann Lee", "ann@example.com")
    assert page.evaluate("svc_api.getContactInfo()")["client_name"] == "Ann Lee"

    # Answered once: a reload goes straight to the chat.
    page.reload()
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    expect(page.get_by_test_id("svc-input")).to_be_visible()
    expect(page.get_by_test_id("svc-prechat")).to_have_count(0)
    assert errors == []


# --- consent ------------------------------------------------------------------------


CONSENT = "We keep this chat for 90 days to answer you.\nRead our privacy notice."


def test_the_consent_text_is_accepted_before_the_first_message_and_asked_again_when_it_changes(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    WidgetChannel.objects.filter(pk=widget.pk).update(consent_text=CONSENT, consent_version=3)
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()

    # The text first, with Accept; no message box, no form asking who the visitor is.
    consent = page.get_by_test_id("svc-consent")
    expect(consent).to_be_visible()
    expect(page.get_by_test_id("svc-consent-text")).to_have_text(CONSENT)
    expect(page.get_by_test_id("svc-input")).to_have_count(0)
    expect(page.get_by_test_id("svc-introduce")).to_be_hidden()
    assert fully_in_sight(in_sight(page, "svc-consent"))
    accept = consent.get_by_role("button", name="Accept")
    expect(accept).to_be_focused()
    accept.click()
    expect(page.get_by_test_id("svc-input")).to_be_focused(timeout=LIVE)

    # Meanwhile the admin changes the text: the first message is refused,
    # and the new text is shown to accept.
    changed = "We keep this chat for 30 days."
    WidgetChannel.objects.filter(pk=widget.pk).update(consent_text=changed, consent_version=4)
    box = page.get_by_test_id("svc-input")
    box.fill("Is the blue one in stock?")
    box.press("Enter")
    expect(page.get_by_test_id("svc-consent-text")).to_have_text(changed, timeout=LIVE)
    assert not Chat.objects.exists()
    page.get_by_test_id("svc-consent").get_by_role("button", name="Accept").click()
    say(page, "Is the blue one in stock?")

    chat = Chat.objects.get(channel=widget.channel)
    assert chat.consent_version == 4 and chat.consent_at is not None

    # Accepted once: a reload goes straight to the chat.
    page.reload()
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    expect(page.get_by_test_id("svc-input")).to_be_visible()
    expect(page.get_by_test_id("svc-consent")).to_have_count(0)
    assert errors == []


def test_a_visitor_who_gives_a_new_address_is_told_to_open_the_link_mailed_to_it(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    widget.prechat_email = WidgetChannel.Ask.REQUIRED
    widget.save(update_fields=["prechat_email"])
    # Addresses no earlier test or run had a link mailed to (a few a day each).
    first, second = (f"ann-{secrets.token_hex(4)}@example.com" for _ in range(2))
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()
    form = page.get_by_test_id("svc-prechat")
    form.get_by_label("E-mail").fill(first)
    form.get_by_role("button", name="Start the chat").click()

    told = page.get_by_test_id("svc-email-link")
    expect(told).to_have_text(
        f"We sent a link to {first}. Open it to get this conversation by e-mail.", timeout=LIVE
    )
    assert fully_in_sight(in_sight(page, "svc-email-link"))
    assert list(Mail.objects.values_list("to", flat=True)) == [first]

    # The same address again mails nothing and says nothing; a new one does both.
    page.get_by_test_id("svc-introduce").click()
    contact = page.get_by_test_id("svc-contact")
    contact.get_by_label("E-mail").fill(first)
    contact.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("svc-input")).to_be_visible()
    page.get_by_test_id("svc-introduce").click()
    contact.get_by_label("E-mail").fill(second)
    contact.get_by_role("button", name="Save").click()
    expect(told).to_have_count(2)
    expect(told.last).to_contain_text(f"We sent a link to {second}.")
    assert sorted(Mail.objects.values_list("to", flat=True)) == sorted([first, second])
    assert errors == []


def test_a_proactive_invitation_is_read_above_a_due_pre_chat_form(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    widget.prechat_name = WidgetChannel.Ask.REQUIRED
    widget.save(update_fields=["prechat_name"])
    errors = watch(page)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)

    page.evaluate("svc_api.showProactiveInvitation('Need help choosing a size?')")

    # The form is due before a first message, and the invitation is read above it.
    form = page.get_by_test_id("svc-prechat")
    expect(form).to_be_visible()
    invitation = page.get_by_test_id("svc-prechat-invitation")
    expect(invitation).to_have_text("Need help choosing a size?")
    said, name = invitation.bounding_box(), form.get_by_label("Name").bounding_box()
    assert said and name and said["y"] + said["height"] <= name["y"], (said, name)
    assert fully_in_sight(in_sight(page, "svc-prechat-invitation"))

    # Answered, the chat shows the invitation, and the visitor's answer keeps it.
    form.get_by_label("Name").fill("Ann Lee")
    form.get_by_role("button", name="Start the chat").click()
    expect(page.get_by_test_id("svc-invitation")).to_have_text("Need help choosing a size?")
    say(page, "Yes, for the boots")
    chat = Chat.objects.select_related("client").get(channel=widget.channel)
    assert chat.client.invite_text == "Need help choosing a size?"
    assert errors == []


def test_the_offline_form_does_not_offer_introduce_yourself_beside_its_name_field(
    page: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:  # fmt: skip
    services.set_agent_status(agent=alice, online=False)
    page.goto(shop_page(site, web_process.url, widget, head=VIEWPORT))
    wait_loaded(page)
    page.get_by_test_id("svc-label").click()
    form = page.get_by_test_id("svc-offline")
    expect(form.get_by_label("Name")).to_be_visible()
    expect(page.get_by_test_id("svc-introduce")).to_be_hidden()
    assert fully_in_sight(in_sight(page, "svc-offline"))
