"""`make soak`: mixed traffic for a long while against the service as
production runs it, watching what must not grow (docs/operations.md, "Soak").

The Procfile's web, worker, delivery and beat processes run (bench/service.py);
this process is every outside party at once, at RATE operations a second in
turn: an integrator's A2 user messages (some from new clients) and its A3
receiver, an agent's replies over the agent API, a bot provider's B2
messages and its event receiver, website visitors sending from the widget,
and STREAMS visitor streams plus a few agent streams held open throughout
(reopened when they end). Every INTERVAL seconds it samples each process's
memory (RSS), every table's rows, and each kind of request's latencies.

At the end it judges, after the warm-up (the first fifth of the run):

- each process's memory grows by at most 10 %;
- the tables a retention rule keeps small (live events, stream leases,
  rate-limit hits) grow by at most 10 % over the second half, while the
  ones that hold the history (messages, chats, deliveries) grow with it;
- each request kind's p99 in the last interval is within 1.5x of its p99 in
  the first interval after the warm-up.

    .venv/bin/python -m bench.soak [--minutes 30] [--rate 20] [--interval 60]

``--faults`` runs the fault run instead (tests/reliability/fault_run.py, the
one CI runs once): rounds of its traffic, each with its faults (the delivery
worker SIGKILLed twice, Redis and PostgreSQL restarted once), on the same
processes until ``--minutes`` have passed, then its checks; ``--rounds N``
runs N rounds whatever the time, ``--size F`` F times the suite's traffic a
round. It needs what the suite's fault tests need
(``initdb``, ``pg_ctl`` run as the ``postgres`` user, ``redis-server``).

    .venv/bin/python -m bench.soak --faults [--minutes 30] [--rounds N] [--size 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from bench.inbound import percentile
from bench.reply_latency import Receiver
from bench.run import ROOT, row, say, table, write
from bench.service import Service, backend, scenario_env

NAME = "soak"
PROCESSES = ("web", "worker", "delivery", "beat")
STREAMS = 50  # visitor streams held open
AGENT_STREAMS = 5
CHATS = 20  # active chats the agent replies in
# Tables a retention rule keeps to a window shorter than a soak's second half.
BOUNDED = ("agents_liveevent", "agents_streamlease", "agents_ratelimithit")
KINDS = ("A2", "reply", "B2", "widget")


def setup(receiver: Receiver) -> dict[str, Any]:
    """An agent with CHATS accepted chats on a Chat API channel whose A3 goes to
    ``receiver``, a bot channel whose events go there too, with chats, and a
    widget: the paths, the agent's token and the chats."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents import services as chats
    from agents.content import Content
    from agents.models import Agent
    from agents.tokens import issue_token
    from bots.services import attach_bot, create_bot_provider
    from channels_api.services import create_chat_api_channel
    from devhooks.widget.services import create_widget_channel

    agent = Agent.objects.create_user("soak@example.com", "x", name="Soak")
    chats.set_agent_status(agent=agent, online=True)
    plain, _ = create_chat_api_channel(name="Soak", webhook_url=receiver.url(), agents=[agent])
    active = []
    for i in range(CHATS):
        client = chats.get_or_create_client(channel=plain.channel, external_id=f"agent-{i}")
        hello = chats.post_client_message(client=client, content=Content("text", "hi", {}))
        active.append(chats.accept_chat(chat=hello.chat, agent=agent).pk)
    with_bot, _ = create_chat_api_channel(name="With bot", webhook_url=receiver.url())
    provider = create_bot_provider(name="soak", endpoint_url=receiver.url())
    attach_bot(channel=with_bot.channel, provider=provider, token="soak-bot-token")
    bot_chats = []
    for i in range(CHATS):
        client = chats.get_or_create_client(channel=with_bot.channel, external_id=f"bot-{i}")
        bot_chats.append(
            chats.post_client_message(client=client, content=Content("text", "hi", {})).chat_id
        )
    widget = create_widget_channel(name="Soak site", agent_emails=[agent.email])
    return {
        "a2": "/" + plain.endpoint_url.split("/", 3)[3],
        "b2": f"/webhooks/{provider.provider_id}/soak-bot-token",
        "widget": f"/widget/{widget.widget_id}/v1/message",
        "token": issue_token(agent=agent),
        "chats": active,
        "bot_chats": bot_chats,
    }


class Traffic:
    """The outside parties; each request's kind, latency and status."""

    def __init__(self, base: str, world: dict[str, Any]) -> None:
        self.base, self.world = base, world
        self.lock = threading.Lock()
        self.times: dict[str, list[float]] = defaultdict(list)
        self.failed: dict[str, int] = defaultdict(int)
        self.visitors: list[str] = []
        self.local = threading.local()
        self.stop = threading.Event()
        self.events = 0

    def session(self) -> requests.Session:
        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
        return self.local.session

    def request(self, kind: str, n: int) -> tuple[str, dict[str, Any], dict[str, str]]:
        """The path, body and headers of the ``n``-th operation, of ``kind``."""
        world = self.world
        if kind == "A2":
            sender = f"user-{n % 500}" if n % 10 else f"new-{n}"
            return (
                world["a2"],
                {"sender": {"id": sender}, "message": {"type": "text", "text": f"m{n}"}},
                {},
            )
        if kind == "reply":  # its A3 reaches the receiver, marked
            chat = world["chats"][n % len(world["chats"])]
            body = {"type": "text", "text": f"mark-reply-{n}"}
            return (
                f"/api/agent/v1/chats/{chat}/messages",
                body,
                {"Authorization": f"Token {world['token']}"},
            )
        if kind == "B2":  # so does the bot's message
            chat = world["bot_chats"][n % len(world["bot_chats"])]
            message = {"type": "TEXT", "text": f"mark-bot-{n}"}
            return (
                world["b2"],
                {"event": "BOT_MESSAGE", "chat_id": str(chat), "message": message},
                {},
            )
        with self.lock:  # a returning visitor, once the streams' visitors are made
            token = self.visitors[n % len(self.visitors)] if len(self.visitors) > STREAMS else None
        return world["widget"], {"text": f"w{n}", **({"token": token} if token else {})}, {}

    def one(self, n: int) -> None:
        kind = KINDS[n % len(KINDS)]
        path, body, headers = self.request(kind, n)
        http = self.session()
        began = time.monotonic()
        try:
            answer = http.post(self.base + path, json=body, headers=headers, timeout=30)
            status = str(answer.status_code)
        except requests.RequestException as error:
            status = type(error).__name__
        took = time.monotonic() - began
        with self.lock:
            self.times[kind].append(took)
            if status not in ("200", "201"):
                self.failed[f"{kind} {status}"] += 1
            elif kind == "widget" and "token" not in body:
                self.visitors.append(answer.json()["token"])

    def hold_stream(self, path: str, headers: dict[str, str]) -> None:
        """Keep one stream open, reading its events, until the soak ends."""
        while not self.stop.is_set():
            try:
                with requests.get(
                    self.base + path, headers=headers, stream=True, timeout=60
                ) as answer:
                    for line in answer.iter_lines():
                        if self.stop.is_set():
                            return
                        if line.startswith(b"data:"):
                            with self.lock:
                                self.events += 1
            except requests.RequestException:
                self.stop.wait(1)

    def take(self) -> tuple[dict[str, list[float]], dict[str, int]]:
        with self.lock:
            times, failed = dict(self.times), dict(self.failed)
            self.times, self.failed = defaultdict(list), defaultdict(int)
        return times, failed


def table_rows() -> dict[str, int]:
    from django.apps import apps

    return {model._meta.db_table: model._default_manager.count() for model in apps.get_models()}


def judge(samples: list[dict[str, Any]], warm_up: int) -> list[dict[str, Any]]:
    """The verdict rows from the samples (each: rss by process, rows by table,
    p99 by kind, failures by kind); ``warm_up`` samples are left out."""
    settled, last = samples[warm_up], samples[-1]
    half = samples[warm_up + (len(samples) - 1 - warm_up) // 2]
    rows = []
    for name, after in last["rss"].items():
        before = settled["rss"][name]
        rows.append(row(NAME, f"{name} memory growth after warm-up (MiB, now {after / 2**20:.0f})",
                        100 * (after - before) / before, "%", "<= 10"))  # fmt: skip
    for kept in BOUNDED:
        before, after = half["rows"].get(kept, 0), last["rows"].get(kept, 0)
        rows.append(row(NAME, f"{kept} rows over the second half (now {after})",
                        100 * (after - before) / max(before, 1), "%", "<= 10"))  # fmt: skip
    for history in ("agents_message", "delivery_delivery"):
        before, after = half["rows"].get(history, 0), last["rows"].get(history, 0)
        rows.append(row(NAME, f"{history} rows added over the second half (now {after})",
                        after - before, "rows"))  # fmt: skip
    for kind in KINDS:
        first, final = settled["p99"].get(kind, float("nan")), last["p99"].get(kind, float("nan"))
        rows.append(row(NAME, f"{kind} p99, last interval / first after warm-up",
                        final / first if first else float("nan"), "x", "<= 1.5"))  # fmt: skip
        failed = sum(n for s in samples for k, n in s["failed"].items() if k.split()[0] == kind)
        rows.append(row(NAME, f"{kind} answers not 2xx", failed, "", "== 0"))
    return rows


def soak(minutes: float, rate: float, interval: float) -> list[dict[str, Any]]:
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as var:
        # Every party is on 127.0.0.1 here: the per-address limits, meant for
        # one office's visitors, would refuse a whole internet's.
        env = scenario_env(
            "soak", var, CHAT_API_RATE_LIMIT_PER_SECOND="0", BOT_API_RATE_LIMIT_PER_SECOND="0",
            WIDGET_NEW_VISITORS_PER_ADDRESS="1000000", WIDGET_ADDRESS_RATE_LIMIT="1000000",
        )  # fmt: skip
        os.environ.update(env)
        say("migrating and seeding")
        world = setup(receiver)
        say(f"starting {', '.join(PROCESSES)}")
        with Service(env, Path(var) / "logs", PROCESSES) as service:
            traffic = Traffic(service.base, world)
            for n in range(STREAMS + 1):  # the visitors whose streams are held
                traffic.one(len(KINDS) * n + KINDS.index("widget"))
            streams: list[tuple[str, dict[str, str]]] = [
                (f"/visitor/{token}/stream", {}) for token in traffic.visitors[:STREAMS]
            ]
            streams += [
                ("/api/agent/v1/stream", {"Authorization": f"Token {world['token']}"})
            ] * AGENT_STREAMS
            holders = [
                threading.Thread(target=traffic.hold_stream, args=s, daemon=True) for s in streams
            ]
            for holder in holders:
                holder.start()
            traffic.take()
            say(f"{minutes} minutes at {rate} operations a second, a sample every {interval:.0f} s")
            start = time.monotonic()
            ends, next_sample = start + minutes * 60, start + interval
            with ThreadPoolExecutor(8) as pool:
                for n in itertools.count():
                    due = start + n / rate
                    if due >= ends:
                        break
                    if due >= next_sample:
                        samples.append(sample(service, traffic))
                        say(describe(samples[-1]))
                        next_sample += interval
                    time.sleep(max(0.0, due - time.monotonic()))
                    pool.submit(traffic.one, n)
            samples.append(sample(service, traffic))
            traffic.stop.set()
    receiver.shutdown()
    warm_up = max(1, len(samples) // 5)
    rows = judge(samples, warm_up)
    shape = f"{minutes:g} min at {rate:g} op/s, {backend(env)}"
    rows.insert(0, row(NAME, f"{shape}: A3 received", len(receiver.arrived), ""))
    rows.insert(1, row(NAME, "stream events received", traffic.events, ""))
    return rows


def sample(service: Service, traffic: Traffic) -> dict[str, Any]:
    times, failed = traffic.take()
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rss": {name: service.rss_bytes([name]) for name in PROCESSES},
        "rows": table_rows(),
        "p99": {kind: percentile(values, 0.99) * 1000 for kind, values in times.items() if values},
        "p50": {kind: statistics.median(values) * 1000 for kind, values in times.items() if values},
        "count": {kind: len(values) for kind, values in times.items()},
        "failed": failed,
    }


def describe(sample: dict[str, Any]) -> str:
    memory = " ".join(f"{name} {rss / 2**20:.0f}" for name, rss in sample["rss"].items())
    p99 = " ".join(f"{kind} {ms:.0f}" for kind, ms in sample["p99"].items())
    bounded = " ".join(f"{t.split('_', 1)[1]} {sample['rows'].get(t, 0)}" for t in BOUNDED)
    return f"MiB {memory} | p99 ms {p99} | rows {bounded} | failed {dict(sample['failed'])}"


def fault_soak(minutes: float, rounds: int | None, size: float) -> list[dict[str, Any]]:
    """Rounds of the fault run until ``minutes`` have passed (or ``rounds``),
    each with ``size`` times the suite's traffic."""
    with tempfile.TemporaryDirectory() as var:
        os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", VAR_DIR=var)
        import django

        django.setup()
        from tests.reliability.fault_run import FaultRun, Shape

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the target's line a request

        ends = time.monotonic() + minutes * 60
        say("starting PostgreSQL, Redis, web, worker, delivery and beat of the run's own")
        with FaultRun(Path(var) / "run", Shape().scaled(size)) as fault_run:
            while (len(fault_run.rounds) < rounds) if rounds else time.monotonic() < ends:
                fault_run.round()
                say(f"round {len(fault_run.rounds)} done: {', '.join(fault_run.counts.faults)}")
            try:
                counts, failure = fault_run.check(), ""
            except AssertionError as error:
                counts, failure = fault_run.counts, str(error).splitlines()[0]
    for line in counts.lines():
        say(line)
    shape = f"{len(fault_run.rounds)} rounds of {size:g}x the suite's traffic"
    checks_failed = "checks failed" + (f" ({failure})" if failure else "")
    figures: list[tuple[str, float, str, str]] = [  # figure, value, unit, goal
        (f"{shape}: faults ({', '.join(counts.faults)})", len(counts.faults), "", ""),
        (checks_failed, int(bool(failure)), "", "== 0"),
        ("messages stored more than once", sum(counts.duplicates_stored.values()), "", "== 0"),
        ("replies delivered", counts.delivered, "", ""),
        ("duplicate arrivals (same webhook-id)", counts.duplicates_delivered, "", ""),
        ("max delivery delay", counts.max_delivery_delay, "s", ""),
        ("deliveries pending after the sweep", counts.pending_after_sweep, "", "== 0"),
        ("answers 503 (a dependency down)", counts.statuses["503"], "", ""),
        ("run time", counts.seconds / 60, "min", ""),
    ]
    return [row(NAME, f"faults: {f}", value, unit, goal) for f, value, unit, goal in figures]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=20, help="operations a second, all kinds")
    parser.add_argument("--interval", type=float, default=60, help="seconds between samples")
    parser.add_argument("--faults", action="store_true", help="the fault run, in rounds")
    parser.add_argument("--rounds", type=int, help="with --faults: this many rounds")
    parser.add_argument(
        "--size", type=float, default=1.0, help="with --faults: each round's traffic, x the suite's"
    )
    args = parser.parse_args()
    started = datetime.now(UTC)
    if args.faults:
        rows = fault_soak(args.minutes, args.rounds, args.size)
    else:
        rows = soak(args.minutes, args.rate, args.interval)
    seconds = (datetime.now(UTC) - started).total_seconds()
    shape = {"started": started.isoformat(timespec="seconds"), "seconds": round(seconds),
             "quick": False, "scenarios": ["soak-faults" if args.faults else "soak"]}  # fmt: skip
    path = write(rows, shape, ROOT / "bench" / "results" / "soak")
    print(table(rows))
    print(f"written to {path.relative_to(ROOT)}")
    print(json.dumps({"ok": all(r["ok"] is not False for r in rows)}))


if __name__ == "__main__":
    main()
