"""Each event's payload against the JSON Schema written from the spec's tables."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agents import services
from agents.models import Chat, Department, Message
from devhooks.models import EVENTS
from devhooks.webhooks.services import set_developer_webhook
from tests.devhooks.conftest import Scene, bodies
from tests.devhooks.webhooks.schemas import SCHEMAS
from tests.factories import text


def assert_valid(body: dict[str, Any]) -> None:
    validator = Draft202012Validator(SCHEMAS[body["event_name"]])
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert not errors, errors


def run_every_event(scene: Scene) -> Chat:
    """Drive the core through each event a CRM hears of."""
    chat = scene.active_chat()  # chat_accepted
    services.update_client_contact(client=scene.client, contact={"phone": "+49 151 0000"})
    services.set_crm_panel(
        chat=chat,
        custom_data=[],
        contact_info={},
        crm_link="https://crm.example.com/card/7",
        enable_assign=True,
        page={},
    )
    services.request_crm_assign(chat=chat, agent=scene.agent)  # chat_assigned
    services.post_agent_message(chat=chat, agent=scene.agent, content=text("On its way!"))
    services.rate_chat(chat=chat, rating="positive")
    services.finish_chat(chat=chat, agent=scene.agent)  # chat_finished
    services.leave_offline_message(
        channel=scene.channel,
        message="Call me tomorrow",
        name="Otto",
        email="otto@example.com",
        page_url="https://shop.example.com/contact",
        page_title="Contact",
    )
    scene.callbacks_always_on()
    call = services.request_callback(
        channel=scene.channel, phone="+49 30 555 0101", client=scene.client
    )
    services.record_call_progress(call=call, agent=scene.agent, status="agent_connected")
    services.record_call_progress(call=call, agent=scene.agent, status="client_connected")
    services.record_call_progress(
        call=call, agent=scene.agent, status="end", record_url="https://pbx.example.com/r/1.mp3"
    )
    failed = services.request_callback(
        channel=scene.channel, phone="030 555 0102", client=scene.client
    )
    services.record_call_progress(call=failed, agent=scene.agent, status="error", reason="busy")
    return chat


def test_every_event_matches_its_schema(scene: Scene, department: Department) -> None:
    run_every_event(scene)

    sent = bodies()
    assert {body["event_name"] for body in sent} == set(EVENTS)
    for body in sent:
        assert_valid(body)


def test_a_client_nothing_is_known_of_still_gets_objects_and_empty_strings(
    bare_scene: Scene,
) -> None:
    run_every_event(bare_scene)

    for body in bodies():
        assert_valid(body)
        assert body["session"]["geoip"] == dict.fromkeys(body["session"]["geoip"], "")
        if body["event_name"] != "offline_message":  # its page is the form's
            assert body["page"] == {"url": "", "title": ""}
        assert "user_token" not in body and "department" not in body


def test_chat_accepted_carries_the_chat_visitor_agent_and_session(scene: Scene) -> None:
    chat = scene.queued_chat()
    Chat.objects.filter(pk=chat.pk).update(department=Department.objects.create(name="Billing"))
    services.accept_chat(chat=chat, agent=scene.agent)

    [body] = bodies("chat_accepted")
    assert body["chat_id"] == chat.pk and isinstance(body["chat_id"], int)
    assert body["widget_id"] == scene.channel.public_id
    assert body["user_token"] == "crm-user-42"
    assert body["visitor"] == {
        "name": "Vera Visitor",
        "email": "vera@example.com",
        "phone": "",
        "number": str(scene.client.visitor_number),
        "description": "",
        "social": {},
        "chats_count": 1,
    }
    assert body["agent"] == {
        "id": scene.agent.pk,
        "name": "Alice Agent",
        "email": "alice@example.com",
        "phone": "+49 30 1234",
    }
    assert body["department"]["name"] == "Billing"
    assert body["session"]["geoip"]["city"] == "Berlin"
    assert body["session"]["utm_json"] == {
        "source": "newsletter",
        "campaign": "",
        "content": "",
        "medium": "email",
        "term": "",
    }
    assert body["session"]["ip_addr"] == "203.0.113.7"
    assert body["page"] == {"url": "https://shop.example.com/cart", "title": "Your cart"}


def test_chat_finished_has_the_log_rate_and_agents(scene: Scene) -> None:
    chat = scene.active_chat()
    services.post_agent_message(chat=chat, agent=scene.agent, content=text("Hi Vera"))
    services.post_system_message(chat=chat, text="a note agents see")
    services.rate_chat(chat=chat, rating="negative")
    services.finish_chat(chat=chat, agent=scene.agent)

    [body] = bodies("chat_finished")
    assert "agent" not in body
    assert [agent["id"] for agent in body["agents"]] == [scene.agent.pk]
    log = body["chat"]["messages"]
    assert [(item["type"], item["message"]) for item in log] == [
        ("visitor", "Hello, my order is late"),
        ("agent", "Hi Vera"),
    ]
    assert "agent_id" not in log[0] and log[1]["agent_id"] == scene.agent.pk
    first = Message.objects.filter(chat=chat).earliest("created")
    assert log[0]["timestamp"] == int(first.created.timestamp())
    assert body["chat"]["rate"] == "negative" and body["chat"]["blacklisted"] is False


def test_an_unrated_chat_has_rate_null(scene: Scene) -> None:
    services.finish_chat(chat=scene.active_chat(), agent=scene.agent)
    [body] = bodies("chat_finished")
    assert body["chat"]["rate"] is None
    assert_valid(body)


def test_offline_message_has_no_chat_and_no_agent(scene: Scene) -> None:
    offline = services.leave_offline_message(
        channel=scene.channel,
        message="Do you ship to Norway?",
        name="Nils",
        email="nils@example.com",
        description="wholesale",
    )
    assert offline is not None

    [body] = bodies("offline_message")
    assert body["event_name"] == "offline_message"
    assert "chat_id" not in body and "agent" not in body
    assert body["offline_message_id"] == str(offline.pk)
    assert body["message"] == "Do you ship to Norway?"
    assert body["visitor"]["name"] == "Nils" and body["visitor"]["description"] == "wholesale"
    assert_valid(body)


def test_call_events_follow_the_call(scene: Scene) -> None:
    scene.callbacks_always_on()
    chat = scene.queued_chat()
    call = services.request_callback(
        channel=scene.channel, phone="+49 (30) 555-0101", client=scene.client
    )
    services.record_call_progress(call=call, agent=scene.agent, status="agent_connected")
    services.record_call_progress(
        call=call, agent=scene.agent, status="end", record_url="https://pbx.example.com/r/1.mp3"
    )

    sent = bodies("call_event")
    assert [body["call"]["status"] for body in sent] == ["start", "agent_connected", "end"]
    assert all(body["chat_id"] == chat.pk for body in sent)
    assert sent[0]["agent"] == {"id": 0, "name": "", "email": "", "phone": ""}
    assert sent[1]["agent"]["id"] == scene.agent.pk
    assert sent[0]["call"] == {"type": "callback", "phone": "+49305550101", "status": "start"}
    assert sent[2]["call"]["record_url"] == "https://pbx.example.com/r/1.mp3"
    for body in sent:
        assert_valid(body)


def test_chat_updated_when_the_client_changes_but_not_for_the_crms_own_change(
    scene: Scene,
) -> None:
    chat = scene.active_chat()
    services.update_client_contact(client=scene.client, contact={"name": "Vera V."})
    services.set_crm_panel(
        chat=chat,
        custom_data=[],
        contact_info={"email": "vera@crm.example.com"},
        crm_link="",
        enable_assign=False,
        page={},
    )

    [body] = bodies("chat_updated")
    assert body["visitor"]["name"] == "Vera V."
    assert body["agent"]["id"] == scene.agent.pk
    scene.client.refresh_from_db()
    assert scene.client.email == "vera@crm.example.com"  # saved, yet not echoed to the CRM


@pytest.mark.parametrize("chosen", [["chat_finished"], ["offline_message", "call_event"]])
def test_only_the_chosen_events_are_sent(scene: Scene, chosen: list[str]) -> None:
    set_developer_webhook(url="http://127.0.0.1:9/crm", events=chosen)
    run_every_event(scene)
    assert {body["event_name"] for body in bodies()} == set(chosen)


def test_nothing_is_sent_while_switched_off_or_without_a_url(scene: Scene) -> None:
    set_developer_webhook(url="http://127.0.0.1:9/crm", active=False)
    run_every_event(scene)
    assert bodies() == []


@pytest.mark.parametrize(
    "path",
    [("visitor",), ("session",), ("session", "geoip"), ("page",), ("agent",), ("chat_id",)],
)
def test_the_schema_refuses_null_where_the_spec_has_an_object(
    scene: Scene, path: tuple[str, ...]
) -> None:
    scene.active_chat()
    [body] = bodies("chat_accepted")
    assert_valid(body)
    holder = body
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = None
    with pytest.raises(AssertionError):
        assert_valid(body)


def test_pressing_assign_twice_asks_the_crm_once(scene: Scene) -> None:
    chat = scene.active_chat()
    services.set_crm_panel(
        chat=chat,
        custom_data=[],
        contact_info={},
        crm_link="https://crm.example.com/card/7",
        enable_assign=True,
        page={},
    )
    services.request_crm_assign(chat=chat, agent=scene.agent)
    services.request_crm_assign(chat=chat, agent=scene.agent)

    [body] = bodies("chat_assigned")
    assert body["assign_to"] == "https://crm.example.com/card/7"


def test_no_assignment_without_a_crm_link(scene: Scene) -> None:
    chat = scene.active_chat()
    services.set_crm_panel(
        chat=chat, custom_data=[], contact_info={}, crm_link="", enable_assign=True, page={}
    )
    with pytest.raises(services.InvalidState):
        services.request_crm_assign(chat=chat, agent=scene.agent)
    assert bodies("chat_assigned") == []


def test_chat_updated_names_the_agent_who_joined_last(scene: Scene) -> None:
    from tests.factories import AgentFactory

    chat = scene.active_chat()
    other = AgentFactory.create()  # a higher id than the scene's agent
    chat.agents.add(other)
    chat.agents.remove(scene.agent)
    chat.agents.add(scene.agent)  # back last, as after a transfer back
    services.update_client_contact(client=scene.client, contact={"name": "Vera V."})
    [body] = bodies("chat_updated")
    assert other.pk > scene.agent.pk and body["agent"]["id"] == scene.agent.pk
