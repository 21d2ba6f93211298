"""The reports API (docs/agent-api.md, "Reports"): its shapes, CSV, who may
read it and what it refuses."""

from __future__ import annotations

import csv
import io

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, Channel, Chat, Label
from agents.tokens import issue_token
from tests.agents.test_reports import MONDAY, chat_at
from tests.factories import AgentFactory, ChannelFactory

pytestmark = pytest.mark.django_db

DAY = "from=2026-03-02&to=2026-03-02"


def api_of(agent: Agent) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return client


@pytest.fixture
def ann() -> Agent:
    return AgentFactory.create(name="Ann")


@pytest.fixture
def sue(ann: Agent) -> Agent:
    return AgentFactory.create(name="Sue", role=Agent.Role.SUPERVISOR)


@pytest.fixture
def channel(ann: Agent, sue: Agent) -> Channel:
    """Sue's channel, where Ann answered one chat and one was missed."""
    channel = ChannelFactory.create(agents=[ann, sue])
    chat_at(
        channel, MONDAY, accepted=30, answered=90, finished=630, by=ann,
        rating=Chat.Rating.POSITIVE, shown_messages=4,
    )  # fmt: skip
    chat_at(channel, MONDAY, finished=120)
    return channel


def test_the_summary(sue: Agent, channel: Channel) -> None:
    answer = api_of(sue).get(f"/api/agent/v1/reports/summary?{DAY}")

    assert answer.status_code == 200
    assert answer.json() == {
        "chats": 2,
        "answered": 1,
        "missed": 1,
        "bot_only": 0,
        "wait_seconds": {"median": 30, "p90": 30},
        "first_response_seconds": {"median": 90, "p90": 90},
        "handle_seconds": {"median": 600, "p90": 600},
        "rated": 1,
        "csat_percent": 100.0,
        "messages": 4,
        "transfers": 0,
        "offline_messages": 0,
        "calls": {"start": 0, "agent_connected": 0, "client_connected": 0, "end": 0, "error": 0},
    }


def test_the_agents(sue: Agent, ann: Agent, channel: Channel) -> None:
    answer = api_of(sue).get(f"/api/agent/v1/reports/agents?{DAY}")

    assert answer.json() == {
        "results": [
            {
                "agent": ann.pk,
                "name": "Ann",
                "chats": 1,
                "first_response_seconds": {"median": 90, "p90": 90},
                "handle_seconds": {"median": 600, "p90": 600},
                "csat_percent": 100.0,
            }
        ]
    }


def test_the_hours_in_the_zone_asked_for(sue: Agent, channel: Channel) -> None:
    answer = api_of(sue).get(f"/api/agent/v1/reports/hours?{DAY}&tz=Asia/Tokyo")

    results = answer.json()["results"]
    assert len(results) == 168
    assert [cell for cell in results if cell["chats"]] == [{"weekday": 0, "hour": 18, "chats": 2}]


def test_each_report_as_csv(sue: Agent, ann: Agent, channel: Channel) -> None:
    api = api_of(sue)

    def rows(report: str, extra: str = "") -> list[list[str]]:
        answer = api.get(f"/api/agent/v1/reports/{report}?{DAY}&format=csv{extra}")
        assert answer.status_code == 200
        assert answer["Content-Type"] == "text/csv; charset=utf-8"
        assert answer["Content-Disposition"] == f'attachment; filename="{report}.csv"'
        return list(csv.reader(io.StringIO(answer.content.decode())))

    summary = rows("summary")
    assert summary[0][:6] == [
        "chats", "answered", "missed", "bot_only", "wait_seconds_median", "wait_seconds_p90",
    ]  # fmt: skip
    assert dict(zip(*summary, strict=True))["csat_percent"] == "100.0"
    assert rows("agents") == [
        [
            "agent", "name", "chats", "first_response_seconds_median",
            "first_response_seconds_p90", "handle_seconds_median", "handle_seconds_p90",
            "csat_percent",
        ],
        [str(ann.pk), "Ann", "1", "90", "90", "600", "600", "100.0"],
    ]  # fmt: skip
    assert rows("agents", f"&agent={sue.pk}")[1:] == []  # no row: the header still
    hours = rows("hours")
    assert hours[0] == ["weekday", "hour", "chats"] and hours[1 + 9] == ["0", "9", "2"]


def test_agents_are_refused_and_supervisors_see_their_channels_only(
    ann: Agent, sue: Agent, channel: Channel
) -> None:
    elsewhere = ChannelFactory.create()
    chat_at(elsewhere, MONDAY, finished=10)
    admin = AgentFactory.create(role=Agent.Role.ADMIN)

    refused = api_of(ann).get(f"/api/agent/v1/reports/summary?{DAY}")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "access_denied"
    for report in ("agents", "hours"):
        assert api_of(ann).get(f"/api/agent/v1/reports/{report}?{DAY}").status_code == 403

    assert api_of(sue).get(f"/api/agent/v1/reports/summary?{DAY}").json()["chats"] == 2
    assert api_of(admin).get(f"/api/agent/v1/reports/summary?{DAY}").json()["chats"] == 3
    mine = api_of(sue).get(f"/api/agent/v1/reports/summary?{DAY}&channel={channel.public_id}")
    assert mine.json()["chats"] == 2
    theirs = api_of(sue).get(f"/api/agent/v1/reports/summary?{DAY}&channel={elsewhere.public_id}")
    assert theirs.status_code == 400
    assert theirs.json() == {
        "error": {"code": "invalid_request", "message": "channel: no such channel"}
    }


def test_the_filters_by_name_and_id(sue: Agent, ann: Agent, channel: Channel) -> None:
    vip = Label.objects.create(name="vip")
    Chat.objects.filter(rating=Chat.Rating.POSITIVE).get().labels.add(vip)
    api = api_of(sue)

    def chats(extra: str) -> int:
        answer = api.get(f"/api/agent/v1/reports/summary?{DAY}{extra}")
        assert answer.status_code == 200, answer.json()
        return int(answer.json()["chats"])

    assert chats("&label=vip") == 1
    assert chats(f"&agent={ann.pk}") == 1
    assert chats("&channel=&agent=&label=") == 2  # empty: not given


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "from: a date as YYYY-MM-DD is required"),
        ("from=2026-03-02", "to: a date as YYYY-MM-DD is required"),
        ("from=2026-3-2&to=2026-03-02", "from: a date as YYYY-MM-DD is required"),
        ("from=2026-02-30&to=2026-03-02", "from: a date as YYYY-MM-DD is required"),
        ("from=20260302&to=2026-03-02", "from: a date as YYYY-MM-DD is required"),
        ("from=2026-03-03&to=2026-03-02", "from: the range starts after it ends (to)"),
        ("from=9999-12-31&to=9999-12-31", "from: a year from 1970 to 2999"),
        ("from=2026-03-02&to=0001-01-01", "to: a year from 1970 to 2999"),
        ("from=2025-03-01&to=2026-03-02", "to: a report covers at most 366 days"),
        (f"{DAY}&tz=Mars/Olympus", "tz: no such time zone (an IANA name, e.g. Europe/Berlin)"),
        (f"{DAY}&tz=../../etc/passwd", "tz: no such time zone (an IANA name, e.g. Europe/Berlin)"),
        (f"{DAY}&channel=nope", "channel: no such channel"),
        (f"{DAY}&agent=999999", "agent: no such agent"),
        (f"{DAY}&agent=1e3", "agent: no such agent"),
        (f"{DAY}&agent={'9' * 40}", "agent: no such agent"),
        (f"{DAY}&label=nope", "label: no such label"),
        (f"{DAY}&department=7", "department: no such department"),
        (f"{DAY}&format=xml", "format: json or csv"),
    ],
)
def test_what_it_cannot_read_is_a_400_naming_it(
    sue: Agent, channel: Channel, query: str, message: str
) -> None:
    answer = api_of(sue).get(f"/api/agent/v1/reports/summary?{query}")

    assert answer.status_code == 400
    assert answer.json() == {"error": {"code": "invalid_request", "message": message}}


def test_a_leap_year_fits_and_an_agent_of_another_channel_is_unknown(sue: Agent) -> None:
    stranger = AgentFactory.create()
    api = api_of(sue)

    year = api.get("/api/agent/v1/reports/summary?from=2028-01-01&to=2028-12-31")
    other = api.get(f"/api/agent/v1/reports/agents?{DAY}&agent={stranger.pk}")

    assert year.status_code == 200
    assert other.json()["error"]["message"] == "agent: no such agent"


def test_the_reports_are_in_the_openapi_schema() -> None:
    schema = APIClient().get("/api/schema/?format=json").json()

    summary = schema["paths"]["/api/agent/v1/reports/summary"]["get"]
    assert {p["name"] for p in summary["parameters"]} >= {"from", "to", "tz", "format"}
    assert set(summary["responses"]["200"]["content"]) == {"application/json", "text/csv"}
