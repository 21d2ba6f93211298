"""A channel's business hours (docs/routing.md, "Business hours"): a time
zone, weekly hours and dates closed. Outside them the channel is
unavailable whoever is online (``agents.selectors.agents_online``); with no
hours and no closed dates it is always open.

Weekly hours are kept as ``{"mon": [["09:00", "18:00"]], …}`` (local times,
each span from its start up to, not including, its end; ``24:00`` is the
end of the day) and written as the command takes them:
``"mon-fri 09:00-18:00"``, ``"sat 10:00-14:00"``, ``"mon,wed 08:00-12:00,13:00-17:00"``.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone
from django.utils.translation import gettext_noop

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# The away message that is no channel's own words: a channel given it sends
# it in each chat's language (agents.services.chats, docs/routing.md); any
# other text goes out as the operator wrote it.
STANDARD_AWAY_MESSAGE = gettext_noop(
    "Nobody can answer right now. An agent will reply as soon as one is back."
)
_TIME = re.compile(r"^(?:[01]\d|2[0-3]):[0-5]\d$|^24:00$")

WeeklyHours = dict[str, list[list[str]]]


class BadHours(ValueError):
    """Hours, a time zone or a date that cannot be read; the message says why."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadHours(f"{name!r} is not a time zone, e.g. Europe/Berlin") from None


def _days(spec: str) -> list[str]:
    days: list[str] = []
    for part in spec.split(","):
        first, _, last = part.strip().lower().partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise BadHours(f"{part!r}: days are mon, tue, wed, thu, fri, sat, sun (mon-fri)")
        start, end = DAYS.index(first), DAYS.index(last or first)
        if end < start:
            raise BadHours(f"{part!r}: a range of days runs forward, e.g. mon-fri")
        days += DAYS[start : end + 1]
    return days


def _spans(spec: str) -> list[list[str]]:
    spans = []
    for part in spec.split(","):
        opens, _, closes = part.strip().partition("-")
        if not _TIME.match(opens) or not _TIME.match(closes) or opens == "24:00":
            raise BadHours(f"{part!r}: hours are HH:MM-HH:MM, e.g. 09:00-18:00")
        if closes <= opens:
            raise BadHours(
                f"{part!r}: closes after it opens (split hours past midnight over two days)"
            )
        spans.append([opens, closes])
    return sorted(spans)


def parse_hours(specs: list[str]) -> WeeklyHours:
    """``["mon-fri 09:00-18:00", "sat 10:00-14:00"]`` as weekly hours."""
    weekly: WeeklyHours = {}
    for spec in specs:
        days, _, spans = spec.strip().partition(" ")
        if not spans.strip():
            raise BadHours(f"{spec!r}: days, then hours, e.g. 'mon-fri 09:00-18:00'")
        for day in _days(days):
            weekly[day] = sorted(weekly.get(day, []) + _spans(spans))
    for day, spans_of_day in weekly.items():
        for (_, closes), (opens, _) in pairwise(spans_of_day):
            if opens < closes:
                raise BadHours(f"the hours of {day} overlap")
    return {day: weekly[day] for day in DAYS if day in weekly}


def parse_date(value: str) -> str:
    try:
        return date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise BadHours(f"{value!r} is not a date (YYYY-MM-DD)") from None


def is_open(channel: Any, at: datetime | None = None) -> bool:
    """Whether ``channel`` is within its business hours at ``at`` (now)."""
    weekly, closed = channel.business_hours, channel.closed_dates
    if not weekly and not closed:
        return True
    local = (at or timezone.now()).astimezone(zone(channel.business_time_zone))
    if local.date().isoformat() in closed:
        return False
    if not weekly:
        return True
    now = local.strftime("%H:%M")
    return any(opens <= now < closes for opens, closes in weekly.get(DAYS[local.weekday()], []))


def describe(channel: Any) -> dict[str, Any]:
    """The channel's hours as the command prints them."""
    return {
        "channel": channel.public_id,
        "always_open": not channel.business_hours and not channel.closed_dates,
        "time_zone": channel.business_time_zone,
        "hours": channel.business_hours,
        "closed": channel.closed_dates,
        "open_now": is_open(channel),
        "away_message": channel.away_message,
    }
