"""Live streams against today's 1 s polling, side by side in one run (docs/live.md).

Runs the web process as production does (gunicorn with 2 uvicorn workers)
against the configured database and Redis (DATABASE_URL, REDIS_URL; without
them SQLite and the event table) and measures:

1. streams: VISITORS visitor streams and AGENTS agent streams open at once
   (5 Chat API channels, each with AGENTS/5 agents and VISITORS/5 clients
   with an open chat); the server's CPU while they are idle, its memory per
   open stream; then client messages POSTed over A2 at RATE a second to
   random chats: the time from the POST to the event arriving on each stream
   entitled to it (the client's own and its channel's agents'), p50 and p99,
   the server's CPU under that load, and whether every stream got exactly
   the events meant for it;
2. the reference, today's agent pages: the same AGENTS agents polling
   /agent/live once a second, idle and under the same load: server CPU, and
   the time from a POST to the end of the first poll that started after it.

    .venv/bin/python bench/live_streams.py [--visitors 2000] [--agents 50] \\
        [--rate 20] [--seconds 20] [--idle 10] [--streams-only] [--port N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.chat_api_inbound import manage  # noqa: E402
from bench.service import Service  # noqa: E402

CHANNELS = 5
OPENING = 100  # streams opening at once


def seed(visitors: int, agents: int) -> dict[str, Any]:
    """Channels, agents (API token and a signed-in session each), clients with
    an open chat and a visitor token; run in this process on the same database."""
    import django

    django.setup()
    from agents.models import Agent, ApiToken, Client
    from agents.tokens import issue_token
    from channels_api.services import create_chat_api_channel

    world: dict[str, Any] = {"channels": [], "agents": [], "visitors": []}
    for c in range(CHANNELS):
        # No password: each agent's session is made for it (``signed_in``), and
        # hashing a hundred took half a minute of the run.
        people = [
            Agent.objects.create_user(
                f"live-{os.getpid()}-{c}-{a}@example.com", None, name=f"A{c}.{a}"
            )
            for a in range(agents // CHANNELS)
        ]
        channel, _ = create_chat_api_channel(
            name=f"Bench {c}", webhook_url="http://127.0.0.1:9/a3", agents=people
        )
        world["channels"].append("/" + channel.endpoint_url.split("/", 3)[3])
        for agent in people:
            world["agents"].append(
                {"channel": c, "token": issue_token(agent=agent), "session": signed_in(agent)}
            )
        # Written in bulk (10,000 one by one take minutes): each client with the
        # token of its visitor's browser; its chat opens with the first A2.
        tokens = [secrets.token_urlsafe(24) for _ in range(visitors // CHANNELS)]
        clients = Client.objects.bulk_create(
            Client(
                channel=channel.channel,
                external_id=f"v{os.getpid()}-{c}-{v}",
                external_id_raw=f"v{os.getpid()}-{c}-{v}",
                visitor_number=10_000_000 * (c + 1) + v,
                visitor_key_hash=ApiToken.hash_key(token),
            )
            for v, token in enumerate(tokens)
        )
        world["visitors"] += [
            {"channel": c, "id": client.external_id, "token": token}
            for client, token in zip(clients, tokens, strict=True)
        ]
    return world


def signed_in(agent: Any) -> str:
    """The key of a new session of ``agent``, as the login page would make it."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(agent.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
    session[HASH_SESSION_KEY] = agent.get_session_auth_hash()
    session.create()
    return str(session.session_key)


# --- the server and what it costs ----------------------------------------------


class Server(Service):
    """The web process as the Procfile starts it (2 uvicorn workers), alone:
    streams and polls need no Celery worker."""

    def __init__(self, env: dict[str, str], port: int | None = None) -> None:
        super().__init__(env, Path(env["VAR_DIR"]) / "logs", ("web",), port=port)


# --- the clients -------------------------------------------------------------------


@dataclass
class Stream:
    name: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    texts: list[tuple[str, float]] = field(default_factory=list)  # (message text, arrival)


async def read_stream(port: int, stream: Stream, opening: asyncio.Semaphore) -> None:
    """Open ``stream`` (while ``opening`` lets it: so many at once) and read it."""
    async with opening:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = "".join(f"{k}: {v}\r\n" for k, v in stream.headers.items())
        writer.write(f"GET {stream.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode())
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            writer.close()
            raise RuntimeError(f"{stream.name}: {status!r}")
        while (line := await reader.readline()) and not line.startswith(b": connected"):
            pass
        stream.connected.set()
    data = ""
    try:
        while line := await reader.readline():
            text = line.decode().rstrip("\r\n")
            if text.startswith("data: "):
                data = text[6:]
            elif not text and data:
                event = json.loads(data)
                if event["kind"] == "message":
                    stream.texts.append((event["message"]["text"], time.monotonic()))
                data = ""
    finally:
        writer.close()


@dataclass
class Posts:
    """A2 client messages at a steady rate to random visitors' chats."""

    sent: dict[str, tuple[int, float, float]] = field(
        default_factory=dict
    )  # text: (visitor, start, end)

    def run(self, base: str, world: dict[str, Any], rate: float, seconds: float) -> None:
        session = requests.Session()
        start = time.monotonic()
        for n in range(int(rate * seconds)):
            if time.monotonic() > start + 2 * seconds:
                break  # a saturated server (100 agents polling) would take minutes
            time.sleep(max(0.0, start + n / rate - time.monotonic()))
            index = random.randrange(len(world["visitors"]))
            visitor = world["visitors"][index]
            text = f"bench {n}"
            began = time.monotonic()
            answer = session.post(
                base + world["channels"][visitor["channel"]],
                json={"sender": {"id": visitor["id"]}, "message": {"type": "text", "text": text}},
                timeout=30,
            )
            if answer.status_code == 200:
                self.sent[text] = (index, began, time.monotonic())


async def post_under_watch(
    server: Server, world: dict[str, Any], rate: float, seconds: float, settle: float
) -> tuple[Posts, float]:
    """Post at ``rate`` for ``seconds``, wait ``settle`` for the last events;
    the messages sent and the server's CPU meanwhile (% of one core)."""
    posts = Posts()
    poster = threading.Thread(target=posts.run, args=(server.base, world, rate, seconds))
    cpu_before, wall = server.cpu_seconds(), time.monotonic()
    poster.start()
    await asyncio.to_thread(poster.join)
    await asyncio.sleep(settle)
    return posts, 100 * (server.cpu_seconds() - cpu_before) / (time.monotonic() - wall)


def percentiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        only = values[0] if values else float("nan")
        return only, only
    cuts = statistics.quantiles(values, n=100)
    return statistics.median(values), cuts[98]


async def streams_phase(
    server: Server,
    world: dict[str, Any],
    rate: float,
    seconds: float,
    idle_for: float = 10,
    connect_within: float = 300,
) -> dict[str, Any]:
    rss_before = server.rss_bytes()
    visitors = [Stream(f"visitor {i}", f"/visitor/{v['token']}/stream")
                for i, v in enumerate(world["visitors"])]  # fmt: skip
    agents = [Stream(f"agent {i}", "/api/agent/v1/stream", {"Authorization": f"Token {a['token']}"})
              for i, a in enumerate(world["agents"])]  # fmt: skip
    # Streams open OPENING at a time, as browsers arriving: a stream still
    # opening holds the server's threads and database; an open one does not.
    opening = asyncio.Semaphore(OPENING)
    began = time.monotonic()
    tasks = [asyncio.create_task(read_stream(server.port, stream, opening))
             for stream in visitors + agents]  # fmt: skip
    # Those open within the time allowed are measured; the rest count as not open.
    deadline = began + connect_within
    while not all(s.connected.is_set() for s in visitors + agents):
        if time.monotonic() > deadline or all(t.done() for t in tasks):
            break
        await asyncio.sleep(0.1)
    open_seconds = time.monotonic() - began
    await asyncio.sleep(2)
    opened = sum(s.connected.is_set() for s in visitors + agents)
    per_stream = (server.rss_bytes() - rss_before) / max(1, opened)
    idle = await asyncio.to_thread(server.cpu_percent, idle_for)
    posts, loaded = await post_under_watch(server, world, rate, seconds, settle=3)
    refused: Counter[str] = Counter()  # streams refused or cut: counted as not open
    for task in tasks:
        if not task.done():
            task.cancel()
        elif not task.cancelled() and (error := task.exception()) is not None:
            refused[str(error).partition(": ")[2] or type(error).__name__] += 1

    latencies, wrong = [], 0
    by_channel: dict[int, set[str]] = defaultdict(set)
    by_visitor: dict[int, set[str]] = defaultdict(set)
    for text, (index, _began, _ended) in posts.sent.items():
        by_visitor[index].add(text)
        by_channel[world["visitors"][index]["channel"]].add(text)
    for index, stream in enumerate(visitors):
        if not stream.connected.is_set():
            continue
        got = {text for text, _ in stream.texts if text.startswith("bench ")}
        wrong += got != by_visitor[index]
        latencies += [at - posts.sent[t][1] for t, at in stream.texts if t in posts.sent]
    for index, stream in enumerate(agents):
        if not stream.connected.is_set():
            continue
        got = {text for text, _ in stream.texts if text.startswith("bench ")}
        wrong += got != by_channel[world["agents"][index]["channel"]]
        latencies += [at - posts.sent[t][1] for t, at in stream.texts if t in posts.sent]
    p50, p99 = percentiles(latencies)
    return {"streams": opened, "open_seconds": open_seconds, "idle_cpu": idle,
            "load_cpu": loaded, "p50": p50, "p99": p99,
            "per_stream": per_stream, "posted": len(posts.sent), "deliveries": len(latencies),
            "wrong_streams": wrong, "refused": dict(refused)}  # fmt: skip


async def poll_agent(
    port: int, session: str, polls: list[tuple[float, float]], stop: asyncio.Event
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    request = (
        f"GET /agent/live HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: sessionid={session}\r\n\r\n"
    ).encode()
    try:
        while not stop.is_set():
            began = time.monotonic()
            writer.write(request)
            await writer.drain()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            polls.append((began, time.monotonic()))
            await asyncio.sleep(max(0.0, began + 1.0 - time.monotonic()))
    finally:
        writer.close()


async def polling_phase(
    server: Server, world: dict[str, Any], rate: float, seconds: float, idle_for: float = 10
) -> dict[str, Any]:
    stop = asyncio.Event()
    polls: list[list[tuple[float, float]]] = [[] for _ in world["agents"]]
    tasks = [asyncio.create_task(poll_agent(server.port, a["session"], polls[i], stop))
             for i, a in enumerate(world["agents"])]  # fmt: skip
    await asyncio.sleep(3)
    idle = await asyncio.to_thread(server.cpu_percent, idle_for)
    posts, loaded = await post_under_watch(server, world, rate, seconds, settle=2)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    latencies = []
    for _text, (index, began, ended) in posts.sent.items():
        channel = world["visitors"][index]["channel"]
        for agent_index, agent in enumerate(world["agents"]):
            if agent["channel"] == channel:
                after = [end for start, end in polls[agent_index] if start >= ended]
                if after:
                    latencies.append(min(after) - began)
    p50, p99 = percentiles(latencies)
    return {"idle_cpu": idle, "load_cpu": loaded, "p50": p50, "p99": p99}


def measure(
    env: dict[str, str],
    visitors: int,
    agents: int,
    rate: float,
    seconds: float,
    idle_for: float,
    polling: bool = True,
    port: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Seed, then both phases (or the streams' alone), each on a web process
    of its own: (streams, polling)."""
    env = {
        **env, "CHAT_API_RATE_LIMIT_PER_SECOND": "0",
        # Every visitor stream comes from this one machine's address.
        "LIVE_STREAMS_PER_ADDRESS": str(visitors),
    }  # fmt: skip
    # A descriptor per stream, here and in the web process (which inherits it).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = visitors + agents + 1024
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    manage(env, "migrate", "--noinput")
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    world = seed(visitors, agents)
    with Server(env, port) as server:
        streams = asyncio.run(streams_phase(server, world, rate, seconds, idle_for))
    if not polling:
        return streams, None
    with Server(env, port) as server:
        # The reference, far from every goal (its p50 is seconds), half as long.
        polled = asyncio.run(polling_phase(server, world, rate, seconds / 2, min(idle_for, 3.0)))
    return streams, polled


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    """Scenario 6 of `make bench` (bench/run.py): 10,000 visitor streams and
    100 agent streams (quick: 500 and 20), beside the agents polling."""
    from bench.run import row, say
    from bench.service import backend, scenario_env

    # 10 s of posts at 20 a second fan out to every open stream: enough
    # events for the p99, and make bench has ten minutes in all.
    visitors, agents, seconds, idle_for = (500, 20, 10, 5) if quick else (10_000, 100, 10, 5)
    rate = 20.0
    name = "6 live streams"
    with tempfile.TemporaryDirectory() as var:
        env = scenario_env("live_streams", var)
        say(f"{visitors} visitor and {agents} agent streams, then {agents} agents polling")
        streams, polling = measure(env, visitors, agents, rate, seconds, idle_for)
    assert polling is not None
    ms = 1000
    return [
        row(name, f"streams open ({backend(env)})", streams["streams"], "",
            f">= {visitors + agents}"),
        row(name, "time to open them all", streams["open_seconds"], "s"),
        row(name, "memory per open stream", streams["per_stream"] / 1024, "KiB", "<= 40"),
        row(name, "web CPU, idle", streams["idle_cpu"], "% core", "<= 5",
            reference=polling["idle_cpu"]),
        row(name, f"web CPU, {rate:g} msg/s", streams["load_cpu"], "% core",
            reference=polling["load_cpu"]),
        row(name, "post -> event p50", streams["p50"] * ms, "ms", reference=polling["p50"] * ms),
        row(name, "post -> event p99", streams["p99"] * ms, "ms", "<= 1000",
            reference=polling["p99"] * ms),
        row(name, "streams with a wrong set of events", streams["wrong_streams"], "", "== 0"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--visitors", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds the idle CPU is measured")
    parser.add_argument(
        "--streams-only", action="store_true", help="leave out the agents polling (the reference)"
    )
    parser.add_argument("--port", type=int, help="the web process's port (else a free one)")
    args = parser.parse_args()
    from bench.service import backend, scenario_env

    with tempfile.TemporaryDirectory() as var:
        env = scenario_env("live_streams", var)
        shape = f"{args.rate:g} msg/s for {args.seconds:g} s, {backend(env)}, 2 web workers"
        print(f"Live streams vs 1 s polling: {args.visitors} visitor + {args.agents} agent "
              f"streams, {shape}")  # fmt: skip
        streams, polling = measure(
            env,
            args.visitors,
            args.agents,
            args.rate,
            args.seconds,
            args.idle,
            not args.streams_only,
            args.port,
        )
    polling = polling or dict.fromkeys(("idle_cpu", "load_cpu", "p50", "p99"), float("nan"))
    print(f"  streams open                 {streams['streams']} in {streams['open_seconds']:.1f} s"
          f"{'; not open: ' + str(streams['refused']) if streams['refused'] else ''}")  # fmt: skip
    print(f"  memory per open stream       {streams['per_stream'] / 1024:.1f} KiB")
    print(f"  server CPU, idle             streams {streams['idle_cpu']:5.1f} %   "
          f"polling {polling['idle_cpu']:5.1f} % of one core")  # fmt: skip
    print(f"  server CPU, {args.rate:g} msg/s        streams {streams['load_cpu']:5.1f} %   "
          f"polling {polling['load_cpu']:5.1f} %")  # fmt: skip
    print(f"  post to event, p50           streams {streams['p50'] * 1000:5.0f} ms  "
          f"polling {polling['p50'] * 1000:5.0f} ms")  # fmt: skip
    print(f"  post to event, p99           streams {streams['p99'] * 1000:5.0f} ms  "
          f"polling {polling['p99'] * 1000:5.0f} ms")  # fmt: skip
    print(f"  events delivered             {streams['deliveries']} for {streams['posted']} "
          f"messages; streams with a wrong set: {streams['wrong_streams']}")  # fmt: skip
    print(f"  ratio p99 polling/streams    {polling['p99'] / streams['p99']:.1f}")


if __name__ == "__main__":
    main()
