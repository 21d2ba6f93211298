"""B2 throughput and cost: bot messages a second, and queries per request.

Runs the web process as production does (gunicorn with uvicorn workers, 2
workers) against the configured database (DATABASE_URL, else a fresh SQLite
file) and posts, over real HTTP from several client threads, side by side:

- B2 `BOT_MESSAGE`s to chats that are with a bot on a Chat API channel (each
  stored, and handed to delivery as an A3 to the integrator);
- A2 user messages to a Chat API channel without a bot (stored, nothing sent).

Both per-channel and per-provider rate limits are off, so the figures are
what the service itself can take. Also counts the SQL queries of one B2
request and one A2 request in-process (Django's test client), since a
query per request more is what would slow B2 down as chats grow.

    .venv/bin/python bench/bot_api_inbound.py [--messages 2000] [--clients 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
CHATS = 200
TOKEN = "bench-bot-token"

sys.path.insert(0, str(ROOT))
from bench.chat_api_inbound import manage, post_many  # noqa: E402


def seed() -> dict[str, Any]:
    """A channel with a bot and CHATS chats with it, and one without a bot."""
    import django

    django.setup()
    from agents import services as chats
    from agents.content import Content
    from bots.services import attach_bot, create_bot_provider
    from channels_api.services import create_chat_api_channel

    with_bot = create_chat_api_channel(name="With bot", webhook_url="http://127.0.0.1:9/a3")[0]
    plain = create_chat_api_channel(name="Plain", webhook_url="http://127.0.0.1:9/a3")[0]
    provider = create_bot_provider(name="bench", endpoint_url="http://127.0.0.1:9/bot")
    attach_bot(channel=with_bot.channel, provider=provider, token=TOKEN)
    chat_ids = []
    for i in range(CHATS):
        client = chats.get_or_create_client(channel=with_bot.channel, external_id=f"u{i}")
        message = chats.post_client_message(client=client, content=Content("text", "hi", {}))
        chat_ids.append(message.chat_id)
    return {
        "b2_path": f"/webhooks/{provider.provider_id}/{TOKEN}",
        "a2_path": "/" + plain.endpoint_url.split("/", 3)[3],
        "chat_ids": chat_ids,
    }


def b2_body(chat_id: int, i: int) -> dict[str, Any]:
    return {"event": "BOT_MESSAGE", "chat_id": str(chat_id),
            "message": {"type": "TEXT", "text": f"answer {i}"}}  # fmt: skip


def a2_body(i: int) -> dict[str, Any]:
    return {"sender": {"id": f"user-{i % CHATS}"}, "message": {"type": "text", "text": f"m{i}"}}


def count_queries(seeded: dict[str, Any]) -> dict[str, int]:
    """SQL queries of one B2 and one A2 request, after a first of each warmed up."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    http = Client()
    counts = {}
    for name, path, body in (
        ("B2", seeded["b2_path"], lambda i: b2_body(seeded["chat_ids"][i], i)),
        ("A2", seeded["a2_path"], a2_body),
    ):
        http.post(path, body(0), content_type="application/json")
        with CaptureQueriesContext(connection) as queries:
            answer = http.post(path, body(1), content_type="application/json")
        assert answer.status_code == 200, answer.content
        counts[name] = len(queries)
    return counts


def run(
    env: dict[str, str], path: str, body: Callable[[int], dict[str, Any]], messages: int,
    clients: int,
) -> dict[str, float]:  # fmt: skip
    codes, elapsed = post_many(env, path, body, messages, clients)
    ok = codes.count(200)
    return {"ok": ok, "other": len(codes) - ok, "per_second": ok / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as var:
        env = {
            **os.environ,
            "VAR_DIR": var,
            "DEBUG": "true",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "BOT_API_RATE_LIMIT_PER_SECOND": "0",
            "CHAT_API_RATE_LIMIT_PER_SECOND": "0",
            "LOG_LEVEL": "WARNING",
        }
        manage(env, "migrate", "--noinput")
        os.environ.update(env)
        seeded = seed()
        queries = count_queries(seeded)
        database = "PostgreSQL" if "DATABASE_URL" in os.environ else "SQLite"
        print(f"B2 beside A2, {args.messages} messages, {args.clients} clients, {database}")
        ids = seeded["chat_ids"]
        b2 = run(env, seeded["b2_path"], lambda i: b2_body(ids[i % len(ids)], i),
                 args.messages, args.clients)  # fmt: skip
        a2 = run(env, seeded["a2_path"], a2_body, args.messages, args.clients)
    for name, result in (("B2 BOT_MESSAGE", b2), ("A2 user message", a2)):
        print(f"  {name:16} {result['per_second']:8.0f} req/s  ok={result['ok']:.0f} "
              f"other={result['other']:.0f}  queries/request={queries[name[:2]]}")  # fmt: skip
    print(f"  ratio B2/A2: {b2['per_second'] / a2['per_second']:.2f}")


if __name__ == "__main__":
    main()
