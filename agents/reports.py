"""The reports (docs/reports.md): reads over the facts each chat keeps of
itself, one function per report. Each takes a ``ReportQuery`` and answers
plain dicts and lists, which the agent API, its CSV and the reports page
share. Every figure is defined once, in docs/reports.md."""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from datetime import time as datetime_time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connections
from django.db.models import (
    Aggregate,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Coalesce, ExtractHour, ExtractIsoWeekDay, TruncDate
from django.utils import timezone
from django.utils.translation import gettext_lazy, ngettext_lazy

from agents import selectors
from agents.api.parsers import id_from
from agents.models import (
    Agent,
    Call,
    Channel,
    Chat,
    Department,
    Label,
    OfflineMessage,
    OnlineSpan,
)
from agents.services.errors import NotAllowed, ServiceError

MAX_DAYS = 366  # the longest range a report reads: a year, a leap day included


@dataclass(frozen=True)
class ReportQuery:
    """What a report reads: the chats created from ``start`` (a local
    midnight, included) to ``end`` (the midnight after the last day,
    excluded) in ``zone``, on the channels ``channel_ids`` (those the viewer
    sees, or the one chosen), narrowed to an agent's, a label's or a
    department's chats when given."""

    start: datetime
    end: datetime
    zone: ZoneInfo
    channel_ids: tuple[int, ...]
    agent_id: int | None = None
    label_id: int | None = None
    department_id: int | None = None

    @classmethod
    def of_days(cls, first: date, last: date, zone: ZoneInfo, **narrow: Any) -> ReportQuery:
        """The days ``first`` to ``last``, both included, on ``zone``'s clock."""
        return cls(
            start=_midnight(first, zone),
            end=_midnight(last + timedelta(days=1), zone),
            zone=zone,
            **narrow,
        )


# --- the query, from a request's parameters ---------------------------------


def query_from(*, viewer: Agent, params: Mapping[str, str]) -> ReportQuery:
    """The report ``viewer`` asks for with ``params`` (``from``, ``to``,
    ``tz``, ``channel``, ``agent``, ``label``, ``department``; the API's and
    the page's). Raises ``NotAllowed`` for an agent who is no supervisor and
    ``ServiceError`` naming the parameter it cannot read."""
    if not viewer.supervises:
        raise NotAllowed(gettext_lazy("the reports are for supervisors and admins"))
    zone = _zone(params.get("tz") or settings.TIME_ZONE)
    first, last = _day(params, "from"), _day(params, "to")
    if first > last:
        raise ServiceError(gettext_lazy("from: the range starts after it ends (to)"))
    if (last - first).days + 1 > MAX_DAYS:
        raise ServiceError(
            ngettext_lazy(
                "to: a report covers at most %(days)d day",
                "to: a report covers at most %(days)d days",
                "days",
            ),
            days=MAX_DAYS,
        )
    channels = selectors.visible_channels(viewer)
    if params.get("channel"):
        channels = channels.filter(public_id=params["channel"])
    channel_ids = tuple(channels.order_by("pk").values_list("pk", flat=True))
    if params.get("channel") and not channel_ids:  # unknown, or not the viewer's: one answer
        raise ServiceError(gettext_lazy("channel: no such channel"))
    return ReportQuery.of_days(
        first,
        last,
        zone,
        channel_ids=channel_ids,
        agent_id=_agent_id(viewer, params.get("agent", "")),
        label_id=_label_id(params.get("label", "")),
        department_id=_department_id(params.get("department", "")),
    )


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:  # ValueError: a path, not a name
        raise ServiceError(
            gettext_lazy("tz: no such time zone (an IANA name, e.g. Europe/Berlin)")
        ) from error


DAY = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)


# The years a report may name: a day at the calendar's very ends has no
# midnight on every zone's clock (year 1 or 9999 overflows a datetime).
YEARS = range(1970, 3000)


def _day(params: Mapping[str, str], name: str) -> date:
    text = params.get(name, "")
    try:
        if not DAY.fullmatch(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError as error:  # no date of that shape, or no such day (2026-02-30)
        raise ServiceError(
            gettext_lazy("%(name)s: a date as YYYY-MM-DD is required"), name=name
        ) from error
    if day.year not in YEARS:
        raise ServiceError(
            gettext_lazy("%(name)s: a year from %(first)d to %(last)d"),
            name=name,
            first=YEARS[0],
            last=YEARS[-1],
        )
    return day


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    """The start of ``day`` in ``zone`` (where a zone skips midnight, the
    first instant of the day it has)."""
    local = datetime.combine(day, datetime_time(0), tzinfo=zone)
    return local.astimezone(ZoneInfo("UTC")).astimezone(zone)


def _agent_id(viewer: Agent, text: str) -> int | None:
    """An agent of the viewer's channels (any agent for an admin); another
    supervisor's agent and an unknown id get one answer."""
    if not text:
        return None
    agents = Agent.objects.filter(pk=id_from(text) or 0)
    if viewer.role != Agent.Role.ADMIN:
        agents = agents.filter(channels__in=selectors.visible_channels(viewer))
    return _found(agents.values_list("pk", flat=True).first(), "agent")


def _label_id(name: str) -> int | None:
    if not name:
        return None
    return _found(Label.objects.filter(name=name).values_list("pk", flat=True).first(), "label")


def _department_id(text: str) -> int | None:
    if not text:
        return None
    department = Department.objects.filter(pk=id_from(text) or 0)
    return _found(department.values_list("pk", flat=True).first(), "department")


def _found(row_id: int | None, name: str) -> int:
    if row_id is None:
        raise ServiceError(gettext_lazy("%(name)s: no such %(name)s"), name=name)
    return row_id


# --- the chats a report reads ------------------------------------------------

# A chat was handed to the agents when it entered the queue (and stayed: not
# straight back to the bot) or an agent took it over from the bot.
HANDED = Q(queue_entered_at__isnull=False) | Q(first_accepted_at__isnull=False)
ENDED_UNANSWERED = Q(state=Chat.State.FINISHED, first_response_at__isnull=True)
# The clocks of the three durations (docs/reports.md): each starts when the
# agents were asked for, so the time with a bot is never counted.
WAIT = ExpressionWrapper(F("first_accepted_at") - F("queue_entered_at"), DurationField())
FIRST_RESPONSE = ExpressionWrapper(
    F("first_response_at") - Coalesce("queue_entered_at", "first_accepted_at"), DurationField()
)
HANDLE = ExpressionWrapper(F("finished_at") - F("first_accepted_at"), DurationField())
DURATIONS = {"wait": WAIT, "first_response": FIRST_RESPONSE, "handle": HANDLE}


def chats_of(query: ReportQuery) -> QuerySet[Chat]:
    """The chats a report counts: created in the range on the query's
    channels, narrowed by its agent (who held the chat), label and department.
    The finished chats made only to keep a blacklisted client's messages
    (created finished: nobody saw them) are no conversation and left out."""
    chats = Chat.objects.filter(
        channel_id__in=query.channel_ids, created__gte=query.start, created__lt=query.end
    ).exclude(blacklisted=True, finished_at=F("created"))
    if query.agent_id is not None:
        chats = chats.filter(handlers=query.agent_id)
    if query.label_id is not None:
        chats = chats.filter(labels=query.label_id)
    if query.department_id is not None:
        chats = chats.filter(department_id=query.department_id)
    return chats.order_by()


# --- the reports -------------------------------------------------------------


def summary(query: ReportQuery) -> dict[str, Any]:
    """The figures of the chats in the range (docs/reports.md, "Summary")."""
    chats = chats_of(query)
    in_database = ranks_in_database(chats.db)
    ranked = {name: NearestRanks(duration) for name, duration in DURATIONS.items()}
    counts = chats.aggregate(
        chats=Count("pk"),
        answered=Count("pk", filter=Q(first_response_at__isnull=False)),
        missed=Count("pk", filter=ENDED_UNANSWERED & HANDED),
        bot_only=Count("pk", filter=ENDED_UNANSWERED & ~HANDED),
        rated=Count("pk", filter=~Q(rating="")),
        positive=Count("pk", filter=Q(rating=Chat.Rating.POSITIVE)),
        messages=Sum("shown_messages", default=0),
        transfers=Sum("transfer_count", default=0),
        **(ranked if in_database else {}),
    )
    if in_database:
        spreads = {name: spread_of(counts[name]) for name in DURATIONS}
    else:
        spreads = dict(zip(DURATIONS, map(spread, _durations(chats)), strict=True))
    return {
        "chats": counts["chats"],
        "answered": counts["answered"],
        "missed": counts["missed"],
        "bot_only": counts["bot_only"],
        "wait_seconds": spreads["wait"],
        "first_response_seconds": spreads["first_response"],
        "handle_seconds": spreads["handle"],
        "rated": counts["rated"],
        "csat_percent": csat_percent(counts["positive"], counts["rated"]),
        "messages": counts["messages"],
        "transfers": counts["transfers"],
        "offline_messages": _in_range(OfflineMessage.objects.all(), query).count(),
        "calls": _calls_by_status(query),
    }


def agents(query: ReportQuery) -> list[dict[str, Any]]:
    """A row per agent who held a chat of the range, by name
    (docs/reports.md, "Per agent")."""
    chats = chats_of(query)
    # A row per chat and agent who held it (``handlers``: the agent's id): the
    # chats joined once to their handlers (with an agent asked for, chats_of's
    # join to theirs), not read a second time for ``chat__in``
    # (docs/performance.md, "Reports and the history search").
    held = chats if query.agent_id is not None else chats.filter(handlers__isnull=False)
    first_answers = chats.filter(first_response_agent__isnull=False)
    if query.agent_id is not None:
        first_answers = first_answers.filter(first_response_agent_id=query.agent_id)
    if ranks_in_database(chats.db):
        figures = _agent_figures_in_database(held, first_answers)
    else:
        figures = _agent_figures_in_python(held, first_answers)
    names = Agent.objects.filter(pk__in=figures).order_by("name", "pk").values_list("pk", "name")
    return [{"agent": agent_id, "name": name, **figures[agent_id]} for agent_id, name in names]


def _agent_figures_in_python(
    held: QuerySet[Chat], first_answers: QuerySet[Chat]
) -> dict[int, dict[str, Any]]:
    """Each holder's figures, from a row per chat held and per chat answered first."""
    handles: dict[int, list[timedelta | None]] = defaultdict(list)
    ratings: dict[int, list[str]] = defaultdict(list)
    for agent_id, duration, rating in held.values_list("handlers", HANDLE, "rating"):
        handles[agent_id].append(duration)
        ratings[agent_id].append(rating)
    responses: dict[int, list[timedelta | None]] = defaultdict(list)
    for agent_id, duration in first_answers.values_list("first_response_agent_id", FIRST_RESPONSE):
        responses[agent_id].append(duration)
    return {
        agent_id: {
            "chats": len(handles[agent_id]),
            "first_response_seconds": spread(responses[agent_id]),
            "handle_seconds": spread(handles[agent_id]),
            "csat_percent": csat_percent(
                sum(rating == Chat.Rating.POSITIVE for rating in ratings[agent_id]),
                sum(rating != "" for rating in ratings[agent_id]),
            ),
        }
        for agent_id in handles
    }


def _agent_figures_in_database(
    held: QuerySet[Chat], first_answers: QuerySet[Chat]
) -> dict[int, dict[str, Any]]:
    """The same figures, a row per agent grouped by PostgreSQL."""
    responses = dict(
        first_answers.values("first_response_agent_id")
        .annotate(ranks=NearestRanks(FIRST_RESPONSE))
        .values_list("first_response_agent_id", "ranks")
    )
    rows = held.values("handlers").annotate(
        chats=Count("pk"),
        handle=NearestRanks(HANDLE),
        rated=Count("pk", filter=~Q(rating="")),
        positive=Count("pk", filter=Q(rating=Chat.Rating.POSITIVE)),
    )
    return {
        row["handlers"]: {
            "chats": row["chats"],
            "first_response_seconds": spread_of(responses.get(row["handlers"])),
            "handle_seconds": spread_of(row["handle"]),
            "csat_percent": csat_percent(row["positive"], row["rated"]),
        }
        for row in rows
    }


def hours(query: ReportQuery) -> list[dict[str, Any]]:
    """Chats by the weekday (0 = Monday) and hour of their creation in the
    query's zone: all 168 cells, Monday 0:00 first (docs/reports.md, "Hours")."""
    cells = (
        chats_of(query)
        .annotate(
            weekday=ExtractIsoWeekDay("created", tzinfo=query.zone),
            hour=ExtractHour("created", tzinfo=query.zone),
        )
        .values_list("weekday", "hour")
        .annotate(chats=Count("pk"))
    )
    counted = {(weekday - 1, hour): n for weekday, hour, n in cells}
    return [
        {"weekday": weekday, "hour": hour, "chats": counted.get((weekday, hour), 0)}
        for weekday in range(7)
        for hour in range(24)
    ]


# --- the reports page's reads (docs/reports.md, "The reports page") ---------


def days_of(query: ReportQuery) -> list[date]:
    """The days of the range on the query's clock, the first to the last."""
    first, after = (
        query.start.astimezone(query.zone).date(),
        query.end.astimezone(query.zone).date(),
    )
    return [first + timedelta(days=n) for n in range((after - first).days)]


def chats_per_day(query: ReportQuery) -> list[dict[str, Any]]:
    """Chats by the day of their creation in the query's zone: every day of
    the range, those without a chat as 0."""
    counted = dict(
        chats_of(query)
        .annotate(day=TruncDate("created", tzinfo=query.zone))
        .values_list("day")
        .annotate(chats=Count("pk"))
        .values_list("day", "chats")
    )
    return [{"day": day.isoformat(), "chats": counted.get(day, 0)} for day in days_of(query)]


# The first-response buckets: [from, to) in whole seconds; None: no end.
FIRST_RESPONSE_BUCKETS: tuple[tuple[int, int | None, str], ...] = (
    (0, 60, "0-1 min"),
    (60, 300, "1-5 min"),
    (300, 900, "5-15 min"),
    (900, 3600, "15-60 min"),
    (3600, None, "> 1 h"),
)


def first_response_distribution(query: ReportQuery) -> list[dict[str, Any]]:
    """The answered chats by their first response time in whole seconds,
    one row per bucket of ``FIRST_RESPONSE_BUCKETS`` (from included, to
    excluded), every bucket, empty ones as 0."""
    answered = chats_of(query).filter(first_response_at__isnull=False)
    seconds = [
        max(0, int(duration.total_seconds()))
        for duration in answered.values_list(FIRST_RESPONSE, flat=True)
        if duration is not None
    ]
    return [
        {
            "bucket": label,
            "from_seconds": low,
            "to_seconds": high,
            "chats": sum(low <= n and (high is None or n < high) for n in seconds),
        }
        for low, high, label in FIRST_RESPONSE_BUCKETS
    ]


def channels(query: ReportQuery) -> list[dict[str, Any]]:
    """A row per channel of the query, by name, those without a chat too:
    chats, answered, missed, first response and CSAT of its chats."""
    chats = chats_of(query)
    counted = {
        row["channel_id"]: row
        for row in chats.values("channel_id").annotate(
            chats=Count("pk"),
            answered=Count("pk", filter=Q(first_response_at__isnull=False)),
            missed=Count("pk", filter=ENDED_UNANSWERED & HANDED),
            rated=Count("pk", filter=~Q(rating="")),
            positive=Count("pk", filter=Q(rating=Chat.Rating.POSITIVE)),
        )
    }
    responses: dict[int, list[timedelta | None]] = defaultdict(list)
    for channel_id, duration in chats.values_list("channel_id", FIRST_RESPONSE):
        responses[channel_id].append(duration)
    named = Channel.objects.filter(pk__in=query.channel_ids).order_by("name", "pk")
    empty = {"chats": 0, "answered": 0, "missed": 0, "rated": 0, "positive": 0}
    rows = []
    for channel_id, public_id, name in named.values_list("pk", "public_id", "name"):
        count = counted.get(channel_id, empty)
        rows.append(
            {
                "channel": public_id,
                "name": name,
                "chats": count["chats"],
                "answered": count["answered"],
                "missed": count["missed"],
                "first_response_seconds": spread(responses[channel_id]),
                "csat_percent": csat_percent(count["positive"], count["rated"]),
            }
        )
    return rows


def previous_period(query: ReportQuery) -> ReportQuery:
    """The same number of days immediately before the query's first, with
    its channels and filters."""
    days = days_of(query)
    first = days[0] - timedelta(days=len(days))
    return replace(
        query,
        start=_midnight(first, query.zone),
        end=_midnight(days[0], query.zone),
    )


def change(now: float | None, before: float | None) -> dict[str, float | None]:
    """The change from ``before`` to ``now``: the difference, now - before,
    and the percentage, (now - before) / before * 100 to one decimal; the
    difference is null when either is null, the percentage also when
    ``before`` is 0."""
    if now is None or before is None:
        return {"difference": None, "percent": None}
    difference = round(now - before, 1)
    percent = round(100 * (now - before) / before, 1) if before else None
    return {"difference": difference, "percent": percent}


def summary_compared(query: ReportQuery) -> list[dict[str, Any]]:
    """Every figure of the summary (flattened as in the CSV:
    ``first_response_seconds_median``) beside the previous period's, with
    the change: a row per figure."""
    now, before = _flat(summary(query)), _flat(summary(previous_period(query)))
    return [
        {"figure": figure, "now": value, "before": before[figure], **change(value, before[figure])}
        for figure, value in now.items()
    ]


def time_online(query: ReportQuery, agent_ids: Iterable[int]) -> dict[int, int]:
    """Each agent's time online in the range, in whole seconds: the overlap
    of their online spans with it (a span still open ends now). Agents
    without a span in the range have 0."""
    ids = list(agent_ids)
    spans = OnlineSpan.objects.filter(agent_id__in=ids, started__lt=query.end).filter(
        Q(ended__isnull=True) | Q(ended__gt=query.start)
    )
    now = timezone.now()
    online = dict.fromkeys(ids, 0.0)
    for agent_id, started, ended in spans.values_list("agent_id", "started", "ended"):
        overlap = min(ended or now, query.end) - max(started, query.start)
        online[agent_id] += max(0.0, overlap.total_seconds())
    return {agent_id: int(seconds) for agent_id, seconds in online.items()}


def agents_online(query: ReportQuery) -> list[dict[str, Any]]:
    """The per-agent report, each row with the agent's ``online_seconds``."""
    rows = agents(query)
    online = time_online(query, (row["agent"] for row in rows))
    return [{**row, "online_seconds": online[row["agent"]]} for row in rows]


# --- the measures' arithmetic ------------------------------------------------


def spread(durations: Iterable[timedelta | None]) -> dict[str, int | None]:
    """The median and the 90th percentile of ``durations`` (Nones skipped),
    in whole seconds, by the nearest rank; None of both when there is none."""
    seconds = sorted(_seconds(duration) for duration in durations if duration is not None)
    return {"median": nearest_rank(seconds, 50), "p90": nearest_rank(seconds, 90)}


def _seconds(duration: timedelta) -> int:
    return max(0, int(duration.total_seconds()))


# --- the percentiles in PostgreSQL --------------------------------------------------
#
# On PostgreSQL the database picks the median and p90 (``NearestRanks``):
# no row per chat crosses to Python, the reports' largest cost at volume
# (docs/reports.md, "Speed"). SQLite has no percentile function and keeps
# the Python reading (``spread``); a test holds the two to one answer.


def ranks_in_database(alias: str) -> bool:
    """Whether the database ``alias`` picks the percentiles itself."""
    return connections[alias].vendor == "postgresql"


class NearestRanks(Aggregate):
    """A duration's median and 90th percentile by the nearest rank, picked by
    PostgreSQL: ``percentile_disc(p)`` is the value at rank ceil(p * n) of
    the n non-null values sorted, as ``nearest_rank``. [median, p90], or
    None when there is no value."""

    function = "PERCENTILE_DISC"
    template = "%(function)s(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Any, **extra: Any) -> None:
        super().__init__(expression, output_field=ArrayField(DurationField()), **extra)


def spread_of(ranks: list[timedelta] | None) -> dict[str, int | None]:
    """``NearestRanks``' answer as ``spread`` answers: the fraction of a
    second is dropped after the ranking, which orders the same either way."""
    if ranks is None:
        return {"median": None, "p90": None}
    median, p90 = ranks
    return {"median": _seconds(median), "p90": _seconds(p90)}


def nearest_rank(ordered: list[int], percent: int) -> int | None:
    """The ``percent``-th percentile of the ascending ``ordered`` by the
    nearest rank: the value at rank ceil(percent * n / 100), counted from 1."""
    if not ordered:
        return None
    rank = -(-percent * len(ordered) // 100)
    return ordered[max(rank, 1) - 1]


def csat_percent(positive: int, rated: int) -> float | None:
    """The share of positive ratings among the rated chats, in per cent to
    one decimal; None when no chat was rated."""
    return round(100 * positive / rated, 1) if rated else None


def _durations(
    chats: QuerySet[Chat],
) -> tuple[list[timedelta | None], list[timedelta | None], list[timedelta | None]]:
    """The wait, the first response and the handle time of every chat, in
    one read of one row per chat (None where a chat has none)."""
    rows = chats.annotate(wait=WAIT, first_response=FIRST_RESPONSE, handle=HANDLE)
    waits, responses, handles = [], [], []
    for wait, response, handle in rows.values_list("wait", "first_response", "handle"):
        waits.append(wait)
        responses.append(response)
        handles.append(handle)
    return waits, responses, handles


def _in_range(rows: QuerySet[Any], query: ReportQuery) -> QuerySet[Any]:
    """Offline messages or calls of the query's channels made in its range
    (they belong to no chat: the agent, label and department do not narrow them)."""
    return rows.filter(
        channel_id__in=query.channel_ids, created__gte=query.start, created__lt=query.end
    )


def _calls_by_status(query: ReportQuery) -> dict[str, int]:
    counted = dict(
        _in_range(Call.objects.all(), query)
        .order_by()
        .values_list("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    return {status: counted.get(status, 0) for status in Call.Status.values}


# --- CSV -----------------------------------------------------------------------


AGENT_COLUMNS = (
    "agent", "name", "chats", "first_response_seconds_median", "first_response_seconds_p90",
    "handle_seconds_median", "handle_seconds_p90", "csat_percent",
)  # fmt: skip


# A cell a spreadsheet would run as a formula (=, +, -, @; a tab or a
# carriage return before one): written after a quote, it is text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_csv(
    rows: Iterable[Mapping[str, Any]],
    header: Iterable[str] = (),
    titles: Mapping[str, object] | None = None,
) -> str:
    """``rows`` as CSV with a header row (``header`` when there is no row);
    a nested figure is flattened to ``<name>_<part>`` (``wait_seconds_median``),
    a None is an empty cell, and text a spreadsheet would take for a formula
    (an agent named "=HYPERLINK(…)") starts with a quote. ``titles`` names
    the columns for people (the reports page's, in its language); without
    it the header row is the field names, as the agent API's CSV has them."""
    flat = [_flat(row) for row in rows]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    names = flat[0].keys() if flat else header
    writer.writerow(str(titles.get(name, name)) if titles else name for name in names)
    for row in flat:
        writer.writerow(_cell(value) for value in row.values())
    return out.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return f"'{value}"
    return value


def _flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}_"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
