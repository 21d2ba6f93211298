"""Live streams (server-sent events) for agents, and the per-process hub
that a client's stream uses too (docs/live.md; the widget's visitor stream
is devhooks/widget/stream.py).

A stream is an async view: while it waits it holds no thread and no database
connection, only a queue in the process's ``Hub``. The hub hears every live
event once per process — from Redis pub/sub when ``REDIS_URL`` is set, else
by reading the ``LiveEvent`` table twice a second (one query per process, not
per stream) — and hands each to the streams entitled to it. A reconnecting
stream sends ``Last-Event-ID`` and is first given what it missed, from the
table. A stream lives as long as its credential: the hub ends it on an
access change and re-reads every credential every ``LIVE_ACCESS_SECONDS``
(a client's through the check its app hands over, ``set_client_check``);
a client's stream holds expiring slots under the limits of open streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
import logging
import weakref
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from importlib import import_module
from typing import Any, TypeVar

from asgiref.sync import SyncToAsync, sync_to_async
from django.conf import settings
from django.contrib import auth
from django.db import connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from agents import leases, live, presence
from agents.api.parsers import id_from
from agents.live import as_dict, channel_name
from agents.models import Agent, ApiToken, Channel, LiveEvent
from agents.selectors import visible_channels
from agents.tokens import agent_for_key
from config.api_errors import error_response, method_not_allowed

logger = logging.getLogger(__name__)

T = TypeVar("T")

QUEUE_SIZE = 1000  # events a slow stream may fall behind before it is closed
REPLAY_LIMIT = 1000
RECENT = 4096  # ids a hub remembers, so a row seen twice is handed on once
HEARTBEAT: dict[str, Any] = {"kind": "heartbeat"}  # the hub's cue to a quiet stream
HEARTBEAT_LINE = ": heartbeat\n\n"
# Passes of the heartbeat timer per LIVE_HEARTBEAT_SECONDS: a quiet stream gets
# one after nine tenths of it, so none is silent longer, and each stream gets
# one every 13.5 s at 15 (every 10 s when the timer ran each third of it).
BEAT_PASSES = 10
HEARTBEAT_BYTES = HEARTBEAT_LINE.encode()


@cache
def redis_client() -> Any:
    import redis

    # A Redis that does not answer costs a publishing request a second, not a hang.
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1.0, socket_timeout=1.0)


async def in_thread(query: Callable[[], T]) -> T:
    """Run a database query in a worker thread and give its connection back
    at once: an open stream keeps no connection while it waits."""

    def run() -> T:
        try:
            return query()
        finally:
            connections.close_all()

    return await sync_to_async(run, thread_sensitive=False)()


async def on_request_thread(query: Callable[[], T]) -> T:
    """Run a query of a stream's view, before the stream begins, on the
    request's own thread, with the connection its middleware opened there
    (reading the session). On a thread of its own the query needed a second
    connection while that one stayed held: as many page streams opening at
    once as the web process's pool has connections held them all, each
    waiting for one more (the pool's time-out, then 503). The stream gives
    the connection back as it begins (``release_request_thread``)."""
    return await sync_to_async(query, thread_sensitive=True)()


class Inbox:
    """A stream's queue of events, with the part of ``asyncio.Queue`` a
    stream uses (one reader). An ``asyncio.Queue`` is about 3.2 KiB (four
    deques and an event), most of an idle stream's own objects; an empty
    inbox is this object alone, its deque made on the first event and let
    go once read empty (docs/performance.md, "Live streams")."""

    __slots__ = ("_items", "_reader", "maxsize")

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: deque[Any] | None = None
        self._reader: asyncio.Future[None] | None = None

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return self._items is not None and len(self._items) >= self.maxsize

    def put_nowait(self, item: Any) -> None:
        if self.full():
            raise asyncio.QueueFull
        if self._items is None:
            self._items = deque()
        self._items.append(item)
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        if not self._items:
            self._items = None
        return item

    async def get(self) -> Any:
        while not self._items:
            self._reader = asyncio.get_running_loop().create_future()
            try:
                await self._reader
            finally:
                self._reader = None
        return self.get_nowait()


@dataclass(eq=False, slots=True)
class Listener:
    """One open stream: who it is for, and its queue."""

    channel_ids: frozenset[int] = frozenset()
    agent_id: int | None = None  # an agent's stream follows the agent's channels
    client_id: int | None = None
    # The credential it was opened with, checked again while it is open
    # (docs/live.md, "Access"): one of these is set.
    token_hash: str = ""  # the agent API's token
    session_key: str = ""  # the agent page's session
    client_credential: str = ""  # the client's, as its app's check reads it
    # The slots it holds under the limits of open streams (agents.leases).
    holder: str = ""
    lease_keys: tuple[str, ...] = ()
    started: bool = False  # its event stream began (and gives the slots back)
    queue: Inbox = field(default_factory=lambda: Inbox(QUEUE_SIZE))
    written: float = 0.0  # when it last wrote (the event loop's clock): heartbeats
    # The web server's writer to the stream's socket (config/web_server.py,
    # WRITE_NOW), once its replay is out: the hub writes its heartbeats there
    # itself instead of waking the stream. What it writes passes no
    # middleware: none may re-encode a stream's body (none compresses).
    write_now: Callable[[bytes], bool] | None = None

    def named_by(self, change: dict[str, Any]) -> bool:
        """Whether an access change (``live.access_changed``) is about this stream."""
        if self.client_id is not None:
            return change.get("client_id") == self.client_id
        return change.get("agent_id") == self.agent_id

    def wants(self, event: dict[str, Any]) -> bool:
        if self.client_id is not None:
            return bool(event["for_client"]) and event["client_id"] == self.client_id
        return event["channel_id"] in self.channel_ids

    def audience(self) -> dict[str, Any]:
        """The same rule as ``wants``, as a filter of the table."""
        if self.client_id is not None:
            return {"client_id": self.client_id, "for_client": True}
        return {"channel_id__in": self.channel_ids}


class Hub:
    """The streams of this process and the one source of their events."""

    def __init__(self) -> None:
        self.listeners: set[Listener] = set()
        # The same, found by what they hear: an event goes to its client's
        # streams and the agents', not past every visitor of the process.
        self.by_client: dict[int, set[Listener]] = {}
        self.agents: set[Listener] = set()
        self.task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.last_id = 0
        self.started = timezone.now()
        self.recent: OrderedDict[int, None] = OrderedDict()
        # When each stream is next due a look from the heartbeat timer (the
        # event loop's clock, a tie-breaker, the stream): a pass looks at the
        # streams due, not at every stream of the process.
        self.due: list[tuple[float, int, Listener]] = []
        self.order = itertools.count()

    def add(self, listener: Listener) -> None:
        loop = asyncio.get_running_loop()
        if self.loop is not loop:  # a new event loop (a test's): start afresh on it
            self.listeners, self.task, self.loop = set(), None, loop
            self.by_client, self.agents, self.due = {}, set(), []
        self.listeners.add(listener)
        self.due_at(loop.time() + quiet_seconds(), listener)
        if listener.client_id is None:
            self.agents.add(listener)
        else:
            self.by_client.setdefault(listener.client_id, set()).add(listener)
        if self.task is None:
            self.task = loop.create_task(self.run())

    def remove(self, listener: Listener) -> None:
        self.listeners.discard(listener)
        self.agents.discard(listener)
        if (same := self.by_client.get(listener.client_id or 0)) is not None:
            same.discard(listener)
            if not same:
                del self.by_client[listener.client_id or 0]

    async def refresh_channels(self) -> None:
        """Follow changes of who is assigned to which channel (one query for
        every agent stream of this process)."""
        agents = {listener.agent_id for listener in self.agents if listener.agent_id}
        if not agents:
            return
        pairs = await in_thread(lambda: list(channel_pairs(agents)))
        channels: dict[int, set[int]] = {agent: set() for agent in agents}
        for agent_id, channel_id in pairs:
            channels[agent_id].add(channel_id)
        for listener in list(self.agents):
            if listener.agent_id in channels:
                listener.channel_ids = frozenset(channels[listener.agent_id])

    def close(self, listener: Listener) -> None:
        """End a stream: it hears nothing more, and its browser reconnects
        (authorised afresh, replayed from its Last-Event-ID)."""
        self.remove(listener)
        with contextlib.suppress(asyncio.QueueEmpty, asyncio.QueueFull):
            if listener.queue.full():
                listener.queue.get_nowait()
            listener.queue.put_nowait(None)

    def dispatch(self, event: dict[str, Any]) -> None:
        if event["id"] in self.recent:
            return
        self.recent[event["id"]] = None
        if len(self.recent) > RECENT:
            self.recent.popitem(last=False)
        self.last_id = max(self.last_id, event["id"])
        if event["kind"] == live.ACCESS:
            # In order with the events: what follows the change reaches none
            # of the streams it names, even before their credential is read.
            for listener in list(self.listeners):
                if listener.named_by(event["data"]):
                    self.close(listener)
            return
        heard = self.by_client.get(event["client_id"], ()) if event["for_client"] else ()
        for listener in [*heard, *self.agents]:
            if listener.wants(event):
                try:
                    listener.queue.put_nowait(event)
                except asyncio.QueueFull:  # far behind: end it; it reconnects and replays
                    self.close(listener)

    def due_at(self, when: float, listener: Listener) -> None:
        heapq.heappush(self.due, (when, next(self.order), listener))

    async def beat(self) -> None:
        """A heartbeat to each stream that wrote nothing for nine tenths of
        ``LIVE_HEARTBEAT_SECONDS``: run every tenth of it (``BEAT_PASSES``),
        so none is silent longer. One timer for the process, not a timeout
        for each stream.

        Written to the socket from here, in one pass, where the web server
        lets it (``Listener.write_now``): waking each stream's task to write
        it through Django's response iterator, the request limits and the
        server's ``send`` was most of what 10,000 idle streams cost. A pass
        looks at the streams due (``due``), not at all of them: going through
        5,000 streams of a worker every 1.5 s took a third of the timer's time."""
        now = asyncio.get_running_loop().time()
        quiet = quiet_seconds()
        due, later = self.due, []
        while due and due[0][0] <= now:
            listener = heapq.heappop(due)[2]
            if listener not in self.listeners:
                continue  # ended
            if listener.written > now - quiet:  # wrote since: due when quiet again
                later.append((listener.written + quiet, listener))
                continue
            if not listener.queue.empty():  # an event is on its way: look again next pass
                later.append((now + settings.LIVE_HEARTBEAT_SECONDS / BEAT_PASSES, listener))
                continue
            write = listener.write_now
            if write is not None and write(HEARTBEAT_BYTES):
                listener.written = now
            else:  # not open yet, or its client reads slowly: the stream writes it
                listener.queue.put_nowait(HEARTBEAT)
            later.append((now + quiet, listener))
        for when, listener in later:
            self.due_at(when, listener)

    async def recheck_access(self) -> None:
        """End the streams whose credential no longer holds (one batch of
        small queries for every stream of this process): what no access
        event told, such as a session that expired or a row changed by an
        ``update()``. The streams' slots are renewed on the way."""
        listeners = list(self.listeners)
        if not listeners:
            return

        def check() -> list[Listener]:
            held = ((key, each.holder) for each in listeners for key in each.lease_keys)
            leases.renew(held=held, seconds=lease_seconds())
            gone = lapsed(listeners)
            # An agent's open stream is a sign of life (agents/presence.py).
            presence.seen(
                {each.agent_id for each in listeners if each.agent_id}
                - {each.agent_id for each in gone}
            )
            return gone

        try:
            gone = await in_thread(check)
        except Exception:
            # The database is out of reach (a busy one makes the check wait,
            # not fail). An agent's stream whose credential cannot be checked
            # ends: its page reconnects, is answered 503 while the outage
            # lasts, and tells the agent (docs/operations.md, "When PostgreSQL
            # is down"). A visitor's stays; the next round tries again.
            gone = [each for each in listeners if each.agent_id]
            logger.warning("live.access_check_failed ending=%d", len(gone), exc_info=True)
        for listener in gone:
            self.close(listener)

    async def run(self) -> None:
        """Hear events while there are streams; ends with the last one."""
        try:
            # A stream hears what happens from when it opens (what it missed
            # before comes from its Last-Event-ID): nothing older is handed on.
            self.started = timezone.now()
            self.last_id = await in_thread(newest_event_id)
            loop = asyncio.get_running_loop()
            members = loop.create_task(
                self._every(settings.LIVE_MEMBERSHIP_SECONDS, self.refresh_channels)
            )
            access = loop.create_task(
                self._every(settings.LIVE_ACCESS_SECONDS, self.recheck_access)
            )
            beats = loop.create_task(
                self._every(settings.LIVE_HEARTBEAT_SECONDS / BEAT_PASSES, self.beat)
            )
            try:
                while self.listeners:
                    try:
                        if settings.REDIS_URL:
                            await self._from_redis_or_table()
                        else:
                            await self._from_table()
                    except Exception:
                        logger.warning("live.hub_error", exc_info=True)
                        await asyncio.sleep(1)
            finally:
                members.cancel()
                access.cancel()
                beats.cancel()
        finally:
            # No await between the last look at the listeners and this: a
            # stream added meanwhile starts a new task.
            self.task = None

    async def _catch_up(self) -> None:
        """Rows not yet seen: new ones, and those of the last seconds again
        (a transaction that took an id before another may commit after it)."""
        late = timezone.now() - timedelta(seconds=settings.LIVE_LATE_COMMIT_SECONDS)
        since, last = max(late, self.started), self.last_id

        def query() -> list[dict[str, Any]]:
            rows = LiveEvent.objects.filter(id__gt=last) | LiveEvent.objects.filter(
                created__gte=since
            )
            return [as_dict(row) for row in rows.order_by("id")[:REPLAY_LIMIT]]

        for event in await in_thread(query):
            self.dispatch(event)

    async def _every(self, seconds: float, step: Callable[[], Any]) -> None:
        """``step`` every ``seconds`` until ``run`` cancels it. It does not end
        when the streams are none for a moment, as ``_every_while`` does: the
        hub's loop may not see that moment, and would run on without it."""
        while True:
            if self.listeners:
                try:
                    await step()
                except Exception:
                    logger.warning("live.periodic_step_failed", exc_info=True)
            await asyncio.sleep(seconds)

    async def _every_while(self, seconds: float, step: Callable[[], Any]) -> None:
        """``step`` every ``seconds`` while there are streams."""
        while self.listeners:
            await step()
            await asyncio.sleep(seconds)

    async def _from_table(self) -> None:
        await self._every_while(settings.LIVE_POLL_SECONDS, self._catch_up)

    async def _from_redis_or_table(self) -> None:
        """From Redis; while it does not answer, from the table (as without
        Redis), so that no stream goes silent, until it answers again."""
        try:
            await self._from_redis()
        except Exception:
            logger.warning("live.redis_down: reading the table until Redis answers", exc_info=True)
            await self._from_table_until_redis_answers()
            logger.warning("live.redis_back")

    async def _from_table_until_redis_answers(self) -> None:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=1.0, socket_timeout=1.0
        )
        try:
            while self.listeners:
                await self._catch_up()
                with contextlib.suppress(redis.RedisError):
                    if await client.ping():
                        return  # _from_redis catches up once it has subscribed
                await asyncio.sleep(settings.LIVE_POLL_SECONDS)
        finally:
            await client.aclose()

    async def _from_redis(self) -> None:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe(channel_name())
            await self._catch_up()  # what came while we were not subscribed
            while self.listeners:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None:
                    self.dispatch(json.loads(message["data"]))
        finally:
            await pubsub.aclose()
            await client.aclose()


hub = Hub()


def channel_pairs(agent_ids: set[int]) -> list[tuple[int, int]]:
    """(agent id, channel id) for each channel the agents see: those they
    are assigned to, and every channel for an admin (agents.selectors)."""
    assignments = Channel.agents.through.objects.filter(agent_id__in=agent_ids)
    pairs = list(assignments.values_list("agent_id", "channel_id"))
    admins = Agent.objects.filter(pk__in=agent_ids, role=Agent.Role.ADMIN)
    admin_ids = list(admins.values_list("pk", flat=True))
    if admin_ids:
        every = list(Channel.objects.values_list("pk", flat=True))
        pairs += [(admin_id, channel_id) for admin_id in admin_ids for channel_id in every]
    return pairs


def quiet_seconds() -> float:
    """How long a stream may write nothing before the hub's heartbeat timer
    sends it a heartbeat: nine tenths of ``LIVE_HEARTBEAT_SECONDS``, the
    timer running every tenth of it."""
    return float(settings.LIVE_HEARTBEAT_SECONDS) * (BEAT_PASSES - 1) / BEAT_PASSES


def lease_seconds() -> float:
    """How long a stream's slot counts without a renewal: three access
    checks, so one slow check does not free a slot still in use."""
    return 3 * settings.LIVE_ACCESS_SECONDS


# Of (client id, credential) pairs, those that still hold. The app that
# serves a client's stream hands it over in its ``AppConfig.ready()`` (the
# website widget: a visitor's token); without one, no client's stream holds.
ClientCheck = Callable[[set[tuple[int, str]]], set[tuple[int, str]]]
_client_check: ClientCheck = lambda pairs: set()  # noqa: E731


def set_client_check(check: ClientCheck) -> None:
    global _client_check
    _client_check = check


def lapsed(listeners: list[Listener]) -> list[Listener]:
    """The streams whose credential no longer holds: the API token deleted or
    replaced, the agent deactivated, the page's session signed out or its
    agent's password changed, a client's credential refused by its app's
    check (``set_client_check``)."""
    hashes = {listener.token_hash for listener in listeners if listener.token_hash}
    tokens = set(
        ApiToken.objects.filter(key_hash__in=hashes, agent__is_active=True).values_list(
            "agent_id", "key_hash"
        )
    )
    clients = {
        (listener.client_id, listener.client_credential)
        for listener in listeners
        if listener.client_id is not None
    }
    holding = _client_check(clients) if clients else set()
    keys = {listener.session_key for listener in listeners if listener.session_key}
    sessions = {key: signed_in_agent_id(key) for key in keys}  # one per session, not per tab

    def holds(listener: Listener) -> bool:
        if listener.token_hash:
            return (listener.agent_id, listener.token_hash) in tokens
        if listener.session_key:
            return sessions[listener.session_key] == listener.agent_id
        return (listener.client_id, listener.client_credential) in holding

    return [listener for listener in listeners if not holds(listener)]


def signed_in_agent_id(session_key: str) -> int | None:
    """The active agent a session is signed in as — Django's own check, the
    session's password hash included — or ``None``."""
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = auth.get_user(request)
    return user.pk if isinstance(user, Agent) and user.is_active else None


def newest_event_id() -> int:
    return LiveEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def sse(event: dict[str, Any]) -> str:
    body = json.dumps({"kind": event["kind"], **event["data"]}, separators=(",", ":"))
    return f"id: {event['id']}\nevent: {event['kind']}\ndata: {body}\n\n"


def replay(listener: Listener, after: int, *, asked: bool) -> list[dict[str, Any]]:
    """What ``listener`` missed after event ``after``. When the stream ``asked``
    for it (Last-Event-ID) and some of it is no longer kept, a ``reset``
    comes first: the page must load its state afresh."""
    rows = LiveEvent.objects.filter(id__gt=after, **listener.audience()).order_by("id")
    missed = [as_dict(row) for row in rows[:REPLAY_LIMIT]]
    # Events are forgotten oldest first: while event ``after`` is kept, so
    # is every later one; once it is gone, some of what followed may be.
    gone = asked and after > 0 and not LiveEvent.objects.filter(id=after).exists()
    reset = {"id": after, "kind": "reset", "data": {"reason": "events were missed"}}
    return ([reset] if gone or len(missed) == REPLAY_LIMIT else []) + missed


async def event_stream(
    listener: Listener, after: int, write_now: Callable[[bytes], bool] | None = None
) -> AsyncIterator[str]:
    """The stream: what it missed since ``after`` (or since it opened), then
    each event as it comes, a heartbeat comment when there is none (written
    by the hub through ``write_now`` once the replay is out, when given)."""
    listener.started = True  # from here its ``finally`` gives the slots back
    release_request_thread()
    asked = bool(after)
    if not asked:
        after = await in_thread(newest_event_id)
    hub.add(listener)
    sent: set[int] = set()
    try:
        yield f"retry: {settings.LIVE_RETRY_MILLISECONDS}\n\n"
        # Also what committed between reading ``after`` and joining the hub.
        # An access change that committed after the view read the credential
        # but before the stream joined the hub reached no stream: read it again
        # now, after the replay's rows (a later change reaches the hub). One
        # trip to a thread and one database connection for both.
        missed, gone = await in_thread(
            lambda: (replay(listener, after, asked=asked), lapsed([listener]))
        )
        if gone:
            return
        for event in missed:
            sent.add(event["id"])
            yield sse(event)
        clock = asyncio.get_running_loop().time
        listener.written = clock()
        yield ": connected\n\n"
        # Resumed once that is written: from here the hub may write between events.
        listener.write_now = write_now
        while True:
            next_event = await listener.queue.get()
            if next_event is None:
                return  # fell too far behind: the browser reconnects and replays
            if next_event is HEARTBEAT:
                listener.written = clock()
                yield HEARTBEAT_LINE
                continue
            if next_event["id"] in sent or next_event["id"] <= after:
                continue  # shown already: before the stream opened, or replayed
            sent.add(next_event["id"])
            if len(sent) > RECENT:
                sent.clear()
            listener.written = clock()
            yield sse(next_event)
    finally:
        hub.remove(listener)
        give_back(listener.holder, listener.lease_keys)


def release_request_thread() -> None:
    """Let the thread go that Django's ASGI handler keeps for this request.

    The handler runs each request in an asgiref ``ThreadSensitiveContext``:
    the request's synchronous code (every ``MiddlewareMixin`` middleware's
    hooks) runs on a thread of its own, kept until the request ends. A
    stream's request ends when the stream does, so each open stream held an
    idle thread (its stack and Python state: most of its memory, and one
    thread started per stream opened). By the time the stream begins, the
    middleware and the view are done; the thread is shut down, and the
    little synchronous code that runs as the request ends (closing the
    answer) gets a thread of its own then.
    """
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is not None:
        executor = SyncToAsync.context_to_thread_executor.pop(context, None)
        if executor is not None:
            # Its last work: give back the database connections it opened
            # (the session's read), which are the thread's own; gone with the
            # thread, a pooled one never came back to the web process's pool.
            executor.submit(connections.close_all)
            executor.shutdown(wait=False)


def last_event_id(request: HttpRequest) -> int:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id", "")
    return id_from(raw) or 0


class EventStreamResponse(StreamingHttpResponse):
    """A listener's stream. A client that leaves before the stream begins
    (while the answer's head is on its way) never runs the stream's
    ``finally``: its slots are given back when the server closes the answer,
    or — cancelled before the server had it — when the answer is dropped;
    not when their lease lapses."""

    def __init__(
        self, listener: Listener, after: int, write_now: Callable[[bytes], bool] | None = None
    ) -> None:
        super().__init__(event_stream(listener, after, write_now), content_type="text/event-stream")
        self.listener = listener
        self["Cache-Control"] = "no-cache, no-store"
        self["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
        weakref.finalize(self, give_back_unstarted, listener)

    def close(self) -> None:
        super().close()
        give_back_unstarted(self.listener)


def stream_response(listener: Listener, request: HttpRequest) -> StreamingHttpResponse:
    from config.web_server import WRITE_NOW  # loaded already where it serves

    # The web server's direct writer (config/web_server.py); none under
    # another ASGI server or Django's test client.
    scope = getattr(request, "scope", None) or {}
    write_now = scope.get("extensions", {}).get(WRITE_NOW)
    return EventStreamResponse(listener, last_event_id(request), write_now)


async def agent_listener(agent: Agent, *, token_hash: str = "", session_key: str = "") -> Listener:
    ids = await on_request_thread(
        lambda: frozenset(visible_channels(agent).values_list("id", flat=True))
    )
    return Listener(
        channel_ids=ids, agent_id=agent.pk, token_hash=token_hash, session_key=session_key
    )


@csrf_exempt  # GET only: any other method is answered 405, never acted on
async def agent_stream(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """``GET /agent/stream``: everything that changes on the agent pages."""
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET"})
    user = await on_request_thread(lambda: auth.get_user(request))
    if not isinstance(user, Agent) or not user.is_active:
        return HttpResponse("sign in first", status=403, content_type="text/plain")
    session_key = request.session.session_key or ""
    return stream_response(await agent_listener(user, session_key=session_key), request)


@csrf_exempt  # token auth, no cookie; GET only
async def agent_api_stream(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """``GET /api/agent/v1/stream``: the agent stream for tools, with the
    agent API's ``Authorization: Token <key>``."""
    if request.method != "GET":
        return method_not_allowed("GET")
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "token" or not key.strip():
        return error_response(401, "send the header Authorization: Token <key>")
    agent = await on_request_thread(lambda: agent_for_key(key.strip()))
    if agent is None:
        return error_response(401, "token is not valid")
    token_hash = ApiToken.hash_key(key.strip())
    return stream_response(await agent_listener(agent, token_hash=token_hash), request)


# Slots are given back off the event loop, and off a stream's task: it may
# be ending in a cancelled one (its client went away).
_releaser = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lease-release")


def _release(holder: str, keys: tuple[str, ...]) -> None:
    try:
        leases.release(holder=holder, keys=keys)
    except Exception:  # the lease lapses by itself
        logger.warning("live.release_failed", exc_info=True)
    finally:
        connections.close_all()


def give_back(holder: str, keys: Iterable[str]) -> None:
    """Free ``holder``'s slots soon, from any thread, without waiting."""
    if holder:
        _releaser.submit(_release, holder, tuple(keys))


def give_back_unstarted(listener: Listener) -> None:
    """Free the slots of a stream that never began (once)."""
    if not listener.started and listener.holder:
        holder, listener.holder = listener.holder, ""
        give_back(holder, listener.lease_keys)


async def take_slots(holder: str, limits: dict[str, int]) -> bool:
    """One slot under each limit for ``holder``, or none when one is full.
    A request cancelled meanwhile (its client left) gives them back once taken."""
    seconds = lease_seconds()
    taking = asyncio.ensure_future(
        in_thread(lambda: leases.acquire(holder=holder, limits=limits, seconds=seconds))
    )
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:
        taking.add_done_callback(lambda _: give_back(holder, limits))
        raise
