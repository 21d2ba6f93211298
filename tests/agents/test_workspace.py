"""The workspace's lists, unread counts, times, icons and hints through the
test client (the browser side is tests/e2e/test_workspace.py)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.test import Client as Browser
from django.utils import timezone
from rest_framework.test import APIClient

from agents import selectors, services
from agents.content import Content
from agents.models import Agent, Call, Chat, Message
from channels_api.serializers import UserMessageIn
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(agent: Agent) -> Browser:
    page = page_of(agent)
    return page


def open_chat(agent: Agent, name: str, *messages: str) -> Chat:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name=name)
    chat = None
    for value in messages:
        chat = services.post_client_message(client=client, content=text(value)).chat
    assert chat is not None
    return chat


def names_in(html: str, testid: str) -> list[str]:
    items = re.findall(rf'data-testid="{testid}".*?<span class="name">([^<]*)</span>', html, re.S)
    return [name.strip() for name in items]


def test_lists_put_the_most_recently_active_chat_first(browser: Browser, agent: Agent) -> None:
    old = open_chat(agent, "Olga", "first")
    new = open_chat(agent, "Nina", "second")
    for chat in (old, new):
        services.accept_chat(chat=chat, agent=agent)
    services.post_client_message(client=old.client, content=text("Olga again"))

    html = browser.get("/agent/").content.decode()

    assert names_in(html, "active-chat") == ["Olga", "Nina"]


def test_the_queue_puts_the_longest_waiting_client_first_with_the_wait(
    browser: Browser, agent: Agent
) -> None:
    first = open_chat(agent, "Olga", "I came first")
    open_chat(agent, "Nina", "I came second, and wrote last")
    Chat.objects.filter(pk=first.pk).update(queued_at=timezone.now() - timedelta(minutes=7))

    html = browser.get("/agent/").content.decode()

    assert names_in(html, "queued-chat") == ["Olga", "Nina"]
    first.refresh_from_db()
    waits = re.findall(r'<time class="when wait" datetime="([^"]+)" data-relative="wait"', html)
    assert waits[0] == first.queued_at.isoformat()  # type: ignore[union-attr]


def test_a_chat_answered_through_the_api_has_nothing_unread(
    browser: Browser, api: APIClient, agent: Agent
) -> None:
    chat = open_chat(agent, "Olga", "one", "two")
    api.post(f"/api/agent/v1/chats/{chat.pk}/accept")
    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/messages", {"type": "text", "text": "Hi"})
    assert answer.status_code == 201

    html = browser.get("/agent/").content.decode()
    item = html[html.index('data-testid="active-chat"') :]
    assert 'data-testid="unread"' not in item[: item.index("</li>")]

    services.post_client_message(client=chat.client, content=text("thanks"))
    html = browser.get("/agent/").content.decode()
    item = html[html.index('data-testid="active-chat"') :]
    assert 'aria-label="1 unread"' in item[: item.index("</li>")]


def test_unread_counts_only_the_clients_messages(agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    colleague = AgentFactory.create()
    services.post_note(chat=chat, agent=colleague, text="VIP, be nice")
    services.post_system_message(chat=chat, text="Bot unreachable")

    [listed] = selectors.queue_for_agent(agent=agent)
    assert listed.unread == 1  # type: ignore[attr-defined]


def test_a_chat_shows_its_last_message_not_its_first(browser: Browser, agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "my first words", "and my latest words")
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("On it"))

    html = browser.get("/agent/").content.decode()

    item = html[html.index('data-testid="active-chat"') :]
    assert "You: On it" in item[: item.index("</li>")]
    assert "my first words" not in html


def test_unread_counts_what_came_after_the_agent_last_looked(
    browser: Browser, agent: Agent
) -> None:
    chat = open_chat(agent, "Olga", "one", "two")
    other = open_chat(agent, "Nina", "hello")

    def unread(chat: Chat) -> int:
        [listed] = [c for c in selectors.queue_for_agent(agent=agent) if c.pk == chat.pk]
        return int(listed.unread)  # type: ignore[attr-defined]

    assert (unread(chat), unread(other)) == (2, 1)
    browser.get(f"/agent/chats/{chat.pk}/")  # the agent opens it: read
    assert (unread(chat), unread(other)) == (0, 1)

    newest = services.post_client_message(client=chat.client, content=text("three"))
    assert unread(chat) == 1
    # A poll of a hidden tab fetches the message but does not count it read…
    browser.get(f"/agent/live?chat={chat.pk}&after={newest.pk - 1}")
    assert unread(chat) == 1
    # …one made while the agent sees the page does, including what it already had.
    live = browser.get(f"/agent/live?chat={chat.pk}&after={newest.pk}&seen=1").json()
    assert unread(chat) == 0
    assert 'data-testid="unread"' not in live["lists_html"].split(f"chats/{chat.pk}/")[1][:400]


def test_my_own_messages_and_system_notes_are_never_unread(agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    services.mark_chat_seen(agent=agent, chat=chat, message_id=chat.messages.last().pk)  # type: ignore[union-attr]
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("Hello"))
    services.post_system_message(chat=chat, text="Bot unreachable")

    [listed] = selectors.active_for_agent(agent=agent)
    assert listed.unread == 0  # type: ignore[attr-defined]


def test_live_tells_the_page_what_to_notify(browser: Browser, agent: Agent) -> None:
    queued = open_chat(agent, "Nina", "Is anyone there?")
    mine = open_chat(agent, "Olga", "hi")
    services.accept_chat(chat=mine, agent=agent)
    reply = services.post_client_message(client=mine.client, content=text("Thanks!"))

    notify = browser.get("/agent/live").json()["notify"]

    assert notify["queued"] == [
        {"id": queued.pk, "name": "Nina", "unread": 1, "last_id": queued.messages.get().pk,
         "text": "Is anyone there?", "offer": ""}
    ]  # fmt: skip
    assert notify["mine"] == [
        {
            "id": mine.pk,
            "name": "Olga",
            "unread": 2,
            "last_id": reply.pk,
            "text": "Thanks!",
            "offer": "",
        }
    ]


def test_the_lists_say_when_one_is_cut_at_its_length(
    browser: Browser, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cut list may leave out the chat an event is about: the page then asks
    # on every event (static/agent/app.js, elsewhere).
    from agents.pages import workspace

    monkeypatch.setattr(workspace, "LIST_LENGTH", 2)
    open_chat(agent, "Nina", "Is anyone there?")
    assert "data-lists-cut" not in browser.get("/agent/live").json()["lists_html"]
    open_chat(agent, "Olga", "hi")
    assert "data-lists-cut" in browser.get("/agent/live").json()["lists_html"]
    assert "data-lists-cut" in browser.get("/agent/").content.decode()


def test_times_carry_iso_datetimes_for_the_browser(browser: Browser, agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    waiting = re.search(r'<time class="when wait" datetime="([^"]+)" data-relative="wait"', html)
    assert waiting and waiting.group(1) == chat.queued_at.isoformat()  # type: ignore[union-attr]
    assert re.search(r'<time datetime="[^"]+" data-local="time"', html)  # each message
    assert "0 minutes" not in html  # the server writes no relative time


def test_calls_offline_messages_history_and_panel_times_are_for_the_browser(
    browser: Browser, agent: Agent
) -> None:
    def stamped(html: str, when: datetime | None, shown_as: str) -> bool:
        """A <time> with the ISO datetime that pages.js shows in the agent's zone."""
        assert when is not None
        return f'datetime="{when.isoformat()}" {shown_as} title="' in html

    chat = open_chat(agent, "Olga", "hi")
    call = Call.objects.create(channel=chat.channel, client=chat.client, phone="+4930123456")
    waiting = services.leave_offline_message(channel=chat.channel, message="?", phone="+4930999")
    handled = services.leave_offline_message(channel=chat.channel, message="!", email="a@b.example")
    assert waiting is not None and handled is not None
    handled = services.mark_offline_message_handled(offline_message=handled, agent=agent)
    services.set_crm_panel(
        chat=chat,
        custom_data=[],
        contact_info={},
        crm_link="https://crm.example/card/1",
        enable_assign=True,
        page={},
    )
    services.accept_chat(chat=chat, agent=agent)
    chat = services.request_crm_assign(chat=chat, agent=agent)
    spam = open_chat(agent, "Ivan", "spam")
    services.blacklist_client(chat=spam, agent=agent)
    spam.refresh_from_db()
    spam.client.refresh_from_db()

    lists = browser.get("/agent/live").json()["lists_html"]
    assert stamped(lists, call.created, 'data-local="time"')
    assert stamped(lists, waiting.created, "data-relative")  # its row's time, as a chat's
    assert stamped(lists, handled.handled_at, 'data-local="time"')  # "Handled by … · 14:05"

    panel = browser.get(f"/agent/live?chat={chat.pk}").json()["chat"]["panel_html"]
    assert stamped(panel, chat.crm_assigned_at, 'data-local="time"')
    assert "Assigned 20" not in panel  # no UTC time in the button's title
    blacklisted = browser.get(f"/agent/chats/{spam.pk}/").content.decode()
    assert stamped(blacklisted, spam.client.blacklisted_at, 'data-local="datetime"')

    history = browser.get("/agent/history/").content.decode()
    assert stamped(history, spam.finished_at, 'data-local="datetime"')


def test_reply_opens_the_chat_with_the_cursor_in_the_reply_box(
    browser: Browser, agent: Agent
) -> None:
    chat = open_chat(agent, "Olga", "hi")
    answer = browser.post(f"/agent/chats/{chat.pk}/accept")
    assert answer.status_code == 302 and answer["Location"] == f"/agent/chats/{chat.pk}/#reply-box"
    assert 'id="reply-box"' in browser.get(answer["Location"]).content.decode()


def test_finish_asks_first_and_is_not_offered_on_a_queued_chat(
    browser: Browser, agent: Agent
) -> None:
    chat = open_chat(agent, "Olga", "hi")
    queued = browser.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert 'data-testid="finish"' not in queued and 'data-testid="reply"' in queued

    services.accept_chat(chat=chat, agent=agent)
    mine = browser.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert 'data-testid="finish"' in mine
    assert 'data-confirm="Finish the chat with Olga?' in mine


def test_another_agents_chat_offers_no_finish(browser: Browser, agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    bob = AgentFactory.create()
    chat.channel.agents.add(bob)
    services.accept_chat(chat=chat, agent=bob)
    assert 'data-testid="finish"' not in browser.get(f"/agent/chats/{chat.pk}/").content.decode()


def test_icons_are_inline_svg_not_emoji(browser: Browser, agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    media = {"file": "https://files.example/a.pdf", "file_name": "a.pdf", "file_size": 10}
    services.post_client_message(client=chat.client, content=Content("document", "", media))
    services.post_client_message(
        client=chat.client, content=Content("location", "", {"latitude": 1, "longitude": 2})
    )
    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    assert not re.search("[\U0001f300-\U0001faff\u2600-\u27bf]", html)
    assert html.count('<svg class="icon"') >= 3  # back, file, location, client panel


def test_a_photo_has_a_file_card_for_when_it_cannot_load(browser: Browser, agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    photo = {"file": "https://files.example/gone.png", "file_name": "gone.png", "file_size": 10}
    services.post_client_message(client=chat.client, content=Content("photo", "", photo))
    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    card = re.search(r'<a class="file file-card"[^>]*data-testid="image-card" hidden>', html)
    assert card and 'href="https://files.example/gone.png"' in card.group(0)


def test_a_text_the_service_cut_says_so(browser: Browser, agent: Agent) -> None:
    body = UserMessageIn(
        data={"sender": {"id": 7}, "message": {"type": "text", "text": "x" * 1500}}
    )
    assert body.is_valid(), body.errors
    content = body.validated_data["message"]["content"]
    assert len(content.text) == 1000 and content.payload == {"text_cut_from": 1500}
    chat = open_chat(agent, "Olga", "hi")
    services.post_client_message(client=chat.client, content=content)

    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    assert 'data-testid="cut-note"' in html and "wrote 1500 characters" in html
    short = UserMessageIn(data={"sender": {"id": 7}, "message": {"type": "text", "text": "ok"}})
    assert short.is_valid() and short.validated_data["message"]["content"].payload == {}


@pytest.mark.parametrize("online", [True, False])
def test_the_empty_pane_hint_matches_the_agents_status(online: bool) -> None:
    agent = AgentFactory.create(is_online=online)
    browser = page_of(agent)
    html = browser.get("/agent/").content.decode()
    hint = html[html.index('data-testid="empty-hint"') :][:600]
    if online:
        assert "You are online" in hint and "Go online" not in hint
    else:
        assert "You are offline" in hint and "Go online to take new chats" in hint


def test_the_last_activity_is_kept_on_the_chat(agent: Agent) -> None:
    chat = open_chat(agent, "Olga", "hi")
    services.accept_chat(chat=chat, agent=agent)
    later = timezone.now() + timedelta(seconds=1)
    message = services.post_agent_message(chat=chat, agent=agent, content=text("yo"))
    chat.refresh_from_db()
    assert chat.last_message_at == message.created and chat.last_message_at <= later
    assert Message.objects.filter(chat=chat).count() == 2


@pytest.mark.parametrize(
    ("geoip", "shown"),
    [
        ({"city": "", "region": "", "country": ""}, None),
        ({}, None),
        ({"city": "", "region": "", "country": "France"}, "France"),
        ({"city": "Lyon", "region": "Auvergne-Rhône-Alpes", "country": "France"}, "Lyon, France"),
        ({"city": "", "region": "Bavaria", "country": "Germany"}, "Bavaria, Germany"),
    ],
)
def test_the_visitor_card_shows_a_location_only_when_known(
    browser: Browser, agent: Agent, geoip: dict[str, str], shown: str | None
) -> None:
    chat = open_chat(agent, "Olga", "hi")
    chat.client.visitor_data = {"geoip": geoip, "user_agent": "SomeKiosk/2.0 (custom build)"}
    chat.client.save()

    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    location = re.search(r'<dt>Location</dt><dd data-testid="visitor-location">([^<]*)</dd>', html)
    assert (location.group(1) if location else None) == shown
    assert "<dt>Location</dt>" in html if shown else "<dt>Location</dt>" not in html
    # A browser ua-parser does not know stays as the visitor's browser sent it.
    assert 'title="SomeKiosk/2.0 (custom build)">SomeKiosk/2.0 (custom build)</dd>' in html
