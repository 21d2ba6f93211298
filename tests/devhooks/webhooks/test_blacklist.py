"""Blacklisting a client (docs/transcripts.md, "Blacklist"): through the agent
API and the chat page; a blacklisted client's next A2 message is answered 200
and kept, but reaches no agent, bot or webhook; the lift; the ``blacklisted``
flags of chat_finished; a blacklisted widget visitor sees an offline chat."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client as Browser
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, Chat, Client, LiveEvent, Mail, Message, OfflineMessage
from agents.tokens import issue_token
from bots.models import BotEvent
from delivery.models import Delivery
from devhooks.models import IntegrationSettings
from devhooks.webhooks import payloads
from devhooks.widget import selectors
from devhooks.widget import services as widgets
from tests.bots.conftest import BotSetup
from tests.channels_api.conftest import Integrator
from tests.devhooks.conftest import Scene, bodies
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(agent: Agent) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return client


def test_blacklisting_through_the_api_finishes_the_chat_and_says_so(
    agent: Agent, api: APIClient, integrator: Integrator, webhook: IntegrationSettings
) -> None:
    assert integrator.say("buy cheap watches").status_code == 200
    chat = Chat.objects.get()
    services.accept_chat(chat=chat, agent=agent)

    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/blacklist", {"reason": "spam"}, format="json")

    assert answer.status_code == 200
    body = answer.json()
    assert body["state"] == "finished" and body["blacklisted"] is True
    assert body["client"]["blacklisted"] is True and body["client"]["blacklist_reason"] == "spam"
    [finished] = bodies("chat_finished")
    assert finished["chat"]["blacklisted"] is True


def test_a_blacklisted_clients_messages_reach_no_agent_bot_or_webhook(
    bot: BotSetup, webhook: IntegrationSettings
) -> None:
    chat = bot.say("first words")
    services.blacklist_client(chat=chat, reason="abuse")
    before = (Delivery.objects.count(), BotEvent.objects.count(), LiveEvent.objects.count())

    answer = bot.client.say("let me in", sender_id="c-1")

    assert answer.status_code == 200  # A2 as usual: the integrator sees nothing unusual
    assert Chat.objects.count() == 1 and Chat.objects.get().state == Chat.State.FINISHED
    kept = Message.objects.get(text="let me in")
    assert kept.chat_id == chat.pk and kept.payload["blacklisted"] is True
    after = (Delivery.objects.count(), BotEvent.objects.count(), LiveEvent.objects.count())
    assert after == before  # no B1, no webhook, nothing live for agents
    # The chat_finished log marks what was written while blacklisted.
    log = payloads.chat_finished(Chat.objects.get())["chat"]["messages"]
    assert [item.get("blacklisted", False) for item in log] == [False, True]
    assert payloads.chat_finished(Chat.objects.get())["chat"]["blacklisted"] is True


def test_the_lift_lets_the_client_open_a_chat_again(
    agent: Agent, api: APIClient, integrator: Integrator
) -> None:
    integrator.say("sorry")
    chat = Chat.objects.get()
    services.blacklist_client(chat=chat, agent=agent)

    lifted = api.delete(f"/api/agent/v1/chats/{chat.pk}/blacklist")

    assert lifted.status_code == 200 and lifted.json()["client"]["blacklisted"] is False
    assert integrator.say("may I ask again?").status_code == 200
    new = Chat.objects.exclude(pk=chat.pk).get()
    assert new.state == Chat.State.QUEUED and new.blacklisted is False


def test_the_chat_page_blacklists_and_lifts_and_others_cannot(
    agent: Agent, integrator: Integrator
) -> None:
    integrator.say("hello")
    chat = Chat.objects.get()
    page = page_of(agent)
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert 'data-testid="blacklist"' in html and "data-confirm=" in html

    page.post(f"/agent/chats/{chat.pk}/blacklist", {"reason": "<b>rude</b>"})

    client = Client.objects.get()
    assert client.is_blacklisted and client.blacklisted_by == agent
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert "&lt;b&gt;rude&lt;/b&gt;" in html and 'data-testid="lift-blacklist"' in html
    stranger = Browser()
    stranger.force_login(AgentFactory.create())
    assert stranger.post(f"/agent/chats/{chat.pk}/blacklist/lift").status_code == 404
    page.post(f"/agent/chats/{chat.pk}/blacklist/lift")
    assert not Client.objects.get().is_blacklisted


def test_admins_list_and_lift_blacklists(admin_client: Browser, integrator: Integrator) -> None:
    integrator.say("hello")
    services.blacklist_client(chat=Chat.objects.get(), reason="phishing links")
    listed = admin_client.get("/admin/agents/blacklistedclient/").content.decode()
    assert "phishing links" in listed

    client = Client.objects.get()
    admin_client.post(
        "/admin/agents/blacklistedclient/", {"action": "lift", "_selected_action": [client.pk]}
    )
    assert not Client.objects.get().is_blacklisted
    assert (
        "phishing links"
        not in admin_client.get("/admin/agents/blacklistedclient/").content.decode()
    )


def test_a_blacklisted_widget_visitor_sees_an_offline_chat(agent: Agent) -> None:
    widget = widgets.create_widget_channel(name="Site", agent_emails=[agent.email])
    visitor, _token = widgets.new_visitor(widget, {})
    message = widgets.send_message(widget, visitor, "hi")
    assert selectors.config_of(widget, visitor)["mode"] == "online"

    services.blacklist_client(chat=message.chat)
    visitor.refresh_from_db()

    assert selectors.config_of(widget, visitor)["mode"] == "offline"
    kept = widgets.send_message(widget, visitor, "hello?")
    assert kept.chat_id == message.chat_id and kept.payload["blacklisted"] is True


def test_a_blacklisted_visitors_offline_message_and_callback_reach_no_one(scene: Scene) -> None:
    scene.callbacks_always_on()
    chat = scene.queued_chat()
    services.blacklist_client(chat=chat, reason="abuse")
    client = Client.objects.get(pk=scene.client.pk)
    before = (Delivery.objects.count(), LiveEvent.objects.count())

    kept = services.leave_offline_message(
        channel=scene.channel, client=client, message="call me now", email="vera@example.com"
    )

    assert kept is None and not OfflineMessage.objects.exists()
    [message] = Message.objects.filter(text__startswith="call me now")
    assert message.chat_id == chat.pk and message.payload["blacklisted"] is True
    assert "vera@example.com" in message.text
    reason = services.callback_unavailable_reason(channel=scene.channel, client=client)
    assert reason == services.CALLBACK_UNAVAILABLE
    with pytest.raises(services.ServiceError):
        services.request_callback(channel=scene.channel, phone="+49 30 1234567", client=client)
    assert (Delivery.objects.count(), LiveEvent.objects.count()) == before


def test_blacklisting_from_an_earlier_chat_finishes_the_open_one(
    scene: Scene, webhook: IntegrationSettings
) -> None:
    earlier = scene.queued_chat("first time")
    services.finish_chat(chat=earlier)
    current = scene.queued_chat("again")

    services.blacklist_client(chat=earlier, agent=scene.agent)

    current.refresh_from_db()
    assert current.state == Chat.State.FINISHED and current.blacklisted
    assert [body["chat"]["blacklisted"] for body in bodies("chat_finished")] == [False, True]
    client = Client.objects.get(pk=scene.client.pk)
    kept = services.post_client_message(client=client, content=text("hello?"))
    assert kept.chat_id == current.pk and not Chat.objects.filter(state="queued").exists()


def test_a_client_blacklisted_with_no_chat_opens_none(scene: Scene) -> None:
    Client.objects.filter(pk=scene.client.pk).update(blacklisted_at=timezone.now())
    client = Client.objects.get(pk=scene.client.pk)

    kept = services.post_client_message(client=client, content=text("spam"))

    assert kept.chat.state == Chat.State.FINISHED and kept.chat.blacklisted
    assert not LiveEvent.objects.exists() and not bodies()


def test_agents_see_nothing_a_blacklisted_client_wrote_afterwards(
    agent: Agent, api: APIClient, integrator: Integrator
) -> None:
    integrator.say("before")
    chat = Chat.objects.get()
    services.accept_chat(chat=chat, agent=agent)
    page = page_of(agent)
    first = page.get(f"/agent/live?chat={chat.pk}&after=0").json()["chat"]["last_message_id"]
    services.blacklist_client(chat=chat, agent=agent)

    integrator.say("after the blacklisting")

    assert Message.objects.filter(text="after the blacklisting").exists()  # kept
    live = page.get(f"/agent/live?chat={chat.pk}&after={first}").json()["chat"]
    assert "after the blacklisting" not in live["messages_html"]
    assert "after the blacklisting" not in page.get(f"/agent/chats/{chat.pk}/").content.decode()
    listed = api.get(f"/api/agent/v1/chats/{chat.pk}/messages").json()
    assert "after the blacklisting" not in str(listed)
    assert "after the blacklisting" not in page.get("/agent/history/?q=").content.decode()
    found = page.get("/agent/history/?q=after+the+blacklisting").content.decode()
    assert f"/agent/chats/{chat.pk}/" not in found
    page.post(f"/agent/chats/{chat.pk}/transcript", {"to": "me@acme.example"})
    [mailed] = Mail.objects.filter(to="me@acme.example")
    assert "before" in mailed.text and "after the blacklisting" not in mailed.text


def test_a_client_blacklisted_with_no_chat_shows_nothing_in_earlier_chats(
    agent: Agent, integrator: Integrator
) -> None:
    integrator.say("an ordinary question")
    chat = Chat.objects.get()
    client = Client.objects.get()
    Client.objects.filter(pk=client.pk).update(blacklisted_at=timezone.now())  # an admin's doing
    services.post_client_message(client=client, content=text("HIDDEN spam"))
    page = page_of(agent)

    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()

    assert "HIDDEN spam" not in html
    assert "HIDDEN spam" not in page.get("/agent/history/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_message_racing_the_blacklisting_opens_no_chat(agent: Agent) -> None:
    # No webhook here: a delivery handed to a worker still running from an
    # earlier test would lock rows while this test's database is flushed.
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("first words")).chat
    stale = Client.objects.get(pk=client.pk)  # read before the blacklisting
    blacklisting = threading.Event()
    outcome: dict[str, Any] = {}

    def blacklist() -> None:
        try:
            with transaction.atomic():
                services.blacklist_client(chat=chat, reason="abuse")
                blacklisting.set()
                time.sleep(0.5)  # the message arrives while this is not committed yet
        finally:
            connection.close()

    def write() -> None:
        blacklisting.wait(5)
        try:
            outcome["message"] = services.post_client_message(client=stale, content=text("hi?"))
        finally:
            connection.close()

    threads = [threading.Thread(target=blacklist), threading.Thread(target=write)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)

    kept = outcome["message"]
    assert kept.payload.get("blacklisted") is True
    assert not Chat.objects.filter(state__in=Chat.OPEN_STATES).exists()
