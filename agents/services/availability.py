"""When a channel takes chats: its business hours (docs/routing.md,
"Business hours"; the rules in agents/hours.py)."""

from __future__ import annotations

from django.db import transaction

from agents import hours
from agents.models import Channel
from agents.services.errors import ServiceError
from config.text import TEXT_LIMIT, storable


@transaction.atomic
def set_business_hours(
    *,
    channel: Channel,
    time_zone: str | None = None,
    weekly: list[str] | None = None,
    closed: list[str] | None = None,
    always: bool = False,
    away_message: str | None = None,
) -> Channel:
    """Set a channel's business hours: a time zone, weekly hours
    (``["mon-fri 09:00-18:00"]``) and dates closed, each replaced when
    given; ``always`` removes them all (always open). Bad input changes
    nothing. ``away_message`` replaces the channel's (blank: none)."""
    if always and (weekly or closed):
        raise ServiceError("--always removes the hours: give it alone")
    try:
        zone_name = time_zone.strip() if time_zone is not None else channel.business_time_zone
        hours.zone(zone_name)
        parsed = hours.parse_hours(weekly) if weekly else None
        dates = sorted({hours.parse_date(value) for value in closed}) if closed else None
    except hours.BadHours as error:
        raise ServiceError(str(error)) from None
    if away_message is not None:
        channel.away_message = channel_text(away_message, "the away message")
    channel.business_time_zone = zone_name
    if always:
        channel.business_hours, channel.closed_dates = {}, []
    if parsed is not None:
        channel.business_hours = parsed
    if dates is not None:
        channel.closed_dates = dates
    channel.save(
        update_fields=["business_time_zone", "business_hours", "closed_dates", "away_message"]
    )
    return channel


def channel_text(value: str, what: str) -> str:
    """A text the channel sends in its own name (the away message, the idle
    warning), trimmed: one a message may hold, else refused."""
    value = storable(value).strip()
    if len(value) > TEXT_LIMIT:
        raise ServiceError(f"{what} is longer than {TEXT_LIMIT} characters")
    return str(value)
