"""The CRM's replies: what counts as delivered, and what the agent is shown
of a chat_accepted answer (through a real local HTTP server)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps as django_apps

from agents.models import Chat
from delivery.models import Delivery, DeliveryAttempt
from devhooks.models import WebhookDelivery
from devhooks.webhooks.services import set_developer_webhook
from tests.delivery.target import Reply, Target, drive
from tests.devhooks.conftest import Scene

ANSWER = {
    "result": "ok",
    "custom_data": [
        {"title": "Orders", "content": "<b>3</b> open, see https://crm.example.com/o/3"},
        {"title": "Elsewhere", "content": "https://phish.example.net/login"},
        "not an object",
        {"title": 7, "content": None},
    ],
    "contact_info": {"name": "Carla CRM", "phone": "+49 30 999", "email": "carla@example.com"},
    "enable_assign": True,
    "crm_link": "https://crm.example.com/card/7",
    "page": {"url": "https://crm.example.com/p", "title": "Card 7"},
}


@pytest.fixture
def crm() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


def accept_and_answer(
    scene: Scene, crm: Target, reply: Reply, **config: Any
) -> tuple[Chat, Delivery]:
    set_developer_webhook(url=crm.url(), **config)
    crm.script(reply)
    chat = scene.active_chat()
    delivery = drive(Delivery.objects.get(purpose="devhook", event="chat_accepted"))
    chat.refresh_from_db()
    return chat, delivery


def answer(body: Any) -> Reply:
    return Reply(200, json.dumps(body), {"Content-Type": "application/json"})


@pytest.mark.parametrize("result", ["ok", "OK", "Ok"])
def test_an_ok_answer_fills_the_panel(scene: Scene, crm: Target, result: str) -> None:
    chat, delivery = accept_and_answer(scene, crm, answer({**ANSWER, "result": result}))

    assert delivery.status == Delivery.Status.DELIVERED
    assert chat.custom_data == [
        {
            "title": "Orders",
            "content": "<b>3</b> open, see https://crm.example.com/o/3",
            "key": "",
            "link": "",
        },
        {"title": "Elsewhere", "content": "https://phish.example.net/login", "key": "", "link": ""},
    ]
    assert chat.crm_link == "https://crm.example.com/card/7" and chat.enable_assign
    assert chat.crm_page == {"url": "https://crm.example.com/p", "title": "Card 7"}
    assert chat.contact_info == ANSWER["contact_info"]
    scene.client.refresh_from_db()
    assert (scene.client.name, scene.client.phone) == ("Carla CRM", "+49 30 999")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"result": "FAILURE"}, "result: FAILURE"),
        ({"result": "no such visitor", "custom_data": [{"title": "x"}]}, "result: no such visitor"),
        ({"result": False}, "result: false"),
    ],
)
def test_a_result_that_is_not_ok_fails_the_attempt_and_shows_nothing(
    scene: Scene, crm: Target, body: dict[str, Any], error: str
) -> None:
    chat, delivery = accept_and_answer(scene, crm, answer(body))

    assert delivery.status == Delivery.Status.FAILED and delivery.last_error == error
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert attempt.status_code == 200 and attempt.error == error
    assert chat.custom_data == [] and chat.crm_link == "" and not chat.enable_assign


@pytest.mark.parametrize("body", ["", "thanks", "[]", '{"custom_data": [{"title": "t"}]}'])
def test_an_answer_without_a_result_is_delivered_but_shows_nothing(
    scene: Scene, crm: Target, body: str
) -> None:
    chat, delivery = accept_and_answer(scene, crm, Reply(200, body))

    assert delivery.status == Delivery.Status.DELIVERED
    assert chat.custom_data == [] and chat.contact_info == {}


def test_a_crm_that_is_down_is_tried_again(scene: Scene, crm: Target) -> None:
    crm.script(Reply(503), answer(ANSWER))
    set_developer_webhook(url=crm.url())
    chat = scene.active_chat()
    delivery = drive(Delivery.objects.get(purpose="devhook", event="chat_accepted"))

    assert delivery.status == Delivery.Status.DELIVERED and delivery.attempts == 2
    chat.refresh_from_db()
    assert chat.crm_link == ANSWER["crm_link"]


def test_safe_url_drops_links_to_other_domains(scene: Scene, crm: Target) -> None:
    foreign = {
        **ANSWER,
        "custom_data": [
            {
                "title": "Orders",
                "content": "see https://crm.example.com/o/3 or www.evil.example.org/x",
            },
            {"title": "Phish", "content": "log in at https://phish.example.net/login now"},
            {"title": "Link", "content": "card", "link": "https://evil.example.net/card"},
            {"title": "Own", "content": "card", "link": "https://sub.example.com/card"},
        ],
        "crm_link": "https://example.com.evil.net/card/7",
        "page": {"url": "javascript:alert(1)", "title": "t"},
    }
    chat, _ = accept_and_answer(scene, crm, answer(foreign), safe_url_domains=["example.com"])

    shown = json.dumps(chat.custom_data)
    assert "crm.example.com/o/3" in shown and "sub.example.com/card" in shown
    assert "evil" not in shown and "phish" not in shown
    assert chat.custom_data[1]["content"] == "log in at  now"
    assert chat.crm_link == "" and chat.crm_page["url"] == ""


def test_without_safe_url_only_http_links_are_kept(scene: Scene, crm: Target) -> None:
    body = {**ANSWER, "crm_link": "javascript:alert(1)", "page": {"url": "data:text/html,x"}}
    chat, _ = accept_and_answer(scene, crm, answer(body))
    assert chat.crm_link == "" and chat.crm_page == {"url": "", "title": ""}


def test_an_answer_to_other_events_is_only_judged(scene: Scene, crm: Target) -> None:
    set_developer_webhook(url=crm.url())
    crm.script(answer({"result": "ok", "custom_data": [{"title": "ignored"}]}))
    chat = scene.active_chat()
    Delivery.objects.filter(event="chat_accepted").delete()
    from agents import services

    services.finish_chat(chat=chat, agent=scene.agent)
    delivery = drive(Delivery.objects.get(purpose="devhook", event="chat_finished"))

    assert delivery.status == Delivery.Status.DELIVERED
    chat.refresh_from_db()
    assert chat.custom_data == []


@pytest.mark.parametrize(
    "link",
    [
        "https://evil.net\\@example.com/x",
        "https://evil.net\\.example.com/",
        'https://example.com/"onmouseover="x',
        "https://example.com/a b",
    ],
)
def test_safe_url_refuses_links_a_browser_reads_otherwise(scene: Scene, link: str) -> None:
    config, _ = set_developer_webhook(
        url="http://127.0.0.1:9/crm", safe_url_domains=["example.com"]
    )
    assert not config.link_allowed(link)
    assert config.link_allowed("https://crm.example.com/card/7?a=1#b")


def test_an_overlong_contact_detail_is_cut_not_fatal(scene: Scene, crm: Target) -> None:
    long_phone = "+49 " + "1" * 200
    body = {**ANSWER, "contact_info": {"name": "N" * 300, "phone": long_phone}}
    chat, delivery = accept_and_answer(scene, crm, answer(body))

    assert delivery.status == Delivery.Status.DELIVERED
    assert chat.crm_link == ANSWER["crm_link"]  # the rest of the answer is shown
    scene.client.refresh_from_db()
    assert scene.client.phone == long_phone[:100] and len(scene.client.name) == 255


def test_safe_url_drops_links_from_contact_details_and_glued_links(
    scene: Scene, crm: Target
) -> None:
    body = {
        **ANSWER,
        "contact_info": {"name": "Open https://phish.net/x now", "email": "c@example.com"},
        "custom_data": [
            {"title": "Glued", "content": "a_https://phish.net/login b1www.evil.net c"},
        ],
    }
    chat, _ = accept_and_answer(scene, crm, answer(body), safe_url_domains=["example.com"])

    assert "phish" not in json.dumps(chat.contact_info) and "evil" not in json.dumps(
        chat.custom_data
    )
    assert chat.custom_data[0]["content"] == "a_ b1 c"
    scene.client.refresh_from_db()
    assert scene.client.name == "Open  now"


def test_a_late_answer_leaves_a_finished_chat_alone(scene: Scene, crm: Target) -> None:
    from agents import services

    set_developer_webhook(url=crm.url())
    crm.script(answer(ANSWER))
    chat = scene.active_chat()
    services.finish_chat(chat=chat, agent=scene.agent)
    delivery = drive(Delivery.objects.get(purpose="devhook", event="chat_accepted"))

    assert delivery.status == Delivery.Status.DELIVERED
    chat.refresh_from_db()
    assert chat.custom_data == [] and chat.crm_link == ""


def test_a_refused_assignment_can_be_made_again(scene: Scene, crm: Target) -> None:
    from agents import services
    from agents.models import Message

    chat, _ = accept_and_answer(scene, crm, answer(ANSWER))
    crm.script(answer({"result": "FAILURE"}))
    services.request_crm_assign(chat=chat, agent=scene.agent)
    assigned = drive(Delivery.objects.get(purpose="devhook", event="chat_assigned"))

    assert assigned.status == Delivery.Status.FAILED
    chat.refresh_from_db()
    assert chat.crm_assigned_at is None
    note = chat.messages.filter(author=Message.Author.SYSTEM).last()
    assert note is not None and note.text.endswith("result: FAILURE")
    services.request_crm_assign(chat=chat, agent=scene.agent)  # pressed again: asked again
    assert Delivery.objects.filter(event="chat_assigned").count() == 2


def test_the_answer_reaches_its_chat_by_the_link_row_not_by_the_subject(
    scene: Scene, crm: Target
) -> None:
    """A chat's delivery is linked to its chat (WebhookDelivery), as A3's and
    B1's are: the subject is a label for the log, read by nothing."""
    set_developer_webhook(url=crm.url())
    crm.script(answer(ANSWER))
    chat = scene.active_chat()
    item = Delivery.objects.get(purpose="devhook", event="chat_accepted")
    assert WebhookDelivery.objects.get(delivery=item).chat_id == chat.pk
    Delivery.objects.filter(pk=item.pk).update(subject="relabelled")

    drive(Delivery.objects.get(pk=item.pk))

    chat.refresh_from_db()
    assert chat.crm_link == "https://crm.example.com/card/7"


def test_the_migration_links_the_deliveries_made_before_the_link_rows(
    scene: Scene, crm: Target
) -> None:
    set_developer_webhook(url=crm.url())
    chat = scene.active_chat()
    item = Delivery.objects.get(purpose="devhook", event="chat_accepted")
    WebhookDelivery.objects.all().delete()
    Delivery.objects.filter(pk=item.pk).update(subject=f"chat:{chat.pk}")
    gone = Delivery.objects.create(
        endpoint=item.endpoint, purpose="devhook", event="chat_finished", body="{}",
        policy=item.policy, subject="chat:999999",
    )  # fmt: skip
    migration = importlib.import_module("devhooks.migrations.0005_webhook_delivery")

    migration.link_existing_deliveries(django_apps, None)

    assert list(WebhookDelivery.objects.values_list("delivery_id", "chat_id")) == [
        (item.pk, chat.pk)
    ]
    assert not WebhookDelivery.objects.filter(delivery=gone).exists()
