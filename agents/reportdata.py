"""Report test data for ``seed_report_data`` (docs/reports.md, "Speed"): a
history of chats over the last days, its facts as the verbs would have
written them, made with ``bulk_create`` in batches so 100,000 chats and a
million messages take minutes, not hours.

Each chat's life is played forward from its opening (the client's first
message) on a clock of its own: the bot's turns, the handover, the wait in
the queue, the Reply, the conversation, a transfer, the finish, a rating.
What would happen after ``now`` does not: such a chat is still open, in the
state it had reached. A client whose chat finished may write again later,
which opens a new chat (docs/reports.md: a finished chat never reopens).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any, NamedTuple

from django.contrib.auth.hashers import make_password
from django.db import connection, models, transaction
from django.db.models import F
from django.utils import timezone

from agents.models import (
    Agent,
    Call,
    Channel,
    Chat,
    Client,
    Counter,
    Department,
    Label,
    Message,
    OfflineMessage,
)
from agents.services.chats import SHOWN_AUTHORS
from agents.services.clients import VISITOR_COUNTER

BATCH = 2000  # chats written per transaction
ROWS_PER_INSERT = 2 * BATCH  # rows a bulk INSERT statement carries
PASSWORD = "switchboard-reports"  # every seeded agent's, hashed once  # noqa: S105

# The channels: name, kind, opens with a bot, share of the chats.
CHANNELS = (
    ("Website", Channel.Kind.WIDGET, False, 45),
    ("Shop app", Channel.Kind.CHAT_API, False, 25),
    ("Support bot", Channel.Kind.CHAT_API, True, 20),
    ("Partners", Channel.Kind.WIDGET, False, 10),
)
DEPARTMENTS = ("Sales", "Support", "Billing")
LABELS = ("billing", "bug", "delivery", "refund", "sales", "vip")
AGENTS, SUPERVISORS = 26, 3  # and one admin: 30 people
# The arrival shape on the UTC clock: busy on weekdays' working hours.
WEEKDAY_WEIGHTS = (1.0, 1.0, 0.95, 0.95, 0.85, 0.45, 0.35)
HOUR_WEIGHTS = (1, 1, 1, 1, 1, 2, 4, 7, 10, 12, 13, 13, 12, 13, 13, 12, 11, 9, 7, 6, 5, 4, 2, 1)
RETURNING = 0.1  # the share of chats opened by a client whose earlier chat finished


@dataclass
class Place:
    """A seeded channel: its row, whether its chats open with the bot, its agents."""

    channel: Channel
    bot: bool
    agent_ids: list[int]


@dataclass
class Cast:
    places: list[Place]
    weights: list[int]
    departments: list[int]
    labels: list[int]
    people: dict[int, str]  # agent id -> name
    logins: list[dict[str, str]]


class Said(NamedTuple):
    """A message, as a row to insert (a million model instances cost more than the inserts)."""

    created: datetime
    author: str
    agent: int | None
    text: str
    payload: str = "{}"  # JSON


@dataclass
class Life:
    """One chat as its verbs would have left it, and its messages."""

    client: Client
    place: Place
    created: datetime
    now: datetime
    state: str = Chat.State.QUEUED
    queued_at: datetime | None = None
    queue_entered_at: datetime | None = None
    accepted_at: datetime | None = None
    first_accepted_at: datetime | None = None
    first_response_at: datetime | None = None
    first_response_agent: int | None = None
    finished_at: datetime | None = None
    transferred_at: datetime | None = None
    transferred_by: int | None = None
    transfer_count: int = 0
    department: int | None = None
    rating: str = ""
    blacklisted: bool = False
    holders: list[int] = field(default_factory=list)  # who has it now (Chat.agents)
    handlers: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    messages: list[Said] = field(default_factory=list)

    def say(self, at: datetime, author: str, agent: int | None = None, text: str = "") -> None:
        self.messages.append(Said(at, author, agent, text or author))
        if author == Message.Author.AGENT and self.first_response_at is None:
            self.first_response_at, self.first_response_agent = at, agent

    def queue(self, at: datetime) -> None:
        self.state, self.queued_at = Chat.State.QUEUED, at
        if self.first_accepted_at is None:
            self.queue_entered_at = at

    def accept(self, at: datetime, agent: int) -> None:
        self.state, self.accepted_at = Chat.State.ACTIVE, at
        self.first_accepted_at = self.first_accepted_at or at
        self.holders = [agent]
        self._held_by(agent)

    def transfer(self, at: datetime, by: int, names: dict[int, str], **to: int) -> None:
        """To the agent ``agent`` (still active, now theirs) or the department
        ``department`` (back in the queue); a system line signed by ``by``."""
        self.transfer_count += 1
        self.transferred_at, self.transferred_by = at, by
        if "agent" in to:
            self.holders = [to["agent"]]
            self._held_by(to["agent"])
            told = f"{names[by]} transferred the chat to {names[to['agent']]}."
        else:
            self.holders, self.department = [], to["department"]
            self.state, self.queued_at = Chat.State.QUEUED, at
            told = f"{names[by]} transferred the chat to a department."
        self.say(at, Message.Author.SYSTEM, by, told)

    def finish(self, at: datetime) -> None:
        self.state, self.finished_at = Chat.State.FINISHED, at

    def _held_by(self, agent: int) -> None:
        if agent not in self.handlers:
            self.handlers.append(agent)


def seed(*, chats: int, days: int, seed: int = 0, now: datetime | None = None) -> dict[str, Any]:
    """``chats`` chats opened over the ``days`` days up to ``now``, on the
    seeded channels with their agents, departments and labels (made, or
    found by name when seeded before), with offline messages and calls;
    what was made, as JSON-able figures."""
    rng = random.Random(seed)
    now = now or timezone.now()
    cast = _cast()
    made = {"chats": 0, "messages": 0, "clients": 0, "offline_messages": 0, "calls": 0}
    moments = _arrivals(rng, chats, days, now)
    lives = _lives(rng, cast, moments, now)
    while batch := [life for _, life in zip(range(BATCH), lives, strict=False)]:
        with transaction.atomic():
            _write(batch, made)
    with transaction.atomic():
        made["offline_messages"], made["calls"] = _offline_and_calls(rng, cast, days, now, chats)
    _analyze()
    return {
        **made,
        "days": days,
        "seed": seed,
        "from": (now - timedelta(days=days)).isoformat(),
        "to": now.isoformat(),
        "channels": [
            {"id": p.channel.public_id, "name": p.channel.name, "agents": len(p.agent_ids)}
            for p in cast.places
        ],
        "logins": cast.logins,
    }


# --- the cast: channels, agents, departments, labels ----------------------------


def _cast() -> Cast:
    password = make_password(PASSWORD)  # one hash for all: PBKDF2 is slow on purpose
    people = [
        (f"report-agent-{n}@example.com", f"Agent {n:02}", Agent.Role.AGENT)
        for n in range(1, AGENTS + 1)
    ]
    people += [
        (f"report-supervisor-{n}@example.com", f"Supervisor {n}", Agent.Role.SUPERVISOR)
        for n in range(1, SUPERVISORS + 1)
    ]
    people.append(("report-admin@example.com", "Report Admin", Agent.Role.ADMIN))
    known = set(
        Agent.objects.filter(email__in=[p[0] for p in people]).values_list("email", flat=True)
    )
    Agent.objects.bulk_create(
        Agent(
            email=email, name=name, role=role, password=password,
            is_staff=role == Agent.Role.ADMIN, is_superuser=role == Agent.Role.ADMIN,
        )
        for email, name, role in people
        if email not in known
    )  # fmt: skip
    agents = list(Agent.objects.filter(email__in=[p[0] for p in people]).order_by("email"))
    answering = [a for a in agents if a.role != Agent.Role.ADMIN]
    places = []
    for index, (name, kind, bot, _) in enumerate(CHANNELS):
        channel = Channel.objects.filter(name=name, kind=kind).order_by("pk").first()
        channel = channel or Channel.objects.create(name=name, kind=kind)
        # Everyone but the admin answers three of the four channels.
        on = [a for n, a in enumerate(answering) if (n + index) % 4 != 0]
        channel.agents.add(*on)
        places.append(Place(channel, bot, [a.pk for a in on if a.role == Agent.Role.AGENT]))
    return Cast(
        places=places,
        weights=[share for *_, share in CHANNELS],
        departments=[Department.objects.get_or_create(name=n)[0].pk for n in DEPARTMENTS],
        labels=[Label.objects.get_or_create(name=n)[0].pk for n in LABELS],
        people={a.pk: a.name for a in agents},
        logins=[
            {"email": a.email, "role": a.role, "password": PASSWORD}
            for a in agents
            if a.role != Agent.Role.AGENT
        ],
    )


# --- when chats open, and how each one goes ---------------------------------------


def _arrivals(rng: random.Random, chats: int, days: int, now: datetime) -> list[datetime]:
    """``chats`` moments over the ``days`` days up to ``now`` (UTC days, today
    the last), shaped by weekday and hour, ascending."""
    first = now.astimezone(UTC).date() - timedelta(days=days - 1)
    day_list = [first + timedelta(days=n) for n in range(days)]
    day_weights = [WEEKDAY_WEIGHTS[day.weekday()] for day in day_list]
    moments: list[datetime] = []
    while len(moments) < chats:
        day = rng.choices(day_list, day_weights)[0]
        hour = rng.choices(range(24), HOUR_WEIGHTS)[0]
        at = datetime.combine(day, time(hour), tzinfo=UTC) + timedelta(seconds=rng.uniform(0, 3600))
        if at < now:
            moments.append(at)
    return sorted(moments)


def _lives(
    rng: random.Random, cast: Cast, moments: list[datetime], now: datetime
) -> Iterator[Life]:
    """A chat for each moment, by a new client or (``RETURNING``) by one whose
    last chat finished before it: never two open chats of one client."""
    finishing: list[tuple[datetime, int, Client]] = []  # (finished_at, tie, client)
    free: dict[int, list[Client]] = {id(p): [] for p in cast.places}
    tie = 0
    for created in moments:
        while finishing and finishing[0][0] < created:
            client = heapq.heappop(finishing)[2]
            pool = free[id(_place_of(cast, client))]
            pool.append(client)
            del pool[:-500]  # the recent ones come back
        place = rng.choices(cast.places, cast.weights)[0]
        pool = free[id(place)]
        if pool and rng.random() < RETURNING:
            client = pool.pop(rng.randrange(len(pool)))
        else:
            client = Client(channel=place.channel, name=f"Client {tie}")
        life = _life(rng, cast, place, client, created, now)
        if life.finished_at is not None and not life.blacklisted:
            tie += 1
            heapq.heappush(finishing, (life.finished_at, tie, client))
        tie += 1
        yield life


def _place_of(cast: Cast, client: Client) -> Place:
    return next(p for p in cast.places if p.channel.pk == client.channel_id)


def _seconds(rng: random.Random, low: float, high: float) -> timedelta:
    return timedelta(seconds=rng.uniform(low, high))


def _life(
    rng: random.Random, cast: Cast, place: Place, client: Client, created: datetime, now: datetime
) -> Life:
    """One chat, played forward from ``created``; it stops where ``now`` is."""
    life = Life(client=client, place=place, created=created, now=now)
    if client.pk is None and rng.random() < 0.002:  # blacklisted before writing: kept, unseen
        life.state, life.finished_at, life.blacklisted = Chat.State.FINISHED, created, True
        blacklisted = json.dumps({Message.BLACKLISTED: True})
        life.messages.append(Said(created, Message.Author.CLIENT, None, "spam", blacklisted))
        return life
    if rng.random() < 0.3:
        life.department = rng.choice(cast.departments)
    life.say(created, Message.Author.CLIENT)
    with contextlib.suppress(_Now):  # the rest of its life is after now
        _play(rng, cast, life)
    if life.state == Chat.State.FINISHED and life.first_response_at and rng.random() < 0.3:
        life.rating = Chat.Rating.POSITIVE if rng.random() < 0.8 else Chat.Rating.NEGATIVE
    if rng.random() < 0.45:
        life.labels = rng.sample(cast.labels, 1 if rng.random() < 0.75 else 2)
    return life


class _Now(Exception):
    """The chat's next step would come after now: it stays as it is."""


@dataclass
class _Clock:
    """A chat's own clock: each step comes a random while after the last."""

    rng: random.Random
    at: datetime
    now: datetime

    def later(self, low: float, high: float) -> datetime:
        self.at += _seconds(self.rng, low, high)
        if self.at > self.now:
            raise _Now
        return self.at


def _play(rng: random.Random, cast: Cast, life: Life) -> None:
    clock = _Clock(rng, life.created, life.now)
    if life.place.bot:
        if not _with_the_bot(rng, life, clock):
            return
    else:
        life.queue(life.created)
    if life.state == Chat.State.QUEUED:
        if rng.random() < 0.1:  # the client leaves the queue; the timer finishes it
            if rng.random() < 0.5:
                life.say(clock.later(20, 200), Message.Author.CLIENT, text="anyone there?")
            life.finish(clock.later(60, 900))
            return
        wait = 2 + min(1800, rng.expovariate(1 / 45))
        life.accept(clock.later(2, wait), rng.choice(life.place.agent_ids))
    if rng.random() < 0.03:  # taken with Reply, finished without a word
        life.finish(clock.later(60, 600))
        return
    _conversation(rng, cast, life, clock)
    life.finish(clock.later(30, 400))


def _with_the_bot(rng: random.Random, life: Life, clock: _Clock) -> bool:
    """The bot's turns, then: the bot finishes the chat (False), hands it
    to the queue or an agent takes it over."""
    life.state = Chat.State.BOT
    for _ in range(rng.randint(1, 3)):
        life.say(clock.later(2, 20), Message.Author.BOT)
        life.say(clock.later(5, 90), Message.Author.CLIENT)
    fate = rng.choices(("bot only", "handover", "take over"), (35, 55, 10))[0]
    if fate == "bot only":
        life.finish(clock.later(30, 900))
        return False
    if fate == "take over":
        life.accept(clock.later(10, 300), rng.choice(life.place.agent_ids))
    else:
        life.queue(clock.later(1, 20))
    return True


def _conversation(rng: random.Random, cast: Cast, life: Life, clock: _Clock) -> None:
    """The agent's answers and the client's messages, a note now and then,
    and in one chat of eight a transfer to a colleague or a department."""
    holder = life.holders[0]
    life.say(clock.later(5, 120), Message.Author.AGENT, holder)
    exchanges = rng.randint(1, 7)
    transfer_after = rng.randrange(exchanges) if rng.random() < 0.12 else None
    for turn in range(exchanges):
        life.say(clock.later(10, 180), Message.Author.CLIENT)
        if rng.random() < 0.05:
            life.say(clock.later(5, 60), Message.Author.NOTE, holder)
        life.say(clock.later(10, 150), Message.Author.AGENT, holder)
        if turn == transfer_after:
            others = [a for a in life.place.agent_ids if a != holder]
            if rng.random() < 0.7:
                before, holder = holder, rng.choice(others)
                life.transfer(clock.later(5, 60), before, cast.people, agent=holder)
            else:
                at, department = clock.later(5, 60), rng.choice(cast.departments)
                life.transfer(at, holder, cast.people, department=department)
                holder = rng.choice(others)
                life.accept(clock.later(5, 300), holder)
            life.say(clock.later(5, 90), Message.Author.AGENT, holder)


# --- writing ---------------------------------------------------------------------


def _write(batch: list[Life], made: dict[str, int]) -> None:
    new = [life.client for life in batch if life.client.pk is None]
    new = list({id(c): c for c in new}.values())
    if new:
        top = _reserve_visitor_numbers(len(new))
        for number, client in enumerate(new, start=top - len(new) + 1):
            client.visitor_number, client.external_id = number, f"report-{number}"
        for life in batch:
            if life.blacklisted:
                life.client.blacklisted_at = life.created
        Client.objects.bulk_create(new, batch_size=ROWS_PER_INSERT)
    rows = Chat.objects.bulk_create([_row(life) for life in batch], batch_size=ROWS_PER_INSERT)
    lives = list(zip((chat.pk for chat in rows), batch, strict=True))
    messages = [
        (chat, m.author, m.agent, "text", m.text, m.payload, "", "", m.created, "", "")
        for chat, life in lives
        for m in life.messages
    ]
    _insert(Message, MESSAGE_COLUMNS, messages)
    for through, column, of in (
        (Chat.handlers.through, "agent_id", "handlers"),
        (Chat.agents.through, "agent_id", "holders"),
        (Chat.labels.through, "label_id", "labels"),
    ):
        _insert(
            through, ("chat_id", column), [(c, v) for c, life in lives for v in getattr(life, of)]
        )
    made["chats"] += len(rows)
    made["messages"] += len(messages)
    made["clients"] += len(new)


MESSAGE_COLUMNS = (
    "chat_id", "author", "agent_id", "type", "text", "payload", "external_id", "sender_name",
    "created", "delivery_status", "delivery_error",
)  # fmt: skip


def _insert(
    model: type[models.Model], columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    """Insert ``rows`` of ``columns`` into ``model``'s table as they are: by
    COPY on PostgreSQL (ten times ``bulk_create``'s pace), else row by row
    in one ``executemany``."""
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(column) for column in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join(["%s"] * len(columns))
            # The names are the models' own, quoted; the values are parameters.
            insert = f"INSERT INTO {table} ({names}) VALUES ({marks})"  # noqa: S608
            cursor.executemany(insert, rows)


def _analyze() -> None:
    """Bring the planner's statistics up to date, as autovacuum would a while
    after a bulk load: without them PostgreSQL plans the reports for a
    table of a few rows (nested loops over 100,000 chats, twice the time)."""
    filled = (Chat, Message, Client, Chat.handlers.through, Chat.agents.through,
              Chat.labels.through, OfflineMessage, Call)  # fmt: skip
    tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in filled)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")


def _reserve_visitor_numbers(count: int) -> int:
    """Take ``count`` visitor numbers at once (as ``_next_visitor_number``
    takes one); the last of them."""
    Counter.objects.get_or_create(name=VISITOR_COUNTER)
    Counter.objects.filter(name=VISITOR_COUNTER).update(value=F("value") + count)
    return Counter.objects.get(name=VISITOR_COUNTER).value


def _row(life: Life) -> Chat:
    last = max((m.created for m in life.messages), default=None)
    return Chat(
        channel=life.place.channel, client_id=life.client.pk, state=life.state,
        department_id=life.department, rating=life.rating, blacklisted=life.blacklisted,
        created=life.created, last_message_at=last,
        queued_at=life.queued_at,
        accepted_at=life.accepted_at, finished_at=life.finished_at,
        queue_entered_at=life.queue_entered_at, first_accepted_at=life.first_accepted_at,
        first_response_at=life.first_response_at,
        first_response_agent_id=life.first_response_agent,
        transferred_at=life.transferred_at, transferred_by_id=life.transferred_by,
        transfer_count=life.transfer_count,
        shown_messages=sum(
            1 for m in life.messages if m.author in SHOWN_AUTHORS and not life.blacklisted
        ),
    )  # fmt: skip


def _offline_and_calls(
    rng: random.Random, cast: Cast, days: int, now: datetime, chats: int
) -> tuple[int, int]:
    """Offline messages (mostly at night) and calls, a few per hundred chats."""
    night = [24 - w for w in HOUR_WEIGHTS]
    moments = _arrivals(random.Random(rng.random()), max(1, chats // 30), days, now)
    offline = [
        OfflineMessage(
            channel=rng.choices(cast.places, cast.weights)[0].channel, name="Visitor",
            email="visitor@example.com", message="Please call me back.",
            created=at.replace(hour=rng.choices(range(24), night)[0]),
        )
        for at in moments
    ]  # fmt: skip
    offline = [message for message in offline if message.created < now]
    OfflineMessage.objects.bulk_create(offline, batch_size=ROWS_PER_INSERT)
    calls = [
        Call(
            channel=rng.choices(cast.places, cast.weights)[0].channel, phone="+4930123456",
            status=rng.choices(Call.Status.values, (1, 1, 1, 30, 3))[0], created=at, updated=at,
        )
        for at in _arrivals(random.Random(rng.random()), max(1, chats // 100), days, now)
    ]  # fmt: skip
    Call.objects.bulk_create(calls, batch_size=ROWS_PER_INSERT)
    return len(offline), len(calls)
