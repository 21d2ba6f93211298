"""Routing under load (docs/routing.md, "Under concurrency"): how soon a new
chat is offered, and that offers never pass an agent's capacity.

Runs the web process as production does (gunicorn with 2 uvicorn workers, so
two processes route at once) against the configured database and broker
(DATABASE_URL and REDIS_URL, else a fresh SQLite file and the filesystem
broker). Each run sends CHATS clients' first messages over A2, each at its
moment within SECONDS, from CLIENTS threads (an integrator's connection pool:
a server slower than the pace holds the sending back, and the rate achieved
is printed), to a channel of its own with AGENTS agents of its own, online
and present, of capacity CAPACITY each, side by side:

- ``manual, new``: a manual channel, new clients: what the service costs
  without routing;
- ``offer, new``: the same on an offer channel. A new client takes the next
  visitor number, whose row lock is held to the transaction's end, so these
  routings run one after the other;
- ``offer, known``: clients made beforehand (their first chat): nothing but
  the agents' locks orders these routings, so the two processes race.

Then it reads from the database, per run: each chat's time from arrival
(``Chat.created``) and from its request's sending to its first
``ChatOffer.offered_at`` (p50, p99, max); the chats offered, waiting and
lost (answered 200 but neither offered nor queued); capacity violations (a
moment when an agent held more pending offers and active chats than their
capacity, from the offers' intervals); chats with two offers pending at
once; slots left empty while chats wait; the arrival rate achieved and the
requests' HTTP p50/p99. Timing goals are printed beside the figures; a
correctness figure off its goal makes the exit status 1.

Offers last 600 s, so none lapses during a run (no worker runs: the lapse
tasks the offers queue stay in the broker).

    .venv/bin/python bench/routing.py [--chats 1000] [--seconds 10] [--agents 50] \\
        [--capacity 5] [--clients 32]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.chat_api_inbound import manage  # noqa: E402
from bench.live_streams import Server, percentiles  # noqa: E402

WARM_UP = 50  # messages to a channel of their own before the runs
GOAL_P99 = 1.0  # seconds from arrival to offer (issue 24)
RUNS = (("manual, new", "manual", False), ("offer, new", "offer", False),
        ("offer, known", "offer", True))  # fmt: skip


@dataclass
class Run:
    name: str
    mode: str
    known_clients: bool
    path: str = ""
    channel_id: int = 0
    agents: dict[int, int] = field(default_factory=dict)  # agent id -> capacity
    sent: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # id: sent, end, status
    figures: dict[str, Any] = field(default_factory=dict)


def seed(runs: list[Run], chats: int, agents: int, capacity: int) -> None:
    """Each run's channel, agents online and present, and (known clients) its clients."""
    import django

    django.setup()
    from django.utils import timezone

    from agents import services
    from agents.models import Agent
    from channels_api.services import create_chat_api_channel

    stamp = f"{os.getpid()}-{int(time.time())}"
    for index, run in enumerate(runs):
        people = [
            Agent.objects.create_user(
                f"route-{stamp}-{index}-{a}@example.com", None, name=f"R{index}.{a}",
                is_online=True, last_seen_at=timezone.now(), max_chats=capacity,
            )
            for a in range(agents)
        ]  # fmt: skip
        chat_api, _ = create_chat_api_channel(
            name=f"Routing bench: {run.name}", webhook_url="http://127.0.0.1:9/a3", agents=people
        )
        services.set_routing(channel=chat_api.channel, mode=run.mode, offer_seconds=600)
        run.path = "/" + chat_api.endpoint_url.split("/", 3)[3]
        run.channel_id = chat_api.channel.pk
        run.agents = {agent.pk: agent.capacity for agent in people}
        if run.known_clients:
            for n in range(chats):
                services.get_or_create_client(channel=chat_api.channel, external_id=f"c{n}")


def arrive(base: str, run: Run, chats: int, seconds: float, clients: int) -> None:
    """Each client's first message at its moment, spread evenly over ``seconds``,
    from ``clients`` threads: as an integrator's connection pool would, a server
    slower than the pace holds the sending back (each request's own sending
    time is kept)."""
    local = threading.local()
    began = time.time() + 0.2

    def post(n: int) -> None:
        time.sleep(max(0.0, began + n * seconds / chats - time.time()))
        if not hasattr(local, "session"):
            local.session = requests.Session()
        body = {"sender": {"id": f"c{n}", "name": f"Client {n}"},
                "message": {"type": "text", "text": f"hello {n}"}}  # fmt: skip
        sent = time.time()
        try:
            status = local.session.post(base + run.path, json=body, timeout=120).status_code
        except requests.RequestException:
            status = 0
        run.sent[f"c{n}"] = (sent, time.time(), status)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(post, range(chats)))


def held_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most of ``intervals`` (start, end) open at one moment; one ending
    when another starts is not open with it."""
    moments = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in moments:
        now += step
        most = max(most, now)
    return most


def measure(run: Run) -> None:
    """The run's figures, from the database and the requests' times."""
    from agents.models import Chat, ChatOffer

    forever = time.time() + 1e6
    chats = {
        chat_id: (external_id, created.timestamp(), state)
        for chat_id, external_id, created, state in Chat.objects.filter(
            channel_id=run.channel_id
        ).values_list("pk", "client__external_id", "created", "state")
    }
    # Every offer to the run's agents (any channel), and the chats they took.
    offers = list(
        ChatOffer.objects.filter(agent_id__in=run.agents).values_list(
            "chat_id", "agent_id", "offered_at", "ended_at", "outcome"
        )
    )
    load: dict[int, list[tuple[float, float]]] = defaultdict(list)
    by_chat: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for chat_id, agent_id, offered_at, ended_at, outcome in offers:
        end = ended_at.timestamp() if ended_at else forever
        by_chat[chat_id].append((offered_at.timestamp(), end))
        if outcome != ChatOffer.Outcome.ACCEPTED:  # accepted: counted as an active chat
            load[agent_id].append((offered_at.timestamp(), end))
    taken = Chat.objects.filter(agents__in=run.agents, accepted_at__isnull=False)
    for agent_id, accepted_at, finished_at in taken.values_list(
        "agents", "accepted_at", "finished_at"
    ):
        assert accepted_at is not None
        end = finished_at.timestamp() if finished_at else forever
        load[agent_id].append((accepted_at.timestamp(), end))
    most = {agent_id: held_at_once(load[agent_id]) for agent_id in run.agents}
    now_held = {
        agent_id: sum(1 for _, end in load[agent_id] if end >= forever) for agent_id in run.agents
    }
    first_offer = {chat_id: min(start for start, _ in spans) for chat_id, spans in by_chat.items()}

    answered = {key for key, (_, _, status) in run.sent.items() if status == 200}
    by_client = {external_id: chat_id for chat_id, (external_id, _, _) in chats.items()}
    offered = [chat_id for chat_id in chats if chat_id in first_offer]
    waiting = [
        chat_id
        for chat_id, (_, _, state) in chats.items()
        if chat_id not in first_offer and state == Chat.State.QUEUED
    ]
    routed = set(offered) | set(waiting)
    lost = sum(1 for key in answered if by_client.get(key) not in routed)
    from_created = [first_offer[c] - chats[c][1] for c in offered]
    from_sent = [first_offer[c] - run.sent[chats[c][0]][0] for c in offered]
    sends = sorted(sent for sent, _, _ in run.sent.values())
    created = sorted(at for _, at, _ in chats.values())
    http = [end - sent for sent, end, status in run.sent.values() if status == 200]
    run.figures = {
        "rate_sent": (len(sends) - 1) / (sends[-1] - sends[0]),
        "answered_in": max(end for _, end, _ in run.sent.values()) - sends[0],
        "rate_created": (len(created) - 1) / (created[-1] - created[0]) if len(created) > 1 else 0,
        "http": percentiles(http),
        "http_errors": len(run.sent) - len(answered),
        "offered": len(offered),
        "waiting": len(waiting),
        "lost": lost,
        "from_created": (*percentiles(from_created), max(from_created, default=float("nan"))),
        "from_sent": (*percentiles(from_sent), max(from_sent, default=float("nan"))),
        "violations": sum(1 for a, held in most.items() if held > run.agents[a]),
        "most_held": max(most.values()),
        "double": sum(1 for spans in by_chat.values() if held_at_once(spans) > 1),
        # Every chat waiting while an agent has room is a slot left empty.
        "idle_slots": min(
            len(waiting), sum(max(0, run.agents[a] - now_held[a]) for a in run.agents)
        )
        if run.mode == "offer"
        else None,
    }


def dash(value: int | None) -> str:
    return "—" if value is None else str(value)


def ms(value: float) -> str:
    return "—" if value != value else f"{value * 1000:.0f}"  # NaN: nothing was offered


def report(runs: list[Run], capacity: int) -> bool:
    """Print the table; whether every correctness figure met its goal."""
    rows: list[tuple[str, Any, str]] = [
        ("requests sent per second", lambda f: f"{f['rate_sent']:.0f}", ""),
        ("last answer after s", lambda f: f"{f['answered_in']:.1f}", ""),
        ("chats opened per second", lambda f: f"{f['rate_created']:.0f}", ""),
        ("HTTP p50 / p99 ms", lambda f: f"{ms(f['http'][0])} / {ms(f['http'][1])}", ""),
        ("HTTP errors", lambda f: f"{f['http_errors']}", ""),
        ("offered / waiting", lambda f: f"{f['offered']} / {f['waiting']}", ""),
        ("lost", lambda f: f"{f['lost']}", "0"),
        ("opened to offer p50 / p99 ms",
         lambda f: f"{ms(f['from_created'][0])} / {ms(f['from_created'][1])}",
         f"p99 <= {GOAL_P99 * 1000:.0f}"),
        ("  max ms", lambda f: ms(f["from_created"][2]), ""),
        ("sent to offer p50 / p99 ms",
         lambda f: f"{ms(f['from_sent'][0])} / {ms(f['from_sent'][1])}",
         f"p99 <= {GOAL_P99 * 1000:.0f}"),
        ("  max ms", lambda f: ms(f["from_sent"][2]), ""),
        ("agents over capacity", lambda f: f"{f['violations']}", "0"),
        ("most held by one agent", lambda f: f"{f['most_held']}", f"<= {capacity}"),
        ("chats offered twice at once", lambda f: f"{f['double']}", "0"),
        ("slots empty while chats wait", lambda f: dash(f["idle_slots"]), "0"),
    ]  # fmt: skip
    print(f"  {'':30}" + "".join(f"{run.name:>16}" for run in runs) + "   goal")
    for label, cell, goal in rows:
        print(f"  {label:30}" + "".join(f"{cell(run.figures):>16}" for run in runs) + f"   {goal}")
    manual, offer = runs[0].figures, runs[1].figures
    print(f"  ratio offer/manual (new clients): HTTP p50 {offer['http'][0] / manual['http'][0]:.2f}"
          f", p99 {offer['http'][1] / manual['http'][1]:.2f}, chats opened per second "
          f"{offer['rate_created'] / manual['rate_created']:.2f}")  # fmt: skip
    wrong = ("lost", "violations", "double", "idle_slots")
    return not any(run.figures[key] for run in runs for key in wrong)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--capacity", type=int, default=5)
    parser.add_argument("--clients", type=int, default=32, help="requests in flight at most")
    args = parser.parse_args()
    runs = [Run(name, mode, known) for name, mode, known in RUNS]
    warm_up = Run("warm-up", "manual", False)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "VAR_DIR": var, "DEBUG": "true", "LOG_LEVEL": "WARNING",
               "CHAT_API_RATE_LIMIT_PER_SECOND": "0"}  # fmt: skip
        manage(env, "migrate", "--noinput")
        os.environ.update(env)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        seed([warm_up, *runs], args.chats, args.agents, args.capacity)
        server = Server(env)
        try:
            # Connections, imports, caches.
            arrive(server.base, warm_up, WARM_UP, 1.0, args.clients)
            for run in runs:
                arrive(server.base, run, args.chats, args.seconds, args.clients)
                time.sleep(1)  # the last answers' commits
        finally:
            server.stop()
        for run in runs:
            measure(run)
    backend = ("PostgreSQL" if "DATABASE_URL" in env else "SQLite") + (
        " + Redis" if env.get("REDIS_URL") else ", filesystem broker"
    )
    print(f"Routing: {args.chats} clients' first messages within {args.seconds:g} s per run, "
          f"{args.agents} agents x capacity {args.capacity}, {backend}, 2 web workers, "
          f"{os.cpu_count()} cores")  # fmt: skip
    correct = report(runs, args.capacity)
    print(f"  took {time.monotonic() - started:.0f} s")
    sys.exit(0 if correct else 1)


if __name__ == "__main__":
    main()
