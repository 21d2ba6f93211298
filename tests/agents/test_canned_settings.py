"""Canned replies and the agent's settings through the test client."""

from __future__ import annotations

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents import canned, services
from agents.models import Agent, CannedReply, Chat
from channels_api import payloads
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'


def test_an_agent_keeps_personal_replies_and_uses_shared_ones(agent: Agent) -> None:
    admin = AgentFactory.create(role="admin")
    canned.save_reply(agent=admin, shortcut="hours", text="We are open 9-18.", shared=True)
    page = page_of(agent)

    page.post("/agent/canned/", {"shortcut": "/Greeting", "text": f"Hi {{client.name}} {EVIL}"})

    mine = CannedReply.objects.get(owner=agent)
    assert mine.shortcut == "greeting"
    html = page.get("/agent/canned/").content.decode()
    assert "/greeting" in html and "/hours" in html and EVIL not in html
    # A shared reply is the admins' to change; an agent cannot make one either.
    shared = CannedReply.objects.get(owner=None)
    assert page.post(f"/agent/canned/{shared.pk}/delete").status_code == 302
    assert CannedReply.objects.filter(pk=shared.pk).exists()
    page.post("/agent/canned/", {"shortcut": "sneaky", "text": "x", "shared": "on"})
    assert not CannedReply.objects.filter(shortcut="sneaky").exists()


def test_another_agents_personal_reply_is_404(agent: Agent) -> None:
    other = AgentFactory.create()
    theirs = canned.save_reply(agent=other, shortcut="secret", text="theirs")
    page = page_of(agent)
    assert page.get(f"/agent/canned/{theirs.pk}/").status_code == 404
    assert page.post(f"/agent/canned/{theirs.pk}/delete").status_code == 404
    assert "secret" not in page.get("/agent/canned/search?q=sec").content.decode()


@pytest.mark.parametrize(
    ("shortcut", "text", "error"),
    [
        ("", "x", "a shortcut is"),
        ("two words", "x", "a shortcut is"),
        ("ok", "", "write a reply"),
        ("ok", "x" * 4001, "write a reply"),
    ],
)
def test_bad_replies_are_refused(agent: Agent, shortcut: str, text: str, error: str) -> None:
    with pytest.raises(services.ServiceError, match=error):
        canned.save_reply(agent=agent, shortcut=shortcut, text=text)


def test_a_taken_shortcut_is_refused(agent: Agent) -> None:
    canned.save_reply(agent=agent, shortcut="hi", text="one")
    html = page_of(agent).post("/agent/canned/", {"shortcut": "hi", "text": "two"}, follow=True)
    assert "/hi is taken" in html.content.decode()
    assert CannedReply.objects.count() == 1


def test_edit_and_delete_my_reply(agent: Agent) -> None:
    reply = canned.save_reply(agent=agent, shortcut="hi", text="one")
    page = page_of(agent)
    page.post(f"/agent/canned/{reply.pk}/", {"shortcut": "hello", "text": "two"})
    reply.refresh_from_db()
    assert (reply.shortcut, reply.text) == ("hello", "two")
    page.post(f"/agent/canned/{reply.pk}/delete")
    assert not CannedReply.objects.exists()


def test_search_fills_the_placeholders_for_the_chat(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent], name="Acme")
    client = ClientFactory.create(channel=channel, name=f"Ann {EVIL}", email="ann@example.com")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    canned.save_reply(
        agent=agent,
        shortcut="greeting",
        text="Hi {client.name} ({client.email}), {agent.name} of {channel.name}. {unknown}",
    )
    found = page_of(agent).get(f"/agent/canned/search?q=gre&chat={chat.pk}").json()["replies"]
    assert found == [
        {
            "id": found[0]["id"],
            "shortcut": "greeting",
            "shared": False,
            "text": f"Hi Ann {EVIL} (ann@example.com), {agent.name} of Acme. {{unknown}}",
        }
    ]  # JSON: the page inserts it as text, never as HTML
    anonymous = Chat.objects.get(pk=chat.pk)
    anonymous.client.name = ""
    assert canned.filled("Hi {client.name}", chat=anonymous, agent=agent) == "Hi there"
    assert page_of(agent).get("/agent/canned/search?q=zzz").json() == {"replies": []}


def test_settings_change_the_name_and_photo_that_a3_carries(agent: Agent) -> None:
    page = page_of(agent)
    page.post(
        "/agent/settings/",
        {"name": "Alice Smith", "photo_url": "https://cdn.example/alice.png", "notify_sound": "on"},
    )
    agent.refresh_from_db()
    assert (agent.name, agent.photo_url) == ("Alice Smith", "https://cdn.example/alice.png")
    assert (agent.notify_sound, agent.notify_desktop) == (True, False)
    html = page.get("/agent/").content.decode()
    assert 'data-notify-sound="true" data-notify-desktop="false"' in html

    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.accept_chat(chat=chat, agent=agent)
    reply = services.post_agent_message(chat=chat, agent=agent, content=text("Hello"))
    body = payloads.agent_message(reply)
    assert body is not None
    assert body["sender"] == {"name": "Alice Smith", "photo": "https://cdn.example/alice.png"}


@pytest.mark.parametrize(
    "photo", ["javascript:alert(1)", "ftp://x.example/a.png", "not a url", "https://" + "a" * 600]
)
def test_settings_refuse_a_photo_that_is_not_http(agent: Agent, photo: str) -> None:
    page = page_of(agent)
    answer = page.post("/agent/settings/", {"name": "A", "photo_url": photo}, follow=True)
    assert "photo" in answer.content.decode()
    agent.refresh_from_db()
    assert agent.photo_url == ""


def test_a_new_api_token_is_shown_once_and_replaces_the_old(agent: Agent) -> None:
    from agents.tokens import issue_token

    old = issue_token(agent=agent)
    page = page_of(agent)

    made = page.post("/agent/settings/token", follow=True).content.decode()
    token = made.split('data-testid="new-token">')[1].split("<")[0]
    assert len(token) == 40 and token != old
    assert 'data-testid="new-token"' not in page.get("/agent/settings/").content.decode()

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/agent/v1/chats").status_code == 200
    api.credentials(HTTP_AUTHORIZATION=f"Token {old}")
    assert api.get("/api/agent/v1/chats").status_code == 401
    strict = Browser(enforce_csrf_checks=True)
    strict.force_login(agent)
    assert strict.post("/agent/settings/token").status_code == 403


def test_variables_in_double_braces_are_filled_when_inserted(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent], name="Acme")
    client = ClientFactory.create(channel=channel, name="Ann Lee")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    canned.save_reply(
        agent=agent,
        shortcut="hello",
        text="Hi {{client.name}}, {{ agent.name }} of {{channel.name}} here. {{unknown}}",
    )

    found = page_of(agent).get(f"/agent/canned/search?q=hello&chat={chat.pk}").json()

    assert found["replies"][0]["text"] == (
        f"Hi Ann Lee, {agent.name} of Acme here. {{{{unknown}}}}"
    )
