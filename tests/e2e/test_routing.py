"""Routing by offers in the agent pages (docs/routing.md): the agent a chat
is offered to hears it and sees it offered to them, the others see who has
it; Decline hands it to the next agent, whose page says so at once, and
Reply takes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import services
from agents.models import Agent, Channel, Chat, ChatOffer
from channels_api.models import ChatApiChannel
from tests.e2e.test_workspace import RECORDER, heard, may_sound, until
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LIVE = 2 * 3000  # ms: the pages promise changes within 2 s (docs/testing.md, margin)
PASSWORD = "agent-password"  # tests/factories.py


@pytest.fixture
def pages(full_chromium: Browser, web_process: Any) -> Iterator[list[Page]]:
    """Two agents' browsers, each its own session, in the desktop chromium:
    the offer shows a desktop notification."""
    contexts = []
    for _ in range(2):
        context = full_chromium.new_context(
            base_url=web_process.url, viewport={"width": 1366, "height": 800}
        )
        context.grant_permissions(["notifications"])
        context.add_init_script(RECORDER)
        contexts.append(context)
    yield [context.new_page() for context in contexts]
    for context in contexts:
        context.close()


def sign_in(page: Page, agent: Agent) -> None:
    page.goto("/agent/login/")
    page.get_by_label("Email").fill(agent.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("status")).to_be_visible()
    page.locator("body").click()  # a browser lets a page make sound after a touch
    heard(page)


def test_an_offer_is_declined_to_the_next_agent_who_takes_it_with_reply(
    pages: list[Page], alice: Agent, chat_api: ChatApiChannel
) -> None:
    bob = AgentFactory.create(email="bob@example.com", name="Bob Agent")
    chat_api.channel.agents.add(bob)
    services.set_routing(channel=chat_api.channel, mode=Channel.RoutingMode.OFFER)
    alices, bobs = pages
    for page, agent in ((alices, alice), (bobs, bob)):
        services.set_agent_status(agent=agent, online=True)
        sign_in(page, agent)
    may_sound(alices)

    client = ClientFactory.create(channel=chat_api.channel, name="Nina")
    chat = services.post_client_message(client=client, content=text("Is anyone there?")).chat
    chat.refresh_from_db()
    assert chat.offered_to == alice  # the tie goes to the agent made first

    # Alice hears it and sees it offered to her; Bob sees it is Alice's, in silence.
    queued = alices.get_by_test_id("queued-chat").filter(has_text="Nina")
    expect(queued.get_by_test_id("offered")).to_have_text("offered to you", timeout=LIVE)
    until(alices, "window.__chimes > 0")
    others = bobs.get_by_test_id("queued-chat").filter(has_text="Nina")
    expect(others.get_by_test_id("offered")).to_have_text("offered to Alice Agent", timeout=LIVE)
    assert bobs.evaluate("window.__chimes") == 0

    # Alice declines: the chat is offered to Bob, whose page tells him.
    alices.goto(f"/agent/chats/{chat.pk}/")
    expect(alices.get_by_test_id("offer-note")).to_contain_text("offered to you until")
    bobs.evaluate("window.__hidden = true")
    alices.get_by_test_id("decline").click()
    expect(others.get_by_test_id("offered")).to_have_text("offered to you", timeout=LIVE)
    until(bobs, "window.__shown.length > 0")
    assert bobs.evaluate("window.__shown") == [["Chat offered to you: Nina", "Is anyone there?"]]

    # Bob takes it with Reply, as in the spec: the chat is his.
    bobs.goto(f"/agent/chats/{chat.pk}/")
    expect(bobs.get_by_test_id("decline")).to_be_visible()
    bobs.get_by_test_id("reply").click()
    expect(bobs.locator("#reply-box")).to_be_visible(timeout=LIVE)
    chat.refresh_from_db()
    assert chat.state == Chat.State.ACTIVE and list(chat.agents.all()) == [bob]
    outcomes = dict(ChatOffer.objects.filter(chat=chat).values_list("agent__name", "outcome"))
    assert outcomes == {"Alice Agent": "declined", "Bob Agent": "accepted"}
