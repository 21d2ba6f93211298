"""The rows a fault test's web process serves, written into that process's
own database (``python -m tests.reliability.seed`` under its
``DATABASE_URL``); prints the credentials and paths as JSON.
``python -m tests.reliability.seed fault-run TARGET_URL CHATS BOT_CHATS``
seeds the fault run's instead (``fault_run``).

The suite's own database is not the one the fault tests stop, so these rows
are made by a process of their own rather than by the test's fixtures.
"""

from __future__ import annotations

import json
import os
import sys

import django


def seed() -> dict[str, object]:
    from agents import services
    from agents.content import Content
    from agents.models import Agent
    from agents.tokens import issue_token
    from bots.services import attach_bot, create_bot_provider
    from channels_api.services import create_chat_api_channel
    from devhooks.widget.services import create_widget_channel
    from devhooks.widget.tokens import issue_visitor_token

    agent = Agent.objects.create_user(
        email="alice@example.com", password="x-unused-x", name="Alice", is_online=True
    )
    chat_api, _ = create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/a3", agents=[agent]
    )
    bot_channel, _ = create_chat_api_channel(
        name="Bot app", webhook_url="http://127.0.0.1:9/a3", agents=[agent]
    )
    provider = create_bot_provider(name="Bots", endpoint_url="http://127.0.0.1:9/bot")
    attach_bot(channel=bot_channel.channel, provider=provider, token="bot-token-0123456789")
    widget = create_widget_channel(name="Site", agent_emails=[agent.email])
    client = services.get_or_create_client(channel=widget.channel, external_id="v-1")
    chat = services.post_client_message(client=client, content=Content("text", "Hi", {})).chat
    services.accept_chat(chat=chat, agent=agent)
    return {
        "a1": chat_api.status_url.split("://", 1)[1].split("/", 1)[1],
        "a2": chat_api.endpoint_url.split("://", 1)[1].split("/", 1)[1],
        "b2": f"webhooks/{provider.provider_id}/bot-token-0123456789",
        "widget": widget.widget_id,
        "visitor_token": issue_visitor_token(client=client),
        "agent_token": issue_token(agent=agent),
        "chat": chat.pk,
    }


def fault_run(target_url: str, chats: int, bot_chats: int) -> dict[str, object]:
    """The fault run's (tests/reliability/fault_run.py): an inbound channel for
    A2 (no agent: its chats wait in the queue); ``chats`` chats accepted by an
    online agent on a channel whose A3 goes to ``target_url`` + ``/a3``; and
    ``bot_chats`` chats with a bot on a channel whose A3 goes to ``/bot-a3``
    (the bot's own events to ``/bot``)."""
    from agents import services
    from agents.content import Content
    from agents.models import Agent
    from agents.tokens import issue_token
    from bots.services import attach_bot, create_bot_provider
    from channels_api.services import create_chat_api_channel

    def path(url: str) -> str:
        return "/" + url.split("://", 1)[1].split("/", 1)[1]

    agent = Agent.objects.create_user(
        email="alice@example.com", password="x-unused-x", name="Alice", is_online=True
    )
    inbound, _ = create_chat_api_channel(name="Inbound", webhook_url=f"{target_url}/inbound")
    replied, _ = create_chat_api_channel(name="App", webhook_url=f"{target_url}/a3", agents=[agent])
    accepted = []
    for n in range(chats):
        client = services.get_or_create_client(channel=replied.channel, external_id=f"c-{n}")
        hello = services.post_client_message(client=client, content=Content("text", "hi", {}))
        accepted.append(services.accept_chat(chat=hello.chat, agent=agent).pk)
    with_bot, _ = create_chat_api_channel(name="Bot app", webhook_url=f"{target_url}/bot-a3")
    provider = create_bot_provider(name="Bots", endpoint_url=f"{target_url}/bot")
    attach_bot(channel=with_bot.channel, provider=provider, token="bot-token-0123456789")
    with_bots = []
    for n in range(bot_chats):
        client = services.get_or_create_client(channel=with_bot.channel, external_id=f"b-{n}")
        hello = services.post_client_message(client=client, content=Content("text", "hi", {}))
        with_bots.append(hello.chat_id)
    return {
        "a2": path(inbound.endpoint_url),
        "b2": f"/webhooks/{provider.provider_id}/bot-token-0123456789",
        "agent_token": issue_token(agent=agent),
        "chats": accepted,
        "bot_chats": with_bots,
    }


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    if sys.argv[1:2] == ["fault-run"]:
        print(json.dumps(fault_run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        print(json.dumps(seed()))
