"""A2 throughput on one channel: how many user messages a second get in.

Runs the web process as production does (gunicorn -c config/gunicorn.py
config.asgi:application: uvicorn workers, access log on), with 2 workers,
against the configured database (DATABASE_URL, else a fresh SQLite file), and posts
messages over real HTTP from several client threads, twice side by side:
with the default per-channel rate limit and with it switched off. Prints
messages per second for both and their ratio; the limiter must not be what
holds a busy integrator back.

    .venv/bin/python bench/chat_api_inbound.py [--messages 2000] [--clients 16]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [PY, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout


def hammer(
    base: str | Sequence[str], path: str, body: Callable[[int], dict[str, Any]] | None,
    requests_: int, clients: int,
) -> tuple[list[int], list[float], float]:  # fmt: skip
    """``requests_`` requests to ``base + path`` from ``clients`` threads (each
    its own keep-alive connection): POST ``body(i)``, or GET when ``body`` is
    None; to several servers, request ``i`` goes to ``base[i % len(base)]``
    (a round-robin balancer). The status codes (0: no answer), each
    request's seconds, and the seconds in all."""
    bases = [base] if isinstance(base, str) else list(base)
    session = requests.Session()
    session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=clients))

    def send(i: int) -> tuple[int, float]:
        url = f"{bases[i % len(bases)]}{path}"
        began = time.perf_counter()
        try:
            if body is None:
                answer = session.get(url, timeout=30)
            else:
                answer = session.post(url, json=body(i), timeout=30)
        except requests.RequestException:  # no answer (reset, time-out): counted, not fatal
            return 0, time.perf_counter() - began
        return answer.status_code, time.perf_counter() - began

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = list(pool.map(send, range(requests_)))
    elapsed = time.perf_counter() - started
    return [code for code, _ in done], [took for _, took in done], elapsed


def post_many(
    env: dict[str, str], path: str, body: Callable[[int], dict[str, Any]], messages: int,
    clients: int,
) -> tuple[list[int], float]:  # fmt: skip
    """Start the web process as production does (gunicorn, 2 uvicorn workers),
    POST ``body(i)`` for each of ``messages`` from ``clients`` threads; return
    the status codes and the seconds they took."""
    port = free_port()
    server = subprocess.Popen(
        [PY, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.asgi:application",
         "--workers", "2", "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT, env={**env, "LOG_LEVEL": "WARNING"}, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                requests.get(f"{base}/", timeout=5)  # any answer: the server is up
                break
            except requests.RequestException:
                time.sleep(0.1)
        codes, _, elapsed = hammer(base, path, body, messages, clients)
        return codes, elapsed
    finally:
        server.terminate()
        server.wait(10)


def run(env: dict[str, str], endpoint_path: str, messages: int, clients: int) -> dict[str, float]:
    def body(i: int) -> dict[str, Any]:
        return {"sender": {"id": f"user-{i % 200}"}, "message": {"type": "text", "text": f"m{i}"}}

    codes, elapsed = post_many(env, endpoint_path, body, messages, clients)
    ok = codes.count(200)
    return {"ok": ok, "limited": codes.count(429), "other": len(codes) - ok - codes.count(429),
            "seconds": elapsed, "per_second": ok / elapsed}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "VAR_DIR": var, "DEBUG": "true"}
        manage(env, "migrate", "--noinput")
        agent = json.loads(
            manage(
                env,
                "create_agent",
                "--email",
                f"bench-{os.getpid()}@example.com",
                "--name",
                "B",
                "--online",
            )
        )
        channel = json.loads(
            manage(env, "create_chat_api_channel", "--name", "Bench", "--webhook-url",
                   "http://127.0.0.1:9/none", "--agent", agent["email"])
        )  # fmt: skip
        path = "/" + channel["endpoint_url"].split("/", 3)[3]
        database = "PostgreSQL" if "DATABASE_URL" in os.environ else "SQLite"
        shape = f"{args.messages} messages, {args.clients} clients, {database}"
        print(f"A2 throughput, one channel, {shape}")
        limited = run(env, path, args.messages, args.clients)
        unlimited = run(
            {**env, "CHAT_API_RATE_LIMIT_PER_SECOND": "0"}, path, args.messages, args.clients
        )
    for name, result in (("rate limit 1000/s (default)", limited), ("rate limit off", unlimited)):
        print(f"  {name:28} {result['per_second']:8.0f} msg/s  ok={result['ok']:.0f} "
              f"429={result['limited']:.0f} other={result['other']:.0f}")  # fmt: skip
    print(f"  ratio default/off: {limited['per_second'] / unlimited['per_second']:.2f}")


if __name__ == "__main__":
    main()
