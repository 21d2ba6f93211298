"""Scenario 2, reply latency: an agent's reply over the agent API, until the
integrator's HTTP receiver has the A3 request, beside a direct POST from this
process to the same receiver.

The service runs as production does (bench/service.py: the Procfile's web,
worker and delivery processes). The receiver is an HTTP/1.1 server with
keep-alive in this process, answering 200 at once and noting when each
request's head arrived (the same clock as the sender's). Replies go one at a
time, round-robin over CHATS active chats, each after the one before
arrived; beside each, a direct POST of the same size. p50 and p99 of both.

    .venv/bin/python -m bench --only reply_latency [--quick]
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from bench.inbound import percentile
from bench.run import row, say
from bench.service import Service, backend, scenario_env

NAME = "2 reply latency"
CHATS = 10
MARK = re.compile(rb'"(mark-\w+-\d+)"')  # the text of a measured request


class Receiver(ThreadingHTTPServer):
    """The integrator: answers at once; when each marked request arrived."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrived: dict[str, float] = {}
        self.changed = threading.Condition()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/a3"

    def wait_for(self, mark: str, timeout: float = 15) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: mark in self.arrived, timeout):
                raise RuntimeError(f"{mark} did not arrive within {timeout} s")
            return self.arrived[mark]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        arrived = time.monotonic()
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
        assert isinstance(self.server, Receiver)
        if found := MARK.search(body):
            with self.server.changed:
                self.server.arrived.setdefault(found.group(1).decode(), arrived)
                self.server.changed.notify_all()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def active_chats(
    webhook_url: str, count: int, email: str = "bench-replies@example.com"
) -> tuple[Any, list[Any]]:
    """An online agent (``email``) and ``count`` chats it has accepted on a
    Chat API channel whose A3 goes to ``webhook_url`` (migrates the database
    first)."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents import services as chats
    from agents.content import Content
    from agents.models import Agent
    from channels_api.services import create_chat_api_channel

    agent = Agent.objects.create_user(email, "x", name="Bench")
    chats.set_agent_status(agent=agent, online=True)
    channel, _ = create_chat_api_channel(name="Bench", webhook_url=webhook_url, agents=[agent])
    accepted = []
    for i in range(count):
        client = chats.get_or_create_client(channel=channel.channel, external_id=f"user-{i}")
        hello = chats.post_client_message(client=client, content=Content("text", "hi", {}))
        accepted.append(chats.accept_chat(chat=hello.chat, agent=agent))
    return agent, accepted


def setup(receiver: Receiver) -> dict[str, Any]:
    """An agent with CHATS active chats on a Chat API channel whose A3 goes to ``receiver``."""
    agent, accepted = active_chats(receiver.url(), CHATS)
    from agents.tokens import issue_token

    ids = [chat.pk for chat in accepted]
    return {"token": issue_token(agent=agent), "chats": ids}


def measure(
    base: str, receiver: Receiver, world: dict[str, Any], replies: int, run: str
) -> tuple[list[float], list[float]]:
    """Seconds from each reply's POST to its A3's arrival; from each direct POST to its arrival."""
    agent = requests.Session()
    agent.headers["Authorization"] = f"Token {world['token']}"
    direct = requests.Session()
    through, straight = [], []
    for n in range(replies):
        chat = world["chats"][n % len(world["chats"])]
        mark = f"mark-{run}-{n}"
        began = time.monotonic()
        answer = agent.post(f"{base}/api/agent/v1/chats/{chat}/messages",
                            json={"type": "text", "text": mark}, timeout=30)  # fmt: skip
        assert answer.status_code == 201, answer.text
        through.append(receiver.wait_for(mark) - began)
        body = {"id": str(n), "type": "text", "text": f"mark-{run}direct-{n}", "chat_id": str(chat)}
        mark = body["text"]
        began = time.monotonic()
        direct.post(receiver.url(), json=body, timeout=30)
        straight.append(receiver.wait_for(mark) - began)
    return through, straight


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    replies = 100 if quick else 500
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as var:
            env = scenario_env("reply_latency", var)
            os.environ.update(env)
            say("seeding")
            world = setup(receiver)
            say("starting the service")
            with Service(env, Path(var) / "logs", ("web", "worker", "delivery")) as service:
                say(f"{replies} replies, each beside a direct POST")
                measure(service.base, receiver, {**world, "chats": world["chats"][:1]}, 5, "warm")
                through, straight = measure(service.base, receiver, world, replies, "bench")
    finally:
        receiver.shutdown()
    ms = 1000
    return [
        row(
            NAME,
            f"reply -> A3 arrives p50 ({replies} replies, {backend(env)})",
            statistics.median(through) * ms,
            "ms",
            "<= 10",
            reference=statistics.median(straight) * ms,
        ),
        row(
            NAME,
            "reply -> A3 arrives p99",
            percentile(through, 0.99) * ms,
            "ms",
            "<= 50",
            reference=percentile(straight, 0.99) * ms,
        ),
    ]


if __name__ == "__main__":
    from bench.run import table

    print(table(scenario()))
