"""Scenario 3, outbound throughput: agent replies (A3) to ONE integrator
endpoint that answers each request after 100 ms, delivered by the Procfile's
``delivery`` worker — one process per CPU, as docs/operations.md runs it on
a worker machine — beside what the same receiver serves a direct client.

A burst of REPLIES agent replies, round-robin over CHATS active chats (one
integrator, many chats: each chat keeps its order, the chats go in
parallel), is posted through the services while the delivery worker is
stopped, so their Celery messages wait in the broker; then the worker starts
and drains them. The figure is deliveries per second from the first request
to arrive to the last (the worker's start-up left out), or of what arrived
within LIMIT seconds. The reference is the receiver's own capacity, measured
in the same run by CLIENTS threads of this process posting to it directly.
Beside it: the most requests the receiver had in flight at once, the
endpoint's adaptive in-flight limit once the burst was drained, and the
delivery workers' CPU time per delivery (their bookkeeping and their HTTP).

Scenario 5, the retry schedule, runs beside it: as the worker starts on the
burst, one agent reply goes to a second integrator that answers 500 at once.
Its tries should reach that integrator 0, 3 and 6 s after the reply (± 0.5
s), and the agent see the reply failed within 10 s.

    .venv/bin/python -m bench --only outbound [--quick]
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from bench.reply_latency import active_chats
from bench.run import row, say
from bench.service import Service, backend, per_core, scenario_env

NAME = "3 outbound"
RETRIES = "5 retry schedule"
REPLY_SECONDS = 0.1  # the integrator answers each request after this long
CHATS = 100
LIMIT = 90.0  # seconds the drain may take; a slower one is measured on what arrived
CLIENTS = 200  # threads of the direct client (more than the goal needs: 1000/s x 0.1 s)


class Receiver(ThreadingHTTPServer):
    """The integrator: HTTP/1.1 with keep-alive, a thread per connection, each
    answer 200 after REPLY_SECONDS; counts the requests, when they came and
    the most it had in flight at once."""

    daemon_threads = True
    request_queue_size = 1024  # the default 5 makes connect()s wait on SYN retries

    def __init__(self, status: int = 200, delay: float = REPLY_SECONDS) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status, self.delay = status, delay
        self.lock = threading.Lock()
        self.arrivals: list[float] = []
        self.in_flight = 0
        self.peak = 0

    def url(self, path: str = "/a3") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def clear(self) -> None:
        with self.lock:
            self.arrivals = []
            self.peak = 0

    def count(self) -> int:
        with self.lock:
            return len(self.arrivals)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        assert isinstance(self.server, Receiver)
        with self.server.lock:
            self.server.arrivals.append(time.monotonic())
            self.server.in_flight += 1
            self.server.peak = max(self.server.peak, self.server.in_flight)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        time.sleep(self.server.delay)
        with self.server.lock:
            self.server.in_flight -= 1
        self.send_response(self.server.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def capacity(receiver: Receiver, seconds: float) -> float:
    """Requests a second the receiver answers to CLIENTS direct keep-alive clients."""
    stop = time.monotonic() + seconds
    done = [0] * CLIENTS

    def client(i: int) -> None:
        with requests.Session() as session:
            while time.monotonic() < stop:
                session.post(receiver.url("/direct"), data=b"{}", timeout=30)
                done[i] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.monotonic() - began)


def setup(receiver: Receiver, failing: Receiver, replies: int) -> Callable[[], Any]:
    """An agent with CHATS active chats on a Chat API channel whose A3 goes to
    ``receiver``, and ``replies`` agent replies over them, not yet sent; and
    a chat on a channel whose A3 goes to ``failing``. Returns what posts one
    reply in that chat (the message)."""
    agent, active = active_chats(receiver.url(), CHATS)
    from agents import services as chats
    from agents.content import Content
    from channels_api.services import create_chat_api_channel

    burst(agent, active, replies)
    channel, _ = create_chat_api_channel(name="Failing", webhook_url=failing.url(), agents=[agent])
    client = chats.get_or_create_client(channel=channel.channel, external_id="failing")
    hello = chats.post_client_message(client=client, content=Content("text", "hi", {}))
    chat = chats.accept_chat(chat=hello.chat, agent=agent)
    return lambda: chats.post_agent_message(
        chat=chat, agent=agent, content=Content("text", "to a failing integrator", {})
    )


def burst(agent: Any, active: list[Any], replies: int) -> None:
    """``replies`` replies of ``agent``, round-robin over its chats
    ``active``, posted through the services: each one's delivery is
    committed and its Celery message waits in the broker for a worker."""
    from agents import services as chats
    from agents.content import Content

    say(f"{replies} replies over {len(active)} chats")
    for n in range(replies):
        text = Content("text", f"reply {n}", {})
        chats.post_agent_message(chat=active[n % len(active)], agent=agent, content=text)


def retry_schedule(failing: Receiver, message: Any, posted: float) -> tuple[list[float], float]:
    """Seconds from the reply to each try's arrival at ``failing``, and to its
    delivery's failure, which marks the agent's message failed in the same
    transaction (NaN: not failed by the end of the drain, or 20 s after the
    reply when the drain was quicker)."""
    from delivery.models import Delivery

    time.sleep(max(0.0, posted + 20 - time.monotonic()))
    failed = Delivery.objects.filter(
        endpoint__url__startswith=failing.url(), status=Delivery.Status.FAILED
    ).values_list("completed_at", flat=True)
    at = failed.first()
    seen = math.nan if at is None else (at - message.created).total_seconds()
    with failing.lock:
        return [arrived - posted for arrived in failing.arrivals], seen


def drain(receiver: Receiver, replies: int, limit: float = LIMIT) -> tuple[float, int, float]:
    """(deliveries a second, how many arrived, seconds) once the first
    arrived, of what arrived within ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while receiver.count() < replies and time.monotonic() < deadline:
        time.sleep(0.05)
    with receiver.lock:
        arrivals = list(receiver.arrivals)
    if len(arrivals) < 2:
        return 0.0, len(arrivals), limit
    if len(arrivals) < replies:  # cut off: what arrived, over the time it had
        seconds = max(arrivals[-1], time.monotonic()) - arrivals[0]
    else:  # the last one answers REPLY_SECONDS after it arrived
        seconds = arrivals[-1] + REPLY_SECONDS - arrivals[0]
    return len(arrivals) / seconds, len(arrivals), seconds


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    replies = 300 if quick else 1000
    receiver, failing = Receiver(), Receiver(status=500, delay=0.0)
    for server in (receiver, failing):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as var:
            env = scenario_env("outbound", var)
            os.environ.update(env)
            say("seeding")
            post_failing = setup(receiver, failing, replies)
            say("the receiver's own capacity, direct")
            reference = capacity(receiver, 3.0 if quick else 5.0)
            receiver.clear()
            say(f"starting the delivery worker; it drains {replies} deliveries")
            workers = per_core("delivery")
            with Service(env, Path(var) / "logs", workers) as service:
                began = service.cpu_seconds(workers)
                posted, message = time.monotonic(), post_failing()
                rate, arrived, seconds = drain(receiver, replies)
                cpu = service.cpu_seconds(workers) - began
                tries, seen = retry_schedule(failing, message, posted)
            say(f"{arrived} arrived in {seconds:.1f} s")
            from delivery.models import Endpoint

            limits = Endpoint.objects.filter(url__startswith=receiver.url()).values_list(
                "in_flight_limit", flat=True
            )
            limit = max(limits, default=0)
    finally:
        receiver.shutdown()
        failing.shutdown()
    off = max((abs(at - due) for at, due in zip(tries, (0, 3, 6), strict=False)), default=math.nan)
    return [
        row(
            NAME,
            f"A3 deliveries/s to one endpoint answering in {REPLY_SECONDS * 1000:.0f} ms "
            f"({arrived} of {replies}, {backend(env)})",
            rate,
            "/s",
            ">= 1000",
            reference=reference,
        ),
        row(NAME, "most requests in flight to it at once", receiver.peak, "", ">= 100"),
        row(NAME, "its in-flight limit after the burst", limit, "", ""),
        row(
            NAME,
            f"delivery workers' CPU per delivery ({len(workers)} processes)",
            1000 * cpu / max(arrived, 1),
            "ms",
        ),
        row(
            RETRIES,
            "tries to a failing integrator during the burst: "
            + (" / ".join(f"{at:.1f}" for at in tries) or "none")
            + " s (due 0 / 3 / 6); latest off by",
            off if len(tries) == 3 else math.nan,
            "s",
            "<= 0.5",
        ),
        row(RETRIES, "the agent sees the reply failed after", seen, "s", "<= 10"),
    ]


if __name__ == "__main__":
    from bench.run import table

    print(table(scenario()))
