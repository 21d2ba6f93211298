"""Handover with the real worker process: the bot down, slow, or silent past
the reply timeout, and B2's answers over real HTTP from the web process."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from agents.models import Agent, Chat, Message
from bots import services
from bots.models import BotProvider
from channels_api.services import create_chat_api_channel
from tests.bots.conftest import TOKEN
from tests.channels_api.conftest import Integrator
from tests.conftest import WORKER_BOT_REPLY_TIMEOUT
from tests.delivery.target import Reply, Target
from tests.web.server import WebServer
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def provider_server() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


def bot_channel(agent: Agent, provider_server: Target) -> Integrator:
    chat_api, _ = create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/a3", agents=[agent]
    )
    provider = services.create_bot_provider(name="Bot", endpoint_url=provider_server.url("/bot"))
    services.attach_bot(channel=chat_api.channel, provider=provider, token=TOKEN)
    return Integrator(chat_api)


def handed_over(note_start: str) -> Chat | None:
    chat = Chat.objects.get()
    notes = chat.messages.filter(author=Message.Author.SYSTEM).values_list("text", flat=True)
    if chat.state == Chat.State.QUEUED and any(n.startswith(note_start) for n in notes):
        return chat
    return None


@pytest.mark.parametrize(
    ("replies", "why"),
    [
        ((Reply(503),) * 3, "503"),
        ((Reply(200, delay=5),) * 3, "timed out"),
    ],
    ids=["down", "slower-than-3-s"],
)
def test_the_client_is_not_left_waiting_on_a_failing_bot(
    celery_worker: Worker,
    agent: Agent,
    provider_server: Target,
    replies: tuple[Reply, ...],
    why: str,
) -> None:
    provider_server.script(*replies)
    client = bot_channel(agent, provider_server)

    assert client.say("hello?").status_code == 200

    chat = wait_for(lambda: handed_over("The bot did not answer:"), timeout=30)
    assert chat is not None and len(provider_server.received) == 3
    note = chat.messages.get(author=Message.Author.SYSTEM).text
    assert why in note


def test_a_silent_bot_loses_the_chat_after_the_reply_timeout(
    celery_worker: Worker, agent: Agent, provider_server: Target
) -> None:
    client = bot_channel(agent, provider_server)

    assert client.say("hello?").status_code == 200

    provider_server.wait_for(1)
    assert Chat.objects.get().state == Chat.State.BOT
    chat = wait_for(lambda: handed_over("The bot did not answer within"), timeout=30)
    waited = (chat.queued_at - chat.messages.first().created).total_seconds()  # type: ignore[union-attr,operator]
    assert WORKER_BOT_REPLY_TIMEOUT <= waited < WORKER_BOT_REPLY_TIMEOUT + 10
    assert json.loads(provider_server.received[0].body)["event"] == "CLIENT_MESSAGE"


def test_b2_answers_over_real_http(agent: Agent, provider_server: Target) -> None:
    # The web process first: the chat is the bot's for the worker's reply
    # timeout only, and a loaded machine takes seconds to start gunicorn.
    server = WebServer().start()
    client = bot_channel(agent, provider_server)
    assert client.say("hi").status_code == 200
    chat = Chat.objects.get()
    provider = BotProvider.objects.get()
    try:
        url = f"{server.base_url}/webhooks/{provider.provider_id}/{TOKEN}"
        event = {
            "event": "BOT_MESSAGE",
            "id": "1",
            "chat_id": str(chat.pk),
            "client_id": str(chat.client_id),
            "message": {"type": "TEXT", "text": "Hello from the bot"},
        }
        answers = {
            "ok": requests.post(url, json=event, timeout=10),
            "401": requests.post(url + "x", json=event, timeout=10),
            "404": requests.post(url, json={**event, "chat_id": "999999"}, timeout=10),
            "400": requests.post(url, json={**event, "event": "NOPE"}, timeout=10),
            "405": requests.get(url, timeout=10),
        }
    finally:
        server.stop()

    assert (answers["ok"].status_code, answers["ok"].json()) == (200, {"result": "ok"})
    for status, code in (
        ("401", "invalid_client"),
        ("404", "not_found"),
        ("400", "invalid_request"),
        ("405", "method_not_allowed"),
    ):
        assert answers[status].status_code == int(status)
        assert answers[status].json()["error"]["code"] == code
    assert chat.messages.filter(author="bot").get().text == "Hello from the bot"
    assert TOKEN not in server.stdout() + server.stderr()  # the token is never logged
