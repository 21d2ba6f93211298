"""Scenario 7, scale-out: two nodes against one, each node a machine of its
own as far as one machine allows.

A node is the Procfile's ``web``, ``worker`` and ``delivery`` processes
(bench/service.py) pinned to one core (``taskset -c``), its web process on a
port of its own (``WEB_CONCURRENCY=1``: one uvicorn worker per core, as
config/gunicorn.py says), its Celery workers named after it (``-n
worker.node1@<host>``); the nodes share PostgreSQL and Redis. PostgreSQL,
Redis, the load generator (this process's threads) and the integrator's
receiver are not pinned: they take whatever the nodes leave of the two
cores, and the other engineers' work takes its share too.

Each of the two runs (one node on the first core; two nodes, one on each)
measures, on the same database one after the other:

- **A2 throughput**: CLIENTS concurrent integrators send A2 user messages
  as scenario 1 does (bench/inbound.py's channel and bodies, after a
  warm-up that also makes its known clients), each request to the next
  node's web process in turn (a round-robin balancer);
- **outbound throughput**: a burst of agent replies over CHATS chats to one
  integrator endpoint answering after 100 ms, posted while no delivery
  worker runs, then drained by every node's delivery worker started side by
  side (bench/outbound.py's burst, receiver and drain). Each run has an
  endpoint (a receiver) of its own, so both start at the adaptive limit's
  first value, and a delivery the first run left behind is not counted in
  the second.

Beside each figure: the nodes' CPU (% of the one core each has; a node near
100 % is what bounds the run, one far below is waiting on something
shared), the load generator's (this process's), and the load average at
the start and the end.

    .venv/bin/python -m bench --only scale_out [--quick]
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import inbound
from bench.chat_api_inbound import hammer
from bench.outbound import CHATS, REPLY_SECONDS, Receiver, burst, drain
from bench.reply_latency import active_chats
from bench.run import row, say
from bench.service import Node, Service, backend, scenario_env

NAME = "7 scale-out"
CLIENTS = inbound.CLIENTS  # concurrent integrators, as scenario 1
GOAL = ">= 1.7"


def nodes(count: int) -> list[Node]:
    """``count`` nodes, each on one core of this process's own."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < count:
        raise RuntimeError(f"{count} nodes need {count} cores; this process may use {cores}")
    return [Node(f"node{i + 1}", str(core)) for i, core in enumerate(cores[:count])]


def started(
    stack: contextlib.ExitStack, env: dict[str, str], logs: Path, processes: tuple[str, ...],
    count: int,
) -> list[Service]:  # fmt: skip
    """``processes`` of ``count`` nodes, started side by side, stopped with ``stack``."""
    services = [
        stack.enter_context(Service(env, logs / node.name, processes, node=node, wait=False))
        for node in nodes(count)
    ]
    for service in services:
        service.ready()
    return services


def cpu(services: list[Service], names: tuple[str, ...]) -> list[float]:
    return [service.cpu_seconds(names) for service in services]


def own_cpu() -> float:
    """CPU seconds of this process (the load generator's threads), so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def busy(before: list[float], after: list[float], seconds: float) -> float:
    """The nodes' mean CPU over ``seconds``, in % of one core (each has one)."""
    return 100 * sum(b - a for a, b in zip(before, after, strict=True)) / len(before) / seconds


def run(
    count: int, env: dict[str, str], logs: Path, paths: dict[str, Any], receiver: Receiver,
    messages: int, replies: int, limit: float,
) -> dict[str, float]:  # fmt: skip
    """A2 and outbound throughput of ``count`` nodes."""
    with contextlib.ExitStack() as stack:
        say(f"{count} node(s): starting web and worker")
        front = started(stack, env, logs, ("web", "worker"), count)
        bases = [service.base for service in front]
        hammer(bases, paths["a2"], inbound.a2_body, inbound.KNOWN, CLIENTS)  # warm-up
        say(f"{count} node(s): {messages} A2 messages from {CLIENTS} clients")
        before, mine = cpu(front, ("web", "worker")), own_cpu()
        codes, _, took = hammer(bases, paths["a2"], inbound.a2_body, messages, CLIENTS)
        a2_cpu = busy(before, cpu(front, ("web", "worker")), took)
        killed = sum((s.logs / "web.log").read_text().count("WORKER TIMEOUT") for s in front)
        generator = 100 * (own_cpu() - mine) / took
        agent, active = active_chats(receiver.url(), CHATS, f"bench-nodes-{count}@example.com")
        burst(agent, active, replies)
        say(f"{count} node(s): starting the delivery workers; they drain {replies} deliveries")
        back = started(stack, env, logs, ("delivery",), count)
        before, began = cpu(back, ("delivery",)), time.monotonic()
        rate, arrived, seconds = drain(receiver, replies, limit)
        drain_cpu = busy(before, cpu(back, ("delivery",)), time.monotonic() - began)
        say(f"{count} node(s): {arrived} arrived in {seconds:.1f} s")
    return {
        "a2": codes.count(200) / took,
        "not 200": len(codes) - codes.count(200),
        "no answer": codes.count(0),
        "killed": killed,
        "a2 cpu": a2_cpu,
        "generator": generator,
        "outbound": rate,
        "arrived": arrived,
        "drain cpu": drain_cpu,
        "peak": receiver.peak,
    }


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    messages = 300 if quick else 1000
    replies = 200 if quick else 400
    limit = 45.0 if quick else 90.0
    load_before = os.getloadavg()[0]
    # A receiver (an endpoint) per run: a delivery the first run left
    # behind, if cut off, is not counted in the second.
    receivers = [Receiver(), Receiver()]
    for receiver in receivers:
        threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as var:
            env = scenario_env("scale_out", var, WEB_CONCURRENCY="1")
            os.environ.update(env)
            say("migrating and seeding")
            paths = inbound.setup()
            logs = Path(var) / "logs"
            one = run(1, env, logs / "one", paths, receivers[0], messages, replies, limit)
            two = run(2, env, logs / "two", paths, receivers[1], messages, replies, limit)
    finally:
        for receiver in receivers:
            receiver.shutdown()
    shape = f"{CLIENTS} clients, {messages} messages, {backend(env)}"
    reply = f"{REPLY_SECONDS * 1000:.0f} ms"
    outbound = f"A3 deliveries/s to one endpoint answering in {reply}"
    return [
        row(NAME, f"A2 user messages, one node on one core ({shape})", one["a2"], "msg/s"),
        row(NAME, "A2 user messages, two nodes on a core each", two["a2"], "msg/s", "", one["a2"]),
        row(NAME, "A2, two nodes / one", ratio(two["a2"], one["a2"]), "x", GOAL),
        row(NAME, "A2 answers not 200, both runs", one["not 200"] + two["not 200"], "", "== 0"),
        row(NAME, "of which no answer (reset, time-out)", one["no answer"] + two["no answer"], ""),
        row(
            NAME, "web workers killed for a time-out, both runs", one["killed"] + two["killed"], ""
        ),
        row(
            NAME,
            "nodes' web + worker CPU during A2, two nodes (ref. one)",
            two["a2 cpu"],
            "% core",
            "",
            one["a2 cpu"],
        ),
        row(
            NAME,
            "load generator's CPU during A2, two nodes (ref. one)",
            two["generator"],
            "% core",
            "",
            one["generator"],
        ),
        row(
            NAME, f"{outbound}, one node ({one['arrived']:.0f} of {replies})", one["outbound"], "/s"
        ),
        row(
            NAME,
            f"{outbound}, two nodes ({two['arrived']:.0f} of {replies})",
            two["outbound"],
            "/s",
            "",
            one["outbound"],
        ),
        row(NAME, "outbound, two nodes / one", ratio(two["outbound"], one["outbound"]), "x", GOAL),
        row(
            NAME,
            "most requests in flight to it at once, two nodes (ref. one)",
            two["peak"],
            "",
            "",
            one["peak"],
        ),
        row(
            NAME,
            "nodes' delivery CPU during the drain, two nodes (ref. one)",
            two["drain cpu"],
            "% core",
            "",
            one["drain cpu"],
        ),
        row(
            NAME,
            "load average (1 min) at the end (ref. at the start)",
            os.getloadavg()[0],
            "",
            "",
            load_before,
        ),
    ]


def ratio(value: float, reference: float) -> float:
    return value / reference if reference else math.nan


if __name__ == "__main__":
    from bench.run import table

    print(table(scenario()))
