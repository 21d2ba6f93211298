"""What agents see of bot chats, and the take-over, on the pages and in the API."""

from __future__ import annotations

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents.models import Agent, Chat
from agents.tokens import issue_token
from tests.bots.conftest import BotSetup
from tests.factories import AgentFactory, ChannelFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(agent: Agent) -> Browser:
    browser = Browser()
    browser.force_login(agent)
    return browser


def api_as(agent: Agent) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return client


def test_the_pages_list_bot_chats_read_only_and_live(bot: BotSetup, browser: Browser) -> None:
    chat = bot.say("Where is my parcel?")
    assert bot.bot_says("Let me look <b>now</b>").json() == {"result": "ok"}

    lists = browser.get("/agent/live").json()["lists_html"]
    page = browser.get(f"/agent/chats/{chat.pk}/").content.decode()

    assert 'data-testid="bot-chat"' in lists
    assert "Acme Assistant: Let me look &lt;b&gt;now&lt;/b&gt;" in lists  # its last message
    assert 'data-testid="queued-chat"' not in lists
    assert "A bot answers this chat" in page and 'id="composer"' not in page
    assert 'data-testid="reply"' in page
    assert 'Acme Assistant <span class="badge">bot</span>' in page
    assert "Let me look &lt;b&gt;now&lt;/b&gt;" in page


def test_another_channels_agent_sees_no_bot_chat(bot: BotSetup) -> None:
    chat = bot.say("hello")
    stranger = AgentFactory.create()
    ChannelFactory.create(agents=[stranger])
    browser = Browser()
    browser.force_login(stranger)

    assert 'data-testid="bot-chat"' not in browser.get("/agent/live").json()["lists_html"]
    assert browser.get(f"/agent/chats/{chat.pk}/").status_code == 404
    assert api_as(stranger).get("/api/agent/v1/chats?state=bot").json()["count"] == 0
    assert api_as(stranger).post(f"/api/agent/v1/chats/{chat.pk}/accept").status_code == 404
    chat.refresh_from_db()
    assert chat.state == Chat.State.BOT


def test_reply_on_the_page_takes_over_and_the_bot_is_told(bot: BotSetup, browser: Browser) -> None:
    chat = bot.say("hi")

    assert browser.post(f"/agent/chats/{chat.pk}/accept").status_code == 302
    bot.say("is this a person?")

    chat.refresh_from_db()
    assert chat.state == Chat.State.ACTIVE
    assert bot.kinds() == ["CLIENT_MESSAGE", "AGENT_JOINED"]
    assert bot.bot_says("me again").status_code == 403
    assert 'data-testid="bot-chat"' not in browser.get("/agent/live").json()["lists_html"]


def test_the_api_lists_bot_chats_and_accept_takes_over(bot: BotSetup, agent: Agent) -> None:
    chat = bot.say("hi")
    bot.bot_says("Hello, I am a bot")
    client = api_as(agent)

    listed = client.get("/api/agent/v1/chats?state=bot").json()
    messages = client.get(f"/api/agent/v1/chats/{chat.pk}/messages").json()
    accepted = client.post(f"/api/agent/v1/chats/{chat.pk}/accept")

    assert [c["id"] for c in listed["results"]] == [chat.pk]
    assert listed["results"][0]["state"] == "bot"
    assert [(m["author"], m["sender_name"], m["text"]) for m in messages] == [
        ("client", "", "hi"),
        ("bot", "Acme Assistant", "Hello, I am a bot"),
    ]
    assert accepted.status_code == 200 and accepted.json()["state"] == "active"
    assert client.get("/api/agent/v1/chats?state=bot").json()["count"] == 0
    assert bot.kinds() == ["CLIENT_MESSAGE", "AGENT_JOINED"]
    again = client.post(f"/api/agent/v1/chats/{chat.pk}/accept")
    assert again.status_code == 200  # pressing Reply twice changes nothing
    assert bot.kinds() == ["CLIENT_MESSAGE", "AGENT_JOINED"]
