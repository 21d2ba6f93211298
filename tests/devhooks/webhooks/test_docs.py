"""docs/webhooks.md says what the code does: every event example is built by
``devhooks.payloads`` from the same data, every reply example is answered by
a real local CRM and does what the guide says, and its numbers are the
policy's. A field added, removed or of another type fails here.

What differs from one run to the next (database ids) is replaced by a marker
of its JSON type before comparing; everything else — the widget id, visitor
numbers, timestamps, texts — is frozen in the data, so the examples are
compared value for value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from standardwebhooks.webhooks import Webhook

from agents import services as chats
from agents.models import Agent, Call, Channel, Chat, Client, Department, Message, OfflineMessage
from delivery.models import Delivery
from delivery.policies import get_policy
from devhooks.models import EVENTS, IntegrationSettings
from devhooks.webhooks import payloads
from devhooks.webhooks.services import POLICY, PURPOSE, set_developer_webhook
from tests.delivery.target import Reply, Target, drive
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, MessageFactory, text
from tests.worker import ROOT

DOC = (ROOT / "docs" / "webhooks.md").read_text()
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.DOTALL)


def examples() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, _language, body in EXAMPLE.findall(DOC):
        assert name not in found, f"two examples named {name}"
        found[name] = body
    return found


def example(name: str) -> Any:
    return json.loads(examples()[name])


ID_KEYS = {"chat_id", "id", "agent_id", "offline_message_id"}


def frozen(value: Any, key: str = "") -> Any:
    """``value`` with database ids replaced by a marker of their JSON type.

    0 stays 0: a ``chat_id`` or agent ``id`` of 0 is a documented decision
    (no chat; nobody), not an id that varies.
    """
    if isinstance(value, dict):
        return {name: frozen(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [frozen(item, key) for item in value]
    if key in ID_KEYS and value not in (0, "0"):
        if type(value) is int:
            return "<integer id>"
        if isinstance(value, str) and value.isdigit():
            return "<id as a string of digits>"
    return value


def shape(value: Any) -> Any:
    """Keys and JSON types only: what a typed receiver's classes see."""
    if isinstance(value, dict):
        return {name: shape(item) for name, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


# --- the shop of the examples ------------------------------------------------------

WIDGET_ID = "Hk2mV9xQ0aB7cD1e"
STARTED = datetime(2024, 11, 14, 9, 30, tzinfo=UTC)
CRM_LINK = "https://crm.example.com/card/7"
VISITOR_DATA = {
    "page": {"url": "https://shop.example.com/cart", "title": "Your cart"},
    "geoip": {
        "region_code": "BE",
        "country": "Germany",
        "country_code": "DE",
        "region": "Berlin",
        "city": "Berlin",
        "latitude": "52.5200",
        "longitude": "13.4050",
        "organization": "Example Telecom",
    },
    "utm": "utm_source=newsletter&utm_medium=email&utm_campaign=winter-sale",
    "utm_json": {"source": "newsletter", "medium": "email", "campaign": "winter-sale"},
    "ip_addr": "203.0.113.7",
    "user_agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
}


@dataclass
class Shop:
    channel: Channel
    department: Department
    alice: Agent
    ann: Client  # a visitor with a chat
    ben: Client  # a visitor without one
    chat: Chat  # Ann's chat, answered by Alice


@pytest.fixture
def shop(db: None) -> Shop:
    alice = AgentFactory.create(
        name="Alice Agent", email="alice@example.com", phone="+49 30 5550100"
    )
    channel = ChannelFactory.create(
        name="Shop website", kind=Channel.Kind.WIDGET, public_id=WIDGET_ID, agents=[alice]
    )
    ann = ClientFactory.create(
        channel=channel,
        name="Ann Lee",
        email="ann@example.com",
        phone="+49 30 1234567",
        visitor_number=1042,
        description="Wholesale customer",
        user_token="crm-user-7f3a",
        visitor_data=VISITOR_DATA,
    )
    ben = ClientFactory.create(
        channel=channel,
        name="",
        visitor_number=1043,
        visitor_data={"page": {"url": "https://shop.example.com/shipping", "title": "Shipping"}},
    )
    department = Department.objects.create(name="Sales")
    chat = Chat.objects.create(
        channel=channel,
        client=ann,
        state=Chat.State.ACTIVE,
        department=department,
        created=STARTED,
    )
    chat.agents.add(alice)
    return Shop(channel, department, alice, ann, ben, chat)


def _chat_accepted(shop: Shop) -> dict[str, Any]:
    return payloads.chat_accepted(shop.chat, shop.alice)


def _chat_assigned(shop: Shop) -> dict[str, Any]:
    return payloads.chat_assigned(shop.chat, shop.alice, CRM_LINK)


def _chat_updated(shop: Shop) -> dict[str, Any]:
    Client.objects.filter(pk=shop.ann.pk).update(phone="+49 151 23456789")  # the contact form
    shop.chat.client.refresh_from_db()
    return payloads.chat_updated(shop.chat, shop.alice)


def _chat_finished(shop: Shop) -> dict[str, Any]:
    def said(seconds: int, author: str, body: str = "", **fields: Any) -> None:
        MessageFactory.create(
            chat=shop.chat,
            author=author,
            text=body,
            created=STARTED + timedelta(seconds=seconds),
            **fields,
        )

    said(0, Message.Author.BOT, "Hi! I am the shop's bot. What can I do for you?")
    said(20, Message.Author.CLIENT, "Where is my order #1234?")
    said(25, Message.Author.SYSTEM, "The bot handed the chat to the agents")
    said(60, Message.Author.AGENT, "It left our warehouse yesterday.", agent=shop.alice)
    said(
        95,
        Message.Author.CLIENT,
        type=Message.Type.PHOTO,
        payload={"file": "https://cdn.example.com/u/box.jpg", "file_name": "box.jpg"},
    )
    said(130, Message.Author.AGENT, "Thanks! I have opened a claim.", agent=shop.alice)
    Chat.objects.filter(pk=shop.chat.pk).update(
        state=Chat.State.FINISHED, rating=Chat.Rating.POSITIVE
    )
    shop.chat.refresh_from_db()
    return payloads.chat_finished(shop.chat)


def _offline_message(shop: Shop) -> dict[str, Any]:
    offline = OfflineMessage.objects.create(
        channel=shop.channel,
        client=shop.ben,
        name="Ben Ortiz",
        email="ben@example.com",
        phone="+4917612345678",
        message="Do you ship to Austria? I need 40 boxes by Friday.",
        page_url="https://shop.example.com/shipping",
        page_title="Shipping",
    )
    return payloads.offline_message(offline)


def _call_event(shop: Shop) -> dict[str, Any]:
    call = Call.objects.create(
        channel=shop.channel,
        client=shop.ann,
        chat=shop.chat,
        type=Call.Type.CALLBACK,
        phone="+49301234567",
        status=Call.Status.END,
        record_url="https://pbx.example.com/records/88.mp3",
        agent=shop.alice,
    )
    return payloads.call_event(call)


def _call_event_without_chat(shop: Shop) -> dict[str, Any]:
    call = Call.objects.create(
        channel=shop.channel,
        client=shop.ben,
        type=Call.Type.CALLBACK,
        phone="+4917612345678",
        status=Call.Status.START,
    )
    return payloads.call_event(call)


BUILDERS: dict[str, Callable[[Shop], dict[str, Any]]] = {
    "event-chat_accepted": _chat_accepted,
    "event-chat_assigned": _chat_assigned,
    "event-chat_updated": _chat_updated,
    "event-chat_finished": _chat_finished,
    "event-offline_message": _offline_message,
    "event-call_event": _call_event,
    "event-call_event-without-chat": _call_event_without_chat,
}


# --- the doc's blocks ------------------------------------------------------------


def test_every_json_block_is_a_checked_example() -> None:
    blocks = re.findall(r"^```json$", DOC, re.MULTILINE)
    named = EXAMPLE.findall(DOC)

    assert len(blocks) == len([name for name, language, _ in named if language == "json"])
    assert set(examples()) == CHECKED
    for _name, language, body in named:
        if language == "json":
            json.loads(body)


def test_every_event_has_its_section_and_example() -> None:
    for name in EVENTS:
        assert f"\n### `{name}`" in DOC, name
        assert example(f"event-{name}")["event_name"] == name


# --- the events ------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(BUILDERS))
def test_each_event_example_is_what_the_code_builds(shop: Shop, name: str) -> None:
    documented = example(name)

    built = json.loads(json.dumps(BUILDERS[name](shop)))  # as it goes on the wire

    assert shape(documented) == shape(built)
    assert frozen(documented) == frozen(built)


def test_the_examples_tell_one_story() -> None:
    """One chat, one agent, one visitor throughout: a reader can follow it."""
    accepted, finished = example("event-chat_accepted"), example("event-chat_finished")
    call, offline = example("event-call_event"), example("event-offline_message")
    agent = accepted["agent"]
    for name in ("event-chat_assigned", "event-chat_updated", "event-call_event"):
        assert example(name)["chat_id"] == accepted["chat_id"]
        assert example(name)["agent"] == agent
    assert finished["chat_id"] == accepted["chat_id"] and finished["agents"] == [agent]
    assert {item.get("agent_id") for item in finished["chat"]["messages"]} == {None, agent["id"]}
    assert example("event-chat_assigned")["assign_to"] == example("reply-chat_accepted")["crm_link"]
    assert call["call"]["status"] == "end" and "record_url" in call["call"]
    without_chat = example("event-call_event-without-chat")
    assert without_chat["chat_id"] == 0 and without_chat["agent"] == example("zero-agent")
    assert without_chat["visitor"]["number"] == offline["visitor"]["number"]


@pytest.mark.django_db
def test_chat_finished_leaves_bot_and_system_notes_out_of_the_log(shop: Shop) -> None:
    sent = _chat_finished(shop)

    assert shop.chat.messages.count() == 6
    assert [item["type"] for item in sent["chat"]["messages"]] == [
        "visitor",
        "agent",
        "visitor",
        "agent",
    ]
    assert sent["chat"]["messages"][2]["message"] == "https://cdn.example.com/u/box.jpg"


# --- decisions where the spec is silent, through the core ---------------------------


@pytest.fixture
def crm_server() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


@pytest.fixture
def crm(shop: Shop, crm_server: Target) -> Target:
    """A local CRM the developer webhook points at."""
    set_developer_webhook(url=crm_server.url("/switchboard"))
    return crm_server


def sent(event: str) -> list[dict[str, Any]]:
    rows = Delivery.objects.filter(purpose=PURPOSE, event=event).order_by("id")
    return [json.loads(row.body) for row in rows]


@pytest.mark.django_db
def test_the_zero_agent_is_sent_where_nobody_has_the_chat(shop: Shop, crm: Target) -> None:
    queued = chats.post_client_message(client=shop.ben, content=text("Hello?")).chat
    chats.update_client_contact(client=shop.ben, contact={"name": "Ben Ortiz"})

    [updated] = sent("chat_updated")

    assert payloads.agent(None) == example("zero-agent")
    assert updated["chat_id"] == queued.pk
    assert updated["agent"] == example("zero-agent")


@pytest.mark.django_db
def test_chat_updated_is_not_sent_for_the_crms_own_change_nor_before_a_chat(
    shop: Shop, crm: Target
) -> None:
    chats.update_client_contact(client=shop.ben, contact={"name": "Ben"})  # no chat yet
    chats.update_client_contact(client=shop.ann, contact={"phone": "+49 30 7654321"}, source="crm")
    assert sent("chat_updated") == []

    chats.update_client_contact(client=shop.ann, contact={"phone": "+49 30 1111111"})
    assert [body["visitor"]["phone"] for body in sent("chat_updated")] == ["+49 30 1111111"]


@pytest.mark.django_db
def test_offline_message_is_named_offline_message(shop: Shop, crm: Target) -> None:
    chats.leave_offline_message(channel=shop.channel, message="Hi", email="ben@example.com")

    [body] = sent("offline_message")

    assert body["event_name"] == "offline_message" == example("event-offline_message")["event_name"]
    assert '"event_name": "offline_message"' in DOC and "offline_messages" in DOC


# --- replies -----------------------------------------------------------------------


def accept_and_answer(shop: Shop, crm: Target, reply: Any) -> tuple[Delivery, Chat]:
    """Ann's queued chat, Alice presses Reply, the CRM answers ``reply``."""
    Chat.objects.filter(pk=shop.chat.pk).update(state=Chat.State.QUEUED)
    shop.chat.agents.clear()
    crm.script(Reply(200, json.dumps(reply), {"Content-Type": "application/json"}))
    chats.accept_chat(chat=Chat.objects.get(pk=shop.chat.pk), agent=shop.alice)
    [item] = Delivery.objects.filter(purpose=PURPOSE, event="chat_accepted")
    return drive(item), Chat.objects.get(pk=shop.chat.pk)


@pytest.mark.django_db
def test_the_chat_accepted_reply_example_fills_the_agents_panel(shop: Shop, crm: Target) -> None:
    reply = example("reply-chat_accepted")

    item, chat = accept_and_answer(shop, crm, reply)

    [request] = crm.received
    assert frozen(json.loads(request.body)) == frozen(example("event-chat_accepted"))
    assert item.status == Delivery.Status.DELIVERED
    assert [{"title": f["title"], "content": f["content"]} for f in chat.custom_data] == reply[
        "custom_data"
    ]
    assert chat.contact_info == reply["contact_info"]
    assert (chat.crm_link, chat.enable_assign) == (reply["crm_link"], True)
    assert chat.crm_page == reply["page"]
    shop.ann.refresh_from_db()  # saved with the client, as if typed
    assert (shop.ann.name, shop.ann.phone, shop.ann.email) == (
        reply["contact_info"]["name"],
        reply["contact_info"]["phone"],
        reply["contact_info"]["email"],
    )
    assert sent("chat_updated") == []  # the CRM is not told of its own change


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "status", "error"),
    [
        ("reply-ok", Delivery.Status.DELIVERED, ""),
        ("reply-failure", Delivery.Status.FAILED, "result: FAILURE"),
        ("reply-error", Delivery.Status.FAILED, "result: customer not found"),
    ],
)
def test_the_reply_examples_are_judged_as_documented(
    shop: Shop, crm: Target, name: str, status: str, error: str
) -> None:
    item, chat = accept_and_answer(shop, crm, example(name))

    assert (item.status, item.last_error, item.attempts) == (status, error, 1)
    assert (chat.custom_data, chat.contact_info, chat.crm_link, chat.enable_assign) == (
        [],
        {},
        "",
        False,
    )  # nothing shown: "ok" has no data, a refusal shows nothing
    assert f"`{error}`" in DOC or not error


@pytest.mark.django_db
def test_a_non_ok_result_shows_nothing_even_with_data(shop: Shop, crm: Target) -> None:
    reply = {**example("reply-chat_accepted"), "result": "FAILURE"}

    item, chat = accept_and_answer(shop, crm, reply)

    assert (item.status, item.last_error) == (Delivery.Status.FAILED, "result: FAILURE")
    assert (chat.custom_data, chat.contact_info, chat.crm_link) == ([], {}, "")


@pytest.mark.django_db
def test_the_safe_url_example(shop: Shop, crm: Target) -> None:
    set_developer_webhook(url=crm.url("/switchboard"), safe_url_domains=["example.com"])
    assert IntegrationSettings.load().safe_url

    _item, chat = accept_and_answer(shop, crm, example("safe-url-reply"))

    shown = {
        "custom_data": [
            {name: value for name, value in field.items() if value} for field in chat.custom_data
        ],
        "crm_link": chat.crm_link,
    }
    assert shown == example("safe-url-shown")


# --- signatures, settings, numbers -------------------------------------------------------


@pytest.mark.django_db
def test_the_requests_carry_the_documented_headers_and_verify(
    shop: Shop, crm_server: Target
) -> None:
    out = StringIO()
    call_command("set_developer_webhook", "--url", crm_server.url("/switchboard"), stdout=out)
    secret = json.loads(out.getvalue())["signing_secret"]

    accept_and_answer(shop, crm_server, example("reply-ok"))

    [request] = crm_server.received
    for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        assert request.headers.get(header), header
        assert f"`{header}`" in DOC
    Webhook(secret).verify(request.body, dict(request.headers))
    assert "(signatures.md)" in DOC and "(delivery.md)" in DOC


@pytest.mark.django_db
def test_the_command_prints_as_documented(db: None) -> None:
    first, again = StringIO(), StringIO()
    documented = example("command-output")
    url = documented["url"]

    call_command("set_developer_webhook", "--url", url, stdout=first)
    call_command(
        "set_developer_webhook",
        "--url",
        url,
        *[f"--event={name}" for name in example("command-output-again")["events"]],
        stdout=again,
    )

    printed = json.loads(first.getvalue())
    assert shape(printed) == shape(documented)
    assert printed["events"] == documented["events"] == list(EVENTS)
    assert printed["signing_secret"].startswith("whsec_")
    assert documented["signing_secret"].startswith("whsec_")
    assert json.loads(again.getvalue()) == example("command-output-again")
    assert "python manage.py set_developer_webhook --url" in DOC


def test_the_numbers_in_the_doc_are_the_policys() -> None:
    policy = get_policy(POLICY)

    def spoken(seconds: float) -> str:
        for unit, size in (("h", 3600), ("min", 60)):
            if seconds >= size and seconds % size == 0:
                return f"{seconds / size:g} {unit}"
        return f"{seconds:g} s"

    waits = ", ".join(spoken(delay) for delay in policy.retry_delays)
    section = " ".join(DOC.split("Retries and order\n", 1)[1].split("\n## ", 1)[0].split())
    last_try = sum(policy.retry_delays) / 3600
    for phrase in (
        f"**{policy.timeout:g} seconds**",
        f"**{policy.max_attempts} tries**",
        waits,
        f"±{policy.jitter:.0%}".replace("%", " %"),
        f"about {last_try:.0f} hours after the first",
    ):
        assert phrase in section, phrase
    assert policy.result_must_be_ok


CHECKED = {
    *BUILDERS,
    "zero-agent",
    "reply-chat_accepted",
    "reply-ok",
    "reply-failure",
    "reply-error",
    "safe-url-reply",
    "safe-url-shown",
    "command-output",
    "command-output-again",
}
