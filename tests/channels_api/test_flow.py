"""The spec's Chat Channel flow, end to end: a real worker process delivers to
a real integrator server, the agent works through the agent REST API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from agents.models import Agent
from channels_api.services import create_chat_api_channel
from tests.channels_api.conftest import Integrator
from tests.delivery.target import Reply, Target
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


def last_message(api: APIClient, chat_id: int) -> dict[str, Any]:
    return api.get(f"/api/agent/v1/chats/{chat_id}/messages").json()[-1]


def test_chat_channel_flow(
    celery_worker: Worker, target: Target, api: APIClient, agent: Agent
) -> None:
    chat_api, _ = create_chat_api_channel(name="App", webhook_url=target.url("/a3"), agents=[agent])
    integrator = Integrator(chat_api)
    api.post("/api/agent/v1/status", {"status": "offline"})

    # The integrator asks for the status: nobody is there.
    assert integrator.status().content == b"0"
    # The agent goes online; the integrator shows its chat window.
    api.post("/api/agent/v1/status", {"status": "online"})
    assert integrator.status().content == b"1"

    # A user writes; the agent sees the chat in the queue and its message.
    assert integrator.say("I need help", sender_id=501, name="Ann").status_code == 200
    [queued] = api.get("/api/agent/v1/chats?state=queued").json()["results"]
    assert queued["client"]["name"] == "Ann"
    chat_id = queued["id"]
    assert last_message(api, chat_id)["text"] == "I need help"

    # The agent presses Reply and answers; the integrator receives it.
    assert api.post(f"/api/agent/v1/chats/{chat_id}/accept").status_code == 200
    reply = api.post(f"/api/agent/v1/chats/{chat_id}/messages", {"type": "text", "text": "Hi Ann"})
    assert reply.status_code == 201 and reply.json()["delivery"]["status"] == "pending"
    [request] = target.wait_for(1)
    assert json.loads(request.body) == {
        "sender": {"name": agent.name},
        "recipient": {"id": 501},
        "message": {"type": "text", "id": str(reply.json()["id"]), "text": "Hi Ann"},
    }
    wait_for(lambda: last_message(api, chat_id)["delivery"]["status"] == "delivered")

    # The integrator's server fails three times: the agent sees why, after
    # three sends 3 s apart (0.6 s in the suite, tests/settings.py).
    target.script(Reply(500, "down"), Reply(500, "down"), Reply(500, "down"))
    api.post(f"/api/agent/v1/chats/{chat_id}/messages", {"type": "text", "text": "Still there?"})
    target.wait_for(4, timeout=30)
    failed = wait_for(
        lambda: (m := last_message(api, chat_id))["delivery"]["status"] == "failed" and m,
        timeout=30,
    )
    assert "500" in failed["delivery"]["error"]
    assert len(target.received) == 4  # three sends, no more
    spacing = 3 * settings.DELIVERY_RETRY_SCALE
    assert all(spacing - 0.5 <= gap <= spacing + 2 for gap in target.gaps()[1:]), target.gaps()

    # The agent retries; the server is back.
    retry = api.post(f"/api/agent/v1/chats/{chat_id}/messages/{failed['id']}/retry")
    assert retry.status_code == 200 and retry.json()["delivery"]["status"] == "pending"
    target.wait_for(5)
    wait_for(lambda: last_message(api, chat_id)["delivery"]["status"] == "delivered")
    assert json.loads(target.received[-1].body)["message"]["text"] == "Still there?"
