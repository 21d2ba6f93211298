"""The Team view in a browser (docs/routing.md, "Team"): a supervisor sees
a new chat queue and whom it is offered to, an agent go offline, and a
reply owed, each without a reload; Reassign offers a queued chat to the
agent chosen, whose page tells them."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents import services
from agents.models import Agent, Channel, Chat
from channels_api.models import ChatApiChannel
from tests.e2e.test_routing import LIVE, pages, sign_in  # noqa: F401 - pages is a fixture
from tests.factories import AgentFactory, ClientFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_team_view_updates_live_and_reassigns_a_queued_chat(
    pages: list[Page],  # noqa: F811 - the fixture of test_routing.py
    alice: Agent,
    chat_api: ChatApiChannel,
    web_process: Any,
) -> None:
    bob = AgentFactory.create(email="bob@example.com", name="Bob Agent")
    sue = AgentFactory.create(email="sue@example.com", name="Sue Lead", role=Agent.Role.SUPERVISOR)
    chat_api.channel.agents.add(bob, sue)
    services.set_routing(channel=chat_api.channel, mode=Channel.RoutingMode.OFFER)
    for agent in (alice, bob):
        services.set_agent_status(agent=agent, online=True)
    sues, bobs = pages
    sign_in(sues, sue)
    sign_in(bobs, bob)
    sues.get_by_test_id("team-link").click()
    expect(sues.get_by_test_id("team-queue-empty")).to_be_visible()
    rows = sues.get_by_test_id("team-agent")
    expect(rows).to_have_count(3)
    alices_row = rows.filter(has_text="Alice Agent")
    expect(alices_row.get_by_test_id("team-status")).to_have_text("online")

    # A client writes: the chat queues, offered to Alice; the team sees it live.
    client = ClientFactory.create(channel=chat_api.channel, name="Nina")
    chat = services.post_client_message(client=client, content=text("Hello?")).chat
    chat.refresh_from_db()
    assert chat.offered_to == alice
    queued = sues.get_by_test_id("team-queued").filter(has_text="Nina")
    expect(queued.get_by_test_id("team-offered-to")).to_have_text("Alice Agent", timeout=LIVE)
    expect(alices_row.get_by_test_id("team-offers")).to_have_text("1")

    # Alice goes offline: her offer moves to Bob, and her row says offline.
    services.set_agent_status(agent=alice, online=False)
    expect(alices_row.get_by_test_id("team-status")).to_have_text("offline", timeout=LIVE)
    expect(queued.get_by_test_id("team-offered-to")).to_have_text("Bob Agent", timeout=LIVE)

    # Sue comes online and gives it to herself (a supervisor answers chats
    # too), then back to Bob, whose page tells him each time.
    services.set_agent_status(agent=sue, online=True)
    expect(queued.get_by_test_id("reassign-to").locator("option")).to_have_count(2, timeout=LIVE)
    queued.get_by_test_id("reassign-to").select_option(label="Sue Lead")
    queued.get_by_test_id("reassign").click()
    expect(sues.locator(".flash")).to_contain_text("Nina's chat is offered to Sue Lead now")
    expect(queued.get_by_test_id("team-offered-to")).to_have_text("Sue Lead")
    mine = bobs.get_by_test_id("queued-chat").filter(has_text="Nina")
    expect(mine.get_by_test_id("offered")).to_have_text("offered to Sue Lead", timeout=LIVE)
    queued.get_by_test_id("reassign-to").select_option(label="Bob Agent")
    queued.get_by_test_id("reassign").click()
    expect(mine.get_by_test_id("offered")).to_have_text("offered to you", timeout=LIVE)

    # Bob takes it with Reply, as in the spec; the team's queue empties.
    bobs.goto(f"/agent/chats/{chat.pk}/")
    bobs.get_by_test_id("reply").click()
    expect(bobs.locator("#reply-box")).to_be_visible(timeout=LIVE)
    expect(sues.get_by_test_id("team-queue-empty")).to_be_visible(timeout=LIVE)

    # The client writes again: the team sees a reply owed by Bob. Sue hands
    # the active chat to Alice, back online: Bob's page takes his reply box away.
    services.post_client_message(client=client, content=text("Are you there?"))
    owed = sues.get_by_test_id("team-waiting").filter(has_text="Nina")
    expect(owed).to_contain_text("Bob Agent", timeout=LIVE)
    services.set_agent_status(agent=alice, online=True)
    expect(owed.get_by_test_id("reassign-to").locator("option")).to_have_count(3, timeout=LIVE)
    owed.get_by_test_id("reassign-to").select_option(label="Alice Agent")
    owed.get_by_test_id("reassign").click()
    expect(sues.locator(".flash")).to_contain_text("Nina's chat is Alice Agent's now")
    expect(owed).to_contain_text("Alice Agent")
    expect(bobs.locator("#reply-box")).to_have_count(0, timeout=LIVE)
    chat.refresh_from_db()
    assert chat.state == Chat.State.ACTIVE and list(chat.agents.all()) == [alice]
    note = chat.messages.get(author="system")
    assert note.text == "Sue Lead reassigned the chat from Bob Agent to Alice Agent."
