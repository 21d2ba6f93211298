"""The agent pages through Django's test client: access, escaping, CSRF, live data."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as Browser

from agents import selectors, services
from agents.content import Content
from agents.models import Agent, Chat
from agents.pages import workspace
from tests.factories import AgentFactory, ChannelFactory, ChatFactory, ClientFactory, text

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'


@pytest.fixture
def browser(agent: Agent) -> Browser:
    page = Browser()
    page.force_login(agent)
    return page


@pytest.fixture
def chat(agent: Agent) -> Chat:
    client = ClientFactory.create(
        channel=ChannelFactory.create(agents=[agent]), name=f"Eve {EVIL}", invite_text=EVIL
    )
    return services.post_client_message(client=client, content=text(f"Hi {EVIL}")).chat


def test_pages_need_a_signed_in_agent(chat: Chat) -> None:
    anonymous = Browser()
    for url in ("/agent/", f"/agent/chats/{chat.pk}/", "/agent/history/", "/agent/live"):
        answer = anonymous.get(url)
        assert answer.status_code == 302 and answer["Location"].startswith("/agent/login/")
    assert anonymous.post(f"/agent/chats/{chat.pk}/accept").status_code == 302
    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED


def test_sign_in_and_out(agent: Agent) -> None:
    agent.set_password("pw-123456")
    agent.save()
    page = Browser()
    assert b"Sign in" in page.get("/agent/login/").content
    wrong = page.post("/agent/login/", {"username": agent.email, "password": "nope"})
    assert "didn't match" in wrong.content.decode()
    answer = page.post("/agent/login/", {"username": agent.email, "password": "pw-123456"})
    assert answer.status_code == 302 and answer["Location"] == "/agent/"
    assert page.get("/agent/").status_code == 200
    page.post("/agent/logout/")
    assert page.get("/agent/").status_code == 302


def test_the_queue_shows_my_chats_escaped(browser: Browser, chat: Chat) -> None:
    other = ChatFactory.create()  # a chat of a channel not assigned to me
    html = browser.get("/agent/").content.decode()

    assert "Eve &lt;script&gt;" in html and EVIL not in html
    assert f"/agent/chats/{chat.pk}/" in html
    assert f"/agent/chats/{other.pk}/" not in html
    assert "<title>(1) Switchboard</title>" in html


def test_a_chat_of_another_channel_is_404(browser: Browser) -> None:
    other = ChatFactory.create()
    assert browser.get(f"/agent/chats/{other.pk}/").status_code == 404
    assert browser.get(f"/agent/live?chat={other.pk}").status_code == 404
    for action in ("accept", "finish", "messages", "typing"):
        assert browser.post(f"/agent/chats/{other.pk}/{action}", {"text": "x"}).status_code == 404
    other.refresh_from_db()
    assert other.state == Chat.State.QUEUED and other.messages.count() == 0


def test_chat_view_escapes_everything_user_supplied(browser: Browser, chat: Chat) -> None:
    Chat.objects.filter(pk=chat.pk).update(
        custom_data=[{"title": EVIL, "content": EVIL, "key": EVIL, "link": "javascript:alert(1)"}],
        crm_link="javascript:alert(2)",
        state=Chat.State.BOT,
    )
    chat.refresh_from_db()
    services.post_bot_message(
        chat=chat,
        content=Content("markdown", "", {"content": f"**hi** [x](javascript:alert(3)) {EVIL}"}),
    )
    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    assert EVIL not in html
    assert (
        'href="javascript:' not in html and "[x](javascript:alert(3))" in html
    )  # text, not a link
    assert "<strong>hi</strong>" in html
    assert "Invitation shown:" in html


def test_forms_need_a_csrf_token(agent: Agent, chat: Chat) -> None:
    strict = Browser(enforce_csrf_checks=True)
    strict.force_login(agent)
    assert strict.post(f"/agent/chats/{chat.pk}/accept").status_code == 403
    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED


def test_reply_write_finish(browser: Browser, chat: Chat, agent: Agent) -> None:
    assert browser.post(f"/agent/chats/{chat.pk}/accept").status_code == 302
    sent = browser.post(
        f"/agent/chats/{chat.pk}/messages",
        {"text": "Hello!"},
        headers={"X-Requested-With": "fetch"},
    )
    assert sent.json()["ok"] is True
    empty = browser.post(
        f"/agent/chats/{chat.pk}/messages", {"text": "  "}, headers={"X-Requested-With": "fetch"}
    )
    assert empty.status_code == 400 and empty.json()["error"]["message"]
    browser.post(f"/agent/chats/{chat.pk}/finish")

    chat.refresh_from_db()
    assert chat.state == Chat.State.FINISHED
    assert [m.text for m in chat.messages.all()] == [f"Hi {EVIL}", "Hello!"]
    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert "This chat is finished" in html


def test_live_returns_new_messages_typing_and_lists(browser: Browser, chat: Chat) -> None:
    first = browser.get(f"/agent/live?chat={chat.pk}&after=0").json()
    last = first["chat"]["last_message_id"]
    assert first["queue_count"] == 1 and "Eve &lt;script&gt;" in first["lists_html"]

    services.post_client_message(client=chat.client, content=text("second"))
    services.set_client_typing(chat=chat, typing=True)
    data: dict[str, Any] = browser.get(f"/agent/live?chat={chat.pk}&after={last}").json()

    assert data["chat"]["client_typing"] is True
    assert "second" in data["chat"]["messages_html"]
    assert "Hi &lt;script" not in data["chat"]["messages_html"]  # only what is new
    assert data["chat"]["last_message_id"] > last
    assert browser.get("/agent/live?chat=abc&after=x").status_code == 200


def test_history_search(browser: Browser, agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent])
    for name, email, words in [
        ("Ann", "ann@x.org", "refund please"),
        ("Bob", "bob@y.org", "hello"),
    ]:
        client = ClientFactory.create(channel=channel, name=name, email=email)
        chat = services.post_client_message(client=client, content=text(words)).chat
        services.finish_chat(chat=chat)

    def rows(query: str) -> int:
        return (
            browser.get("/agent/history/", {"q": query})
            .content.decode()
            .count('data-testid="history-row"')
        )

    assert rows("") == 2
    assert rows("ann") == 1 and rows("y.org") == 1 and rows("refund") == 1 and rows("nothing") == 0


def finished_chats(agent: Agent, said: list[tuple[str, str]]) -> list[Chat]:
    """A finished chat per (client name, what the client wrote), oldest first."""
    channel = ChannelFactory.create(agents=[agent])
    chats = []
    for name, words in said:
        client = ClientFactory.create(channel=channel, name=name)
        chat = services.post_client_message(client=client, content=text(words)).chat
        services.finish_chat(chat=chat)
        chats.append(chat)
    return chats


def test_history_search_finds_words_inside_a_message_in_any_case(
    browser: Browser, agent: Agent
) -> None:
    finished_chats(agent, [("Ann", "My parcel arrived BROKEN twice"), ("Bob", "hello")])

    def names(query: str) -> list[str]:
        html = browser.get("/agent/history/", {"q": query}).content.decode()
        return [name for name in ("Ann", "Bob") if f">{name}</a>" in html]

    assert names("broken") == ["Ann"]
    assert names("Rived bRoK") == ["Ann"]
    assert names("ELL") == ["Bob"]
    assert names("parcel twice") == []  # the words as written, not each word


def test_history_search_reaching_the_newest_finds_what_the_plain_search_finds(
    agent: Agent,
) -> None:
    """A search with ``reach`` (two branches, newest first each) lists the
    same chats in the same order as the plain search, up to ``reach``: by
    text and by name mixed, on PostgreSQL and on SQLite."""
    said = [(f"Refund {n}" if n % 3 == 0 else f"Client {n}", f"hello {n}") for n in range(4)]
    said += [(f"Client {n}", f"a refund for order {n}") for n in range(4, 9)]
    finished_chats(agent, said)

    def found(reach: int | None) -> list[int]:
        chats = selectors.finished_for_agent(agent=agent, search="REFUND", reach=reach)
        return [chat.pk for chat in chats]

    every = found(None)
    assert len(every) == 7
    for reach in (1, 3, 7, 20):
        assert found(reach)[:reach] == every[:reach]


def test_a_search_with_more_matches_than_it_reaches_says_so(
    browser: Browser, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace, "SEARCH_REACH", 3)
    finished_chats(agent, [(f"Client {n}", f"refund {n}") for n in range(4)])

    def shown(query: str) -> tuple[int, bool]:
        html = browser.get("/agent/history/", {"q": query}).content.decode()
        return html.count('data-testid="history-row"'), 'data-testid="history-capped"' in html

    assert shown("refund") == (3, True)  # the newest three, and "more than 3"
    assert shown("refund 1") == (1, False)
    assert shown("") == (4, False)  # without a search every chat is counted and shown
    html = browser.get("/agent/history/", {"q": "refund"}).content.decode()
    assert "More than 3 finished chats match “refund”" in html and "Page 1 of 1" in html


def test_status_switch(browser: Browser, agent: Agent) -> None:
    browser.post("/agent/status", {"status": "offline"})
    agent.refresh_from_db()
    assert not agent.is_online
    assert "Offline" in browser.get("/agent/").content.decode()


def test_another_agents_failed_message_has_no_retry(browser: Browser, agent: Agent) -> None:
    colleague = AgentFactory.create()
    chat = ChatFactory.create(channel=ChannelFactory.create(agents=[agent, colleague]))
    services.accept_chat(chat=chat, agent=colleague)
    message = services.post_agent_message(chat=chat, agent=colleague, content=text("x"))
    services.mark_message_delivery(message=message, status="failed", error="HTTP 500")

    html = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    assert "not delivered: HTTP 500" in html and 'data-testid="retry"' not in html
    assert "Another agent answers this chat" in html


def test_odd_live_parameters_are_ignored(browser: Browser) -> None:
    assert browser.get("/agent/live?chat=²&after=³").status_code == 200


def test_the_status_switch_stays_on_this_site(browser: Browser) -> None:
    answer = browser.post("/agent/status", {"status": "online", "next": "https://evil.example/"})
    assert answer["Location"] == "/agent/"
    answer = browser.post("/agent/status", {"status": "online", "next": "/agent/history/"})
    assert answer["Location"] == "/agent/history/"
