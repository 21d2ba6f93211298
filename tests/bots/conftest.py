"""A bot attached to a Chat API channel, a real provider server, and a
provider's B2 requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client as HttpClient

from agents.models import Agent, Chat
from bots import services
from bots.models import BotAttachment, BotEvent, BotProvider
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from delivery.models import Delivery
from tests.channels_api.conftest import Integrator
from tests.delivery.target import Target, drive

TOKEN = "bot-token-0123456789abcdef"


@pytest.fixture
def provider_server() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


@pytest.fixture
def integrator_server() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


@dataclass
class BotSetup:
    chat_api: ChatApiChannel
    provider: BotProvider
    attachment: BotAttachment
    client: Integrator
    server: Target
    integrator: Target

    @property
    def webhook_path(self) -> str:
        return f"/webhooks/{self.provider.provider_id}/{TOKEN}"

    def chat(self) -> Chat:
        return Chat.objects.select_related("client").get(channel=self.chat_api.channel)

    def b2(self, body: Any, **headers: str) -> Any:
        """POST a B2 event as the provider would."""
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return HttpClient().post(
            self.webhook_path, data, content_type="application/json", headers=headers
        )

    def say(self, text: str, **extra: Any) -> Chat:
        response = self.client.say(text, sender_id="c-1", **extra)
        assert response.status_code == 200, response.content
        return self.chat()

    def bot_says(self, text: str, chat: Chat | None = None) -> Any:
        chat = chat or self.chat()
        return self.b2(
            {
                "event": "BOT_MESSAGE",
                "id": "e-1",
                "client_id": str(chat.client_id),
                "chat_id": str(chat.pk),
                "message": {"type": "TEXT", "text": text, "timestamp": 1700000000},
            }
        )

    def invite_agent(self, chat: Chat | None = None) -> Any:
        chat = chat or self.chat()
        return self.b2(
            {
                "event": "INVITE_AGENT",
                "id": "e-2",
                "client_id": str(chat.client_id),
                "chat_id": str(chat.pk),
            }
        )

    def events(self) -> list[dict[str, Any]]:
        """Send every pending B1 event (in this process, over real HTTP) and
        return the bodies the provider received, in order."""
        for item in Delivery.objects.filter(purpose="bot_event").order_by("id"):
            drive(item)
        return [json.loads(request.body) for request in self.server.received]

    def kinds(self) -> list[str]:
        return [body["event"] for body in self.events()]


@pytest.fixture
def bot(agent: Agent, provider_server: Target, integrator_server: Target) -> BotSetup:
    chat_api, _ = create_chat_api_channel(
        name="App", webhook_url=integrator_server.url("/a3"), agents=[agent]
    )
    provider = services.create_bot_provider(
        name="Acme bots", endpoint_url=provider_server.url("/bot"), display_name="Acme Assistant"
    )
    attachment, _secret = services.attach_bot(
        channel=chat_api.channel, provider=provider, token=TOKEN
    )
    return BotSetup(
        chat_api, provider, attachment, Integrator(chat_api), provider_server, integrator_server
    )


def bot_events(kind: str | None = None) -> list[BotEvent]:
    events = BotEvent.objects.order_by("created")
    return list(events.filter(kind=kind) if kind else events)
