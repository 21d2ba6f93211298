"""The example bot provider (docs/examples/bot_provider.py) as a real process,
talking to the real web process and the real worker; and its demo seeder."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.core.management import call_command

from agents import services as chats
from agents.models import Agent, Chat, Client, Message
from bots import services
from bots.demo import CHANNEL_NAME, DEMO_TOKEN, PROVIDER_NAME, seed_demo_bot
from bots.models import BotAttachment, BotEvent, BotProvider
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from delivery.models import Delivery
from tests.bots.conftest import TOKEN
from tests.channels_api.conftest import path_of
from tests.delivery.target import Target
from tests.web.server import WebServer, free_port
from tests.worker import ROOT, Worker, wait_for

EXAMPLE = ROOT / "docs" / "examples" / "bot_provider.py"


class ExampleBot:
    """docs/examples/bot_provider.py in a process of its own, as ``make run`` starts it."""

    def __init__(
        self, *, webhook_url_prefix: str, token: str, signing_secret: str, port: int = 0
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(settings.VAR_DIR) / f"example-bot-{uuid.uuid4().hex[:8]}.log"
        self.command = [
            sys.executable, str(EXAMPLE), "--port", str(self.port),
            "--webhook-url-prefix", webhook_url_prefix, "--token", token,
            "--signing-secret", signing_secret,
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20) -> ExampleBot:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the example bot did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@dataclass
class Stack:
    """A Chat API channel with the example bot attached, all over real HTTP."""

    web: WebServer
    bot: ExampleBot
    integrator: Target
    endpoint_url: str
    agent: Agent

    def say(self, text: str) -> None:
        answer = requests.post(
            self.endpoint_url,
            json={"sender": {"id": 7, "name": "Ann"}, "message": {"type": "text", "text": text}},
            timeout=10,
        )
        assert (answer.status_code, answer.json()) == (200, {"result": "ok"})

    def a3_texts(self) -> list[str]:
        """What the integrator was sent, in order (the client's screen)."""
        return [json.loads(r.body)["message"].get("text", "") for r in self.integrator.received]

    def wait_for_a3(self, text: str, timeout: float = 30) -> None:
        try:
            wait_for(lambda: text in self.a3_texts(), timeout=timeout)
        except AssertionError:
            raise AssertionError(
                f"{text!r} not among {self.a3_texts()}\n--- bot log:\n{self.bot.log()}"
            ) from None


@pytest.fixture
def stack(celery_worker: Worker, agent: Agent) -> Iterator[Stack]:
    integrator = Target("127.0.0.1").start()
    web = WebServer().start()
    chat_api, _ = create_chat_api_channel(
        name="Shop app", webhook_url=integrator.url("/a3"), agents=[agent]
    )
    port = free_port()
    provider = services.create_bot_provider(
        name="Example", endpoint_url=f"http://127.0.0.1:{port}", display_name="Shop Bot"
    )
    _, secret = services.attach_bot(channel=chat_api.channel, provider=provider, token=TOKEN)
    bot = ExampleBot(
        webhook_url_prefix=f"{web.base_url}/webhooks/{provider.provider_id}/",
        token=TOKEN,
        signing_secret=secret,
        port=port,
    ).start()
    try:
        yield Stack(web, bot, integrator, web.base_url + path_of(chat_api.endpoint_url), agent)
    finally:
        bot.stop()
        web.stop()
        integrator.stop()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_client_talks_to_the_example_bot_until_a_person_takes_over(stack: Stack) -> None:
    # Given a client who says hi: the bot greets with a text and buttons (their fallback).
    stack.say("hi")
    stack.wait_for_a3('Reply "Order status" or "Talk to a person".')
    chat = Chat.objects.get()
    bot_messages = list(chat.messages.filter(author=Message.Author.BOT).order_by("id"))
    assert [(m.type, m.sender_name) for m in bot_messages] == [
        ("text", "Shop Bot"),
        ("buttons", "Shop Bot"),
    ]
    assert bot_messages[1].payload["buttons"] == [
        {"text": "Order status"},
        {"text": "Talk to a person"},
    ]
    assert stack.a3_texts() == [
        "Hello! I am the example bot.",
        'Reply "Order status" or "Talk to a person".',
    ]

    # "help" is answered in Markdown; the Chat API client sees its text fallback.
    stack.say("help")
    stack.wait_for_a3(
        "I can look up an order or find you a person. Write your e-mail address, "
        "or see our help pages: https://example.com/help"
    )
    markdown = chat.messages.filter(author=Message.Author.BOT, type="markdown").get()
    assert "<strong>look up an order</strong>" in markdown.payload["html"]

    # With nobody online, asking for a person comes back: AGENT_UNAVAILABLE,
    # and the bot, which has the chat again, asks for an e-mail address.
    chats.set_agent_status(agent=stack.agent, online=False)
    stack.say("Talk to a person")
    stack.wait_for_a3(
        "Sorry, nobody is free right now. Leave your e-mail address "
        "and someone will get back to you."
    )
    chat.refresh_from_db()
    assert chat.state == Chat.State.BOT
    assert BotEvent.objects.filter(chat=chat, kind="AGENT_UNAVAILABLE").count() == 1
    assert stack.a3_texts()[-2] == "Let me find a person for you."

    # The client leaves an e-mail address: CLIENT_INFO saves it, the bot thanks.
    stack.say("sure, it is ann@example.com")
    stack.wait_for_a3("Thanks! We will write to ann@example.com.")
    assert Client.objects.get().email == "ann@example.com"

    # An agent is online now: asking for a human queues the chat for the agents.
    chats.set_agent_status(agent=stack.agent, online=True)
    stack.say("I want a human")
    wait_for(lambda: Chat.objects.filter(state=Chat.State.QUEUED).exists(), timeout=30)
    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED
    assert "The bot invited an agent." in notes(chat)

    # Every event reached the bot (signed, verified) and every answer the client.
    pending = Delivery.objects.filter(status=Delivery.Status.PENDING)
    wait_for(lambda: not pending.exists(), timeout=30)
    outcomes = set(Delivery.objects.values_list("purpose", "status"))
    assert outcomes == {("bot_event", "delivered"), ("chat_api_message", "delivered")}
    assert TOKEN not in stack.bot.log()


def notes(chat: Chat) -> list[str]:
    return list(chat.messages.filter(author=Message.Author.SYSTEM).values_list("text", flat=True))


# --- bad input: the example answers the error body, and keeps running ------------


@pytest.fixture
def lone_bot() -> Iterator[ExampleBot]:
    bot = ExampleBot(
        webhook_url_prefix="http://127.0.0.1:9/webhooks/p/",
        token=TOKEN,
        signing_secret="",
    ).start()
    yield bot
    bot.stop()


def envelope(**changes: Any) -> dict[str, Any]:
    body = {
        "event": "AGENT_JOINED",
        "id": str(uuid.uuid4()),
        "site_id": "1",
        "client_id": "1",
        "chat_id": "1",
        "agents_online": True,
        "sender": {"id": 1, "name": "", "url": "", "has_contacts": False},
        "channel": {"id": "x", "type": "chat_api"},
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", f"/{TOKEN}", b"{not json", 400, "invalid_request"),
        ("POST", f"/{TOKEN}", b"[1, 2]", 400, "invalid_request"),
        ("POST", f"/{TOKEN}", envelope(chat_id=None), 400, "invalid_request"),
        ("POST", f"/{TOKEN}", envelope(event="CLIENT_MESSAGE"), 400, "invalid_request"),
        ("POST", f"/{TOKEN}", envelope(sender="Ann"), 400, "invalid_request"),
        ("POST", "/another-token", envelope(), 401, "invalid_client"),
        ("GET", f"/{TOKEN}", None, 405, "method_not_allowed"),
        ("POST", f"/{TOKEN}", b"x" * (64 * 1024 + 1), 413, "payload_too_large"),
        ("POST", f"/{TOKEN}", envelope(), 200, None),
        ("POST", f"/{TOKEN}", envelope(event="SOMETHING_NEW"), 200, None),
    ],
    ids=[
        "not-json", "not-an-object", "no-chat-id", "message-missing", "sender-not-object",
        "wrong-token", "get", "too-large", "agent-joined", "unknown-event",
    ],
)  # fmt: skip
def test_the_example_refuses_bad_input_with_the_error_body(
    lone_bot: ExampleBot, method: str, path: str, body: Any, status: int, code: str | None
) -> None:
    data = body if isinstance(body, bytes | None) else json.dumps(body).encode()
    answer = requests.request(
        method,
        lone_bot.url + path,
        data=data,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )

    assert answer.status_code == status
    if code is None:
        assert answer.json() == {"result": "ok"}
    else:
        assert set(answer.json()) == {"error"}
        assert answer.json()["error"]["code"] == code and answer.json()["error"]["message"]
    # And it still serves the next request.
    ok = requests.post(lone_bot.url + f"/{TOKEN}", json=envelope(), timeout=10)
    assert ok.status_code == 200


def test_the_example_checks_the_signature_when_it_has_a_secret() -> None:
    bot = ExampleBot(
        webhook_url_prefix="http://127.0.0.1:9/webhooks/p/",
        token=TOKEN,
        signing_secret="whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHM=",
    ).start()
    try:
        unsigned = requests.post(bot.url + f"/{TOKEN}", json=envelope(), timeout=10)
        forged = requests.post(
            bot.url + f"/{TOKEN}",
            json=envelope(),
            headers={
                "webhook-id": "msg_1",
                "webhook-timestamp": str(int(time.time())),
                "webhook-signature": "v1,AAAA",
            },
            timeout=10,
        )
    finally:
        bot.stop()

    for answer in (unsigned, forged):
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_client"


# --- the demo ---------------------------------------------------------------------


def seed() -> dict[str, Any]:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    [entry] = [c for c in json.loads(out.getvalue())["channels"] if c["kind"] == "bot"]
    return dict(entry)


@pytest.mark.django_db
def test_seed_demo_attaches_the_example_bot_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_BOT_URL", "http://127.0.0.1:8123")

    first, second = seed(), seed()

    provider = BotProvider.objects.get(name=PROVIDER_NAME)
    attachment = BotAttachment.objects.get()
    assert attachment.provider == provider and attachment.token == DEMO_TOKEN
    assert attachment.target_url == f"http://127.0.0.1:8123/{DEMO_TOKEN}"
    assert attachment.channel.name == CHANNEL_NAME
    assert ChatApiChannel.objects.filter(channel__name=CHANNEL_NAME).count() == 1
    assert first["signing_secret"].startswith("whsec_")
    assert {k: v for k, v in first.items() if k != "signing_secret"} == {
        k: v for k, v in second.items() if k != "signing_secret"
    }
    assert first["webhook_url_prefix"] == f"{settings.PUBLIC_URL}/webhooks/{provider.provider_id}/"
    assert (first["token"], first["provider_endpoint"]) == (DEMO_TOKEN, "http://127.0.0.1:8123")
    # A B2 request to the printed prefix and token is the bot's.
    assert (first["public_id"], first["endpoint_url"]) == (
        attachment.channel.public_id,
        ChatApiChannel.objects.get(channel=attachment.channel).endpoint_url,
    )


@pytest.mark.django_db
def test_seed_demo_follows_a_new_example_bot_url(monkeypatch: pytest.MonkeyPatch) -> None:
    seed()
    monkeypatch.setenv("EXAMPLE_BOT_URL", "http://127.0.0.1:8124")

    seed()

    assert BotAttachment.objects.get().endpoint.url == f"http://127.0.0.1:8124/{DEMO_TOKEN}"


@pytest.mark.django_db
def test_without_private_targets_the_bot_demo_is_left_out_and_says_why(
    settings: Any, agent: Agent
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False  # production mode

    [entry] = seed_demo_bot([agent])

    assert entry["kind"] == "bot" and entry["skipped"].startswith("http://127.0.0.1:8010: ")
    assert not BotProvider.objects.exists()
