"""The reports page (docs/reports.md, "The reports page"): who may open it,
what it shows, its filters and CSV; and the reads it adds to agents/reports.py,
on chats with known answers."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client as Browser
from django.utils import timezone, translation
from rest_framework.test import APIClient

from agents import reports, services
from agents.models import Agent, Channel, Chat, Label, OnlineSpan
from agents.pages import charts, reports_page
from agents.tokens import issue_token
from tests.agents.test_reports import BERLIN, MONDAY, chat_at, query
from tests.factories import AgentFactory, ChannelFactory

pytestmark = pytest.mark.django_db

DAY = "from=2026-03-02&to=2026-03-02&tz=UTC"


def browser_of(agent: Agent) -> Browser:
    browser = Browser()
    browser.force_login(agent)
    return browser


@pytest.fixture
def ann() -> Agent:
    return AgentFactory.create(name="Ann")


@pytest.fixture
def sue() -> Agent:
    return AgentFactory.create(name="Sue", role=Agent.Role.SUPERVISOR)


@pytest.fixture
def channel(ann: Agent, sue: Agent) -> Channel:
    """Sue's channel: Ann answered one chat in 90 s, one was missed."""
    channel = ChannelFactory.create(name="Shop", agents=[ann, sue])
    chat_at(
        channel, MONDAY, accepted=30, answered=90, finished=630, by=ann,
        rating=Chat.Rating.POSITIVE,
    )  # fmt: skip
    chat_at(channel, MONDAY, finished=120)
    return channel


@pytest.fixture
def other() -> Channel:
    """A channel that is not Sue's, with three chats of Bob's."""
    bob = AgentFactory.create(name="Bob")
    other = ChannelFactory.create(name="Secret desk", agents=[bob])
    for _ in range(3):
        chat_at(other, MONDAY, accepted=5, answered=10, finished=20, by=bob)
    return other


def figure(html: str, name: str) -> str:
    """The number a summary card shows now."""
    card = html.split(f'data-testid="figure-{name}"', 1)[1]
    return card.split('data-testid="figure-now">', 1)[1].split("<", 1)[0]


# --- who may open it -----------------------------------------------------------


def test_an_agent_is_refused_and_sees_no_link(ann: Agent, channel: Channel) -> None:
    assert browser_of(ann).get(f"/agent/reports/?{DAY}").status_code == 403
    assert 'data-testid="reports-link"' not in browser_of(ann).get("/agent/").content.decode()


def test_signed_out_goes_to_sign_in() -> None:
    answer = Browser().get("/agent/reports/")
    assert answer.status_code == 302 and "/agent/login/" in answer["Location"]


def test_a_supervisor_sees_their_channels_only(
    sue: Agent, channel: Channel, other: Channel
) -> None:
    answer = browser_of(sue).get(f"/agent/reports/?{DAY}")

    html = answer.content.decode()
    assert answer.status_code == 200
    assert 'data-testid="reports-link"' in html
    assert figure(html, "chats") == "2"
    assert "Secret desk" not in html and "Bob" not in html
    refused = browser_of(sue).get(f"/agent/reports/?{DAY}&channel={other.public_id}")
    assert refused.status_code == 400
    assert "channel: no such channel" in refused.content.decode()


def test_an_admin_sees_every_channel(channel: Channel, other: Channel) -> None:
    admin = AgentFactory.create(role=Agent.Role.ADMIN)

    html = browser_of(admin).get(f"/agent/reports/?{DAY}").content.decode()

    assert figure(html, "chats") == "5"
    assert "Secret desk" in html and "Shop" in html


# --- the range and the filters -------------------------------------------------


def test_the_filters_narrow_the_figures(sue: Agent, ann: Agent, channel: Channel) -> None:
    billing = Label.objects.create(name="billing", colour="#1f77b4")
    Chat.objects.filter(first_response_at__isnull=True).get().labels.add(billing)
    page = browser_of(sue)

    assert (
        figure(page.get(f"/agent/reports/?{DAY}&agent={ann.pk}").content.decode(), "chats") == "1"
    )
    labelled = page.get(f"/agent/reports/?{DAY}&label=billing").content.decode()
    assert figure(labelled, "chats") == "1" and figure(labelled, "missed") == "1"
    assert figure(page.get(f"/agent/reports/?{DAY}&tz=Asia/Tokyo").content.decode(), "chats") == "2"


def test_a_period_stands_for_the_days_up_to_today(sue: Agent) -> None:
    ChannelFactory.create(agents=[sue])
    today = timezone.now().astimezone(ZoneInfo("Pacific/Auckland")).date()

    html = browser_of(sue).get("/agent/reports/?period=30d&tz=Pacific/Auckland").content.decode()

    assert f'name="from" value="{today - timedelta(days=29)}"' in html
    assert f'name="to" value="{today}"' in html
    assert 'aria-current="true" data-testid="period-30d"' in html
    default = (
        browser_of(sue).get("/agent/reports/").content.decode()
    )  # 7 days, the installation's zone
    assert f'name="from" value="{timezone.now().date() - timedelta(days=6)}"' in default


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("from=yesterday&to=2026-03-02", "from: a date as YYYY-MM-DD is required"),
        ("from=2026-03-03&to=2026-03-02", "from: the range starts after it ends"),
        ("from=2026-03-02&to=2026-03-02&tz=Nowhere/Else", "tz: no such time zone"),
        (f"{DAY}&agent=abc", "agent: no such agent"),
        (f"{DAY}&department=999999", "department: no such department"),
        (f"{DAY}&label=%3Cb%3Enope", "label: no such label"),
        (f"{DAY}&format=csv&table=everything", "table: one of summary"),
    ],
)
def test_a_bad_range_or_filter_is_a_message_on_the_page(
    sue: Agent, channel: Channel, params: str, message: str
) -> None:
    answer = browser_of(sue).get(f"/agent/reports/?{params}")

    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/html")
    assert message in answer.content.decode()
    assert b"<b>nope" not in answer.content


# --- CSV -------------------------------------------------------------------------


def rows_of(answer: object) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(answer.content.decode())))  # type: ignore[attr-defined]


def test_every_table_downloads_as_csv(sue: Agent, ann: Agent, channel: Channel) -> None:
    page = browser_of(sue)
    html = page.get(f"/agent/reports/?{DAY}").content.decode()
    for table in ("summary", "days", "hours", "first_response", "agents", "channels"):
        assert f"format=csv&amp;table={table}" in html

    def get(table: str) -> list[dict[str, str]]:
        answer = page.get(f"/agent/reports/?{DAY}&format=csv&table={table}")
        assert answer["Content-Type"] == "text/csv; charset=utf-8"
        assert answer["Content-Disposition"] == f'attachment; filename="{table}.csv"'
        return rows_of(answer)

    # The columns are titled for people, in the page's language (English here).
    chats = next(row for row in get("summary") if row["Figure"] == "chats")
    assert chats == {
        "Figure": "chats", "This period": "2", "Previous period": "0", "Difference": "2",
        "Change (%)": "",
    }  # fmt: skip
    assert get("days") == [{"Day": "2026-03-02", "Chats": "2"}]
    assert len(get("hours")) == 168
    assert [row["Chats"] for row in get("first_response")] == ["0", "1", "0", "0", "0"]
    assert get("agents")[0]["Name"] == "Ann" and get("agents")[0]["Time online (seconds)"] == "0"
    assert get("channels")[0] == {
        "Channel ID": channel.public_id, "Name": "Shop", "Chats": "2", "Answered": "1",
        "Missed": "1", "Median first response (seconds)": "90",
        "First response, 90th percentile (seconds)": "90", "CSAT (%)": "100.0",
    }  # fmt: skip


def test_an_empty_agents_table_still_has_its_header(sue: Agent) -> None:
    ChannelFactory.create(agents=[sue])
    answer = browser_of(sue).get(f"/agent/reports/?{DAY}&format=csv&table=agents")
    assert answer.content.decode().startswith("Agent ID,Name,Chats,")
    assert answer.content.decode().strip().endswith("Time online (seconds)")


@pytest.mark.parametrize(
    "table", ["summary", "days", "hours", "first_response", "agents", "channels"]
)
def test_the_pages_csv_titles_its_columns_in_the_pages_language(
    sue: Agent, ann: Agent, channel: Channel, table: str
) -> None:
    Agent.objects.filter(pk=sue.pk).update(language="de")
    german = browser_of(sue).get(f"/agent/reports/?{DAY}&format=csv&table={table}")
    header = next(csv.reader(io.StringIO(german.content.decode())))
    # Every column has its title: no field name of the API's is left.
    fields = set(reports_page.COLUMN_TITLES)
    assert header and not fields & set(header), header
    with translation.override("de"):
        assert set(header) <= {str(title) for title in reports_page.COLUMN_TITLES.values()}
    if table == "channels":
        assert header[:3] == ["Kanal-ID", "Name", "Chats"] and "CSAT (%)" in header


def test_the_agent_apis_csv_keeps_its_field_names(sue: Agent, channel: Channel) -> None:
    Agent.objects.filter(pk=sue.pk).update(language="de")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=sue)}")
    answer = api.get(f"/api/agent/v1/reports/agents?{DAY}&format=csv", HTTP_ACCEPT_LANGUAGE="de")
    assert answer.status_code == 200, answer.content
    assert answer.content.decode().startswith("agent,name,chats,first_response_seconds_median,")


# --- the page's reads ------------------------------------------------------------


def test_chats_per_day_has_every_day_of_the_range_on_the_local_clock() -> None:
    channel = ChannelFactory.create()
    chat_at(channel, datetime(2026, 3, 2, 23, 30, tzinfo=UTC))  # Tuesday 00:30 in Berlin
    chat_at(channel, datetime(2026, 3, 4, 12, 0, tzinfo=UTC))

    days = reports.chats_per_day(
        query(channel, date(2026, 3, 2), date(2026, 3, 5), "Europe/Berlin")
    )

    assert days == [
        {"day": "2026-03-02", "chats": 0},
        {"day": "2026-03-03", "chats": 1},
        {"day": "2026-03-04", "chats": 1},
        {"day": "2026-03-05", "chats": 0},
    ]


def test_the_first_response_buckets_include_their_start_and_not_their_end() -> None:
    channel, ann = ChannelFactory.create(), AgentFactory.create()
    for seconds in (0, 59.9, 60, 299, 300, 899, 900, 3599, 3600, 86400):
        chat_at(channel, MONDAY, accepted=0, answered=seconds, by=ann)
    chat_at(channel, MONDAY, finished=30)  # never answered: in no bucket

    buckets = reports.first_response_distribution(query(channel, MONDAY.date()))

    assert [(row["from_seconds"], row["to_seconds"], row["chats"]) for row in buckets] == [
        (0, 60, 2),
        (60, 300, 2),
        (300, 900, 2),
        (900, 3600, 2),
        (3600, None, 2),
    ]


def test_the_channels_table_has_every_channel_of_the_query() -> None:
    ann = AgentFactory.create()
    busy, quiet = ChannelFactory.create(name="B busy"), ChannelFactory.create(name="A quiet")
    chat_at(busy, MONDAY, accepted=10, answered=70, finished=200, by=ann, rating="negative")
    chat_at(busy, MONDAY, accepted=10, answered=40, finished=200, by=ann, rating="positive")
    chat_at(busy, MONDAY, finished=50)
    narrow = reports.ReportQuery.of_days(
        MONDAY.date(), MONDAY.date(), ZoneInfo("UTC"), channel_ids=(busy.pk, quiet.pk)
    )

    rows = reports.channels(narrow)

    assert [(row["name"], row["chats"], row["answered"], row["missed"]) for row in rows] == [
        ("A quiet", 0, 0, 0),
        ("B busy", 3, 2, 1),
    ]
    assert rows[0]["first_response_seconds"] == {"median": None, "p90": None}
    assert rows[1]["first_response_seconds"] == {"median": 40, "p90": 70}
    assert (rows[0]["csat_percent"], rows[1]["csat_percent"]) == (None, 50.0)


def test_the_previous_period_is_as_long_and_just_before() -> None:
    channel = ChannelFactory.create()
    week = query(channel, date(2026, 3, 23), date(2026, 3, 29), "Europe/Berlin")

    before = reports.previous_period(week)

    assert reports.days_of(before)[0] == date(2026, 3, 16)
    assert reports.days_of(before)[-1] == date(2026, 3, 22)
    assert before.end == week.start and before.channel_ids == week.channel_ids
    # The week of the clocks' change (29 March) is an hour shorter; the days stay 7.
    assert week.end.astimezone(UTC) - week.start.astimezone(UTC) == timedelta(days=7, hours=-1)


@pytest.mark.parametrize(
    ("now", "before", "difference", "percent"),
    [(12, 10, 2, 20.0), (5, 10, -5, -50.0), (3, 0, 3, None), (None, 10, None, None),
     (90.0, None, None, None), (1, 3, -2, -66.7)],
)  # fmt: skip
def test_the_change(
    now: float | None, before: float | None, difference: float | None, percent: float | None
) -> None:
    assert reports.change(now, before) == {"difference": difference, "percent": percent}


def test_the_summary_is_compared_with_the_previous_period() -> None:
    channel = ChannelFactory.create()
    for _ in range(3):
        chat_at(channel, MONDAY - timedelta(days=1), finished=10)
    chat_at(channel, MONDAY, finished=10)

    rows = {row["figure"]: row for row in reports.summary_compared(query(channel, MONDAY.date()))}

    assert rows["chats"] == {
        "figure": "chats",
        "now": 1,
        "before": 3,
        "difference": -2,
        "percent": -66.7,
    }
    assert rows["wait_seconds_median"]["percent"] is None


def test_time_online_is_the_overlap_of_the_spans_with_the_range() -> None:
    ann, bob, cid = AgentFactory.create(), AgentFactory.create(), ChannelFactory.create()
    day = query(cid, MONDAY.date(), zone="Europe/Berlin")  # 1 March 23:00 to 2 March 23:00 UTC
    OnlineSpan.objects.create(  # 22:00-01:00 UTC: two hours of it in the day
        agent=ann,
        started=datetime(2026, 3, 1, 22, tzinfo=UTC),
        ended=datetime(2026, 3, 2, 1, tzinfo=UTC),
    )
    OnlineSpan.objects.create(  # 10:00-10:30
        agent=ann,
        started=datetime(2026, 3, 2, 10, tzinfo=UTC),
        ended=datetime(2026, 3, 2, 10, 30, tzinfo=UTC),
    )
    OnlineSpan.objects.create(agent=bob, started=datetime(2026, 3, 3, tzinfo=UTC))  # after it

    assert reports.time_online(day, [ann.pk, bob.pk]) == {ann.pk: 9000, bob.pk: 0}
    assert day.zone == BERLIN


def test_the_status_verb_records_the_spans() -> None:
    ann = AgentFactory.create(is_online=False)

    services.set_agent_status(agent=ann, online=True)
    services.set_agent_status(agent=ann, online=True)  # already online: the same span
    assert OnlineSpan.objects.filter(agent=ann, ended__isnull=True).count() == 1
    services.set_agent_status(agent=ann, online=False)
    services.set_agent_status(agent=ann, online=False)

    span = OnlineSpan.objects.get(agent=ann)
    assert span.ended is not None and span.ended >= span.started
    today = reports.ReportQuery.of_days(
        timezone.now().date(), timezone.now().date(), ZoneInfo("UTC"), channel_ids=()
    )
    assert reports.time_online(today, [ann.pk]) == {
        ann.pk: int((span.ended - span.started).total_seconds())
    }


# --- the charts ------------------------------------------------------------------


def test_a_chart_escapes_its_texts_and_scales() -> None:
    svg = charts.bar_chart(title='<script>"x"</script>', bars=[("<b>", 3), ("b", 0)])

    assert "<script>" not in svg and "&lt;script&gt;" in svg and "&lt;b&gt;" in svg
    assert 'role="img"' in svg and "viewBox=" in svg and 'width="640"' not in svg
    assert [charts.shade(n, 10) for n in (0, 1, 2, 5, 10)] == [0, 1, 1, 3, 5]
