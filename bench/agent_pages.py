"""Scenario 8, the agent pages: AGENTS agents, each with CHATS active chats,
each with the workspace open on one of them and live, for a minute, while
their clients write: requests per agent per minute, and the web process's CPU
per agent.

An agent's page is simulated as its scripts behave (static/agent/app.js):
the page is loaded once; it opens its stream (/agent/stream, with the page's
last event id) and, when the stream says it is open, asks /agent/live for
what changed (the open chat's messages after the last it has, marked seen);
then every event of the kinds the page listens to is a cue for one more
/agent/live, a cue arriving while one is in flight for one more after it
(its pollNow), except an event inside a chat the page shows nowhere
(another agent's: app.js's elsewhere()). No other script of the workspace asks the server by itself
(pages.js only redraws times; canned.js asks when the agent types "/").

The clients write over A2 at RATE messages a second in all, each to a random
one of the open chats (one message a minute per chat). The agents sit in
CHANNELS channels of equal size, so an agent's stream carries the events of
its channel's chats. The service runs as production does (bench/service.py).

The reference is today's figures (TODAY, measured on the 2-core machine of
docs/performance.md), since what the pages cost is what later work changes.

    .venv/bin/python -m bench --only agent_pages [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

from bench.run import row, say
from bench.service import Service, backend, scenario_env

NAME = "8 agent pages"
CHANNELS = 5
CHATS = 10  # open chats per agent
# Requests per agent per minute and web CPU per agent (% of one core) with
# every event a cue (before app.js's elsewhere()), measured on this machine
# on 2026-11-26 once page streams opening together no longer starved the
# web process's pool (docs/performance.md).
TODAY: dict[str, float | None] = {"requests": 23.6, "cpu": 2.07}
CUES = {
    "chat.opened", "chat.queued", "chat.returned_to_bot", "chat.accepted", "chat.finished",
    "chat.transferred", "chat.labelled", "chat.offered", "chat.offer_ended", "message",
    "message.delivery", "typing", "client.updated", "crm.panel", "call", "offline_message",
    "reset",
}  # fmt: skip  # app.js's STREAM_EVENTS
# app.js's INSIDE_A_CHAT: no cue for a chat the page shows nowhere.
INSIDE_A_CHAT = {"message", "message.delivery", "typing", "client.updated", "crm.panel"}
SHOWN = re.compile(rb'data-chat-id="(\d+)"')


def setup(agents: int) -> dict[str, Any]:
    """Agents in CHANNELS Chat API channels, each signed in, each with CHATS
    chats accepted; the A2 paths and senders of the chats."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents import services as chats
    from agents.content import Content
    from agents.models import Agent
    from bench.live_streams import signed_in
    from channels_api.services import create_chat_api_channel

    world: dict[str, Any] = {"agents": [], "senders": []}
    for c in range(CHANNELS):
        # No password: each page's session is made for it (``signed_in``), and
        # hashing fifty took a quarter of a minute of the run.
        people = [
            Agent.objects.create_user(f"page-{c}-{a}@example.com", None, name=f"A{c}.{a}")
            for a in range(agents // CHANNELS)
        ]
        channel, _ = create_chat_api_channel(
            name=f"Bench {c}", webhook_url="http://127.0.0.1:9/a3", agents=people
        )
        path = "/" + channel.endpoint_url.split("/", 3)[3]
        for a, agent in enumerate(people):
            opened = []
            for n in range(CHATS):
                client = chats.get_or_create_client(channel=channel.channel, external_id=f"{a}-{n}")
                hello = chats.post_client_message(client=client, content=Content("text", "hi", {}))
                chats.accept_chat(chat=hello.chat, agent=agent)
                opened.append(hello.chat_id)
                world["senders"].append((path, client.external_id))
            world["agents"].append({"session": signed_in(agent), "chat": opened[0]})
    return world


class Page:
    """One agent's workspace page: its requests, counted."""

    def __init__(self, port: int, session: str, chat: int) -> None:
        self.port, self.chat = port, chat
        self.cookie = f"Cookie: sessionid={session}\r\n"
        self.requests = 0
        self.last_message = 0
        self.last_event = "0"
        self.shown: set[str] = set()  # the chats of its lists (data-chat-id)
        self.cut = False  # a list at its length (data-lists-cut)
        self.cue = asyncio.Event()
        self.connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, path: str) -> bytes:
        """One GET, on the kept-alive connection while the server keeps it
        (config/gunicorn.py closes an idle one after seconds), else a new
        one, as a browser does; the body (Content-Length framed)."""
        self.requests += 1
        for _ in range(2):
            if self.connection is None:
                self.connection = await asyncio.open_connection(
                    "127.0.0.1", self.port, limit=1 << 22
                )
            reader, writer = self.connection
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{self.cookie}\r\n".encode())
            try:
                await writer.drain()
                status = await reader.readline()
            except ConnectionError:
                status = b""
            if status:
                break
            writer.close()
            self.connection = None
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await reader.readexactly(length)
        if b" 200 " not in status:
            raise RuntimeError(f"{path}: {status!r}")
        return body

    async def run(self) -> None:
        try:
            page = await self.get(f"/agent/chats/{self.chat}/")
            self.last_event = _data_attribute(page, b"data-live-id") or "0"
            self.last_message = int(_data_attribute(page, b"data-last") or 0)
            self.lists(page)
            streaming = asyncio.create_task(self.listen())
            try:
                while True:  # app.js's poll(), asked by cues (pollNow)
                    await self.cue.wait()
                    self.cue.clear()
                    path = f"/agent/live?chat={self.chat}&after={self.last_message}&seen=1"
                    answer = json.loads(await self.get(path))
                    self.last_message = answer["chat"]["last_message_id"]
                    self.lists(answer["lists_html"].encode())
            finally:
                streaming.cancel()
        finally:
            if self.connection is not None:
                self.connection[1].close()

    def lists(self, html: bytes) -> None:
        self.shown = {m.decode() for m in SHOWN.findall(html)}
        self.cut = b"data-lists-cut" in html

    def elsewhere(self, kind: str, data: str) -> bool:
        """app.js's elsewhere(): an event inside a chat neither open nor listed."""
        if kind not in INSIDE_A_CHAT or self.cut:
            return False
        chat = str(json.loads(data).get("chat_id") or "")
        return bool(chat) and chat != str(self.chat) and chat not in self.shown

    async def listen(self) -> None:
        """The page's EventSource: each event of a kind it listens to is a cue."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
        self.requests += 1
        path = f"/agent/stream?last_event_id={self.last_event}"
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{self.cookie}\r\n".encode())
        await writer.drain()
        kind = data = ""
        try:
            while line := await reader.readline():
                text = line.decode().rstrip("\r\n")
                if text.startswith(": connected"):
                    self.cue.set()  # open: what changed meanwhile
                elif text.startswith("event: "):
                    kind = text[7:]
                elif text.startswith("data: "):
                    data = text[6:]
                elif not text and kind:
                    if kind in CUES and not self.elsewhere(kind, data):
                        self.cue.set()
                    kind = data = ""
        finally:
            writer.close()


def _data_attribute(html: bytes, name: bytes) -> str:
    at = html.find(name + b'="')
    if at < 0:
        return ""
    start = at + len(name) + 2
    return html[start : html.find(b'"', start)].decode()


def write(base: str, senders: list[tuple[str, str]], rate: float, stop: threading.Event) -> int:
    """Client messages over A2 at ``rate`` a second to random chats, until
    ``stop``; how many were taken (200)."""
    session, tried, sent, start = requests.Session(), 0, 0, time.monotonic()
    while not stop.is_set():
        time.sleep(max(0.0, start + tried / rate - time.monotonic()))
        path, sender = random.choice(senders)
        body = {"sender": {"id": sender}, "message": {"type": "text", "text": f"m{tried}"}}
        with contextlib.suppress(requests.RequestException):  # not taken: the rate says so
            sent += session.post(base + path, json=body, timeout=30).status_code == 200
        tried += 1
    return sent


async def watch(
    service: Service, world: dict[str, Any], rate: float, seconds: float
) -> dict[str, float]:
    pages = [Page(service.port, a["session"], a["chat"]) for a in world["agents"]]
    tasks = [asyncio.create_task(page.run()) for page in pages]
    await asyncio.sleep(5)  # loaded, streams open, first polls done
    stop = threading.Event()
    writer = asyncio.create_task(
        asyncio.to_thread(write, service.base, world["senders"], rate, stop)
    )
    before = sum(p.requests for p in pages)
    cpu, wall = service.cpu_seconds(), time.monotonic()
    await asyncio.sleep(seconds)
    counted = sum(p.requests for p in pages) - before
    cpu, wall = service.cpu_seconds() - cpu, time.monotonic() - wall
    stop.set()
    sent = await writer
    for task in tasks:
        if task.done() and task.exception():
            raise RuntimeError("a page failed") from task.exception()
        task.cancel()
    agents = len(pages)
    return {
        "requests": counted / agents * 60 / wall,
        "cpu": 100 * cpu / wall / agents,
        "sent": sent / wall,
    }


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    # 20 s: the figures are rates per minute, and make bench has ten minutes.
    agents, seconds = (10, 15) if quick else (50, 20)
    rate = agents * CHATS / 60  # one message a minute per open chat
    with tempfile.TemporaryDirectory() as var:
        env = scenario_env("agent_pages", var, CHAT_API_RATE_LIMIT_PER_SECOND="0")
        os.environ.update(env)
        say(f"seeding {agents} agents with {CHATS} chats each")
        world = setup(agents)
        say("starting the service")
        with Service(env, Path(var) / "logs", ("web", "worker", "delivery")) as service:
            say(f"{agents} pages open for {seconds} s, clients writing {rate:.1f} msg/s")
            figures = asyncio.run(watch(service, world, rate, seconds))
    shape = f"{agents} agents x {CHATS} chats, {figures['sent']:.1f} client msg/s, {backend(env)}"
    return [
        row(NAME, f"requests per agent per minute ({shape})", figures["requests"], "/min",
            reference=TODAY["requests"]),
        row(NAME, "web CPU per agent", figures["cpu"], "% core", reference=TODAY["cpu"]),
    ]  # fmt: skip


if __name__ == "__main__":
    from bench.run import table

    print(table(scenario()))
