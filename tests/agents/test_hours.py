"""Business hours (docs/routing.md, "Business hours"): a time zone, weekly
hours and dates closed; outside them a channel is unavailable whoever is
online. Each integration's view of it (A1, the widget, a bot's
INVITE_AGENT) is tested in its own folder."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client as Browser
from django.utils import timezone

from agents import hours, selectors, services
from agents.models import Agent, Channel, Message
from channels_api.models import ChatApiChannel, MessageDelivery
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db

OFFICE = ["mon-fri 09:00-12:00,13:00-18:00", "sat 10:00-14:00"]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def berlin(**fields: Any) -> Channel:
    channel = ChannelFactory.create()
    return services.set_business_hours(
        channel=channel, time_zone="Europe/Berlin", weekly=OFFICE, **fields
    )


def test_weekly_hours_are_read_as_the_command_writes_them() -> None:
    assert hours.parse_hours(OFFICE) == {
        **{day: [["09:00", "12:00"], ["13:00", "18:00"]] for day in hours.DAYS[:5]},
        "sat": [["10:00", "14:00"]],
    }
    assert hours.parse_hours(["sun,tue 20:00-24:00"]) == {
        "tue": [["20:00", "24:00"]], "sun": [["20:00", "24:00"]],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("mon-fri", "days, then hours"),
        ("moon 09:00-18:00", "days are mon"),
        ("fri-mon 09:00-18:00", "runs forward"),
        ("mon 9-18", "HH:MM-HH:MM"),
        ("mon 25:00-26:00", "HH:MM-HH:MM"),
        ("mon 18:00-09:00", "past midnight"),
        ("mon 09:00-09:00", "closes after it opens"),
        ("mon 09:00-13:00,12:00-18:00", "overlap"),
    ],
)
def test_hours_that_cannot_be_read_are_refused(spec: str, says: str) -> None:
    with pytest.raises(hours.BadHours, match=says):
        hours.parse_hours([spec])


@pytest.mark.parametrize(
    ("utc", "open_"),
    [
        ("2026-11-25 07:59", False),  # Wednesday 08:59 in Berlin (UTC+1)
        ("2026-11-25 08:00", True),  # 09:00
        ("2026-11-25 11:30", False),  # 12:30: the lunch break
        ("2026-11-25 16:59", True),  # 17:59
        ("2026-11-25 17:00", False),  # 18:00: closed from the end of the span
        ("2026-11-28 09:30", True),  # Saturday 10:30
        ("2026-11-29 10:00", False),  # Sunday
        ("2026-07-01 07:30", True),  # summer (UTC+2): 09:30
        ("2026-12-25 10:00", False),  # a Friday, but closed that day
    ],
)
def test_open_follows_the_local_hours_and_the_dates_closed(utc: str, open_: bool) -> None:
    channel = berlin(closed=["2026-12-25"])
    assert hours.is_open(channel, at(utc)) is open_


def test_a_channel_with_no_hours_is_always_open_and_dates_closed_alone_close_it() -> None:
    channel = ChannelFactory.create()
    assert hours.is_open(channel, at("2026-11-29 03:00"))
    services.set_business_hours(channel=channel, closed=["2026-11-29"])
    assert not hours.is_open(channel, at("2026-11-29 03:00"))
    assert hours.is_open(channel, at("2026-11-30 03:00"))


def test_outside_the_hours_nobody_is_online_for_the_channel() -> None:
    agent = AgentFactory.create(is_online=True)
    channel = ChannelFactory.create(agents=[agent])
    assert selectors.agents_online(channel=channel)
    today = timezone.now().date().isoformat()

    services.set_business_hours(channel=channel, closed=[today])
    assert not selectors.agents_online(channel=channel)

    services.set_business_hours(channel=channel, always=True)
    assert selectors.agents_online(channel=channel)


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_sets_the_hours_and_always_removes_them() -> None:
    channel = ChannelFactory.create()
    made = run(
        "set_business_hours", "--channel", channel.public_id, "--time-zone", "Europe/Berlin",
        "--hours", "mon-fri 09:00-18:00", "--hours", "sat 10:00-14:00",
        "--closed", "2026-12-25", "--closed", "2026-12-24",
    )  # fmt: skip

    assert made["channel"] == channel.public_id and made["time_zone"] == "Europe/Berlin"
    assert made["always_open"] is False and made["closed"] == ["2026-12-24", "2026-12-25"]
    assert made["hours"]["mon"] == [["09:00", "18:00"]] and "sun" not in made["hours"]
    assert isinstance(made["open_now"], bool)

    cleared = run("set_business_hours", "--channel", channel.public_id, "--always")
    assert cleared["always_open"] is True and cleared["open_now"] is True
    assert (cleared["hours"], cleared["closed"]) == ({}, [])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--time-zone", "Mars/Olympus_Mons"], "is not a time zone"),
        (["--hours", "mon 18:00-09:00"], "past midnight"),
        (["--closed", "25.12.2026"], "is not a date"),
        (["--always", "--hours", "mon 09:00-18:00"], "give it alone"),
    ],
)
def test_the_command_refuses_what_it_cannot_read_and_changes_nothing(
    args: list[str], says: str
) -> None:
    channel = berlin()
    with pytest.raises(CommandError, match=says):
        call_command("set_business_hours", "--channel", channel.public_id, *args, stdout=StringIO())
    channel.refresh_from_db()
    assert channel.business_time_zone == "Europe/Berlin"
    assert channel.business_hours == hours.parse_hours(OFFICE) and channel.closed_dates == []


def test_an_unknown_channel_is_refused() -> None:
    with pytest.raises(CommandError, match="no channel"):
        call_command("set_business_hours", "--channel", "nope", "--always", stdout=StringIO())


def test_the_channels_admin_page_edits_the_hours() -> None:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    channel = berlin(closed=["2026-12-25"])
    page = browser.get(f"/admin/agents/channel/{channel.pk}/change/").content.decode()
    assert "mon 09:00-12:00,13:00-18:00" in page and "2026-12-25" in page

    form = {
        "name": channel.name, "is_active": "on", "routing_mode": "manual",
        "offer_seconds": "30", "business_time_zone": "America/New_York",
        "weekly_hours": "mon-fri 08:00-16:00\n", "dates_closed": "2027-01-01",
        "callback-TOTAL_FORMS": "0", "callback-INITIAL_FORMS": "0",
    }  # fmt: skip
    answer = browser.post(f"/admin/agents/channel/{channel.pk}/change/", form)

    assert answer.status_code == 302
    channel.refresh_from_db()
    assert channel.business_time_zone == "America/New_York"
    assert channel.business_hours["fri"] == [["08:00", "16:00"]]
    assert "sat" not in channel.business_hours
    assert channel.closed_dates == ["2027-01-01"]

    refused = browser.post(
        f"/admin/agents/channel/{channel.pk}/change/",
        {**form, "weekly_hours": "mon 18:00-09:00"},
    )
    assert refused.status_code == 200 and "past midnight" in refused.content.decode()
    channel.refresh_from_db()
    assert channel.business_hours["mon"] == [["08:00", "16:00"]]


# --- the away message -----------------------------------------------------------------


def away(channel: Channel) -> list[str]:
    return list(
        Message.objects.filter(chat__channel=channel, payload__has_key=Message.AWAY)
        .order_by("id")
        .values_list("text", flat=True)
    )


def test_the_away_message_answers_once_per_chat_while_nobody_can(
    chat_api: ChatApiChannel, agent: Agent
) -> None:
    services.set_agent_status(agent=agent, online=False)
    services.set_business_hours(channel=chat_api.channel, away_message="Back at 9, promise.")
    client = ClientFactory.create(channel=chat_api.channel)

    first = services.post_client_message(client=client, content=text("hello?")).chat
    services.post_client_message(client=client, content=text("anyone?"))

    sent = first.messages.get(payload__has_key=Message.AWAY)
    assert (sent.author, sent.text, sent.sender_name) == (
        Message.Author.BOT, "Back at 9, promise.", chat_api.channel.name,
    )  # fmt: skip
    # It reaches the client as any answer does: here, the integrator's A3.
    assert MessageDelivery.objects.filter(message=sent).exists()
    assert away(chat_api.channel) == ["Back at 9, promise."]

    # The next chat gets it again; with an agent online, nobody does.
    services.finish_chat(chat=first)
    services.post_client_message(client=client, content=text("me again"))
    assert len(away(chat_api.channel)) == 2
    services.set_agent_status(agent=agent, online=True)
    services.post_client_message(client=ClientFactory.create(channel=chat_api.channel),
                                 content=text("hi"))  # fmt: skip
    assert len(away(chat_api.channel)) == 2


def test_outside_the_hours_the_away_message_answers_whoever_is_online(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent])
    today = timezone.now().date().isoformat()
    services.set_business_hours(channel=channel, closed=[today], away_message="Closed today.")
    client = ClientFactory.create(channel=channel)
    services.post_client_message(client=client, content=text("hello"))
    assert agent.is_online and away(channel) == ["Closed today."]


def test_no_away_message_is_set_by_default_and_a_bots_chat_gets_none(agent: Agent) -> None:
    services.set_agent_status(agent=agent, online=False)
    channel = ChannelFactory.create(agents=[agent])
    services.post_client_message(client=ClientFactory.create(channel=channel), content=text("x"))
    assert away(channel) == []

    services.set_business_hours(channel=channel, away_message="Nobody here.")
    bot_chat = services.open_chat(client=ClientFactory.create(channel=channel), state="bot")
    services.post_client_message(client=bot_chat.client, content=text("hi bot"))
    assert away(channel) == []


def test_the_command_sets_and_removes_the_away_message() -> None:
    channel = ChannelFactory.create()
    made = run("set_business_hours", "--channel", channel.public_id, "--away-message", "  Later!  ")
    assert made["away_message"] == "Later!" and made["always_open"] is True
    cleared = run("set_business_hours", "--channel", channel.public_id, "--away-message", "")
    assert cleared["away_message"] == ""
    with pytest.raises(CommandError, match="longer than 4000"):
        call_command("set_business_hours", "--channel", channel.public_id,
                     "--away-message", "x" * 4001, stdout=StringIO())  # fmt: skip
