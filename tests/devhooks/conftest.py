"""A developer webhook pointed at a URL, and the devhook deliveries it wrote."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import time
from typing import Any

import pytest

from agents import services
from agents.models import Agent, CallbackSettings, Channel, Chat, Client, Department
from delivery.models import Delivery
from devhooks.models import IntegrationSettings
from devhooks.webhooks.services import set_developer_webhook

# The Chat API's and the Bot API's fixtures, for the events they cause.
from tests.bots.conftest import bot, integrator_server, provider_server  # noqa: F401
from tests.channels_api.conftest import chat_api, integrator  # noqa: F401
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

FULL_VISITOR_DATA = {
    "geoip": {
        "region_code": "BE",
        "country": "Germany",
        "country_code": "DE",
        "region": "Berlin",
        "city": "Berlin",
        "latitude": "52.52",
        "longitude": "13.40",
        "organization": "Example ISP",
    },
    "utm": "utm_source=newsletter&utm_medium=email",
    "utm_json": {"source": "newsletter", "medium": "email"},
    "ip_addr": "203.0.113.7",
    "user_agent": "Mozilla/5.0 (X11; Linux x86_64)",
    "page": {"url": "https://shop.example.com/cart", "title": "Your cart"},
}


def bodies(event: str | None = None) -> list[dict[str, Any]]:
    """The bodies of the devhook deliveries written, oldest first."""
    rows = Delivery.objects.filter(purpose="devhook").order_by("id")
    if event is not None:
        rows = rows.filter(event=event)
    return [json.loads(row.body) for row in rows]


@pytest.fixture
def webhook(db: None) -> IntegrationSettings:
    config, _secret = set_developer_webhook(url="http://127.0.0.1:9/crm")
    return config


@dataclass
class Scene:
    agent: Agent
    channel: Channel
    client: Client

    def queued_chat(self, message: str = "Hello, my order is late") -> Chat:
        return services.post_client_message(client=self.client, content=text(message)).chat

    def active_chat(self) -> Chat:
        chat = self.queued_chat()
        return services.accept_chat(chat=chat, agent=self.agent)

    def callbacks_always_on(self) -> None:
        CallbackSettings.objects.update_or_create(
            channel=self.channel,
            defaults={
                "enabled": True,
                "working_days": [1, 2, 3, 4, 5, 6, 7],
                "opens_at": time(0, 0),
                "closes_at": time(23, 59, 59, 999999),
            },
        )


@pytest.fixture
def scene(webhook: IntegrationSettings) -> Scene:
    agent = AgentFactory.create(name="Alice Agent", email="alice@example.com", phone="+49 30 1234")
    channel = ChannelFactory.create(name="Shop", agents=[agent])
    client = ClientFactory.create(
        channel=channel,
        name="Vera Visitor",
        email="vera@example.com",
        user_token="crm-user-42",
        visitor_data=FULL_VISITOR_DATA,
    )
    return Scene(agent=agent, channel=channel, client=client)


@pytest.fixture
def bare_scene(webhook: IntegrationSettings) -> Scene:
    """A Chat API client as it first comes: an id, nothing else known."""
    agent = AgentFactory.create()
    channel = ChannelFactory.create(agents=[agent])
    client = ClientFactory.create(channel=channel, name="")
    return Scene(agent=agent, channel=channel, client=client)


@pytest.fixture
def department(db: None) -> Department:
    return Department.objects.create(name="Billing")
