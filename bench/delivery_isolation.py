"""Scenario 4, delivery isolation: a healthy receiver's delivery time beside
dripping ones.

Runs one Celery worker process shaped like the Procfile's ``delivery``
process (queue ``delivery``, 32 threads) on a database of its own
(``bench.service.scenario_env``: PostgreSQL when DATABASE_URL is set, else a
fresh SQLite file; Redis as the broker when REDIS_URL is set, else the
filesystem broker), with the default adaptive in-flight limits per endpoint.
Sends agent replies (policy ``chat_api_message``) to a healthy receiver, which
answers at once, at a steady pace, twice side by side in one run: alone, and
while ten dripping receivers — 200, Content-Length 100000, Connection: close,
then a byte every 0.5 s, as in the security review — and ten that read the
request and never answer each have several deliveries going (measured
once the worker has taken their messages: while they drip). Prints p50/p99
of the healthy deliveries' time from enqueue to arrival at the receiver, in
both runs, and their ratio (goal: p99 with the drippers within 1.5x of p99
without), and the healthy deliveries' rate beside the drippers over their
rate alone (goal: at least 0.9). The runner
makes RUNS such runs one after the other (80 healthy deliveries each) and
shows the worst of them: the issue asks for the goals in each of five
consecutive runs.

    .venv/bin/python -m bench --only delivery_isolation [--quick]
    .venv/bin/python bench/delivery_isolation.py [--healthy 300] [--drippers 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import get_context
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PACE = 0.1  # seconds between two healthy deliveries
THREADS = 32  # the Procfile's delivery concurrency


class HealthyReceiver(ThreadingHTTPServer):
    """Answers every request at once; notes when each delivery arrived."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrived: dict[str, float] = {}  # webhook-id -> time.monotonic()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real integrator would

    def do_POST(self) -> None:
        arrived = time.monotonic()
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        assert isinstance(self.server, HealthyReceiver)
        self.server.arrived.setdefault(self.headers["webhook-id"], arrived)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def run_drippers(count: int, pipe: Connection) -> None:
    """In a process of its own (a dripping receiver is elsewhere; here it must
    not compete for the bench's own GIL): start ``count`` drippers, send their
    URLs, then answer each request with how many connections each has open
    and the most it ever had open at once."""
    from tests.delivery.dripper import Dripper

    drippers = [Dripper("body_close", interval=0.5, limit=90).start() for _ in range(count)]
    drippers += [Dripper("silent", limit=90).start() for _ in range(count)]  # never answer
    pipe.send([d.url() for d in drippers])
    while pipe.recv() != "stop":
        pipe.send([(len(d.open_now()), d.most_open) for d in drippers])
    for dripper in drippers:
        dripper.stop()


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "delivery",
         "-P", "threads", "-c", str(THREADS), "-l", "INFO",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while b" ready." not in log.read_bytes():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start:\n{log.read_text()}")
        time.sleep(0.2)
    return worker


def send_healthy(count: int, endpoint: Any, receiver: HealthyReceiver) -> tuple[list[float], float]:
    """Enqueue ``count`` replies at a steady pace: seconds from enqueue to
    arrival of each, and deliveries a second from the first enqueue to the
    last arrival."""
    from delivery import services

    enqueued: dict[str, float] = {}
    for n in range(count):
        started = time.monotonic()
        delivery = services.enqueue(
            endpoint=endpoint,
            purpose="bench.healthy",
            event="message",
            body={"n": n, "text": "Hello from an agent"},
            policy="chat_api_message",
        )
        enqueued[delivery.webhook_id] = started
        time.sleep(max(0.0, started + PACE - time.monotonic()))
    deadline = time.monotonic() + 60
    while len(receiver.arrived.keys() & enqueued.keys()) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("healthy deliveries did not all arrive within 60 s")
        time.sleep(0.05)
    first = min(enqueued.values())
    last = max(receiver.arrived[key] for key in enqueued)
    return [receiver.arrived[key] - at for key, at in enqueued.items()], count / (last - first)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


NAME = "4 isolation"


def measure(healthy: int, drippers: int, per_dripper: int) -> dict[str, Any]:
    """The two runs side by side; what ``scenario`` and ``main`` show."""
    # Before any thread of ours exists: the drippers' process.
    pipe, child_pipe = get_context("spawn").Pipe()
    dripping = get_context("spawn").Process(
        target=run_drippers, args=(drippers, child_pipe), daemon=True
    )
    dripping.start()
    dripper_urls: list[str] = pipe.recv()

    def dripper_state() -> list[tuple[int, int]]:
        pipe.send("state")
        state: list[tuple[int, int]] = pipe.recv()
        return state

    from bench.service import backend, scenario_env

    with tempfile.TemporaryDirectory() as var:
        env = scenario_env("isolation", var)
        os.environ.update(env)
        import django

        django.setup()
        from django.conf import settings

        from config.celery import app
        from delivery import services

        app.control.purge()
        cap = settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT
        receiver = HealthyReceiver()
        threading.Thread(target=receiver.serve_forever, daemon=True).start()
        healthy_endpoint, _ = services.create_endpoint(url=receiver.url())
        worker = start_worker(env, Path(var) / "worker.log")
        try:
            send_healthy(10, healthy_endpoint, receiver)  # warm up: connections, threads
            alone, alone_rate = send_healthy(healthy, healthy_endpoint, receiver)

            for url in dripper_urls:
                endpoint, _ = services.create_endpoint(url=url)
                for n in range(per_dripper):
                    services.enqueue(endpoint=endpoint, purpose="bench.dripping", event="message",
                                     body={"n": n}, policy="chat_api_message")  # fmt: skip
            # A dripper's limit starts at 2 and halves with its first time-out:
            # one try open at each is what holds from then on.
            held = min(1, per_dripper) * len(dripper_urls)
            deadline = time.monotonic() + 30
            while sum(now for now, _ in dripper_state()) < held:
                if time.monotonic() > deadline:
                    raise RuntimeError("the dripping receivers did not get their tries")
                time.sleep(0.05)
            # Measured while they drip, not while the worker takes the burst of
            # messages that enqueued their deliveries: until each is in flight,
            # asleep for a slot or waiting for its retry's time.
            from django.utils import timezone

            from delivery.models import Delivery

            while Delivery.objects.filter(
                purpose="bench.dripping",
                status=Delivery.Status.PENDING,
                waiting_for_slot=False,
                locked_until__isnull=True,
                next_attempt_at__lte=timezone.now(),
            ).exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker did not take the drippers' deliveries")
                time.sleep(0.05)
            beside, beside_rate = send_healthy(healthy, healthy_endpoint, receiver)
            state = dripper_state()
        finally:
            # Measured: no warm shutdown, which would wait for the tries in
            # flight to the drippers (3 s), five times over.
            worker.kill()
            worker.wait(30)
            pipe.send("stop")
            dripping.join(10)
            receiver.shutdown()
    return {
        "backend": backend(env),
        "cap": cap,
        "held": held,
        "open_at_end": sum(now for now, _ in state),
        "most_open": max(most for _, most in state),
        "alone": alone,
        "beside": beside,
        "rates": (alone_rate, beside_rate),
    }


RUNS = 5  # the "in each of five consecutive runs"


def _measure_into(result: Connection, healthy: int, drippers: int, per_dripper: int) -> None:
    try:
        result.send(measure(healthy, drippers, per_dripper))
    except BaseException as error:
        result.send(error)
        raise


def measured(healthy: int, drippers: int, per_dripper: int) -> dict[str, Any]:
    """``measure`` in a process of its own: each run gets a fresh database,
    its settings and its worker, none of them left over from the run before."""
    context = get_context("spawn")
    pipe, child_pipe = context.Pipe()
    run = context.Process(target=_measure_into, args=(child_pipe, healthy, drippers, per_dripper))
    run.start()
    outcome = pipe.recv()
    run.join(60)
    if isinstance(outcome, BaseException):
        raise outcome
    result: dict[str, Any] = outcome
    return result


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    from bench.run import row, say

    runs, healthy, drippers, per_dripper = (1, 80, 10, 4) if quick else (RUNS, 80, 10, 8)
    ratios, rates, most_open, p99s = [], [], 0, []
    for run in range(runs):
        say(f"run {run + 1} of {runs}: {healthy} healthy deliveries alone, then beside "
            f"{drippers} dripping and {drippers} silent receivers")  # fmt: skip
        m = measured(healthy, drippers, per_dripper)
        alone_p99, beside_p99 = percentile(m["alone"], 0.99), percentile(m["beside"], 0.99)
        alone_rate, beside_rate = m["rates"]
        ratios.append(beside_p99 / alone_p99)
        rates.append(beside_rate / alone_rate)
        most_open = max(most_open, m["most_open"])
        p99s.append((alone_p99, beside_p99))
    worst = max(range(runs), key=lambda n: ratios[n])
    where = f"{healthy} at {1 / PACE:.0f}/s, {m['backend']}"
    each = " / ".join(f"{ratio:.2f}" for ratio in ratios)
    return [
        row(
            NAME,
            f"healthy p99 beside {drippers} drippers and {drippers} silent, the run of the worst "
            f"ratio ({where})",
            1000 * p99s[worst][1],
            "ms",
            reference=1000 * p99s[worst][0],
        ),
        row(
            NAME,
            f"healthy p99, beside the drippers / alone, worst of {runs} runs ({each})",
            max(ratios),
            "x",
            "<= 1.5",
        ),
        row(
            NAME,
            f"healthy deliveries/s, beside the drippers / alone, worst of {runs} runs",
            min(rates),
            "x",
            ">= 0.9",
        ),
        row(NAME, "most tries open at one dripping or silent receiver", most_open, "", "<= 2"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--healthy", type=int, default=300, help="healthy deliveries per run")
    parser.add_argument("--drippers", type=int, default=10)
    parser.add_argument("--per-dripper", type=int, default=8, help="deliveries to each dripper")
    args = parser.parse_args()
    m = measure(args.healthy, args.drippers, args.per_dripper)
    print(f"Delivery isolation: {args.healthy} healthy deliveries, {1 / PACE:.0f}/s, one worker "
          f"x {THREADS} threads, {m['backend']}, at most {m['cap']} per endpoint")  # fmt: skip
    print(f"  drippers: {args.drippers} x {args.per_dripper} deliveries; tries open: {m['held']} "
          f"when the healthy run began, {m['open_at_end']} when it ended; "
          f"most open at one dripper: {m['most_open']}")  # fmt: skip
    for name, times in (("alone", m["alone"]), (f"beside {args.drippers} drippers", m["beside"])):
        print(f"  {name:22} p50 {percentile(times, 0.5) * 1000:7.1f} ms   "
              f"p99 {percentile(times, 0.99) * 1000:7.1f} ms   "
              f"mean {statistics.fmean(times) * 1000:7.1f} ms")  # fmt: skip
    ratio = percentile(m["beside"], 0.99) / percentile(m["alone"], 0.99)
    print(f"  ratio p99 beside/alone: {ratio:.2f} (goal: at most 1.5)")


if __name__ == "__main__":
    main()
