"""Every event through the real worker to a strict receiver: one that, like
the original platform's typed client libraries, refuses ``null`` where the
spec has an object and checks our signature."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from agents.models import Chat
from delivery.models import Delivery
from devhooks.models import EVENTS
from devhooks.webhooks.services import set_developer_webhook
from tests.delivery.target import Received, Reply, Target
from tests.devhooks.conftest import Scene
from tests.devhooks.webhooks.test_payloads import run_every_event
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Where a typed receiver builds an object, a null or a missing value breaks it.
OBJECTS = {
    "chat_accepted": ["visitor", "session", "session.geoip", "session.utm_json", "page", "agent"],
    "chat_assigned": ["visitor", "session", "session.geoip", "page", "agent"],
    "chat_updated": ["visitor", "session", "session.geoip", "page", "agent"],
    "chat_finished": ["visitor", "session", "session.geoip", "page", "chat"],
    "offline_message": ["visitor", "session", "session.geoip", "page"],
    "call_event": ["visitor", "session", "session.geoip", "page", "agent", "call"],
}


def refusal(body: dict[str, object]) -> str:
    """Why a strict receiver refuses ``body``; "" when it takes it."""
    for path in OBJECTS[str(body["event_name"])]:
        value: object = body
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, dict):
            return f"{path} is not an object"
    if body["event_name"] != "offline_message" and not isinstance(body.get("chat_id"), int):
        return "chat_id is not a number"
    if not isinstance(body.get("widget_id"), str):
        return "widget_id is not a string"
    return ""


class StrictReceiver:
    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        self.taken: list[dict[str, object]] = []

    def __call__(self, request: Received, index: int) -> Reply:
        try:
            self.webhook.verify(request.body, dict(request.headers))
        except WebhookVerificationError:
            return Reply(401, '{"result": "bad signature"}')
        body = json.loads(request.body)
        why = refusal(body)
        if why:
            return Reply(400, json.dumps({"result": why}))
        self.taken.append(body)
        if body["event_name"] == "chat_accepted":
            return Reply(
                200,
                json.dumps(
                    {
                        "result": "ok",
                        "custom_data": [{"title": "Orders", "content": "3 open"}],
                        "crm_link": "https://crm.example.com/card/7",
                        "enable_assign": True,
                    }
                ),
            )
        return Reply(200, '{"result": "ok"}')


@pytest.fixture
def crm() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


def all_final() -> list[Delivery]:
    rows = list(Delivery.objects.filter(purpose="devhook").order_by("id"))
    return rows if rows and all(row.is_final for row in rows) else []


@pytest.mark.parametrize("scene_name", ["scene", "bare_scene"])
def test_a_strict_receiver_takes_every_event(
    celery_worker: Worker, crm: Target, scene_name: str, request: pytest.FixtureRequest
) -> None:
    scene: Scene = request.getfixturevalue(scene_name)
    _config, secret = set_developer_webhook(url=crm.url(), rotate_secret=True)
    assert secret is not None
    receiver = StrictReceiver(secret)
    crm.respond(receiver)

    run_every_event(scene)

    rows = wait_for(all_final, timeout=30)
    assert [(row.event, row.status, row.last_error) for row in rows] == [
        (row.event, Delivery.Status.DELIVERED, "") for row in rows
    ]
    assert {body["event_name"] for body in receiver.taken} == set(EVENTS)


def test_the_agents_panel_fills_when_the_answer_comes(
    celery_worker: Worker, crm: Target, scene: Scene
) -> None:
    _config, secret = set_developer_webhook(url=crm.url(), rotate_secret=True)
    assert secret is not None
    crm.respond(StrictReceiver(secret))

    chat = scene.active_chat()

    filled = wait_for(lambda: Chat.objects.filter(pk=chat.pk, enable_assign=True).first())
    assert filled is not None
    assert filled.custom_data[0]["content"] == "3 open"
    assert filled.crm_link == "https://crm.example.com/card/7"


def test_a_chats_events_arrive_in_order(celery_worker: Worker, crm: Target, scene: Scene) -> None:
    set_developer_webhook(url=crm.url())
    crm.respond(lambda request, index: Reply(200, '{"result": "ok"}', delay=0.3))
    from agents import services

    chat = scene.active_chat()
    services.update_client_contact(client=scene.client, contact={"name": "Vera V."})
    services.finish_chat(chat=chat, agent=scene.agent)

    received = crm.wait_for(3, timeout=20)
    assert [json.loads(r.body)["event_name"] for r in received] == [
        "chat_accepted",
        "chat_updated",
        "chat_finished",
    ]
