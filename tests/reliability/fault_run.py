"""The fault run (issue 29): traffic through the whole service while its
processes and dependencies fail, then what must have held.

The service runs as production runs it, on servers of the run's own: a
PostgreSQL cluster (``pg_server.py``) and a redis-server (``redis_server.py``)
it may stop, a web process (gunicorn, DEBUG off), a default-queue worker, a
delivery worker, and beat (its sweep every DELIVERY_SWEEP_SECONDS). It always
runs on PostgreSQL, the embedded default run included: a PostgreSQL restart
is what it is about, and SQLite has no server to restart. This process is
every outside party at once, each a client that retries as a real one does:
on a 503, a 429 or a connection error it sends the same request again with
the same ``Idempotency-Key`` after ``RETRY_SECONDS`` (sooner than the
``Retry-After`` asked, to keep the run short), and gives up after
``GIVE_UP_SECONDS``.

- integrators send A2 messages, each with its key; one in ``resend_every`` is
  sent a second time with the same key once answered (a retry whose first
  answer was lost);
- an agent replies over the agent API in ``chats`` chats, one reply after the
  other in each chat, so that the order per chat means something; their A3s
  reach the ``Target``, which records each arrival;
- a bot provider sends B2 messages in ``bot_chats`` chats.

While the traffic goes, at even steps of its progress: the delivery worker is
SIGKILLed and started again (``worker_kills`` times), Redis is stopped and
started (``redis_restarts``), PostgreSQL is stopped and started
(``postgres_restarts``). A round is that traffic with those faults; the run
is ``rounds`` of them, each with texts of its own.

Then ``check`` says what must hold: every A2 and B2 message stored exactly
once, every reply stored once and delivered at least once and in order per
chat, no delivery pending once the sweep has run, and no 5xx answer but a
503 with the error body while a dependency was down (or within
``RECOVERY_SECONDS`` of its return). ``Counts.lines`` are the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
import requests

from tests.delivery.target import Target
from tests.reliability import outage
from tests.reliability.pg_server import PostgresServer
from tests.reliability.redis_server import RedisServer
from tests.web.server import WebServer
from tests.worker import ROOT, Worker

# The ports this project's fault tests may give their own PostgreSQL.
POSTGRES_PORTS = range(5481, 5486)
DATABASE = "switchboard"
RETRY_SECONDS = 0.5
GIVE_UP_SECONDS = 90.0
CLIENT_TIMEOUT = 10.0
# A 503 this long after a dependency's return still counts as its outage's:
# the service is promised back within 10 s (docs/operations.md).
RECOVERY_SECONDS = 10.0
RETRIED = (429, 503)
ERROR_KEYS = {"code", "message"}


@dataclass(frozen=True)
class Shape:
    """One round's traffic and faults."""

    a2: int = 2000
    resend_every: int = 10
    replies: int = 2000
    chats: int = 20
    b2: int = 200
    bot_chats: int = 10
    worker_kills: int = 2
    redis_restarts: int = 1
    postgres_restarts: int = 1
    clients: int = 12  # A2 and B2 clients at once, besides one per chat

    def scaled(self, size: float) -> Shape:
        """This shape with ``size`` times the traffic, in as many chats."""
        a2, replies, b2 = (max(1, round(n * size)) for n in (self.a2, self.replies, self.b2))
        return replace(self, a2=a2, replies=replies, b2=b2)

    def faults(self) -> list[str]:
        """The faults of a round, in turn: a worker's kill, then another
        fault, and so on, so that the kills come early (what a killed worker
        held waits DELIVERY_REDISPATCH_AFTER_SECONDS for the sweep)."""
        kills = ["worker"] * self.worker_kills
        others = ["redis"] * self.redis_restarts + ["postgres"] * self.postgres_restarts
        ordered: list[str] = []
        while kills or others:
            ordered += [kills.pop()] if kills else []
            ordered += [others.pop(0)] if others else []
        return ordered


@dataclass(frozen=True)
class Answer:
    kind: str
    status: int | None  # None: no answer (refused, reset, timed out)
    began: float
    ended: float
    error_body: bool  # the body is {"error": {"code", "message"}}


@dataclass
class Counts:
    sent: Counter[str] = field(default_factory=Counter)  # operations, by kind
    resent: int = 0  # A2s sent again with their key once answered
    retried: Counter[str] = field(default_factory=Counter)  # requests sent again
    stored: Counter[str] = field(default_factory=Counter)
    duplicates_stored: Counter[str] = field(default_factory=Counter)
    delivered: int = 0  # replies that reached the target
    duplicates_delivered: int = 0  # their arrivals beyond the first
    statuses: Counter[str] = field(default_factory=Counter)
    max_delivery_delay: float = 0.0  # a reply's 201 to its first arrival
    faults: list[str] = field(default_factory=list)
    pending_after_sweep: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.sent.items()))
        return [
            f"sent: {kinds}; A2 re-sent with their key: {self.resent}",
            f"retried requests (503, 429, no answer): {dict(sorted(self.retried.items()))}",
            f"stored: {dict(sorted(self.stored.items()))}; "
            f"duplicates stored: {sum(self.duplicates_stored.values())}",
            f"replies delivered: {self.delivered}; duplicate arrivals: "
            f"{self.duplicates_delivered}; max delivery delay: {self.max_delivery_delay:.1f} s",
            f"answers: {dict(sorted(self.statuses.items()))}",
            f"faults: {', '.join(self.faults)}; pending after the sweep: "
            f"{self.pending_after_sweep}; {self.seconds:.0f} s",
        ]


class Beat:
    """``celery beat`` as the Procfile runs it: the delivery sweep, and the rest."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.log_path = folder / "beat.log"
        command = [
            sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO",
            "--schedule", str(folder / "celerybeat-schedule"),
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class Service:
    """The service's processes on servers of the run's own."""

    def __init__(self, folder: Path, shape: Shape, **settings: str) -> None:
        self.folder = folder
        self.shape = shape
        self.target = Target("127.0.0.1").start()
        self.postgres = PostgresServer(POSTGRES_PORTS, durable_commits=True)
        self.redis = RedisServer(folder / "redis")
        self.processes: list[Any] = []
        self.postgres.start()
        self.postgres.execute(f"CREATE DATABASE {DATABASE}")
        self.redis.start()
        var_dir = folder / "var"
        var_dir.mkdir()
        self.env = {
            **outage.production_env(self.postgres.url(DATABASE), var_dir),
            "REDIS_URL": self.redis.url(0),
            "REDIS_CACHE_URL": self.redis.url(1),
            # Every party is this one process on 127.0.0.1.
            "CHAT_API_RATE_LIMIT_PER_SECOND": "0",
            "BOT_API_RATE_LIMIT_PER_SECOND": "0",
            "LOG_LEVEL": "INFO",
            # The target takes what it is sent at once: more tries in flight
            # to it than production's default 2, so the outbound keeps up with
            # the traffic on a loaded machine (the order per chat holds anyway).
            "DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT": "8",
            # The bot answers its chats' clients only when the run's B2 comes
            # round to them, minutes later on a loaded machine: beat would hand
            # the chats to the agents meanwhile, and refuse the bot's messages.
            "BOT_REPLY_TIMEOUT_SECONDS": "3600",
            **settings,
        }
        self._run("manage.py", "migrate", "--noinput", "-v0")
        printed = self._run(
            "-m", "tests.reliability.seed", "fault-run",
            self.target.url("").rstrip("/"), str(shape.chats), str(shape.bot_chats),
        )  # fmt: skip
        self.seed: dict[str, Any] = json.loads(printed.strip().splitlines()[-1])
        self.web = WebServer(workers=2)
        self.web.env.update(self.env)
        self.worker = Worker(queues="default", concurrency=4, env=self.env)
        self.delivery = Worker(queues="delivery", concurrency=8, env=self.env)
        self.web.start()
        self.worker.start()
        self.delivery.start()
        self.beat = Beat(self.env, folder)

    def _run(self, *command: str) -> str:
        return outage.run(self.env, *command)

    def stop(self) -> None:
        for stop in (self.beat.stop, self.delivery.stop, self.worker.stop, self.web.stop):
            with suppress(Exception):
                stop()
        self.redis.stop()
        self.postgres.destroy()
        self.target.stop()

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.postgres.url(DATABASE)) as connection:
            return connection.execute(sql, params).fetchall()

    def logs(self) -> str:
        """The end of each process's log, for a failure's message."""
        parts = {
            "web": self.web.stderr(),
            "delivery": self.delivery.log(),
            "worker": self.worker.log(),
            "beat": self.beat.log_path.read_text(errors="replace"),
        }
        return "\n".join(f"--- {name}\n{text[-2000:]}" for name, text in parts.items())


class Outages:
    """When each dependency was down: (stopped, started again) in monotonic time."""

    def __init__(self) -> None:
        self.windows: list[tuple[str, float, float]] = []

    @contextmanager
    def down(self, name: str) -> Iterator[None]:
        stopped = time.monotonic()
        try:
            yield
        finally:
            self.windows.append((name, stopped, time.monotonic()))

    def covers(self, answer: Answer) -> bool:
        return any(
            answer.ended >= stopped and answer.began <= started + RECOVERY_SECONDS
            for _, stopped, started in self.windows
        )


class Clients:
    """Every outside party's requests: each retried until answered, every answer kept."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.lock = threading.Lock()
        self.answers: list[Answer] = []
        self.retried: Counter[str] = Counter()
        self.done = 0
        self.local = threading.local()

    def session(self) -> requests.Session:
        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
        return self.local.session

    def send(self, kind: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        """POST until a final answer (not a 503, 429 or none), which must be a 2xx; its JSON."""
        gives_up = time.monotonic() + GIVE_UP_SECONDS
        while True:
            began = time.monotonic()
            try:
                response = self.session().post(
                    self.base_url + path, json=body, headers=headers, timeout=CLIENT_TIMEOUT
                )
                status: int | None = response.status_code
            except requests.RequestException:
                self.local.session = requests.Session()  # its connection may be broken
                response, status = None, None
            answer = Answer(kind, status, began, time.monotonic(), error_body(response))
            with self.lock:
                self.answers.append(answer)
            if status is not None and status not in RETRIED:
                assert response is not None
                assert status < 300, (kind, status, response.text[:300])
                with self.lock:
                    self.done += 1
                return response.json()
            if time.monotonic() > gives_up:
                raise AssertionError(
                    f"{kind} {path}: no answer but {status} for {GIVE_UP_SECONDS} s"
                )
            with self.lock:
                self.retried[kind] += 1
            time.sleep(RETRY_SECONDS)


def error_body(response: requests.Response | None) -> bool:
    try:
        error = response.json()["error"] if response is not None else None
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(error, dict) and set(error) == ERROR_KEYS


class Round:
    """One round's traffic: its texts carry the round's tag."""

    def __init__(self, service: Service, clients: Clients, tag: str) -> None:
        self.service, self.clients, self.tag = service, clients, tag
        self.shape = service.shape
        self.seed = service.seed
        self.replied_at: dict[str, float] = {}  # a reply's text: when it was answered 201
        self.resent = 0
        self.finished = threading.Event()  # the traffic is answered, or failed
        self.fault_error: BaseException | None = None

    def total(self) -> int:
        shape = self.shape
        resent = len(range(0, shape.a2, shape.resend_every))
        return shape.a2 + resent + shape.replies + shape.b2

    def a2(self, n: int) -> None:
        body = {
            "sender": {"id": f"u-{n % 50}"},
            "message": {"type": "text", "text": f"a2-{self.tag}-{n}"},
        }
        headers = {"Idempotency-Key": f"a2-{self.tag}-{n}-{uuid.uuid4().hex}"}
        first = self.clients.send("A2", self.seed["a2"], body, headers)
        if n % self.shape.resend_every == 0:
            again = self.clients.send("A2", self.seed["a2"], body, headers)
            assert again == first, (first, again)
            with self.clients.lock:
                self.resent += 1

    def b2(self, n: int) -> None:
        chats = self.seed["bot_chats"]
        body = {
            "event": "BOT_MESSAGE",
            "chat_id": str(chats[n % len(chats)]),
            "message": {"type": "TEXT", "text": f"bot-{self.tag}-{n}"},
        }
        headers = {"Idempotency-Key": f"b2-{self.tag}-{n}-{uuid.uuid4().hex}"}
        self.clients.send("B2", self.seed["b2"], body, headers)

    def replies_in(self, index: int) -> None:
        """The agent's replies in one chat, each once the one before was answered."""
        chat = self.seed["chats"][index]
        auth = f"Token {self.seed['agent_token']}"
        for seq in range(len(range(index, self.shape.replies, self.shape.chats))):
            text = f"reply-{self.tag}-{index}-{seq}"
            headers = {"Authorization": auth, "Idempotency-Key": f"{text}-{uuid.uuid4().hex}"}
            path = f"/api/agent/v1/chats/{chat}/messages"
            answered = self.clients.send("reply", path, {"type": "text", "text": text}, headers)
            assert "id" in answered, answered
            self.replied_at[text] = time.monotonic()

    def go(self, faults: Callable[[Round], None]) -> None:
        fault_thread = threading.Thread(target=self._faults, args=(faults,))
        fault_thread.start()
        try:
            self._traffic()
        finally:
            self.finished.set()
            fault_thread.join()
        if self.fault_error is not None:
            raise self.fault_error

    def _faults(self, faults: Callable[[Round], None]) -> None:
        try:
            faults(self)
        except BaseException as error:  # raised again by the traffic's thread
            self.fault_error = error

    def _traffic(self) -> None:
        shape = self.shape
        with (
            ThreadPoolExecutor(shape.chats, thread_name_prefix="agent") as agents,
            ThreadPoolExecutor(shape.clients, thread_name_prefix="client") as others,
        ):
            jobs = [agents.submit(self.replies_in, i) for i in range(shape.chats)]
            # A2 and B2 interleaved, so that both meet every fault.
            step = max(1, shape.a2 // max(1, shape.b2))
            for n in range(shape.a2):
                jobs.append(others.submit(self.a2, n))
                if n % step == 0 and n // step < shape.b2:
                    jobs.append(others.submit(self.b2, n // step))
            for n in range(len(range(0, shape.a2, step)), shape.b2):
                jobs.append(others.submit(self.b2, n))
            try:
                for job in jobs:
                    job.result()  # a client that gave up fails the run here
            except BaseException:
                for job in jobs:
                    job.cancel()  # those not begun
                raise


class FaultRun:
    def __init__(self, folder: Path, shape: Shape | None = None, **settings: str) -> None:
        self.shape = shape or Shape()
        self.service = Service(folder, self.shape, **settings)
        self.clients = Clients(self.service.web.base_url)
        self.outages = Outages()
        self.rounds: list[Round] = []
        self.counts = Counts()
        self.started = time.monotonic()

    def __enter__(self) -> FaultRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.service.stop()

    def round(self) -> Round:
        done = Round(self.service, self.clients, f"r{len(self.rounds)}")
        self.rounds.append(done)
        done.go(self.faults)
        return done

    def faults(self, traffic: Round) -> None:
        """Each fault of the round once its share of the traffic is answered."""
        planned = self.shape.faults()
        start = self.clients.done
        for i, kind in enumerate(planned):
            due = start + traffic.total() * (i + 1) // (len(planned) + 1)
            while self.clients.done < due:
                if traffic.finished.is_set():  # it failed before this fault's turn
                    return
                time.sleep(0.05)
            getattr(self, f"fail_{kind}")()
            self.counts.faults.append(kind)

    def fail_worker(self) -> None:
        """SIGKILL the delivery worker mid-traffic; the process manager starts it again."""
        self.service.delivery.kill()
        self.service.delivery.start()

    def fail_redis(self) -> None:
        with self.outages.down("redis"):
            self.service.redis.stop()
            time.sleep(2)
            self.service.redis.start()

    def fail_postgres(self) -> None:
        with self.outages.down("postgres"):
            self.service.postgres.stop()
            time.sleep(2)
            self.service.postgres.start()

    def settle(self, stalled: float = 60, timeout: float = 900) -> None:
        """Wait for the delivery worker and beat's sweep to leave no delivery
        pending: fail when none went out for ``stalled`` seconds, or after
        ``timeout`` (on a loaded machine the outbound ends well after the
        traffic)."""
        service = self.service

        def pending() -> int:
            rows = service.query("SELECT count(*) FROM delivery_delivery WHERE status = 'pending'")
            return int(rows[0][0])

        started = last_change = time.monotonic()
        left = pending()
        while left and time.monotonic() - last_change < stalled:
            assert time.monotonic() - started < timeout, (
                f"{left} deliveries still pending {timeout:.0f} s after the traffic\n"
                f"{service.logs()}"
            )
            time.sleep(0.5)
            now = pending()
            if now != left:
                left, last_change = now, time.monotonic()
        self.counts.pending_after_sweep = left
        assert not left, (
            f"{left} deliveries pending, none done for {stalled:.0f} s\n{service.logs()}"
        )

    def check(self) -> Counts:
        """What must hold after the run (each failure says what), and the figures."""
        counts, service = self.counts, self.service
        counts.retried = self.clients.retried
        counts.resent = sum(r.resent for r in self.rounds)
        for answer in self.clients.answers:
            counts.statuses["none" if answer.status is None else str(answer.status)] += 1
        wrong = [
            a
            for a in self.clients.answers
            if a.status is not None
            and a.status >= 500
            and not (a.status == 503 and a.error_body and self.outages.covers(a))
        ]
        assert not wrong, (wrong[:10], self.outages.windows, service.logs())
        stored = self._stored()
        for prefix, kind, each in (("a2", "A2", "a2"), ("reply", "reply", "replies"),
                                   ("bot", "B2", "b2")):  # fmt: skip
            expected = {
                f"{prefix}-{r.tag}-{n}" for r in self.rounds for n in self._numbers(r, each)
            }
            found = {text: len(ids) for text, ids in stored.items() if text.startswith(prefix)}
            counts.sent[kind] = len(expected)
            counts.stored[kind] = len(found)
            counts.duplicates_stored[kind] = sum(n - 1 for n in found.values())
            missing = sorted(expected - set(found))
            assert not missing, f"{len(missing)} {kind} not stored, e.g. {missing[:5]}"
            duplicated = {text: n for text, n in found.items() if n > 1}
            assert not duplicated, f"{kind} stored more than once: {list(duplicated.items())[:5]}"
        self.settle()
        counts.seconds = time.monotonic() - self.started
        self._check_replies_delivered(stored)
        return counts

    def _numbers(self, traffic: Round, each: str) -> list[str]:
        shape = self.shape
        if each != "replies":
            return [str(n) for n in range(getattr(shape, each))]
        return [
            f"{i}-{seq}"
            for i in range(shape.chats)
            for seq in range(len(range(i, shape.replies, shape.chats)))
        ]

    def _stored(self) -> dict[str, list[int]]:
        rows = self.service.query(
            "SELECT text, id FROM agents_message WHERE text LIKE 'a2-%%' "
            "OR text LIKE 'reply-%%' OR text LIKE 'bot-%%' ORDER BY id"
        )
        stored: dict[str, list[int]] = defaultdict(list)
        for text, pk in rows:
            stored[text].append(pk)
        return stored

    def _check_replies_delivered(self, stored: dict[str, list[int]]) -> None:
        counts = self.counts
        arrivals: dict[str, list[float]] = defaultdict(list)
        firsts: dict[str, list[tuple[float, int, int]]] = defaultdict(list)  # chat: (at, id, seq)
        for received in list(self.service.target.received):
            if not received.path.startswith("/a3"):
                continue
            message = json.loads(received.body)["message"]
            arrivals[message["text"]].append(received.at)
            if len(arrivals[message["text"]]) == 1:
                _, tag, chat, seq = message["text"].split("-")
                firsts[f"{tag}-{chat}"].append((received.at, int(message["id"]), int(seq)))
        replied = {text: at for r in self.rounds for text, at in r.replied_at.items()}
        missing = sorted(set(replied) - set(arrivals))
        assert not missing, f"{len(missing)} replies never delivered, e.g. {missing[:5]}"
        counts.delivered = len(arrivals)
        counts.duplicates_delivered = sum(len(at) - 1 for at in arrivals.values())
        counts.max_delivery_delay = max(
            (arrivals[text][0] - at for text, at in replied.items()), default=0.0
        )
        for chat, seen in firsts.items():
            order = [seq for _, _, seq in sorted(seen)]
            assert order == sorted(order), f"chat {chat}'s replies arrived out of order: {order}"
            ids = [pk for _, pk, _ in sorted(seen)]
            assert ids == sorted(ids), f"chat {chat}'s replies' ids out of order: {ids}"
        for text, ids in stored.items():
            if text in arrivals:
                assert len(ids) == 1, (text, ids)


def run(folder: Path, shape: Shape | None = None, rounds: int = 1, **settings: str) -> Counts:
    """``rounds`` rounds of ``shape`` and their checks; the counts."""
    with FaultRun(folder, shape, **settings) as fault_run:
        for _ in range(rounds):
            fault_run.round()
        return fault_run.check()
