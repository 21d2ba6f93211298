"""Labels (docs/agent-pages.md, "Labels"): the list admins keep, an agent's
labels on a chat through the service, the agent API, the pages, the admin
and the create_label command."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents import events, services
from agents.models import Agent, Chat, Label, LiveEvent
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def billing() -> Label:
    return services.create_label(name="billing", colour="#1F77B4")


@pytest.fixture
def vip() -> Label:
    return services.create_label(name="vip", colour="#d62728")


@pytest.fixture
def chat(agent: Agent) -> Chat:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Olga")
    return services.post_client_message(client=client, content=text("My invoice?")).chat


def names(chat: Chat) -> list[str]:
    return sorted(label.name for label in chat.labels.all())


# --- the service ---------------------------------------------------------------------


def test_labels_replace_the_chats_labels_and_tell_the_agents_pages(
    chat: Chat, agent: Agent, billing: Label, vip: Label, published: list[events.Event]
) -> None:
    services.set_chat_labels(chat=chat, agent=agent, names=["billing"])
    services.set_chat_labels(chat=chat, agent=agent, names=["vip", " billing ", "vip"])

    assert names(chat) == ["billing", "vip"]
    labelled = [e for e in published if isinstance(e, events.ChatLabelled)]
    assert labelled[-1] == events.ChatLabelled(
        chat_id=chat.pk, agent_id=agent.pk, labels=("billing", "vip")
    )
    told = LiveEvent.objects.filter(kind="chat.labelled").last()
    assert told is not None and told.data["labels"] == ["billing", "vip"]
    assert not told.for_client  # the visitor's stream never hears of labels

    services.set_chat_labels(chat=chat, agent=agent, names=[])
    assert names(chat) == []


def test_the_same_labels_again_change_nothing_and_tell_nobody(
    chat: Chat, agent: Agent, billing: Label, published: list[events.Event]
) -> None:
    services.set_chat_labels(chat=chat, agent=agent, names=["billing"])
    services.set_chat_labels(chat=chat, agent=agent, names=["billing"])

    assert sum(isinstance(e, events.ChatLabelled) for e in published) == 1


def test_a_name_not_on_the_list_refuses_the_whole_change_naming_it(
    chat: Chat, agent: Agent, billing: Label, vip: Label
) -> None:
    services.set_chat_labels(chat=chat, agent=agent, names=["vip"])

    with pytest.raises(services.ServiceError, match="not on the list of labels: refund, urgent"):
        services.set_chat_labels(chat=chat, agent=agent, names=["billing", "urgent", "refund"])
    assert names(chat) == ["vip"]


def test_a_finished_chat_may_be_labelled_after_the_fact(
    chat: Chat, agent: Agent, billing: Label
) -> None:
    services.accept_chat(chat=chat, agent=agent)
    services.finish_chat(chat=chat, agent=agent)
    lead = AgentFactory.create(role=Agent.Role.SUPERVISOR)
    chat.channel.agents.add(lead)

    services.set_chat_labels(chat=chat, agent=lead, names=["billing"])

    assert names(chat) == ["billing"]


def test_only_agents_who_see_the_chat_label_it(chat: Chat, billing: Label) -> None:
    stranger = AgentFactory.create()

    with pytest.raises(services.NotAllowed):
        services.set_chat_labels(chat=chat, agent=stranger, names=["billing"])
    assert names(chat) == []


# --- the command ---------------------------------------------------------------------


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("create_label", *args, stdout=out)
    return json.loads(out.getvalue())


def test_create_label_prints_the_label() -> None:
    made = run("--name", "billing", "--colour", "#1F77B4")
    plain = run("--name", "refund")

    assert made == {"id": made["id"], "name": "billing", "colour": "#1f77b4"}
    assert plain["colour"] == "#1f77b4"  # the default
    assert list(Label.objects.values_list("name", flat=True)) == ["billing", "refund"]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--name", "billing", "--colour", "blue"], "colour: A colour is #rrggbb."),
        (["--name", "  "], "name: This field cannot be blank."),
        (["--name", "x" * 51], "name: Ensure this value has at most 50 characters"),
        (["--name", "Billing"], "a label named Billing exists already"),
        (["--colour", "#123456"], "the following arguments are required: --name"),
    ],
)
def test_create_label_refuses_bad_input_and_changes_nothing(
    args: list[str], complaint: str
) -> None:
    run("--name", "billing")

    with pytest.raises(CommandError, match=complaint):
        run(*args)
    assert list(Label.objects.values_list("name", "colour")) == [("billing", "#1f77b4")]


# --- the agent API -------------------------------------------------------------------


def test_the_api_sets_a_chats_labels_and_answers_with_the_chat(
    api: APIClient, chat: Chat, billing: Label, vip: Label
) -> None:
    url = f"/api/agent/v1/chats/{chat.pk}/labels"

    answer = api.post(url, {"labels": ["vip", "billing"]}, format="json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["id"] == chat.pk
    assert answer.json()["labels"] == [
        {"name": "billing", "colour": "#1f77b4"},
        {"name": "vip", "colour": "#d62728"},
    ]
    assert api.post(url, {"labels": []}, format="json").json()["labels"] == []
    assert names(chat) == []


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"labels": ["billing", "refund"]}, "not on the list of labels: refund"),
        ({"labels": "billing"}, "labels"),
        ({}, "labels"),
    ],
)
def test_the_api_refuses_a_name_not_on_the_list_naming_it(
    api: APIClient, chat: Chat, billing: Label, body: dict[str, Any], complaint: str
) -> None:
    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/labels", body, format="json")

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
    assert complaint in answer.json()["error"]["message"]
    assert names(chat) == []


def test_a_chat_of_another_channel_cannot_be_labelled(api: APIClient, billing: Label) -> None:
    other = ClientFactory.create()
    chat = services.post_client_message(client=other, content=text("Hi")).chat

    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/labels", {"labels": ["billing"]}, "json")

    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert names(chat) == []


def test_every_chat_the_api_shows_carries_its_labels(
    api: APIClient, chat: Chat, agent: Agent, billing: Label
) -> None:
    services.set_chat_labels(chat=chat, agent=agent, names=["billing"])
    chip = [{"name": "billing", "colour": "#1f77b4"}]

    assert api.get("/api/agent/v1/chats").json()["results"][0]["labels"] == chip
    assert api.get(f"/api/agent/v1/chats/{chat.pk}").json()["labels"] == chip
    accepted = api.post(f"/api/agent/v1/chats/{chat.pk}/accept").json()
    assert accepted["labels"] == chip


def test_the_chat_list_reads_the_labels_in_one_query(
    api: APIClient, agent: Agent, billing: Label, vip: Label
) -> None:
    channel = ChannelFactory.create(agents=[agent])

    def listed() -> int:
        api.get("/api/agent/v1/chats")  # the token's first use is written once
        with CaptureQueriesContext(connection) as queries:
            assert api.get("/api/agent/v1/chats").status_code == 200
        return len(queries)

    client = ClientFactory.create(channel=channel)
    chat = services.post_client_message(client=client, content=text("Hi")).chat
    services.set_chat_labels(chat=chat, agent=agent, names=["billing"])
    one = listed()
    for _ in range(5):
        client = ClientFactory.create(channel=channel)
        chat = services.post_client_message(client=client, content=text("Hi")).chat
        services.set_chat_labels(chat=chat, agent=agent, names=["billing", "vip"])

    assert listed() == one


def test_the_api_lists_the_labels_to_choose_from(
    api: APIClient, vip: Label, billing: Label
) -> None:
    answer = api.get("/api/agent/v1/labels")

    assert answer.status_code == 200
    assert answer.json() == [
        {"name": "billing", "colour": "#1f77b4"},
        {"name": "vip", "colour": "#d62728"},
    ]
    assert APIClient().get("/api/agent/v1/labels").status_code == 401


# --- the pages -----------------------------------------------------------------------


def test_the_chat_page_shows_the_labels_and_its_form_sets_them(
    chat: Chat, agent: Agent, billing: Label, vip: Label
) -> None:
    page = page_of(agent)

    sent = page.post(f"/agent/chats/{chat.pk}/labels", {"label": ["billing", "vip"]})

    assert sent.status_code == 302 and sent["Location"] == f"/agent/chats/{chat.pk}/"
    assert names(chat) == ["billing", "vip"]
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert html.count('data-testid="label-chip"') == 2 + 2  # the chips and the form's choices
    assert 'fill="#d62728"' in html and 'style="' not in html  # the CSP refuses style attributes
    assert f'id="label-{chat.pk}-{billing.pk}" checked' in html
    panel = page.get("/agent/live", {"chat": chat.pk}).json()["chat"]["panel_html"]
    assert 'data-testid="chat-labels"' in panel


def test_the_chat_pages_form_refuses_an_unknown_label(
    chat: Chat, agent: Agent, billing: Label
) -> None:
    page = page_of(agent)

    sent = page.post(
        f"/agent/chats/{chat.pk}/labels", {"label": "nope"}, headers={"X-Requested-With": "fetch"}
    )

    assert sent.status_code == 400
    assert sent.json()["error"]["message"] == "not on the list of labels: nope"
    other = services.post_client_message(client=ClientFactory.create(), content=text("x")).chat
    assert page.post(f"/agent/chats/{other.pk}/labels", {"label": "billing"}).status_code == 404


def test_history_filters_by_label_and_shows_each_rows_labels(
    agent: Agent, billing: Label, vip: Label
) -> None:
    channel = ChannelFactory.create(agents=[agent])
    finished = {}
    for name, labels in (("Ann", ["billing"]), ("Bob", ["billing", "vip"]), ("Cid", [])):
        client = ClientFactory.create(channel=channel, name=name)
        chat = services.post_client_message(client=client, content=text("Hello")).chat
        services.set_chat_labels(chat=chat, agent=agent, names=labels)
        finished[name] = services.finish_chat(chat=chat)
    page = page_of(agent)

    def rows(**query: str) -> str:
        return page.get("/agent/history/", query).content.decode()

    every = rows()
    assert every.count('data-testid="history-row"') == 3
    assert every.count('data-testid="history-labels"') == 2
    assert '<option value="vip">vip</option>' in every
    only_vip = rows(label="vip")
    assert only_vip.count('data-testid="history-row"') == 1 and "Bob" in only_vip
    assert '<option value="vip" selected>' in only_vip
    assert rows(label="billing", q="Ann").count('data-testid="history-row"') == 1
    assert "with the label nope" in rows(label="nope")


# --- the admin -----------------------------------------------------------------------


def test_the_admin_keeps_the_list_with_colour_swatches(billing: Label) -> None:
    admin = page_of(AgentFactory.create(role=Agent.Role.ADMIN))

    listed = admin.get("/admin/agents/label/", {"q": "bill"}).content.decode()
    assert 'fill="#1f77b4"' in listed and "billing" in listed
    added = admin.post("/admin/agents/label/add/", {"name": "vip", "colour": "#d62728"})
    assert added.status_code == 302
    taken = admin.post("/admin/agents/label/add/", {"name": "Billing", "colour": "#000000"})
    assert "a label named Billing exists already" in taken.content.decode()
    bad = admin.post("/admin/agents/label/add/", {"name": "red", "colour": "red"})
    assert "A colour is #rrggbb." in bad.content.decode()
    assert list(Label.objects.values_list("name", flat=True)) == ["billing", "vip"]
    assert admin.get("/admin/agents/chat/", {"labels__id__exact": billing.pk}).status_code == 200
