"""The reports page for supervisors and admins (docs/reports.md, "The
reports page"): a range of days in the viewer's time zone, the filters, the
summary against the previous period, charts drawn as SVG on the server
(agents/pages/charts.py), each beside its table, and every table as CSV."""

from __future__ import annotations

from datetime import date, timedelta
from math import ceil
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils import dateformat, timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agents import reports, selectors
from agents.models import Agent, Department, Label
from agents.pages import charts
from agents.pages.workspace import _agent
from agents.services.errors import ServiceError
from agents.templatetags.agent_pages import seconds

PERIODS = {"today": 1, "7d": 7, "30d": 30}  # the range's last days, today included
DEFAULT_PERIOD = "7d"
FILTERS = ("tz", "channel", "department", "agent", "label")
# The summary's cards: (figure of reports.summary_compared, its name, its kind).
CARDS = (
    ("chats", gettext_lazy("Chats"), "count"),
    ("answered", gettext_lazy("Answered"), "count"),
    ("missed", gettext_lazy("Missed"), "count"),
    ("first_response_seconds_median", gettext_lazy("Median first response"), "seconds"),
    ("wait_seconds_median", gettext_lazy("Median wait"), "seconds"),
    ("handle_seconds_median", gettext_lazy("Median handle time"), "seconds"),
    ("csat_percent", gettext_lazy("CSAT"), "percent"),
    ("offline_messages", gettext_lazy("Offline messages"), "count"),
)
TABLES = ("summary", "days", "hours", "first_response", "agents", "channels")
# The CSV's header when a table has no row (the others always have rows).
HEADERS = {
    "agents": (*reports.AGENT_COLUMNS, "online_seconds"),
    "channels": (
        "channel", "name", "chats", "answered", "missed", "first_response_seconds_median",
        "first_response_seconds_p90", "csat_percent",
    ),
}  # fmt: skip
# The columns' titles in the page's download, in the page's language; the
# agent API's CSV keeps the field names (docs/reports.md, "CSV").
COLUMN_TITLES = {
    "figure": gettext_lazy("Figure"),
    "now": gettext_lazy("This period"),
    "before": gettext_lazy("Previous period"),
    "difference": gettext_lazy("Difference"),
    "percent": gettext_lazy("Change (%)"),
    "day": gettext_lazy("Day"),
    "weekday": gettext_lazy("Weekday"),
    "hour": gettext_lazy("Hour"),
    "bucket": gettext_lazy("Range"),
    "from_seconds": gettext_lazy("From (seconds)"),
    "to_seconds": gettext_lazy("To (seconds)"),
    "agent": gettext_lazy("Agent ID"),
    "channel": gettext_lazy("Channel ID"),
    "name": gettext_lazy("Name"),
    "chats": gettext_lazy("Chats"),
    "answered": gettext_lazy("Answered"),
    "missed": gettext_lazy("Missed"),
    "first_response_seconds_median": gettext_lazy("Median first response (seconds)"),
    "first_response_seconds_p90": gettext_lazy("First response, 90th percentile (seconds)"),
    "handle_seconds_median": gettext_lazy("Median handle time (seconds)"),
    "handle_seconds_p90": gettext_lazy("Handle time, 90th percentile (seconds)"),
    "csat_percent": gettext_lazy("CSAT (%)"),
    "online_seconds": gettext_lazy("Time online (seconds)"),
}


def _supervisor(request: HttpRequest) -> Agent:
    agent = _agent(request)
    if not agent.supervises:
        raise PermissionDenied("The reports are for supervisors and admins.")
    return agent


@never_cache
@login_required
@require_GET
def reports_page(request: HttpRequest) -> HttpResponse:
    viewer = _supervisor(request)
    params = _params(request.GET)
    page = _form(viewer, params)
    try:
        query = reports.query_from(viewer=viewer, params=params)
        if request.GET.get("format") == "csv":
            return _csv(query, request.GET.get("table", ""))
    except ServiceError as error:  # a bad filter or range: said on the page
        return render(request, "agents/reports.html", {**page, "error": error.message}, status=400)
    return render(request, "agents/reports.html", {**page, **_report(query)})


def _params(get: QueryDict) -> dict[str, str]:
    """The query's parameters: a period (today, 7 or 30 days up to today on
    the viewer's clock) stands for ``from`` and ``to`` when neither is given."""
    params = {name: get.get(name, "").strip() for name in ("from", "to", *FILTERS)}
    if not params["from"] and not params["to"]:
        period = get.get("period", DEFAULT_PERIOD)
        first, last = _period(PERIODS.get(period, PERIODS[DEFAULT_PERIOD]), params["tz"])
        params["from"], params["to"] = first.isoformat(), last.isoformat()
    return params


def _today(tz: str) -> date:
    try:
        zone = ZoneInfo(tz or settings.TIME_ZONE)
    except (ZoneInfoNotFoundError, ValueError):  # query_from says so
        zone = ZoneInfo(settings.TIME_ZONE)
    return timezone.now().astimezone(zone).date()


def _period(days: int, tz: str) -> tuple[date, date]:
    today = _today(tz)
    return today - timedelta(days=days - 1), today


def _form(viewer: Agent, params: dict[str, str]) -> dict[str, Any]:
    """The range picker and the filters, offering what the viewer may see."""
    channels = selectors.visible_channels(viewer).order_by("name", "pk")
    agents: QuerySet[Agent] = Agent.objects.all()
    if viewer.role != Agent.Role.ADMIN:
        agents = agents.filter(channels__in=channels).distinct()
    filters = {name: params[name] for name in FILTERS if params[name]}
    periods = [
        {
            "key": key,
            "name": _("Today")
            if key == "today"
            else ngettext("%(days)s day", "%(days)s days", days) % {"days": days},
            "query": urlencode({**filters, "period": key}),
            "current": _iso(_period(days, params["tz"])) == (params["from"], params["to"]),
        }
        for key, days in PERIODS.items()
    ]
    return {
        "params": params,
        "periods": periods,
        "channels": channels,
        "agents": agents.order_by("name", "pk"),
        "departments": Department.objects.order_by("name"),
        "labels": Label.objects.order_by("name"),
        "csv_query": urlencode({"from": params["from"], "to": params["to"], **filters}),
    }


def _iso(days: tuple[date, date]) -> tuple[str, str]:
    return days[0].isoformat(), days[1].isoformat()


def _report(query: reports.ReportQuery) -> dict[str, Any]:
    compared = {row["figure"]: row for row in reports.summary_compared(query)}
    days = reports.chats_per_day(query)
    hours = reports.hours(query)
    distribution = reports.first_response_distribution(query)
    first, last = days[0]["day"], days[-1]["day"]
    return {
        "first_day": first,
        "last_day": last,
        "previous": reports.days_of(reports.previous_period(query)),
        "cards": [_card(compared[figure], str(name), kind) for figure, name, kind in CARDS],
        "days": days,
        "days_chart": charts.bar_chart(
            title=_("Chats per day, %(first)s to %(last)s") % {"first": first, "last": last},
            bars=[(_short_day(row["day"]), row["chats"]) for row in days],
            labels_every=ceil(len(days) / 8),
        ),
        "hours_rows": [
            {"weekday": name, "cells": hours[n * 24 : (n + 1) * 24]}
            for n, name in enumerate(charts.WEEKDAYS)
        ],
        "hours_chart": charts.heatmap(title=_("Chats by weekday and hour of arrival"), cells=hours),
        "distribution": distribution,
        "distribution_chart": charts.bar_chart(
            title=_("Answered chats by first response time"),
            bars=[(row["bucket"], row["chats"]) for row in distribution],
        ),
        "agent_rows": reports.agents_online(query),
        "channel_rows": reports.channels(query),
    }


def _short_day(iso: str) -> str:
    return dateformat.format(date.fromisoformat(iso), "j M")  # "5 Mar", in the page's language


def _card(row: dict[str, Any], name: str, kind: str) -> dict[str, Any]:
    """A summary figure as the page writes it: now, before, and the change."""
    difference, percent = row["difference"], row["percent"]
    if difference is None:
        change = _("no change to tell")
    else:
        sign = "+" if difference > 0 else ""
        change = f"{sign}{_shown(difference, kind)}"
        if percent is not None:
            change += f" ({'+' if percent > 0 else ''}{percent}%)"
    return {
        "figure": row["figure"],
        "name": name,
        "now": _shown(row["now"], kind),
        "before": _shown(row["before"], kind),
        "change": change,
        "up": difference is not None and difference > 0,
        "down": difference is not None and difference < 0,
    }


def _shown(value: float | None, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "seconds":
        return seconds(value)
    return f"{value:,}%" if kind == "percent" else f"{value:,}"


def _csv(query: reports.ReportQuery, table: str) -> HttpResponse:
    """One of the page's tables as CSV (the API's format: a header row,
    nested figures flattened, None an empty cell)."""
    if table not in TABLES:
        raise ServiceError(gettext_lazy("table: one of %(tables)s"), tables=", ".join(TABLES))
    rows: list[dict[str, Any]] = {
        "summary": reports.summary_compared,
        "days": reports.chats_per_day,
        "hours": reports.hours,
        "first_response": reports.first_response_distribution,
        "agents": reports.agents_online,
        "channels": reports.channels,
    }[table](query)
    header = HEADERS.get(table, ())
    body = reports.as_csv(rows, header, COLUMN_TITLES)
    answer = HttpResponse(body, content_type="text/csv; charset=utf-8")
    answer["Content-Disposition"] = f'attachment; filename="{table}.csv"'
    return answer
