"""Scenario 1, inbound: A2 user messages beside A1 status reads, and the SQL
statements of one inbound request.

The service runs as production does (bench/service.py: the Procfile's web,
worker and delivery processes). On one server, in one run, CLIENTS
concurrent integrators (threads, each its own keep-alive connection) send
A1 status reads, then A2 user messages to a channel with an agent online
(most from known clients, as a live integration's are): A2's rate beside
A1's, and A2's p99. The per-channel rate limit keeps its default.

Then, with the service stopped, the SQL statements of one request each are
counted in this process through the query log (Django's test client and
``CaptureQueriesContext``, savepoints included): A2 for a known and a new
client, B2 for a chat's first and next bot message, the widget's send for a
known and a new visitor.

    .venv/bin/python -m bench --only inbound [--quick]
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.chat_api_inbound import hammer
from bench.run import row, say
from bench.service import Service, backend, scenario_env

NAME = "1 inbound"
CLIENTS = 50  # concurrent integrators
KNOWN = 200  # clients the A2 messages come from


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile: a value some request took."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-int(fraction * 100) * len(ordered) // 100) - 1))]


def setup() -> dict[str, Any]:
    """Migrate; an agent online; a Chat API channel (A1, A2), a channel with a
    bot and chats with it (B2), a widget (its send). Paths and bodies."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents import services as chats
    from agents.models import Agent
    from bots.services import attach_bot, create_bot_provider
    from channels_api.services import create_chat_api_channel
    from devhooks.widget.services import create_widget_channel

    agent = Agent.objects.create_user("bench-inbound@example.com", "x", name="Bench")
    chats.set_agent_status(agent=agent, online=True)
    plain, _ = create_chat_api_channel(
        name="Bench", webhook_url="http://127.0.0.1:9/a3", agents=[agent]
    )
    with_bot, _ = create_chat_api_channel(name="With bot", webhook_url="http://127.0.0.1:9/a3")
    provider = create_bot_provider(name="bench", endpoint_url="http://127.0.0.1:9/bot")
    attach_bot(channel=with_bot.channel, provider=provider, token="bench-bot-token")
    widget = create_widget_channel(name="Bench site", agent_emails=[agent.email])
    a2 = "/" + plain.endpoint_url.split("/", 3)[3]
    return {
        "a1": f"{a2}/status",
        "a2": a2,
        "b2": f"/webhooks/{provider.provider_id}/bench-bot-token",
        "bot_channel": with_bot.channel,
        "widget": f"/widget/{widget.widget_id}/v1/message",
    }


def a2_body(i: int) -> dict[str, Any]:
    return {"sender": {"id": f"user-{i % KNOWN}"}, "message": {"type": "text", "text": f"m{i}"}}


def b2_body(chat_id: int, text: str) -> dict[str, Any]:
    return {"event": "BOT_MESSAGE", "chat_id": str(chat_id),
            "message": {"type": "TEXT", "text": text}}  # fmt: skip


def statements(paths: dict[str, Any]) -> dict[str, int]:
    """SQL statements of one request of each kind, after one of its kind warmed up."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from agents import services as chats
    from agents.content import Content

    http = Client(HTTP_HOST="127.0.0.1")  # DEBUG is off: ALLOWED_HOSTS holds
    bot_chats = []  # made now: no worker runs to find their bot unreachable
    for i in range(2):
        client = chats.get_or_create_client(channel=paths["bot_channel"], external_id=f"b{i}")
        hello = chats.post_client_message(client=client, content=Content("text", "hi", {}))
        bot_chats.append(hello.chat_id)

    def count(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with CaptureQueriesContext(connection) as queries:
            answer = http.post(path, body, content_type="application/json")
        assert answer.status_code == 200, answer.content
        return len(queries), answer.json()

    def a2(sender: str) -> dict[str, Any]:
        return {"sender": {"id": sender}, "message": {"type": "text", "text": "hello"}}

    count(paths["a2"], a2("warm-up"))
    first, second = bot_chats
    count(paths["b2"], b2_body(first, "warm-up"))
    count(paths["b2"], b2_body(first, "warm-up 2"))
    _, visitor = count(paths["widget"], {"text": "warm-up"})
    counts = {
        "A2, known client": count(paths["a2"], a2("warm-up"))[0],
        "A2, new client": count(paths["a2"], a2("someone-new"))[0],
        "B2, first in a chat": count(paths["b2"], b2_body(second, "first"))[0],
        "B2, next in a chat": count(paths["b2"], b2_body(second, "next"))[0],
        "widget send, known visitor": count(
            paths["widget"], {"token": visitor["token"], "text": "again"}
        )[0],
        "widget send, new visitor": count(paths["widget"], {"text": "hello"})[0],
    }
    return counts


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    reads = 300 if quick else 1000
    messages = 300 if quick else 1000
    with tempfile.TemporaryDirectory() as var:
        env = scenario_env("inbound", var)
        import os

        os.environ.update(env)
        say("migrating and seeding")
        paths = setup()
        say("starting the service")
        with Service(env, Path(var) / "logs", ("web", "worker", "delivery")) as service:
            say("A1 and A2 under load")
            hammer(service.base, paths["a1"], None, 100, CLIENTS)  # warm up
            hammer(service.base, paths["a2"], a2_body, KNOWN, CLIENTS)  # the known clients
            codes1, times1, took1 = hammer(service.base, paths["a1"], None, reads, CLIENTS)
            codes2, times2, took2 = hammer(service.base, paths["a2"], a2_body, messages, CLIENTS)
        say("counting SQL statements")
        counts = statements(paths)
    a1_rate = codes1.count(200) / took1
    a2_rate = codes2.count(200) / took2
    shape = f"{CLIENTS} clients, {backend(env)}"
    rows = [
        row(NAME, f"A1 status reads ({shape})", a1_rate, "req/s"),
        row(NAME, "A2 user messages", a2_rate, "msg/s", reference=a1_rate),
        row(NAME, "A2 / A1", a2_rate / a1_rate, "x", ">= 0.6"),
        row(
            NAME,
            "A2 p50",
            statistics.median(times2) * 1000,
            "ms",
            reference=statistics.median(times1) * 1000,
        ),
        row(
            NAME,
            "A2 p99",
            percentile(times2, 0.99) * 1000,
            "ms",
            "<= 150",
            reference=percentile(times1, 0.99) * 1000,
        ),
        row(NAME, "A2 answers not 200", len(codes2) - codes2.count(200), "", "== 0"),
    ]
    for figure, counted in counts.items():
        limit = 12 if ("new" in figure or "first" in figure) else 8
        rows.append(row(NAME, f"SQL statements, {figure}", counted, "", f"<= {limit}"))
    return rows


if __name__ == "__main__":
    from bench.run import table

    print(table(scenario()))
