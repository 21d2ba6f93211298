"""Roles and the supervisors' Team (docs/routing.md, "Roles" and "Team"):
who sees the team, what it shows, and reassigning a chat."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client as Browser
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, Channel, Chat, ChatOffer, LiveEvent, Message
from agents.tokens import issue_token
from tests.agents.test_routing import busy, new_chat, offer_channel, online
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db


def api(agent: Agent) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return client


def supervisor(name: str = "Sue", *, of: Channel | None = None, **fields: Any) -> Agent:
    sue = AgentFactory.create(name=name, role=Agent.Role.SUPERVISOR, **fields)
    if of is not None:
        of.agents.add(sue)
    return sue


# --- roles -------------------------------------------------------------------------


def test_the_role_decides_the_django_admin_flags() -> None:
    sue = supervisor()
    assert sue.supervises and not sue.is_staff and not sue.is_superuser
    sue.role = Agent.Role.ADMIN
    sue.save(update_fields=["role"])
    sue.refresh_from_db()
    assert sue.is_staff and sue.is_superuser
    sue.role = Agent.Role.AGENT
    sue.save()
    sue.refresh_from_db()
    assert not sue.is_staff and not sue.is_superuser and not sue.supervises
    assert Agent.objects.create_superuser("root@example.com", name="Root").role == "admin"


def test_an_agent_sees_their_channels_and_an_admin_every_channel() -> None:
    ann = online("Ann")
    mine, other = ChannelFactory.create(agents=[ann]), ChannelFactory.create()
    in_mine, in_other = new_chat(mine), new_chat(other)
    admin = AgentFactory.create(role=Agent.Role.ADMIN)

    def ids(agent: Agent) -> set[int]:
        return {chat["id"] for chat in api(agent).get("/api/agent/v1/chats").json()["results"]}

    assert ids(ann) == {in_mine.pk}
    assert ids(supervisor(of=mine)) == {in_mine.pk}
    assert ids(admin) == {in_mine.pk, in_other.pk}
    assert api(ann).get(f"/api/agent/v1/chats/{in_other.pk}").status_code == 404


# --- the team ----------------------------------------------------------------------


def test_the_team_shows_status_load_capacity_offers_queue_and_waiting_chats() -> None:
    ann, bob = online("Ann", max_chats=2), online("Bob")
    cy = AgentFactory.create(name="Cy")  # offline
    sue = supervisor()
    channel = offer_channel(ann, bob, cy, sue)
    ChannelFactory.create(agents=[AgentFactory.create(name="Elsewhere")])
    Agent.objects.filter(pk=bob.pk).update(last_seen_at=timezone.now() - timedelta(hours=1))
    answered, unanswered = busy(ann, channel, 2)
    services.post_agent_message(chat=answered, agent=ann, content=text("Here you go"))
    services.post_client_message(client=unanswered.client, content=text("Still there?"))
    services.post_agent_message(chat=answered, agent=ann, content=text("Anything else?"))
    services.post_client_message(client=answered.client, content=text("Thanks"))
    services.post_agent_message(chat=answered, agent=ann, content=text("Bye"))
    Agent.objects.filter(pk=ann.pk).update(max_chats=3)  # room for one offer
    waiting = new_chat(channel, "first in line")
    Chat.objects.filter(pk=waiting.pk).update(queued_at=timezone.now() - timedelta(seconds=90))

    answer = api(sue).get("/api/agent/v1/team")

    assert answer.status_code == 200, answer.content
    team = answer.json()
    agents = {row["name"]: row for row in team["agents"]}
    assert list(agents) == ["Ann", "Bob", "Cy", "Sue"]  # only the supervisor's channels
    assert agents["Ann"] | {"id": 0} == {
        "id": 0,
        "name": "Ann",
        "email": ann.email,
        "role": "agent",
        "status": "online",
        "open_chats": 2,
        "max_chats": 3,
        "pending_offers": 1,
    }
    assert agents["Bob"]["status"] == "away" and agents["Cy"]["status"] == "offline"
    assert agents["Bob"]["max_chats"] == 5  # the installation's AGENT_MAX_CHATS
    [queued] = team["queue"]
    assert queued["id"] == waiting.pk and queued["offered_to"] == ann.pk
    assert 89 <= queued["wait_seconds"] <= 120
    [owed] = team["waiting_for_reply"]  # the client wrote last; not the answered chat
    assert owed["id"] == unanswered.pk and owed["agents"] == [ann.pk]
    assert owed["wait_seconds"] >= 0 and owed["waiting_since"]


def test_the_team_is_for_supervisors_and_admins_only() -> None:
    ann = online("Ann")
    ChannelFactory.create(agents=[ann])
    refused = api(ann).get("/api/agent/v1/team")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "access_denied"
    assert APIClient().get("/api/agent/v1/team").status_code == 401
    admin = AgentFactory.create(role=Agent.Role.ADMIN)
    assert [a["name"] for a in api(admin).get("/api/agent/v1/team").json()["agents"]] == ["Ann"]


@pytest.mark.parametrize("size", [2, 6])
def test_the_team_is_read_in_a_fixed_number_of_queries(size: int) -> None:
    sue = supervisor()
    agents = [online(f"Agent {n}") for n in range(size)]
    channel = offer_channel(*agents, sue)
    for agent in agents:
        for chat in busy(agent, channel, 2):  # each owes its client a reply
            services.post_client_message(client=chat.client, content=text("Hello?"))
    for _ in range(size):
        new_chat(channel)
    client = api(sue)
    client.get("/api/agent/v1/team")  # the token's first use is written once
    with CaptureQueriesContext(connection) as queries:
        team = client.get("/api/agent/v1/team").json()
    assert len(team["waiting_for_reply"]) == 2 * size and len(team["agents"]) == size + 1
    # The token, the agents, the two lists, the agents of the chats waiting
    # for a reply and the labels of each list's chats: as many for 6 agents as for 2.
    assert len(queries) <= 7, [q["sql"] for q in queries]


# --- reassign ----------------------------------------------------------------------


def test_a_supervisor_reassigns_an_active_chat_and_the_client_is_not_told() -> None:
    ann, bob = online("Ann"), online("Bob")
    sue = supervisor(is_online=True)
    channel = ChannelFactory.create(agents=[ann, bob, sue])
    [chat] = busy(ann, channel, 1)
    told_client = LiveEvent.objects.filter(for_client=True).count()

    answer = api(sue).post(f"/api/agent/v1/chats/{chat.pk}/reassign", {"agent": bob.pk})

    assert answer.status_code == 200, answer.content
    chat.refresh_from_db()
    assert chat.state == Chat.State.ACTIVE and list(chat.agents.all()) == [bob]
    assert chat.transferred_by == sue
    note = chat.messages.get(author=Message.Author.SYSTEM)
    assert note.text == "Sue reassigned the chat from Ann to Bob." and note.agent == ann
    assert LiveEvent.objects.filter(for_client=True).count() == told_client
    moved = LiveEvent.objects.filter(kind="chat.transferred").last()
    assert moved is not None and moved.data["to_agent_id"] == bob.pk
    # Bob writes now; Ann may not.
    services.post_agent_message(chat=chat, agent=bob, content=text("Bob here"))
    with pytest.raises(services.InvalidState):
        services.post_agent_message(chat=chat, agent=ann, content=text("Ann here"))


def test_a_reassigned_queued_chat_is_offered_to_the_chosen_agent_even_at_capacity() -> None:
    ann, bob = online("Ann"), online("Bob", max_chats=1)
    sue = supervisor()
    channel = ChannelFactory.create(agents=[ann, bob, sue])  # manual: no offers by itself
    busy(bob, channel, 1)
    chat = new_chat(channel)

    answer = api(sue).post(f"/api/agent/v1/chats/{chat.pk}/reassign", {"agent": bob.pk})

    assert answer.status_code == 200, answer.content
    assert answer.json()["offered_to"] == bob.pk
    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED and chat.offered_to == bob
    assert ChatOffer.objects.get(chat=chat).outcome == ChatOffer.Outcome.PENDING
    [offer] = api(bob).get("/api/agent/v1/offers").json()["results"]
    assert offer["id"] == chat.pk
    # Reply keeps its meaning: Bob's Reply takes it, and that tells the client.
    services.accept_chat(chat=chat, agent=bob)
    assert ChatOffer.objects.get(chat=chat).outcome == ChatOffer.Outcome.ACCEPTED

    # Another queued chat offered to Ann moves to Bob: Ann's offer is withdrawn.
    other = new_chat(offer_channel(ann, bob, sue))
    assert other.offered_to in (ann, bob)
    first = other.offered_to
    second = bob if first == ann else ann
    api(sue).post(f"/api/agent/v1/chats/{other.pk}/reassign", {"agent": second.pk})
    outcomes = dict(ChatOffer.objects.filter(chat=other).values_list("agent_id", "outcome"))
    assert outcomes == {first.pk: "withdrawn", second.pk: "pending"}


def test_reassigning_frees_the_agent_it_leaves_for_what_waits() -> None:
    ann, bob = online("Ann", max_chats=1), online("Bob", max_chats=1)
    sue = supervisor()
    channel = offer_channel(ann, bob, sue)
    [active] = busy(ann, channel, 1)
    waiting = new_chat(channel)
    assert waiting.offered_to == bob  # Ann is full
    other = new_chat(channel)
    assert other.offered_to is None  # so is Bob, with his offer

    # Bob's offer goes to Ann... who is full: it is offered to her all the same,
    # and Bob, free again, is offered the chat that waited.
    services.reassign_chat(chat=waiting, by=sue, to_agent=ann)
    waiting.refresh_from_db()
    other.refresh_from_db()
    assert waiting.offered_to == ann and other.offered_to == bob

    # Ann's active chat goes to Bob (past his maximum, by the supervisor's
    # choice); Ann has room again, but her offers already fill it.
    Agent.objects.filter(pk=ann.pk).update(max_chats=3)
    third = new_chat(channel)
    services.reassign_chat(chat=active, by=sue, to_agent=bob)
    third.refresh_from_db()
    assert list(active.agents.all()) == [bob] and third.offered_to == ann


def test_the_services_check_the_supervisors_channels_too() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = ChannelFactory.create(agents=[ann, bob])
    [chat] = busy(ann, channel, 1)
    elsewhere = supervisor(of=ChannelFactory.create())
    with pytest.raises(services.NotAllowed):
        services.reassign_chat(chat=chat, by=elsewhere, to_agent=bob)
    with pytest.raises(services.NotAllowed):
        services.set_max_chats(agent=bob, by=elsewhere, max_chats=2)
    assert list(chat.agents.all()) == [ann] and Agent.objects.get(pk=bob.pk).max_chats is None
    admin = AgentFactory.create(role=Agent.Role.ADMIN)
    services.set_max_chats(agent=bob, by=admin, max_chats=2)
    services.reassign_chat(chat=chat, by=admin, to_agent=bob)
    assert list(chat.agents.all()) == [bob]


def test_the_flags_cannot_disagree_with_the_role() -> None:
    ann = AgentFactory.create()
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.filter(pk=ann.pk).update(role=Agent.Role.ADMIN)  # save() skipped
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.filter(pk=ann.pk).update(is_staff=True)


def test_an_admins_stream_hears_every_channel() -> None:
    from agents.streams import channel_pairs

    ann = AgentFactory.create()
    first, second = ChannelFactory.create(agents=[ann]), ChannelFactory.create()
    admin = AgentFactory.create(role=Agent.Role.ADMIN)
    pairs = set(channel_pairs({ann.pk, admin.pk}))
    assert pairs == {(ann.pk, first.pk), (admin.pk, first.pk), (admin.pk, second.pk)}


@pytest.mark.django_db(transaction=True)
def test_the_migration_makes_superusers_admins_and_staff_supervisors() -> None:
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("agents", "0017_business_hours")])
    old = executor.loader.project_state([("agents", "0017_business_hours")]).apps
    made = old.get_model("agents", "Agent").objects
    made.create(email="root@example.com", name="Root", is_staff=True, is_superuser=True)
    made.create(email="lead@example.com", name="Lead", is_staff=True)
    made.create(email="ann@example.com", name="Ann")
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    roles = dict(Agent.objects.values_list("name", "role"))
    assert roles == {"Root": "admin", "Lead": "supervisor", "Ann": "agent"}
    admins = Agent.objects.filter(is_staff=True, is_superuser=True)
    assert list(admins.values_list("name", flat=True)) == ["Root"]
    assert not Agent.objects.filter(is_staff=True, is_superuser=False).exists()


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({}, 400, "agent"),
        ({"agent": "x"}, 400, "agent"),
        ({"agent": 0}, 400, "agent"),
        ({"agent": 999999}, 400, "does not answer this channel"),
        ("stranger", 400, "does not answer this channel"),
        ("offline", 400, "Cy is offline"),
        ("ann", 400, "Ann's already"),
    ],
)
def test_a_bad_reassignment_is_refused_and_changes_nothing(
    body: Any, status: int, message: str
) -> None:
    ann, cy = online("Ann"), AgentFactory.create(name="Cy")
    stranger = online("Stranger")
    ChannelFactory.create(agents=[stranger])
    sue = supervisor()
    channel = ChannelFactory.create(agents=[ann, cy, sue])
    [chat] = busy(ann, channel, 1)
    named = {"stranger": stranger, "offline": cy, "ann": ann}
    if isinstance(body, str):
        body = {"agent": named[body].pk}

    answer = api(sue).post(f"/api/agent/v1/chats/{chat.pk}/reassign", body, format="json")

    assert answer.status_code == status, answer.content
    assert message in answer.json()["error"]["message"]
    assert list(chat.agents.all()) == [ann] and not chat.messages.exists()


def test_only_supervisors_reassign_and_only_chats_they_see() -> None:
    ann, bob = online("Ann"), online("Bob")
    channel = ChannelFactory.create(agents=[ann, bob])
    [chat] = busy(ann, channel, 1)
    refused = api(bob).post(f"/api/agent/v1/chats/{chat.pk}/reassign", {"agent": bob.pk})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "access_denied"
    elsewhere = supervisor(of=ChannelFactory.create())
    hidden = api(elsewhere).post(f"/api/agent/v1/chats/{chat.pk}/reassign", {"agent": bob.pk})
    assert hidden.status_code == 404
    finished = services.finish_chat(chat=chat, agent=ann)
    sue = supervisor(of=channel)
    late = api(sue).post(f"/api/agent/v1/chats/{finished.pk}/reassign", {"agent": bob.pk})
    assert late.status_code == 400 and "finished" in late.json()["error"]["message"]
    assert list(Chat.objects.get(pk=chat.pk).agents.all()) == [ann]


def test_an_agent_going_online_or_offline_is_a_live_event_on_their_channels() -> None:
    ann = AgentFactory.create(name="Ann")
    first, second = ChannelFactory.create(agents=[ann]), ChannelFactory.create(agents=[ann])
    services.set_agent_status(agent=ann, online=True)
    rows = LiveEvent.objects.filter(kind="agent.status")
    assert {row.channel_id for row in rows} == {first.pk, second.pk}
    assert all(row.data == {"agent_id": ann.pk, "status": "online"} for row in rows)
    assert not any(row.for_client for row in rows)


def test_a_client_on_another_channel_never_reaches_the_team_of_this_one() -> None:
    sue = supervisor()
    ChannelFactory.create(agents=[sue])
    other = ChannelFactory.create(routing_mode=Channel.RoutingMode.MANUAL)
    services.post_client_message(client=ClientFactory.create(channel=other), content=text("hi"))
    team = api(sue).get("/api/agent/v1/team").json()
    assert team["queue"] == [] and team["waiting_for_reply"] == []


# --- the Team page -----------------------------------------------------------------


def test_the_team_page_shows_the_team_and_only_supervisors_open_it() -> None:
    ann, bob = online("Ann", max_chats=1), online("Bob")
    sue = supervisor()
    channel = ChannelFactory.create(agents=[ann, bob, sue], name="Shop <chat>")
    busy(ann, channel, 2)  # past her maximum by her own Reply
    waiting = new_chat(channel)

    page = page_of(sue).get("/agent/team/")

    html = page.content.decode()
    assert page.status_code == 200 and 'data-testid="team-link"' in html
    assert (
        html.count('data-testid="team-agent"') == 3 and "2 / 1" in html and 'class="over"' in html
    )
    assert f'data-chat="{waiting.pk}"' in html and "Shop &lt;chat&gt;" in html
    assert f'action="/agent/chats/{waiting.pk}/reassign"' in html
    live = page_of(sue).get("/agent/team/live").json()["html"]
    assert f'data-chat="{waiting.pk}"' in live
    for agent in (ann,):
        assert page_of(agent).get("/agent/team/").status_code == 403
        assert page_of(agent).get("/agent/team/live").status_code == 403
        assert 'data-testid="team-link"' not in page_of(agent).get("/agent/").content.decode()
    assert Browser().get("/agent/team/").status_code == 302  # to the sign-in


def test_the_team_page_reassigns_and_sets_an_agents_maximum() -> None:
    ann, bob = online("Ann"), online("Bob")
    sue = supervisor()
    channel = ChannelFactory.create(agents=[ann, bob, sue])
    [chat] = busy(ann, channel, 1)
    page = page_of(sue)

    moved = page.post(f"/agent/chats/{chat.pk}/reassign", {"agent": str(bob.pk)}, follow=True)
    assert "chat is Bob&#x27;s now" in moved.content.decode()
    assert list(chat.agents.all()) == [bob]
    refused = page.post(
        f"/agent/chats/{chat.pk}/reassign", {"agent": "x"}, HTTP_X_REQUESTED_WITH="fetch"
    )
    assert (
        refused.status_code == 400
        and "choose an online agent" in refused.json()["error"]["message"]
    )

    page.post(f"/agent/team/agents/{bob.pk}/max-chats", {"max_chats": "7"})
    bob.refresh_from_db()
    assert bob.max_chats == 7
    page.post(f"/agent/team/agents/{bob.pk}/max-chats", {"max_chats": ""})
    bob.refresh_from_db()
    assert bob.max_chats is None and bob.capacity == 5
    for bad in ("0", "101", "x", "9" * 5000, "-1"):
        answer = page.post(
            f"/agent/team/agents/{bob.pk}/max-chats", {"max_chats": bad},
            HTTP_X_REQUESTED_WITH="fetch",
        )  # fmt: skip
        assert answer.status_code == 400 and "1 to 100" in answer.json()["error"]["message"]
    bob.refresh_from_db()
    assert bob.max_chats is None
    stranger = AgentFactory.create()
    assert (
        page.post(f"/agent/team/agents/{stranger.pk}/max-chats", {"max_chats": "3"}).status_code
        == 404
    )
    assert (
        page_of(ann).post(f"/agent/team/agents/{bob.pk}/max-chats", {"max_chats": "3"}).status_code
        == 403
    )


def test_more_room_is_offered_what_waits_at_once() -> None:
    ann = online("Ann", max_chats=1)
    sue = supervisor()
    channel = offer_channel(ann, sue)
    busy(ann, channel, 1)
    chat = new_chat(channel)
    assert chat.offered_to is None  # Ann is full
    services.set_max_chats(agent=ann, by=sue, max_chats=2)
    chat.refresh_from_db()
    assert chat.offered_to == ann
    with pytest.raises(services.NotAllowed):
        services.set_max_chats(agent=ann, by=ann, max_chats=9)
