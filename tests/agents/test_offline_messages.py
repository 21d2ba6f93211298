"""Offline messages: what a visitor may leave, and how the channel's agents
see them and mark them handled, on the pages and through the API."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents import events, services
from agents.models import Agent, Channel, OfflineMessage
from agents.tokens import issue_token
from tests.factories import AgentFactory, ChannelFactory

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'


@pytest.fixture
def channel(agent: Agent) -> Channel:
    return ChannelFactory.create(agents=[agent], name="Web shop")


@pytest.fixture
def offline(channel: Channel) -> OfflineMessage:
    left = services.leave_offline_message(
        channel=channel,
        name=f"Bob {EVIL}",
        email="bob@example.com",
        phone="+44 20 7946 0958",
        message=f"Where is my parcel?\nOrder 77 {EVIL}",
        page_url="https://shop.example/orders",
        page_title="My orders",
    )
    assert left is not None
    return left


@pytest.fixture
def browser(agent: Agent) -> Browser:
    page = Browser()
    page.force_login(agent)
    return page


def lists_html(browser: Browser) -> str:
    return str(browser.get("/agent/live").json()["lists_html"])


# --- what a visitor may leave ---------------------------------------------------


def test_a_visitor_leaves_a_message(channel: Channel, published: list[events.Event]) -> None:
    offline = services.leave_offline_message(
        channel=channel, message="  Call me back  ", name=" Ann ", phone="+1 (212) 555-0100"
    )
    assert offline is not None

    assert (offline.message, offline.name, offline.phone, offline.email) == (
        "Call me back", "Ann", "+12125550100", ""
    )  # fmt: skip
    assert offline.handled_at is None
    assert events.OfflineMessageReceived(offline_message_id=offline.pk) in published


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"message": "hi", "email": "bob@"}, "'bob@' is not a valid e-mail address"),
        ({"message": "hi", "email": "not an e-mail"}, "'not an e-mail' is not a valid e-mail"),
        ({"message": "", "email": "bob@example.com"}, "write a message"),
        ({"message": " \n ", "email": "bob@example.com"}, "write a message"),
        ({"message": "hi"}, "give an e-mail address or a phone number"),
        ({"message": "hi", "email": " ", "phone": " "}, "give an e-mail address or a phone number"),
        ({"message": "hi", "phone": "call me"}, "enter a phone number"),
        ({"message": "x" * 4001, "email": "bob@example.com"}, "longer than 4000 characters"),
    ],
)
def test_what_cannot_be_answered_is_refused(
    channel: Channel, fields: dict[str, Any], error: str
) -> None:
    with pytest.raises(services.ServiceError) as refused:
        services.leave_offline_message(channel=channel, **fields)

    assert error in refused.value.message
    assert not OfflineMessage.objects.exists()


# --- the Offline messages list on the agent pages --------------------------------


def test_an_agent_sees_the_message_and_how_to_answer(
    browser: Browser, offline: OfflineMessage
) -> None:
    html = browser.get("/agent/").content.decode()

    assert html.count('data-testid="offline-message"') == 1
    assert "Bob &lt;script&gt;" in html and EVIL not in html
    assert 'href="mailto:bob@example.com"' in html and 'href="tel:+442079460958"' in html
    assert "Where is my parcel?<br>Order 77 &lt;script&gt;" in html
    assert '<a href="https://shop.example/orders"' in html and "My orders" in html
    assert "Web shop" in html and 'data-testid="offline-handled"' in html


def test_a_page_that_is_no_http_url_is_shown_as_text(browser: Browser, channel: Channel) -> None:
    services.leave_offline_message(
        channel=channel, message="hi", email="a@example.com", page_url="javascript:alert(1)"
    )
    html = lists_html(browser)
    assert "javascript:alert(1)" in html and 'href="javascript:' not in html


def test_a_page_that_is_no_url_at_all_does_not_break_the_pages(
    browser: Browser, channel: Channel
) -> None:
    services.leave_offline_message(
        channel=channel, message="hi", email="a@example.com", page_url="http://[x/"
    )
    assert browser.get("/agent/").status_code == 200
    assert "http://[x/" in lists_html(browser)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"email": "a" * 250 + "@example.com"}, "longer than 255"),
        ({"email": "a@example.com", "name": "Bo\x00b"}, "NUL"),
    ],
)
def test_what_the_database_cannot_hold_is_refused_in_words(
    channel: Channel, fields: dict[str, Any], error: str
) -> None:
    with pytest.raises(services.ServiceError, match=error):
        services.leave_offline_message(channel=channel, message="hi", **fields)
    assert not OfflineMessage.objects.exists()


def test_marking_handled_says_who_did(
    browser: Browser, offline: OfflineMessage, agent: Agent, published: list[events.Event]
) -> None:
    answer = browser.post(
        f"/agent/offline-messages/{offline.pk}/handled", {"next": "/agent/"}, follow=True
    )

    html = answer.content.decode()
    assert f"Handled by {agent.name}" in html and 'data-testid="offline-handled"' not in html
    offline.refresh_from_db()
    assert offline.handled_by == agent and offline.handled_at is not None
    assert events.OfflineMessageHandled(offline_message_id=offline.pk, agent_id=agent.pk) in (
        published
    )


def test_marking_handled_twice_keeps_the_first(
    browser: Browser, offline: OfflineMessage, agent: Agent
) -> None:
    colleague = AgentFactory.create(name="Carol")
    services.mark_offline_message_handled(offline_message=offline, agent=colleague)

    answer = browser.post(
        f"/agent/offline-messages/{offline.pk}/handled", headers={"X-Requested-With": "fetch"}
    )

    assert answer.json() == {"ok": True}
    assert "Handled by Carol" in lists_html(browser)


def test_unhandled_messages_come_first_and_show_live(
    browser: Browser, offline: OfflineMessage, channel: Channel, agent: Agent
) -> None:
    services.mark_offline_message_handled(offline_message=offline, agent=agent)
    assert 'id="offline-count" title="not handled yet">0<' in lists_html(browser)

    services.leave_offline_message(channel=channel, message="Newer one", phone="+4930123456")

    html = lists_html(browser)
    assert html.count('data-testid="offline-message"') == 2
    assert html.index("Newer one") < html.index("Where is my parcel?")
    assert 'id="offline-count" title="not handled yet">1<' in html


def test_an_agent_of_another_channel_sees_no_offline_message(offline: OfflineMessage) -> None:
    stranger = AgentFactory.create()
    ChannelFactory.create(agents=[stranger])
    page = Browser()
    page.force_login(stranger)

    assert 'data-testid="offline-message"' not in page.get("/agent/").content.decode()
    assert 'data-testid="offline-message"' not in page.get("/agent/live").json()["lists_html"]
    assert page.post(f"/agent/offline-messages/{offline.pk}/handled").status_code == 404
    offline.refresh_from_db()
    assert offline.handled_at is None


def test_marking_handled_needs_a_csrf_token(agent: Agent, offline: OfflineMessage) -> None:
    strict = Browser(enforce_csrf_checks=True)
    strict.force_login(agent)
    assert strict.post(f"/agent/offline-messages/{offline.pk}/handled").status_code == 403
    offline.refresh_from_db()
    assert offline.handled_at is None


# --- offline messages in the agent API --------------------------------------------


def test_the_api_lists_my_offline_messages_unhandled_first(
    api: APIClient, offline: OfflineMessage, channel: Channel, agent: Agent
) -> None:
    services.mark_offline_message_handled(offline_message=offline, agent=agent)
    newer = services.leave_offline_message(channel=channel, message="Newer", email="n@example.com")
    assert newer is not None
    services.leave_offline_message(
        channel=ChannelFactory.create(), message="not mine", email="x@example.com"
    )

    body = api.get("/api/agent/v1/offline-messages").json()

    assert body["count"] == 2
    first, second = body["results"]
    assert (first["id"], first["handled"], first["handled_by"]) == (newer.pk, None, None)
    assert second["id"] == offline.pk
    assert second["handled_by"] == {"id": agent.pk, "name": agent.name}
    assert second["name"] == f"Bob {EVIL}" and second["phone"] == "+442079460958"
    assert second["page"] == {"url": "https://shop.example/orders", "title": "My orders"}
    assert second["channel"] == {"id": channel.pk, "name": "Web shop", "kind": "chat_api"}


def test_the_api_marks_handled(api: APIClient, offline: OfflineMessage, agent: Agent) -> None:
    answer = api.post(f"/api/agent/v1/offline-messages/{offline.pk}/handled")

    assert answer.status_code == 200
    assert answer.json()["handled"] and answer.json()["handled_by"]["id"] == agent.pk


def test_the_api_does_not_show_another_channels_offline_message(offline: OfflineMessage) -> None:
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=AgentFactory.create())}")

    assert stranger.get("/api/agent/v1/offline-messages").json()["count"] == 0
    answer = stranger.post(f"/api/agent/v1/offline-messages/{offline.pk}/handled")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    offline.refresh_from_db()
    assert offline.handled_at is None


def test_the_admin_lists_offline_messages(offline: OfflineMessage) -> None:
    page = Browser()
    page.force_login(AgentFactory.create(role="admin"))

    html = page.get("/admin/agents/offlinemessage/?handled=no").content.decode()

    assert "bob@example.com" in html and "Where is my parcel?" in html
    assert (
        "bob@example.com"
        not in page.get("/admin/agents/offlinemessage/?handled=yes").content.decode()
    )
