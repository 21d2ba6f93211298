"""Routing by offers (docs/routing.md): who a queued chat is offered to,
and what moves an offer on — Decline, the offer's time, Reply, an agent
going offline — and what offers a waiting chat to an agent who frees up."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, Channel, Chat, ChatOffer, Department, LiveEvent
from agents.tokens import issue_token
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db


def online(name: str, **fields: Any) -> Agent:
    return AgentFactory.create(name=name, is_online=True, **fields)


def offer_channel(*agents: Agent, offer_seconds: int = 30) -> Channel:
    return ChannelFactory.create(
        agents=list(agents), routing_mode=Channel.RoutingMode.OFFER, offer_seconds=offer_seconds
    )


def new_chat(channel: Channel, words: str = "hello") -> Chat:
    client = ClientFactory.create(channel=channel)
    chat = services.post_client_message(client=client, content=text(words)).chat
    chat.refresh_from_db()
    return chat


def offered_to(chat: Chat) -> Agent | None:
    chat.refresh_from_db()
    return chat.offered_to


def busy(agent: Agent, channel: Channel, chats: int) -> list[Chat]:
    """``agent`` answers ``chats`` active chats of ``channel``."""
    made = []
    for _ in range(chats):
        client = ClientFactory.create(channel=channel)
        chat = services.open_chat(client=client)
        made.append(services.accept_chat(chat=chat, agent=agent))
    return made


def offered_first(chat: Chat, ann: Agent, bob: Agent) -> tuple[Agent, Agent]:
    """Who of the two ``chat`` is offered to, and the other."""
    first = offered_to(chat)
    assert first in (ann, bob)
    return first, bob if first == ann else ann


def expire(chat: Chat) -> None:
    """The chat's offer runs out of time now."""
    past = timezone.now() - timedelta(seconds=1)
    ChatOffer.objects.filter(chat=chat, outcome=ChatOffer.Outcome.PENDING).update(expires_at=past)


# --- who is offered a chat ---------------------------------------------------------


def test_a_manual_channel_offers_nothing() -> None:
    channel = ChannelFactory.create(agents=[online("Ann")])
    chat = new_chat(channel)
    assert chat.state == Chat.State.QUEUED and offered_to(chat) is None
    assert not ChatOffer.objects.exists()


def test_a_new_chat_is_offered_to_the_online_agent_with_the_fewest_open_chats() -> None:
    ann, bob, cy = online("Ann"), online("Bob"), AgentFactory.create(name="Cy")  # Cy offline
    channel = offer_channel(ann, bob, cy)
    busy(ann, channel, 2)
    busy(bob, channel, 1)

    chat = new_chat(channel)

    assert offered_to(chat) == bob
    offer = ChatOffer.objects.get(chat=chat)
    assert offer.outcome == ChatOffer.Outcome.PENDING and offer.agent == bob
    assert offer.expires_at == chat.offer_expires_at
    assert 29 <= (offer.expires_at - offer.offered_at).total_seconds() <= 30


@pytest.mark.parametrize("waited_longer", ["Ann", "Bob"])
def test_a_tie_goes_to_the_agent_longest_without_an_offer(waited_longer: str) -> None:
    ann, bob = online("Ann"), online("Bob")
    now = timezone.now()
    for agent in (ann, bob):
        hours = 2 if agent.name == waited_longer else 1
        Agent.objects.filter(pk=agent.pk).update(last_offered_at=now - timedelta(hours=hours))
    chat = new_chat(offer_channel(ann, bob))

    chosen = offered_to(chat)
    assert chosen is not None and chosen.name == waited_longer
    assert chosen.last_offered_at is not None and chosen.last_offered_at >= now


def test_an_agent_never_offered_a_chat_goes_before_one_who_was() -> None:
    ann, bob = online("Ann"), online("Bob")
    Agent.objects.filter(pk=ann.pk).update(last_offered_at=timezone.now())
    assert offered_to(new_chat(offer_channel(ann, bob))) == bob


def test_a_returning_client_is_offered_to_their_last_agent_first() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = offer_channel(ann, bob)
    busy(bob, channel, 1)  # Bob is busier: Ann would be offered a stranger's chat
    client = ClientFactory.create(channel=channel)
    earlier = services.open_chat(client=client)
    services.accept_chat(chat=earlier, agent=bob)
    services.finish_chat(chat=earlier, agent=bob)

    chat = services.post_client_message(client=client, content=text("me again")).chat

    assert offered_to(chat) == bob


def test_an_agent_at_capacity_is_offered_nothing_and_the_chat_waits() -> None:
    ann = online("Ann", max_chats=2)
    channel = offer_channel(ann)
    busy(ann, channel, 2)

    chat = new_chat(channel)

    assert chat.state == Chat.State.QUEUED and offered_to(chat) is None


def test_pending_offers_count_toward_capacity() -> None:
    ann = online("Ann", max_chats=1)
    channel = offer_channel(ann)
    first, second = new_chat(channel), new_chat(channel)
    assert offered_to(first) == ann and offered_to(second) is None


def test_the_installation_default_capacity_applies_when_the_agent_has_none(
    settings: Any,
) -> None:
    settings.AGENT_MAX_CHATS = 1
    ann = online("Ann")
    channel = offer_channel(ann)
    busy(ann, channel, 1)
    assert offered_to(new_chat(channel)) is None


def test_a_chat_of_a_department_is_offered_only_to_its_agents() -> None:
    sales = Department.objects.create(name="Sales")
    ann, bob = online("Ann"), online("Bob")
    bob.departments.add(sales)
    channel = offer_channel(ann, bob)
    busy(bob, channel, 2)  # busier, but the only one of Sales
    client = ClientFactory.create(channel=channel)

    chat = services.post_client_message(client=client, content=text("hi"), department=sales).chat

    assert offered_to(chat) == bob


# --- what moves an offer on ----------------------------------------------------------


def test_decline_offers_the_chat_to_the_next_agent_and_never_back() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = offer_channel(ann, bob)
    chat = new_chat(channel)
    first, second = offered_first(chat, ann, bob)

    services.decline_offer(chat=chat, agent=first)
    assert offered_to(chat) == second
    services.decline_offer(chat=chat, agent=second)

    # Both declined: it waits in the queue, for anyone's Reply.
    assert offered_to(chat) is None and chat.state == Chat.State.QUEUED
    outcomes = ChatOffer.objects.filter(chat=chat).values_list("agent", "outcome")
    assert sorted(outcomes) == sorted(
        [(first.pk, ChatOffer.Outcome.DECLINED), (second.pk, ChatOffer.Outcome.DECLINED)]
    )


def test_only_the_agent_offered_a_chat_may_decline_it() -> None:
    ann, bob = online("Ann"), online("Bob", max_chats=1)
    channel = offer_channel(ann, bob)
    busy(bob, channel, 1)
    chat = new_chat(channel)
    assert offered_to(chat) == ann
    with pytest.raises(services.InvalidState):
        services.decline_offer(chat=chat, agent=bob)
    assert offered_to(chat) == ann


def test_an_offer_not_answered_in_time_lapses_to_the_next_agent() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = offer_channel(ann, bob)
    chat = new_chat(channel)
    first = offered_to(chat)
    offer = ChatOffer.objects.get(chat=chat)

    assert services.lapse_offer(offer_id=offer.pk) is False  # not yet its time
    expire(chat)
    assert services.lapse_due_offers() == 1

    offer.refresh_from_db()
    assert offer.outcome == ChatOffer.Outcome.LAPSED and offer.ended_at is not None
    assert offered_to(chat) not in (None, first)
    assert services.lapse_offer(offer_id=offer.pk) is False  # once only


def test_reply_by_the_offered_agent_accepts_the_offer() -> None:
    ann = online("Ann")
    channel = offer_channel(ann)
    chat = new_chat(channel)

    services.accept_chat(chat=chat, agent=ann)

    assert offered_to(chat) is None and chat.state == Chat.State.ACTIVE
    assert ChatOffer.objects.get(chat=chat).outcome == ChatOffer.Outcome.ACCEPTED


def test_reply_by_another_agent_takes_the_chat_and_withdraws_the_offer() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = offer_channel(ann, bob)
    busy(bob, channel, 1)
    chat = new_chat(channel)
    assert offered_to(chat) == ann

    services.accept_chat(chat=chat, agent=bob)

    assert offered_to(chat) is None and list(chat.agents.all()) == [bob]
    assert ChatOffer.objects.get(chat=chat).outcome == ChatOffer.Outcome.WITHDRAWN


def test_a_chat_that_ends_in_the_queue_withdraws_its_offer() -> None:
    ann = online("Ann")
    chat = new_chat(offer_channel(ann))
    services.finish_chat(chat=chat)
    assert offered_to(chat) is None
    assert ChatOffer.objects.get(chat=chat).outcome == ChatOffer.Outcome.WITHDRAWN


def test_going_offline_moves_the_agents_offers_on() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = offer_channel(ann, bob)
    busy(bob, channel, 1)
    chat = new_chat(channel)
    assert offered_to(chat) == ann

    services.set_agent_status(agent=ann, online=False)

    assert offered_to(chat) == bob
    assert ChatOffer.objects.get(chat=chat, agent=ann).outcome == ChatOffer.Outcome.WITHDRAWN


# --- a waiting chat goes to the first agent who frees up -----------------------------


def test_finishing_a_chat_offers_the_agent_the_oldest_waiting_one() -> None:
    ann = online("Ann", max_chats=1)
    channel = offer_channel(ann)
    (mine,) = busy(ann, channel, 1)
    older, newer = new_chat(channel, "first"), new_chat(channel, "second")
    assert offered_to(older) is None and offered_to(newer) is None

    services.finish_chat(chat=mine, agent=ann)

    assert offered_to(older) == ann and offered_to(newer) is None


def test_coming_online_offers_the_waiting_chats() -> None:
    ann = AgentFactory.create(name="Ann", is_online=False)
    channel = offer_channel(ann)
    chat = new_chat(channel)
    assert offered_to(chat) is None

    services.set_agent_status(agent=ann, online=True)

    assert offered_to(chat) == ann


def test_a_transfer_to_a_department_offers_the_chat_afresh() -> None:
    sales = Department.objects.create(name="Sales")
    ann, bob = online("Ann"), online("Bob")
    bob.departments.add(sales)
    channel = offer_channel(ann, bob)
    (chat,) = busy(ann, channel, 1)

    services.transfer_chat(chat=chat, agent=ann, department=sales)

    assert offered_to(chat) == bob


# --- the channel's mode ------------------------------------------------------------


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_set_routing_turns_offers_on_for_the_waiting_chats_and_off_again() -> None:
    ann = online("Ann")
    channel = ChannelFactory.create(agents=[ann])
    chat = new_chat(channel)
    assert offered_to(chat) is None

    made = run("set_routing", "--channel", channel.public_id, "--mode", "offer",
               "--offer-seconds", "45")  # fmt: skip

    assert made == {
        "channel": channel.public_id, "mode": "offer", "offer_seconds": 45,
        "idle_close_minutes": None, "idle_warning": "",
    }  # fmt: skip
    assert offered_to(chat) == ann
    assert chat.offer_expires_at is not None

    run("set_routing", "--channel", channel.public_id, "--mode", "manual")
    assert offered_to(chat) is None
    assert ChatOffer.objects.get(chat=chat).outcome == ChatOffer.Outcome.WITHDRAWN


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--channel", "nope", "--mode", "offer"], "no channel"),
        (["--mode", "offer", "--offer-seconds", "2"], "5 to 600 seconds"),
        (["--mode", "offer", "--offer-seconds", "601"], "5 to 600 seconds"),
    ],
)
def test_set_routing_refuses_what_it_cannot_do(args: list[str], says: str) -> None:
    channel = ChannelFactory.create()
    if "--channel" not in args:
        args = ["--channel", channel.public_id, *args]
    with pytest.raises(CommandError, match=says):
        call_command("set_routing", *args, stdout=StringIO())
    channel.refresh_from_db()
    assert channel.routing_mode == Channel.RoutingMode.MANUAL and channel.offer_seconds == 30


def test_create_agent_takes_a_maximum_of_chats() -> None:
    made = run("create_agent", "--email", "max@example.com", "--name", "Max", "--max-chats", "3")
    assert Agent.objects.get(pk=made["id"]).capacity == 3
    with pytest.raises(CommandError, match="1 to 100"):
        call_command("create_agent", "--email", "z@example.com", "--name", "Z",
                     "--max-chats", "0", stdout=StringIO())  # fmt: skip
    assert not Agent.objects.filter(email="z@example.com").exists()


# --- the agent API -----------------------------------------------------------------


@pytest.fixture
def api_for() -> Callable[[Agent], APIClient]:
    def signed_in(agent: Agent) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
        return client

    return signed_in


def test_the_api_lists_my_offers_and_declines_one(
    api_for: Callable[[Agent], APIClient],
) -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = offer_channel(ann, bob)
    chat = new_chat(channel)
    first, second = offered_first(chat, ann, bob)
    mine, theirs = api_for(first), api_for(second)

    offers = mine.get("/api/agent/v1/offers").json()["results"]
    assert [(c["id"], c["offered_to"]) for c in offers] == [(chat.pk, first.pk)]
    assert offers[0]["offer_expires"] is not None
    assert theirs.get("/api/agent/v1/offers").json()["results"] == []
    listed = theirs.get("/api/agent/v1/chats?state=queued").json()["results"]
    assert [(c["id"], c["offered_to"]) for c in listed] == [(chat.pk, first.pk)]

    refused = theirs.post(f"/api/agent/v1/chats/{chat.pk}/decline")
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": "invalid_state", "message": "the chat is not offered to you",
    }  # fmt: skip

    declined = mine.post(f"/api/agent/v1/chats/{chat.pk}/decline")
    assert declined.status_code == 200 and declined.json()["offered_to"] == second.pk
    assert [c["id"] for c in theirs.get("/api/agent/v1/offers").json()["results"]] == [chat.pk]


def test_an_agent_of_another_channel_cannot_decline_or_see_the_offer(
    api_for: Callable[[Agent], APIClient],
) -> None:
    ann = online("Ann")
    chat = new_chat(offer_channel(ann))
    stranger = api_for(online("Stranger"))
    assert stranger.post(f"/api/agent/v1/chats/{chat.pk}/decline").status_code == 404
    assert offered_to(chat) == ann


def test_the_channels_agents_hear_each_offer_and_its_end_live() -> None:
    ann = online("Ann")
    chat = new_chat(offer_channel(ann))
    services.decline_offer(chat=chat, agent=ann)

    heard = LiveEvent.objects.filter(kind__startswith="chat.offer").order_by("id")
    assert [(e.kind, e.channel_id, e.for_client) for e in heard] == [
        ("chat.offered", chat.channel_id, False),
        ("chat.offer_ended", chat.channel_id, False),
    ]
    assert heard[0].data["offered_to"] == ann.pk
    assert heard[1].data == {
        "chat_id": chat.pk, "state": "queued", "agent_id": ann.pk, "outcome": "declined",
    }  # fmt: skip


def test_the_sweep_offers_a_chat_left_waiting_while_an_agent_has_room(settings) -> None:
    # The race it mends (docs/routing.md, "Under concurrency"): a new chat's
    # routing counted Ann full just before her finish committed, and that
    # finish's offer_waiting could not see the new chat. Its outcome, made here.
    ann, cy = online("Ann", max_chats=1), online("Cy", max_chats=1)
    channel = offer_channel(ann)
    [active] = busy(ann, channel, 1)
    waiting = new_chat(channel)
    assert offered_to(waiting) is None
    Chat.objects.filter(pk=active.pk).update(state=Chat.State.FINISHED)  # no hook ran
    other = offer_channel(cy)
    busy(cy, other, 1)  # full, on a channel where nothing waits: not counted

    assert services.offer_waiting_to_free_agents() == 1
    assert offered_to(waiting) == ann
    assert services.offer_waiting_to_free_agents() == 0  # Ann is full again
    sweep = settings.CELERY_BEAT_SCHEDULE["offer-waiting-to-free-agents"]
    assert sweep["task"] == "agents.tasks.offer_waiting_to_free_agents"
