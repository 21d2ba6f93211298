from __future__ import annotations

from typing import Any

from django.conf import settings

from agents import services as chats
from agents.content import Content
from agents.models import Agent, Channel, Chat, ClientAddress
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel

DEMO_NAME = "Demo Chat API"


def _waiting_customer(chat_api: ChatApiChannel) -> None:
    """A customer waiting in the queue, as if the integrator had posted A2,
    unless one waits already (each ``make run`` starts with one waiting)."""
    channel = chat_api.channel
    if Chat.objects.filter(channel=channel, state=Chat.State.QUEUED).exists():
        return
    number = 1
    # The first demo customer without an open chat (one may be talking to Alice).
    while Chat.objects.filter(
        client__channel=channel,
        client__external_id=f"demo-customer-{number}",
        state__in=Chat.OPEN_STATES,
    ).exists():
        number += 1
    client = chats.get_or_create_client(
        channel=channel,
        external_id=f"demo-customer-{number}",
        contact={"name": "Demo Customer", "email": f"customer{number}@example.com"},
        address_source=ClientAddress.Source.INTEGRATOR,  # as its integrator would send it
    )
    chats.post_client_message(
        client=client, content=Content("text", f"Hi! Where is my order #{1000 + number}?", {})
    )


def _demo_chat_api(name: str, agents: list[Agent]) -> tuple[ChatApiChannel, dict[str, Any]]:
    """The Chat API channel ``name`` whose integrator is the built-in demo
    receiver, made on first need, and its URLs."""
    chat_api = ChatApiChannel.objects.filter(channel__name=name).first()
    secret = None
    if chat_api is None:
        chat_api, secret = create_chat_api_channel(
            name=name, webhook_url=f"{settings.PUBLIC_URL}/demo/integrator", agents=agents
        )
    return chat_api, {
        "public_id": chat_api.channel.public_id,
        "endpoint_url": chat_api.endpoint_url,
        "status_url": chat_api.status_url,
        "signing_secret": secret or "(shown when first created; rotate it in the admin)",
    }


def demo_channel(name: str, agents: list[Agent]) -> tuple[Channel, dict[str, Any]]:
    """``agents.demo``'s maker of ``chat_api`` demo channels (the bot demo's)."""
    chat_api, urls = _demo_chat_api(name, agents)
    return chat_api.channel, urls


def seed_demo_channel(agents: list[Agent]) -> list[dict[str, Any]]:
    """One Chat API channel whose integrator is the built-in demo receiver."""
    chat_api, urls = _demo_chat_api(DEMO_NAME, agents)
    _waiting_customer(chat_api)
    return [{"kind": "chat_api", "name": DEMO_NAME, **urls}]
