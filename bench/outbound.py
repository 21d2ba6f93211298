"""Scenario 3, outbound throughput: agent replies (A3) to ONE integrator
endpoint that answers each request after 100 ms, delivered by the Procfile's
``delivery`` worker, beside what the same receiver serves a direct client.

A burst of REPLIES agent replies, round-robin over CHATS active chats (one
integrator, many chats: each chat keeps its order, the chats go in
parallel), is posted through the services while the delivery worker is
stopped, so their Celery messages wait in the broker; then the worker starts
and drains them. The figure is deliveries per second from the first request
to arrive to the last (the worker's start-up left out), or of what arrived
within LIMIT seconds. The reference is the receiver's own capacity, measured
in the same run by CLIENTS threads of this process posting to it directly.

    .venv/bin/python -m bench --only outbound [--quick]
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from bench.reply_latency import active_chats
from bench.run import row, say
from bench.service import Service, backend, scenario_env

NAME = "3 outbound"
REPLY_SECONDS = 0.1  # the integrator answers each request after this long
CHATS = 100
LIMIT = 90.0  # seconds the drain may take; a slower one is measured on what arrived
CLIENTS = 200  # threads of the direct client (more than the goal needs: 1000/s x 0.1 s)


class Receiver(ThreadingHTTPServer):
    """The integrator: HTTP/1.1 with keep-alive, a thread per connection, each
    answer 200 after REPLY_SECONDS; counts the requests and when they came."""

    daemon_threads = True
    request_queue_size = 1024  # the default 5 makes connect()s wait on SYN retries

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.arrivals: list[float] = []

    def url(self, path: str = "/a3") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def clear(self) -> None:
        with self.lock:
            self.arrivals = []

    def count(self) -> int:
        with self.lock:
            return len(self.arrivals)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        assert isinstance(self.server, Receiver)
        with self.server.lock:
            self.server.arrivals.append(time.monotonic())
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        time.sleep(REPLY_SECONDS)
        self.send_response(200)
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


def setup(receiver: Receiver, replies: int) -> None:
    """An agent with CHATS active chats on a Chat API channel whose A3 goes to
    ``receiver``, and ``replies`` agent replies over them, not yet sent."""
    agent, active = active_chats(receiver.url(), CHATS)
    from agents import services as chats
    from agents.content import Content

    say(f"{replies} replies over {CHATS} chats")
    for n in range(replies):
        text = Content("text", f"reply {n}", {})
        chats.post_agent_message(chat=active[n % CHATS], agent=agent, content=text)


def drain(receiver: Receiver, replies: int) -> tuple[float, int, float]:
    """(deliveries a second, how many arrived, seconds) once the first arrived."""
    deadline = time.monotonic() + LIMIT
    while receiver.count() < replies and time.monotonic() < deadline:
        time.sleep(0.05)
    with receiver.lock:
        arrivals = list(receiver.arrivals)
    if len(arrivals) < 2:
        return 0.0, len(arrivals), LIMIT
    if len(arrivals) < replies:  # cut off: what arrived, over the time it had
        seconds = max(arrivals[-1], time.monotonic()) - arrivals[0]
    else:  # the last one answers REPLY_SECONDS after it arrived
        seconds = arrivals[-1] + REPLY_SECONDS - arrivals[0]
    return len(arrivals) / seconds, len(arrivals), seconds


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    replies = 300 if quick else 1000
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as var:
            env = scenario_env("outbound", var)
            os.environ.update(env)
            say("seeding")
            setup(receiver, replies)
            say("the receiver's own capacity, direct")
            reference = capacity(receiver, 3.0 if quick else 5.0)
            receiver.clear()
            say(f"starting the delivery worker; it drains {replies} deliveries")
            with Service(env, Path(var) / "logs", ("delivery",)):
                rate, arrived, seconds = drain(receiver, replies)
            say(f"{arrived} arrived in {seconds:.1f} s")
    finally:
        receiver.shutdown()
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
    ]


if __name__ == "__main__":
    from bench.run import table

    print(table(scenario()))
