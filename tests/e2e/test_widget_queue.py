"""The widget tells a waiting visitor its place in the queue and the
estimated wait, and keeps it current as the chats ahead are taken
(docs/widget.md, "Your place in the queue")."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone
from playwright.sync_api import Browser, Page, Route, expect

from agents import services
from agents.models import Agent, Chat
from bots.services import attach_bot, create_bot_provider
from devhooks.models import WidgetChannel
from devhooks.widget import services as widgets
from tests.e2e.conftest import record_network
from tests.e2e.host_pages import HostSite, host_site
from tests.e2e.test_widget import host_page, wait_loaded
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# ms: the server's WIDGET_QUEUE_REFRESH_SECONDS is 3 (tests/e2e/conftest.py),
# so the second place asks every 6 s; doubled for a loaded machine.
MOVES = 2 * 6000 + 3000
LIVE = 2 * 5000  # ms: the stream's news (docs/testing.md, margin)
BOT_TOKEN = "queue-bot-token-0123"  # a test bot's path token


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(email="alice@example.com", name="Alice Agent", is_online=True)


@pytest.fixture
def widget(alice: Agent) -> WidgetChannel:
    made = widgets.create_widget_channel(
        name="Website", agent_emails=[alice.email], title="Talk to us"
    )
    # Three chats answered an hour ago after 90 s in the queue: the
    # estimate's history, whose median the test's own short waits keep.
    for _ in range(3):
        client = ClientFactory.create(channel=made.channel)
        earlier = services.post_client_message(client=client, content=text("Earlier")).chat
        services.accept_chat(chat=earlier, agent=alice)
        taken = timezone.now() - timedelta(hours=1)
        Chat.objects.filter(pk=earlier.pk).update(
            queued_at=taken - timedelta(seconds=90), accepted_at=taken
        )
    return made


@pytest.fixture
def site() -> Iterator[HostSite]:
    with host_site() as running:
        yield running


@pytest.fixture
def two_visitors(chromium: Browser, request: pytest.FixtureRequest) -> Iterator[list[Page]]:
    """Two visitors' browsers, each with its own storage (its own token)."""
    contexts = [chromium.new_context(viewport={"width": 1280, "height": 800}) for _ in range(2)]
    for context in contexts:
        record_network(context, request.node)
    yield [context.new_page() for context in contexts]
    for context in contexts:
        context.close()


def start_chat(page: Page, url: str, words: str) -> None:
    page.goto(url)
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    page.get_by_test_id("svc-input").fill(words)
    page.get_by_test_id("svc-input").press("Enter")
    expect(page.get_by_test_id("svc-waiting")).to_be_visible()


def test_a_second_visitor_sees_its_place_and_moves_up_when_the_chat_ahead_is_taken(
    two_visitors: list[Page], web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    ann, ben = two_visitors
    url = host_page(site, web_process.url, widget)
    errors: list[str] = []
    for page in two_visitors:
        page.on("pageerror", lambda error: errors.append(str(error)))

    start_chat(ann, url, "Where is my order?")
    expect(ann.get_by_test_id("svc-queue")).to_have_text("You are next in line, about 2 minutes")
    start_chat(ben, url, "Do you ship abroad?")
    line = ben.get_by_test_id("svc-queue")
    # The median recent wait (90 s) for each place: 3 minutes for the second.
    expect(line).to_have_text("You are 2nd in line, about 3 minutes")
    expect(line).to_have_attribute("role", "status")

    # Alice takes Ann's chat: Ann's line goes at once, Ben moves up.
    services.accept_chat(chat=Chat.objects.get(messages__text="Where is my order?"), agent=alice)
    expect(ann.get_by_test_id("svc-who")).to_have_text("Alice Agent", timeout=LIVE)
    expect(ann.get_by_test_id("svc-queue")).to_be_hidden()
    expect(line).to_have_text("You are next in line, about 2 minutes", timeout=MOVES)

    # A reload while waiting shows the place again; Reply takes it away.
    ben.reload()
    wait_loaded(ben)
    ben.evaluate("svc_api.open()")
    expect(line).to_have_text("You are next in line, about 2 minutes")
    services.accept_chat(chat=Chat.objects.get(state=Chat.State.QUEUED), agent=alice)
    expect(line).to_be_hidden(timeout=LIVE)
    expect(ben.get_by_test_id("svc-who")).to_have_text("Alice Agent")
    assert errors == []


def test_a_chat_a_bot_hands_to_the_agents_shows_its_place_without_a_reload(
    two_visitors: list[Page], web_process: Any, site: HostSite, widget: WidgetChannel
) -> None:
    # B1 goes to a provider nobody serves here: the bot speaks over B2 only.
    provider = create_bot_provider(
        name="Acme bots", endpoint_url="https://bots.example.com/b1", display_name="Acme Bot"
    )
    attach_bot(channel=widget.channel, provider=provider, token=BOT_TOKEN)
    page = two_visitors[0]
    page.goto(host_page(site, web_process.url, widget))
    wait_loaded(page)
    page.evaluate("svc_api.open()")
    page.get_by_test_id("svc-input").fill("I need a person")
    page.get_by_test_id("svc-input").press("Enter")
    for _ in range(100):  # the send's answer is in flight
        chat = Chat.objects.filter(messages__text="I need a person").first()
        if chat is not None:
            break
        page.wait_for_timeout(100)
    assert chat is not None
    assert chat.state == Chat.State.BOT
    line = page.get_by_test_id("svc-queue")
    expect(line).to_be_hidden()

    # The bot invites an agent: the chat queues, and the visitor's widget says
    # where it stands, told by its stream (no reload).
    invited = requests.post(
        f"{web_process.url}/webhooks/{provider.provider_id}/{BOT_TOKEN}",
        json={"event": "INVITE_AGENT", "chat_id": chat.pk, "client_id": chat.client_id},
        timeout=5,
    )
    assert invited.json() == {"result": "ok"}, invited.text
    expect(line).to_have_text("You are next in line, about 2 minutes", timeout=LIVE)


def test_a_session_answer_read_before_the_reply_does_not_undo_it(
    two_visitors: list[Page], web_process: Any, site: HostSite, widget: WidgetChannel, alice: Agent
) -> None:
    """The race a loaded CI machine hit: the widget asks for its session
    (svc_api.open(), a reload, a reset), the service reads it, then an agent
    replies and the stream says so, and only then does the session's answer
    arrive. The older answer must not take the chat back to the queue."""
    page = two_visitors[0]
    start_chat(page, host_page(site, web_process.url, widget), "Anyone?")
    line, who = page.get_by_test_id("svc-queue"), page.get_by_test_id("svc-who")
    expect(line).to_have_text("You are next in line, about 2 minutes")
    held: list[Route] = []
    page.route("**/v1/session", lambda route: held.append(route))
    page.evaluate("svc_api.open()")  # asks for the session again
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    before = held[0].fetch()  # read by the service now, before the Reply

    services.accept_chat(chat=Chat.objects.get(messages__text="Anyone?"), agent=alice)
    expect(who).to_have_text("Alice Agent", timeout=LIVE)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    held[0].fulfill(response=before)  # the older answer arrives last
    page.wait_for_timeout(1500)  # it is applied, and the page draws again

    expect(who).to_have_text("Alice Agent")
    expect(line).to_be_hidden()
    assert not [url for url in asked if url.endswith("/v1/queue")], asked  # not queued again
