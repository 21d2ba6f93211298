"""Internal notes, transfers and the client's earlier chats: the services, the
pages through the test client and the agent API. A note or a transfer never
reaches the client, its integrator, a bot or a webhook."""

from __future__ import annotations

import json

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, Chat, Department, LiveEvent, Message
from agents.tokens import issue_token
from bots.models import BotEvent
from delivery.models import Delivery
from devhooks.models import IntegrationSettings
from devhooks.webhooks import payloads
from tests.bots.conftest import BotSetup
from tests.channels_api.conftest import Integrator
from tests.factories import (
    AgentFactory,
    ChannelFactory,
    ChatFactory,
    ClientFactory,
    page_of,
    text,
)

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'


def fetch(page: Browser, url: str, data: dict[str, str]) -> dict[str, object]:
    answer = page.post(url, data, headers={"X-Requested-With": "fetch"})
    body: dict[str, object] = json.loads(answer.content)
    return body


def test_a_note_reaches_no_client_bot_or_webhook(
    bot: BotSetup, agent: Agent, webhook: IntegrationSettings
) -> None:
    chat = bot.say("hello bot")
    services.accept_chat(chat=chat, agent=agent)  # the bot is told AGENT_JOINED
    sent = Delivery.objects.count(), BotEvent.objects.count()

    note = services.post_note(chat=chat, agent=agent, text="VIP customer, be nice")

    assert note.author == Message.Author.NOTE and note.agent == agent
    assert (Delivery.objects.count(), BotEvent.objects.count()) == sent
    live = LiveEvent.objects.filter(kind="message").latest("id")
    assert live.data["message"]["id"] == note.pk and live.for_client is False
    services.finish_chat(chat=chat, agent=agent)
    log = payloads.chat_finished(Chat.objects.get(pk=chat.pk))["chat"]["messages"]
    assert [item["type"] for item in log] == ["visitor"]  # neither the note nor anything else
    with pytest.raises(services.ServiceError):
        services.post_note(chat=chat, agent=agent, text="   ")


def test_notes_in_the_pages_any_agent_of_the_channel_escaped(
    agent: Agent, integrator: Integrator
) -> None:
    integrator.say("hi")
    chat = Chat.objects.get()
    page = page_of(agent)
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert 'id="note-box"' in html and 'id="composer"' not in html  # a queued chat: note box

    assert fetch(page, f"/agent/chats/{chat.pk}/messages", {"text": EVIL, "as": "note"}) == {
        "ok": True
    }
    services.accept_chat(chat=chat, agent=agent)
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert 'data-testid="note-mode"' in html  # my chat: the reply box has a note mode
    assert "msg-note" in html and "Internal note" in html
    assert EVIL not in html and "&lt;script&gt;" in html
    stranger = page_of(AgentFactory.create())
    answer = stranger.post(f"/agent/chats/{chat.pk}/messages", {"text": "x", "as": "note"})
    assert answer.status_code == 404
    assert Message.objects.filter(author=Message.Author.NOTE).count() == 1


def transfer_scene(integrator: Integrator, agent: Agent) -> tuple[Chat, Agent]:
    integrator.say("I need billing")
    chat = Chat.objects.get()
    services.accept_chat(chat=chat, agent=agent)
    bob = AgentFactory.create(name="Bob", is_online=True)
    chat.channel.agents.add(bob)
    return chat, bob


def test_a_transfer_to_an_agent_keeps_the_client_uninterrupted(
    agent: Agent, integrator: Integrator, webhook: IntegrationSettings
) -> None:
    chat, bob = transfer_scene(integrator, agent)
    before = Delivery.objects.count()
    last_event = LiveEvent.objects.latest("id").pk

    services.transfer_chat(chat=chat, agent=agent, to_agent=bob, note="Refund over 100 EUR")

    chat.refresh_from_db()
    assert chat.state == Chat.State.ACTIVE and list(chat.agents.all()) == [bob]
    assert (chat.transferred_by, chat.transfer_note) == (agent, "Refund over 100 EUR")
    assert Delivery.objects.count() == before  # no A3, no webhook
    texts = list(chat.messages.values_list("author", "text"))
    assert texts[-2:] == [
        ("system", f"{agent.name} transferred the chat to Bob."),
        ("note", "Refund over 100 EUR"),
    ]
    event = LiveEvent.objects.get(kind="chat.transferred")
    assert event.data["to_agent_id"] == bob.pk
    # The system note, the note and the transfer: agents hear them, the
    # visitor stream none of them.
    told = LiveEvent.objects.filter(pk__gt=last_event)
    assert sorted(told.values_list("kind", flat=True)) == ["chat.transferred", "message", "message"]
    assert not told.filter(for_client=True).exists()
    # Bob's page: the chat is his; the live answer says who handed it over.
    live = page_of(bob).get("/agent/live").json()
    [mine] = live["notify"]["mine"]
    assert mine["transferred_by"] == agent.name and mine["transfer_note"] == "Refund over 100 EUR"
    assert mine["transferred_at"] == chat.transferred_at.isoformat()  # type: ignore[union-attr]
    assert 'id="composer"' in page_of(bob).get(f"/agent/chats/{chat.pk}/").content.decode()
    # A page open on the chat learns it changed hands (the state did not).
    for who, mine in ((bob, True), (agent, False)):
        assert page_of(who).get(f"/agent/live?chat={chat.pk}").json()["chat"]["mine"] is mine
    assert 'id="composer"' not in page_of(agent).get(f"/agent/chats/{chat.pk}/").content.decode()


def test_a_transfer_to_a_department_queues_the_chat(agent: Agent, integrator: Integrator) -> None:
    chat, _bob = transfer_scene(integrator, agent)
    billing = Department.objects.create(name="Billing")
    page = page_of(agent)

    answer = fetch(page, f"/agent/chats/{chat.pk}/transfer", {"to": f"department:{billing.pk}"})

    assert answer == {"ok": True}
    chat.refresh_from_db()
    assert (chat.state, chat.department, chat.agents.count()) == ("queued", billing, 0)
    lists = page.get("/agent/live").json()["lists_html"]
    assert "Billing" in lists.split('data-testid="queued-chat"')[1]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("", "choose an agent or a department"),
        ("agent:999999", "that agent does not answer this channel"),
        ("robot:1", "choose an agent or a department"),
        ("department:x", "choose an agent or a department"),
        (f"agent:{'9' * 5000}", "choose an agent or a department"),
    ],
)
def test_a_transfer_without_a_right_target_is_refused(
    agent: Agent, integrator: Integrator, target: str, message: str
) -> None:
    chat, _bob = transfer_scene(integrator, agent)
    answer = page_of(agent).post(
        f"/agent/chats/{chat.pk}/transfer", {"to": target}, headers={"X-Requested-With": "fetch"}
    )
    assert answer.status_code == 400 and answer.json()["error"]["message"] == message
    assert Chat.objects.get().agents.get() == agent


def test_transfer_rules(agent: Agent, integrator: Integrator) -> None:
    chat, bob = transfer_scene(integrator, agent)
    offline = AgentFactory.create(is_online=False)
    chat.channel.agents.add(offline)
    outsider = AgentFactory.create(is_online=True)

    for to_agent in (agent, offline, outsider):
        with pytest.raises(services.ServiceError):
            services.transfer_chat(chat=chat, agent=agent, to_agent=to_agent)
    with pytest.raises(services.InvalidState):
        services.transfer_chat(chat=chat, agent=bob, to_agent=agent)  # not bob's chat
    html = page_of(agent).get(f"/agent/chats/{chat.pk}/").content.decode()
    assert f'value="agent:{bob.pk}"' in html and f'value="agent:{offline.pk}"' not in html


def test_the_api_adds_notes_and_transfers(agent: Agent, integrator: Integrator) -> None:
    chat, bob = transfer_scene(integrator, agent)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")

    note = api.post(f"/api/agent/v1/chats/{chat.pk}/notes", {"text": "VIP"}, format="json")
    assert note.status_code == 201 and note.json()["author"] == "note"
    listed = api.get(f"/api/agent/v1/chats/{chat.pk}/messages").json()
    assert [m["author"] for m in listed] == ["client", "note"]
    moved = api.post(
        f"/api/agent/v1/chats/{chat.pk}/transfer",
        {"agent_id": bob.pk, "note": "over to you"},
        format="json",
    )
    assert moved.status_code == 200 and [a["name"] for a in moved.json()["agents"]] == ["Bob"]
    again = api.post(f"/api/agent/v1/chats/{chat.pk}/transfer", {"agent_id": bob.pk}, format="json")
    assert again.status_code == 400  # no longer mine


def test_earlier_chats_of_the_client_open_read_only(agent: Agent) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Ann")
    old = services.post_client_message(client=client, content=text(f"old {EVIL}")).chat
    services.finish_chat(chat=old)
    current = services.post_client_message(client=client, content=text("new question")).chat
    other_client = ClientFactory.create(channel=client.channel)
    services.post_client_message(client=other_client, content=text("not hers"))
    page = page_of(agent)

    html = page.get(f"/agent/chats/{current.pk}/").content.decode()

    card = html[html.index('data-testid="earlier-chats"') :]
    card = card[: card.index("</section>")]
    assert f"/agent/chats/{old.pk}/" in card and "Finished" in card and "1 message" in card
    assert "&lt;script&gt;" in card and EVIL not in card and "not hers" not in card
    finished = page.get(f"/agent/chats/{old.pk}/").content.decode()
    assert 'id="composer"' not in finished and "This chat is finished" in finished


def test_a_transfer_of_a_chat_taken_from_the_bot_tells_the_bot_and_the_crm_nothing(
    bot: BotSetup, agent: Agent, webhook: IntegrationSettings
) -> None:
    chat = bot.say("hello bot")
    services.accept_chat(chat=chat, agent=agent)  # AGENT_JOINED and chat_accepted, once
    bob = AgentFactory.create(name="Bob", is_online=True)
    chat.channel.agents.add(bob)
    sent = list(Delivery.objects.values_list("purpose", "event"))
    bot_events = list(BotEvent.objects.values_list("kind", flat=True))

    services.transfer_chat(chat=chat, agent=agent, to_agent=bob, note="over to you")

    assert list(Delivery.objects.values_list("purpose", "event")) == sent  # no B1, C1 or A3
    assert list(BotEvent.objects.values_list("kind", flat=True)) == bot_events


def test_chat_finished_names_every_agent_who_answered_but_not_a_note_writer(
    agent: Agent, integrator: Integrator, webhook: IntegrationSettings
) -> None:
    chat, bob = transfer_scene(integrator, agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("Let me check"))
    colleague = AgentFactory.create(name="Carol")
    chat.channel.agents.add(colleague)
    services.post_note(chat=chat, agent=colleague, text="I know this client")
    services.transfer_chat(chat=chat, agent=agent, to_agent=bob, note="refund")
    services.post_agent_message(chat=chat, agent=bob, content=text("Refunded"))

    services.finish_chat(chat=chat, agent=bob)

    body = json.loads(Delivery.objects.get(event="chat_finished").body)  # what the CRM gets
    assert [a["name"] for a in body["agents"]] == [agent.name, "Bob"]
    log = body["chat"]["messages"]
    assert [(item["type"], item.get("agent_id")) for item in log] == [
        ("visitor", None),
        ("agent", agent.pk),
        ("agent", bob.pk),
    ]
    assert all(item["message"] not in ("refund", "I know this client") for item in log)


def test_notes_and_transfers_need_the_csrf_token_and_one_of_my_channels(
    agent: Agent, integrator: Integrator
) -> None:
    chat, bob = transfer_scene(integrator, agent)
    strict = Browser(enforce_csrf_checks=True)
    strict.force_login(agent)
    for url, data in (
        (f"/agent/chats/{chat.pk}/messages", {"text": "x", "as": "note"}),
        (f"/agent/chats/{chat.pk}/transfer", {"to": f"agent:{bob.pk}"}),
    ):
        assert strict.post(url, data).status_code == 403
    stranger = page_of(AgentFactory.create(is_online=True))
    answer = stranger.post(f"/agent/chats/{chat.pk}/transfer", {"to": f"agent:{bob.pk}"})
    assert answer.status_code == 404
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=AgentFactory.create())}")
    for path, body in (("notes", {"text": "x"}), ("transfer", {"agent_id": bob.pk})):
        refused = api.post(f"/api/agent/v1/chats/{chat.pk}/{path}", body, format="json")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert not Message.objects.filter(author=Message.Author.NOTE).exists()
    assert Chat.objects.get().agents.get() == agent


def test_a_refused_transfer_says_why_without_naming_strangers(
    agent: Agent, integrator: Integrator
) -> None:
    chat, bob = transfer_scene(integrator, agent)
    outsider = AgentFactory.create(name="Zed Outsider", is_online=True)
    page = page_of(agent)

    refused = {
        "error": {"code": "invalid_request", "message": "that agent does not answer this channel"}
    }
    answer = fetch(page, f"/agent/chats/{chat.pk}/transfer", {"to": f"agent:{outsider.pk}"})
    assert answer == refused
    # An id of nobody reads the same: agents of other channels are not told apart.
    assert fetch(page, f"/agent/chats/{chat.pk}/transfer", {"to": "agent:999999"}) == refused
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    for agent_id in (outsider.pk, 999999):
        answer = api.post(
            f"/api/agent/v1/chats/{chat.pk}/transfer", {"agent_id": agent_id}, format="json"
        ).json()
        assert answer == refused
    services.set_agent_status(agent=bob, online=False)
    answer = fetch(page, f"/agent/chats/{chat.pk}/transfer", {"to": f"agent:{bob.pk}"})
    assert answer["error"] == {
        "code": "invalid_request",
        "message": "Bob is offline: choose an online agent",
    }
    # Without JavaScript: back to the chat, the refusal above it.
    plain = page.post(f"/agent/chats/{chat.pk}/transfer", {"to": f"agent:{bob.pk}"}, follow=True)
    assert "Bob is offline" in plain.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    both = api.post(
        f"/api/agent/v1/chats/{chat.pk}/transfer",
        {"agent_id": bob.pk, "department_id": Department.objects.create(name="X").pk},
        format="json",
    )
    assert both.status_code == 400 and both.json()["error"]["code"] == "invalid_request"
    empty = api.post(f"/api/agent/v1/chats/{chat.pk}/notes", {"text": "  "}, format="json")
    assert empty.status_code == 400
    assert Chat.objects.get().agents.get() == agent and not chat.messages.filter(author="note")


def test_after_a_department_transfer_the_agent_who_takes_it_is_not_told_it_was_handed_to_them(
    agent: Agent, integrator: Integrator
) -> None:
    chat, bob = transfer_scene(integrator, agent)
    billing = Department.objects.create(name="Billing")
    services.transfer_chat(chat=chat, agent=agent, department=billing, note="needs billing")
    [queued] = page_of(bob).get("/agent/live").json()["notify"]["queued"]
    assert (queued["transferred_by"], queued["transfer_note"]) == (agent.name, "needs billing")

    services.accept_chat(chat=chat, agent=bob)

    [mine] = page_of(bob).get("/agent/live").json()["notify"]["mine"]
    assert mine["id"] == chat.pk and "transferred_by" not in mine


def test_earlier_chats_list_only_chats_of_my_channels(agent: Agent) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Ann")
    for n in range(12):
        services.finish_chat(
            chat=services.post_client_message(client=client, content=text(f"q{n}")).chat
        )
    # The newest of the client's chats, but on a channel that is not mine.
    elsewhere = ChatFactory.create(
        client=client, channel=ChannelFactory.create(), state=Chat.State.FINISHED
    )
    current = services.post_client_message(client=client, content=text("now")).chat

    html = page_of(agent).get(f"/agent/chats/{current.pk}/").content.decode()

    card = html[html.index('data-testid="earlier-chats"') :]
    card = card[: card.index("</section>")]
    assert f"/agent/chats/{elsewhere.pk}/" not in card
    assert card.count("<li>") == 10 and "q11<" in card and "q1<" not in card  # newest ten
