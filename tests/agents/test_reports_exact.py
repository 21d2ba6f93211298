"""The served report figures equal a recomputation from the raw rows
(docs/reports.md; issue 25, "Exact and fast at volume").

The data set mixes chats the real verbs made on a controlled clock
(summer time beginning and ending, chats spanning midnight, transfers,
reassignments, a bot's handover and take-over, a missed chat, a client who
writes again after a finished chat) with ``seed_report_data``'s generator
at a small scale. The recomputation here reads the messages (who answered
first and when, what the client saw, the transfers' system lines), buckets
chats by their local day with ``astimezone`` and ranks durations itself;
it shares no code with ``agents.reports``. On PostgreSQL both ways of
ranking (the database's ``percentile_disc`` and the Python reading) are
held to it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from agents import reportdata, reports, services
from agents.models import (
    Agent,
    Call,
    Channel,
    Chat,
    Department,
    Label,
    Message,
    OfflineMessage,
)
from tests.agents.test_reports_api import api_of
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db

REAL_NOW = timezone.now
ZONES = ("UTC", "Europe/Berlin", "America/Los_Angeles")
SPRING = datetime(2026, 3, 28, 20, 0, tzinfo=UTC)  # Berlin's clocks go forward on the 29th
AUTUMN = datetime(2026, 10, 24, 20, 0, tzinfo=UTC)  # and back on the 25th


class Clock:
    """``timezone.now`` and every ``default=timezone.now`` column, held at a
    moment the test moves."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def to(self, at: datetime) -> None:
        self.at = at

    def tick(self, seconds: float) -> datetime:
        self.at += timedelta(seconds=seconds)
        return self.at


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock(SPRING)
    monkeypatch.setattr(timezone, "now", clock)
    for model in apps.get_models():
        for column in model._meta.concrete_fields:
            if column.default is REAL_NOW:
                monkeypatch.setattr(column, "_get_default", clock)
    return clock


@dataclass
class World:
    channel: Channel
    other: Channel
    ann: Agent
    bob: Agent
    cyd: Agent
    sue: Agent
    admin: Agent
    sales: Department
    vip: Label
    days: list[date] = field(default_factory=list)


def _verb_chats(clock: Clock, world: World, start: datetime) -> None:
    """Chats the verbs make from ``start`` on (UTC): around a local midnight,
    transferred, handed over by a bot, missed, and a client's second chat."""
    ann, bob, cyd, sue = world.ann, world.bob, world.cyd, world.sue
    client = ClientFactory.create(channel=world.channel)

    # 21:50 UTC: Berlin's 22:50 (winter) or 23:50 (summer), Los Angeles'
    # afternoon. Answered, transferred to Bob, reassigned to Cyd, finished
    # 75 minutes later: after Berlin's midnight, the day after it opened.
    clock.to(start + timedelta(hours=1, minutes=50, seconds=0.4))
    chat = services.post_client_message(client=client, content=text("hello")).chat
    clock.tick(37.6)
    services.accept_chat(chat=chat, agent=ann)
    clock.tick(12.9)
    services.post_note(chat=chat, agent=ann, text="regular")
    clock.tick(20.2)
    services.post_agent_message(chat=chat, agent=ann, content=text("hi"))
    clock.tick(40)
    services.post_client_message(client=client, content=text("my order"))
    clock.tick(15)
    services.transfer_chat(chat=chat, agent=ann, to_agent=bob, note="billing")
    clock.tick(300)
    services.post_agent_message(chat=chat, agent=bob, content=text("here"))
    clock.tick(60)
    services.reassign_chat(chat=chat, by=sue, to_agent=cyd)
    clock.tick(4000)
    services.post_agent_message(chat=chat, agent=cyd, content=text("done"))
    clock.tick(33)
    services.finish_chat(chat=chat, agent=cyd)
    services.rate_chat(chat=chat, rating=Chat.Rating.POSITIVE)
    services.set_chat_labels(chat=chat, agent=cyd, names=[world.vip.name])

    # The same client writes again after midnight UTC: a new chat, on its own
    # day. Transferred to a department, taken again by Bob, rated negative.
    clock.to(start + timedelta(hours=5, minutes=10))
    second = services.post_client_message(client=client, content=text("again")).chat
    assert second.pk != chat.pk
    clock.tick(100)
    services.accept_chat(chat=second, agent=bob)
    clock.tick(9.99)
    services.post_agent_message(chat=second, agent=bob, content=text("yes?"))
    clock.tick(30)
    services.transfer_chat(chat=second, agent=bob, department=world.sales)
    clock.tick(600)
    services.accept_chat(chat=second, agent=ann)
    clock.tick(50)
    services.post_agent_message(chat=second, agent=ann, content=text("sales here"))
    clock.tick(120)
    services.finish_chat(chat=second, agent=ann)
    services.rate_chat(chat=second, rating=Chat.Rating.NEGATIVE)

    # A bot's chat handed over at 00:40, taken a minute later; another the
    # bot keeps to the end; one an agent takes over from the bot unqueued.
    for offset, fate in ((2.6, "handover"), (3.1, "bot only"), (4.4, "take over")):
        clock.to(start + timedelta(hours=offset))
        bot_client = ClientFactory.create(channel=world.channel)
        # (No bot is attached here: a client message would hand it over at once.)
        chat = services.open_chat(client=bot_client, state=Chat.State.BOT)
        clock.tick(3)
        services.post_bot_message(chat=chat, content=text("I am a bot"))
        clock.tick(120)
        if fate == "handover":
            services.queue_chat(chat=chat, reason="invited")
            clock.tick(61.5)
            services.accept_chat(chat=chat, agent=cyd)
            clock.tick(19)
            services.post_agent_message(chat=chat, agent=cyd, content=text("human now"))
            clock.tick(200)
            services.finish_chat(chat=chat, agent=cyd)
        elif fate == "take over":
            services.accept_chat(chat=chat, agent=ann)
            clock.tick(44)
            services.post_agent_message(chat=chat, agent=ann, content=text("taking over"))
        else:
            services.finish_chat(chat=chat)

    # Missed: nobody answered; the system finishes it. Another taken with
    # Reply and finished without a word. One still waiting.
    for offset, taken in ((3.6, False), (6.2, True), (7.9, None)):
        clock.to(start + timedelta(hours=offset))
        chat = services.post_client_message(
            client=ClientFactory.create(channel=world.channel), content=text("anyone?")
        ).chat
        clock.tick(400)
        if taken:
            services.accept_chat(chat=chat, agent=bob)
            clock.tick(90)
        if taken is not None:
            services.finish_chat(chat=chat, agent=bob if taken else None)

    # A blacklisted client's later message: kept in the finished chat, unseen.
    clock.to(start + timedelta(hours=6, minutes=30))
    rude = ClientFactory.create(channel=world.channel)
    chat = services.post_client_message(client=rude, content=text("rude")).chat
    clock.tick(20)
    services.blacklist_client(chat=chat)
    clock.tick(20)
    services.post_client_message(client=rude, content=text("still rude"))

    # The other channel (the channel filter) and its offline message and call.
    clock.to(start + timedelta(hours=2))
    elsewhere = services.post_client_message(
        client=ClientFactory.create(channel=world.other), content=text("other")
    ).chat
    clock.tick(5)
    services.accept_chat(chat=elsewhere, agent=ann)
    clock.tick(5)
    services.post_agent_message(chat=elsewhere, agent=ann, content=text("other answer"))
    OfflineMessage.objects.create(channel=world.channel, message="call me", created=clock())
    Call.objects.create(channel=world.other, phone="+100", status=Call.Status.END)


@pytest.fixture
def world(clock: Clock) -> World:
    ann, bob, cyd = (AgentFactory.create(name=n, is_online=True) for n in ("Ann", "Bob", "Cyd"))
    sue = AgentFactory.create(name="Sue", role=Agent.Role.SUPERVISOR, is_online=True)
    admin = AgentFactory.create(name="Ada", role=Agent.Role.ADMIN)
    world = World(
        channel=ChannelFactory.create(agents=[ann, bob, cyd, sue]),
        other=ChannelFactory.create(agents=[ann]),
        ann=ann, bob=bob, cyd=cyd, sue=sue, admin=admin,
        sales=Department.objects.create(name="Sales"),
        vip=Label.objects.create(name="vip"),
    )  # fmt: skip
    for start in (SPRING, AUTUMN):
        _verb_chats(clock, world, start)
    clock.to(REAL_NOW())
    # The generator's history over both changes of the clocks (some chats
    # still open at its "now"), on channels of its own.
    reportdata.seed(chats=200, days=3, seed=7, now=datetime(2026, 3, 30, 9, 0, tzinfo=UTC))
    reportdata.seed(chats=100, days=2, seed=8, now=datetime(2026, 10, 26, 3, 0, tzinfo=UTC))
    world.days = [date(2026, 3, 27) + timedelta(days=n) for n in range(5)]
    world.days += [date(2026, 10, 23) + timedelta(days=n) for n in range(5)]
    return world


# --- the recomputation, from the raw rows ------------------------------------------


def rank(values: list[int], percent: int) -> int | None:
    """The nearest rank, as docs/reports.md defines it: sorted, rank ceil(p n / 100)."""
    if not values:
        return None
    ordered = sorted(values)
    position = len(ordered) * percent // 100 + (len(ordered) * percent % 100 > 0)
    return ordered[max(position, 1) - 1]


def spread(durations: list[timedelta]) -> dict[str, int | None]:
    seconds = [max(0, int(d.total_seconds())) for d in durations]
    return {"median": rank(seconds, 50), "p90": rank(seconds, 90)}


def csat(ratings: list[str]) -> float | None:
    rated = [r for r in ratings if r]
    return round(100 * rated.count("positive") / len(rated), 1) if rated else None


TRANSFER_LINES = (" transferred the chat to ", " reassigned the chat from ")


@dataclass
class Raw:
    """A chat as its rows tell it, with what its messages say."""

    chat: Chat
    handlers: set[int]
    labels: set[int]
    first_agent_message: Message | None
    shown: int
    transfers: int


def raw_chats() -> Iterator[Raw]:
    handlers, labels = defaultdict(set), defaultdict(set)
    for chat_id, agent_id in Chat.handlers.through.objects.values_list("chat_id", "agent_id"):
        handlers[chat_id].add(agent_id)
    for chat_id, label_id in Chat.labels.through.objects.values_list("chat_id", "label_id"):
        labels[chat_id].add(label_id)
    messages = defaultdict(list)
    for message in Message.objects.order_by("created", "pk"):
        messages[message.chat_id].append(message)
    for chat in Chat.objects.all():
        said = [m for m in messages[chat.pk] if not m.payload.get(Message.BLACKLISTED)]
        agent_said = [m for m in said if m.author == "agent"]
        yield Raw(
            chat=chat,
            handlers=handlers[chat.pk],
            labels=labels[chat.pk],
            first_agent_message=agent_said[0] if agent_said else None,
            shown=sum(m.author in ("client", "agent", "bot") for m in said),
            transfers=sum(
                m.author == "system" and any(line in m.text for line in TRANSFER_LINES)
                for m in said
            ),
        )


def counted(
    rows: list[Raw], zone: ZoneInfo, first: date, last: date, channels: set[int], **narrow: int
) -> list[Raw]:
    def kept(raw: Raw) -> bool:
        chat = raw.chat
        return (
            chat.channel_id in channels
            and first <= chat.created.astimezone(zone).date() <= last
            and not (chat.blacklisted and chat.finished_at == chat.created)
            and narrow.get("agent_id", 0) in (0, *raw.handlers)
            and narrow.get("label_id", 0) in (0, *raw.labels)
            and narrow.get("department_id", 0) in (0, chat.department_id)
        )

    return [raw for raw in rows if kept(raw)]


def expected_summary(
    rows: list[Raw], zone: ZoneInfo, first: date, last: date, channels: set[int]
) -> dict[str, Any]:
    waits, responses, handles = [], [], []
    answered = missed = bot_only = 0
    for raw in rows:
        chat, first_word = raw.chat, raw.first_agent_message
        handed = chat.queue_entered_at is not None or chat.first_accepted_at is not None
        if chat.queue_entered_at and chat.first_accepted_at:
            waits.append(chat.first_accepted_at - chat.queue_entered_at)
        if first_word is not None:
            answered += 1
            responses.append(first_response(raw))
        elif chat.state == "finished":
            missed += handed
            bot_only += not handed
        if chat.finished_at and chat.first_accepted_at:
            handles.append(chat.finished_at - chat.first_accepted_at)

    def in_range(created: datetime, channel_id: int) -> bool:
        return channel_id in channels and first <= created.astimezone(zone).date() <= last

    calls = [c.status for c in Call.objects.all() if in_range(c.created, c.channel_id)]
    return {
        "chats": len(rows),
        "answered": answered,
        "missed": missed,
        "bot_only": bot_only,
        "wait_seconds": spread(waits),
        "first_response_seconds": spread(responses),
        "handle_seconds": spread(handles),
        "rated": sum(raw.chat.rating != "" for raw in rows),
        "csat_percent": csat([raw.chat.rating for raw in rows]),
        "messages": sum(raw.shown for raw in rows),
        "transfers": sum(raw.transfers for raw in rows),
        "offline_messages": sum(
            in_range(m.created, m.channel_id) for m in OfflineMessage.objects.all()
        ),
        "calls": {status: calls.count(status) for status in Call.Status.values},
    }


def first_response(raw: Raw) -> timedelta:
    """From the moment the agents were asked for to the first agent message."""
    asked = raw.chat.queue_entered_at or raw.chat.first_accepted_at
    assert raw.first_agent_message is not None and asked is not None
    return raw.first_agent_message.created - asked


def expected_agents(rows: list[Raw], agent_id: int = 0) -> list[dict[str, Any]]:
    held, answered_first = defaultdict(list), defaultdict(list)
    for raw in rows:
        for holder in raw.handlers:
            held[holder].append(raw)
        if raw.first_agent_message is not None:
            answered_first[raw.first_agent_message.agent_id].append(raw)
    names = dict(Agent.objects.values_list("pk", "name"))
    agents = sorted((names[a], a) for a in held if agent_id in (0, a))
    return [
        {
            "agent": a,
            "name": name,
            "chats": len(held[a]),
            "first_response_seconds": spread([first_response(raw) for raw in answered_first[a]]),
            "handle_seconds": spread(
                [
                    raw.chat.finished_at - raw.chat.first_accepted_at
                    for raw in held[a]
                    if raw.chat.finished_at and raw.chat.first_accepted_at
                ]
            ),
            "csat_percent": csat([raw.chat.rating for raw in held[a]]),
        }
        for name, a in agents
    ]


def expected_hours(rows: list[Raw], zone: ZoneInfo) -> list[dict[str, int]]:
    cells: dict[tuple[int, int], int] = defaultdict(int)
    for raw in rows:
        local = raw.chat.created.astimezone(zone)
        cells[(local.weekday(), local.hour)] += 1
    return [
        {"weekday": weekday, "hour": hour, "chats": cells[(weekday, hour)]}
        for weekday in range(7)
        for hour in range(24)
    ]


# --- the tests -----------------------------------------------------------------------


# Each way the reports rank durations: the Python reading everywhere,
# PostgreSQL's ``percentile_disc`` where the suite runs on PostgreSQL (a run
# on SQLite has no such case rather than a skipped one: tests/conftest.py).
RANKING = ["python", "database"] if connection.vendor == "postgresql" else ["python"]


@pytest.fixture(params=RANKING)
def ranking(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(reports, "ranks_in_database", lambda alias: request.param == "database")
    return str(request.param)


def test_the_served_figures_equal_a_recomputation_from_the_raw_rows(
    ranking: str, world: World
) -> None:
    rows = list(raw_chats())
    every_channel = set(Channel.objects.values_list("pk", flat=True))
    ranges = [(day, day) for day in world.days] + [
        (world.days[0], world.days[4]), (world.days[5], world.days[9]),
        (world.days[0], world.days[9]),
    ]  # fmt: skip
    checked = 0
    for name in ZONES:
        zone = ZoneInfo(name)
        for first, last in ranges:
            query = reports.ReportQuery.of_days(
                first, last, zone, channel_ids=tuple(sorted(every_channel))
            )
            chats = counted(rows, zone, first, last, every_channel)
            assert reports.summary(query) == expected_summary(
                chats, zone, first, last, every_channel
            ), (name, first, last)
            assert reports.agents(query) == expected_agents(chats), (name, first, last)
            assert reports.hours(query) == expected_hours(chats, zone), (name, first, last)
            checked += len(chats)
    assert checked > 1000


def test_the_filters_narrow_as_the_recomputation_does(ranking: str, world: World) -> None:
    rows = list(raw_chats())
    zone, first, last = ZoneInfo("Europe/Berlin"), world.days[0], world.days[9]
    both = {world.channel.pk, world.other.pk}
    narrows: list[tuple[set[int], dict[str, int]]] = [
        ({world.channel.pk}, {}),
        (both, {"agent_id": world.bob.pk}),
        (both, {"label_id": world.vip.pk}),
        (both, {"department_id": world.sales.pk}),
        (both, {"agent_id": world.ann.pk, "label_id": world.vip.pk}),
    ]
    for channels, by in narrows:
        query = reports.ReportQuery.of_days(first, last, zone, channel_ids=tuple(channels), **by)
        chats = counted(rows, zone, first, last, channels, **by)

        assert chats or by.keys() == {"agent_id", "label_id"}, by
        assert reports.summary(query) == expected_summary(chats, zone, first, last, channels)
        assert reports.agents(query) == expected_agents(chats, by.get("agent_id", 0)), by
        assert reports.hours(query) == expected_hours(chats, zone), by


def test_the_api_serves_the_recomputed_figures_across_summer_time(world: World) -> None:
    rows = list(raw_chats())
    channels = set(Channel.objects.values_list("pk", flat=True))
    api = api_of(world.admin)
    for name, day in (("Europe/Berlin", "2026-03-29"), ("America/Los_Angeles", "2026-10-25")):
        zone, first = ZoneInfo(name), date.fromisoformat(day)
        params = {"from": day, "to": day, "tz": name}
        chats = counted(rows, zone, first, first, channels)

        summary = api.get("/api/agent/v1/reports/summary", params).json()
        cells = api.get("/api/agent/v1/reports/hours", params).json()["results"]

        assert summary == expected_summary(chats, zone, first, first, channels)
        assert cells == expected_hours(chats, zone)


def test_a_clients_message_after_a_finished_chat_opens_a_new_chat_on_its_own_day(
    world: World,
) -> None:
    """The first verb-made client wrote at 21:50 UTC on Saturday (the chat
    labelled vip) and again at 01:10 UTC on Sunday (the chat transferred to
    Sales): two chats, each on its own UTC day; both on Los Angeles' Saturday."""
    first = Chat.objects.filter(channel=world.channel).order_by("created").first()
    assert first is not None
    first, second = Chat.objects.filter(client=first.client_id).order_by("created")
    assert first.client_id == second.client_id and first.finished_at is not None
    assert first.finished_at < second.created

    def chats(day: date, zone: str, **narrow: int) -> int:
        query = reports.ReportQuery.of_days(
            day, day, ZoneInfo(zone), channel_ids=(world.channel.pk,), **narrow
        )
        return int(reports.summary(query)["chats"])

    saturday, sunday = date(2026, 3, 28), date(2026, 3, 29)
    vip, sales = {"label_id": world.vip.pk}, {"department_id": world.sales.pk}
    assert (chats(saturday, "UTC", **vip), chats(sunday, "UTC", **vip)) == (1, 0)
    assert (chats(saturday, "UTC", **sales), chats(sunday, "UTC", **sales)) == (0, 1)
    assert chats(saturday, "America/Los_Angeles", **vip) == 1
    assert chats(saturday, "America/Los_Angeles", **sales) == 1
