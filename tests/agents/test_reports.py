"""The reports' measures (docs/reports.md), on chats with known answers; and
the facts the verbs keep for them."""

from __future__ import annotations

import csv
import importlib
import io
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.apps import apps
from django.utils import timezone

from agents import reports, services
from agents.models import Agent, Call, Channel, Chat, Department, Label, Message, OfflineMessage
from tests.factories import (
    AgentFactory,
    ChannelFactory,
    ChatFactory,
    ClientFactory,
    MessageFactory,
    text,
)

pytestmark = pytest.mark.django_db

MONDAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def chat_at(
    channel: Channel,
    created: datetime,
    *,
    queued: float | None = 0,
    accepted: float | None = None,
    answered: float | None = None,
    finished: float | None = None,
    by: Agent | None = None,
    held_by: tuple[Agent, ...] = (),
    **fields: Any,
) -> Chat:
    """A chat with its facts as the verbs keep them, each moment given in
    seconds after ``created`` (``queued=None``: never queued)."""

    def after(seconds: float | None) -> datetime | None:
        return None if seconds is None else created + timedelta(seconds=seconds)

    state = Chat.State.FINISHED if finished is not None else Chat.State.QUEUED
    if finished is None and accepted is not None:
        state = Chat.State.ACTIVE
    chat = ChatFactory.create(
        client=ClientFactory.create(channel=channel),
        state=fields.pop("state", state),
        created=created,
        queue_entered_at=after(queued),
        first_accepted_at=after(accepted),
        first_response_at=after(answered),
        first_response_agent=by if answered is not None else None,
        finished_at=after(finished),
        **fields,
    )
    chat.handlers.add(*(held_by or ((by,) if by else ())))
    return chat


def query(
    channel: Channel, first: date, last: date | None = None, zone: str = "UTC", **narrow: Any
) -> reports.ReportQuery:
    return reports.ReportQuery.of_days(
        first, last or first, ZoneInfo(zone), channel_ids=(channel.pk,), **narrow
    )


def test_answered_missed_and_bot_only_are_told_apart() -> None:
    channel, ann = ChannelFactory.create(), AgentFactory.create()
    chat_at(channel, MONDAY, accepted=10, answered=20, finished=100, by=ann)  # answered
    chat_at(channel, MONDAY, finished=50)  # left in the queue: missed
    chat_at(channel, MONDAY, accepted=10, finished=60, held_by=(ann,))  # taken, no word: missed
    chat_at(channel, MONDAY, queued=None, finished=300)  # the bot's from start to end
    chat_at(channel, MONDAY, queued=None, state=Chat.State.BOT)  # with the bot now: none
    chat_at(channel, MONDAY)  # waiting now: none of the three
    chat_at(channel, MONDAY, accepted=5, answered=9, by=ann)  # active, answered

    figures = reports.summary(query(channel, MONDAY.date()))

    assert (figures["chats"], figures["answered"], figures["missed"], figures["bot_only"]) == (
        7,
        2,
        2,
        1,
    )


def test_the_durations_are_whole_seconds_by_the_nearest_rank() -> None:
    channel, ann = ChannelFactory.create(), AgentFactory.create()
    for wait in (40, 10, 30, 20):  # median: rank 2 of 4 -> 20; p90: rank 4 -> 40
        chat_at(channel, MONDAY, accepted=wait, answered=wait + 5.9, finished=wait + 600, by=ann)

    figures = reports.summary(query(channel, MONDAY.date()))

    assert figures["wait_seconds"] == {"median": 20, "p90": 40}
    assert figures["first_response_seconds"] == {"median": 25, "p90": 45}  # 25.9 is 25
    assert figures["handle_seconds"] == {"median": 600, "p90": 600}


def test_nothing_to_measure_is_null() -> None:
    channel = ChannelFactory.create()
    chat_at(channel, MONDAY, finished=50)

    figures = reports.summary(query(channel, MONDAY.date()))

    for measure in ("wait_seconds", "first_response_seconds", "handle_seconds"):
        assert figures[measure] == {"median": None, "p90": None}
    assert (figures["rated"], figures["csat_percent"]) == (0, None)


@pytest.mark.parametrize(
    ("values", "median", "p90"),
    [([7], 7, 7), ([1, 2], 1, 2), ([1, 2, 3], 2, 3), (list(range(1, 11)), 5, 9), ([], None, None)],
)
def test_the_nearest_rank(values: list[int], median: int | None, p90: int | None) -> None:
    assert (reports.nearest_rank(values, 50), reports.nearest_rank(values, 90)) == (median, p90)


def test_a_bots_time_is_left_out_of_the_first_response() -> None:
    channel, ann = ChannelFactory.create(), AgentFactory.create()
    # Five minutes with the bot, handed over, taken a minute later, answered 40 s after.
    chat_at(channel, MONDAY, queued=300, accepted=360, answered=400, finished=900, by=ann)

    figures = reports.summary(query(channel, MONDAY.date()))

    assert figures["wait_seconds"] == {"median": 60, "p90": 60}
    assert figures["first_response_seconds"] == {"median": 100, "p90": 100}
    assert figures["handle_seconds"] == {"median": 540, "p90": 540}


def test_a_take_over_from_the_bot_never_waited_and_answers_from_the_take_over() -> None:
    channel, ann = ChannelFactory.create(), AgentFactory.create()
    chat_at(channel, MONDAY, queued=None, accepted=120, answered=150, by=ann)

    figures = reports.summary(query(channel, MONDAY.date()))

    assert figures["wait_seconds"] == {"median": None, "p90": None}
    assert figures["first_response_seconds"] == {"median": 30, "p90": 30}
    assert figures["missed"] == figures["bot_only"] == 0


def test_a_transferred_chat_counts_its_transfers_and_each_holder() -> None:
    channel = ChannelFactory.create()
    ann, bob = AgentFactory.create(name="Ann"), AgentFactory.create(name="Bob")
    chat_at(
        channel, MONDAY, accepted=10, answered=30, finished=310, by=ann, held_by=(ann, bob),
        transfer_count=2, shown_messages=7, rating=Chat.Rating.POSITIVE,
    )  # fmt: skip
    chat_at(channel, MONDAY, accepted=10, answered=70, finished=110, by=bob, shown_messages=3)

    figures = reports.summary(query(channel, MONDAY.date()))
    rows = reports.agents(query(channel, MONDAY.date()))

    assert (figures["transfers"], figures["messages"]) == (2, 10)
    assert rows == [
        {
            "agent": ann.pk, "name": "Ann", "chats": 1,
            "first_response_seconds": {"median": 30, "p90": 30},
            "handle_seconds": {"median": 300, "p90": 300}, "csat_percent": 100.0,
        },
        {
            "agent": bob.pk, "name": "Bob", "chats": 2,
            "first_response_seconds": {"median": 70, "p90": 70},  # the one Bob answered first
            "handle_seconds": {"median": 100, "p90": 300}, "csat_percent": 100.0,
        },
    ]  # fmt: skip


def test_csat_is_the_share_of_positive_among_the_rated() -> None:
    channel = ChannelFactory.create()
    for rating in ("positive", "positive", "negative", "positive", "", "negative"):
        chat_at(channel, MONDAY, finished=10, rating=rating)

    figures = reports.summary(query(channel, MONDAY.date()))

    assert (figures["rated"], figures["csat_percent"]) == (5, 60.0)


def test_a_chat_belongs_to_the_day_it_opened_in_the_reports_zone() -> None:
    channel = ChannelFactory.create()
    late = datetime(2026, 3, 2, 23, 50, tzinfo=BERLIN)  # finished at 00:20 the next day
    chat_at(channel, late, accepted=60, finished=1800)

    def chats(first: date, zone: str = "Europe/Berlin") -> int:
        return int(reports.summary(query(channel, first, zone=zone))["chats"])

    assert chats(date(2026, 3, 2)) == 1
    assert chats(date(2026, 3, 3)) == 0
    assert chats(date(2026, 3, 2), zone="UTC") == 1  # 22:50 UTC
    assert chats(date(2026, 3, 2), zone="Asia/Tokyo") == 0  # 07:50 the next morning


def test_the_day_summer_time_begins_is_23_hours_long() -> None:
    channel = ChannelFactory.create()
    # Sunday 29 March 2026 in Berlin: 00:00 CET is 23:00 UTC the day before,
    # 24:00 CEST is 22:00 UTC.
    for moment in ("2026-03-28T22:59", "2026-03-28T23:00", "2026-03-29T21:59", "2026-03-29T22:00"):
        chat_at(channel, datetime.fromisoformat(moment).replace(tzinfo=UTC))

    figures = reports.summary(query(channel, date(2026, 3, 29), zone="Europe/Berlin"))

    assert figures["chats"] == 2


def test_the_hours_follow_the_local_clock_over_summer_time() -> None:
    channel = ChannelFactory.create()
    at = [
        "2026-03-29T00:30",  # 01:30 CET
        "2026-03-29T01:30",  # 03:30 CEST: 02:00 to 03:00 never happened
        "2026-10-25T00:30",  # 02:30 CEST
        "2026-10-25T01:30",  # 02:30 CET: the hour happens twice
        "2026-03-02T08:00",  # Monday 09:00 CET
    ]
    for moment in at:
        chat_at(channel, datetime.fromisoformat(moment).replace(tzinfo=UTC))

    cells = reports.hours(query(channel, date(2026, 3, 1), date(2026, 10, 31), "Europe/Berlin"))

    assert len(cells) == 168 and cells[0] == {"weekday": 0, "hour": 0, "chats": 0}
    counted = {(cell["weekday"], cell["hour"]): cell["chats"] for cell in cells if cell["chats"]}
    assert counted == {(6, 1): 1, (6, 3): 1, (6, 2): 2, (0, 9): 1}


def test_the_filters_narrow_the_chats() -> None:
    channel, other = ChannelFactory.create(), ChannelFactory.create()
    ann, bob = AgentFactory.create(), AgentFactory.create()
    sales, vip = Department.objects.create(name="Sales"), Label.objects.create(name="vip")
    labelled = chat_at(channel, MONDAY, accepted=1, by=ann, answered=2)
    labelled.labels.add(vip)
    chat_at(channel, MONDAY, accepted=1, by=bob, answered=3, department=sales)
    chat_at(other, MONDAY, accepted=1, by=ann, answered=4)

    def chats(**narrow: Any) -> int:
        return int(reports.summary(query(channel, MONDAY.date(), **narrow))["chats"])

    assert chats() == 2
    assert chats(agent_id=ann.pk) == 1
    assert chats(label_id=vip.pk) == 1
    assert chats(department_id=sales.pk) == 1
    assert chats(agent_id=bob.pk, label_id=vip.pk) == 0
    assert [
        row["agent"] for row in reports.agents(query(channel, MONDAY.date(), agent_id=ann.pk))
    ] == [ann.pk]


def test_offline_messages_and_calls_of_the_range_and_channel() -> None:
    channel, other = ChannelFactory.create(), ChannelFactory.create()
    for where, when in ((channel, MONDAY), (channel, MONDAY - timedelta(days=1)), (other, MONDAY)):
        OfflineMessage.objects.create(channel=where, message="call me", created=when)
    for status in (Call.Status.END, Call.Status.END, Call.Status.ERROR):
        Call.objects.create(channel=channel, phone="+100", status=status, created=MONDAY)
    Call.objects.create(channel=other, phone="+100", created=MONDAY)

    figures = reports.summary(query(channel, MONDAY.date()))

    assert figures["offline_messages"] == 1
    assert figures["calls"] == {
        "start": 0, "agent_connected": 0, "client_connected": 0, "end": 2, "error": 1,
    }  # fmt: skip


def test_a_chat_kept_only_for_a_blacklisted_clients_messages_is_no_chat() -> None:
    channel = ChannelFactory.create()
    services.blacklist_client(chat=services.open_chat(client=ClientFactory.create(channel=channel)))
    # Blacklisted by an admin before writing: the message is kept in a chat made finished.
    nina = ClientFactory.create(channel=channel, blacklisted_at=timezone.now())
    services.post_client_message(client=nina, content=text("never seen"))

    assert Chat.objects.count() == 2
    assert reports.summary(query(channel, timezone.now().date()))["chats"] == 1


# --- the facts the verbs keep ----------------------------------------------------


def test_the_verbs_keep_a_queued_chats_facts() -> None:
    ann = AgentFactory.create(is_online=True)
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[ann]))
    chat = services.post_client_message(client=client, content=text("hello")).chat
    services.accept_chat(chat=chat, agent=ann)
    services.post_note(chat=chat, agent=ann, text="a note")
    first = services.post_agent_message(chat=chat, agent=ann, content=text("hi"))
    services.post_agent_message(chat=chat, agent=ann, content=text("more"))
    services.post_client_message(client=client, content=text("thanks"))
    services.finish_chat(chat=chat, agent=ann)

    chat.refresh_from_db()
    assert chat.queue_entered_at == chat.created
    assert chat.first_accepted_at == chat.accepted_at
    assert (chat.first_response_at, chat.first_response_agent) == (first.created, ann)
    assert chat.shown_messages == 4  # the note is not shown
    assert list(chat.handlers.all()) == [ann]
    assert chat.transfer_count == 0


def test_a_bots_handover_starts_the_wait_and_a_return_to_the_bot_ends_it() -> None:
    ann = AgentFactory.create(is_online=True)
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[ann]))
    chat = services.open_chat(client=client, state=Chat.State.BOT)
    assert chat.queue_entered_at is None
    services.post_bot_message(chat=chat, content=text("I am a bot"))

    services.queue_chat(chat=chat, reason="invited")
    services.return_chat_to_bot(chat=chat, reason="nobody online")
    chat.refresh_from_db()
    assert chat.queue_entered_at is None and chat.shown_messages == 1

    chat = services.queue_chat(chat=chat, reason="invited again")
    assert chat.queue_entered_at == chat.queued_at and chat.queued_at is not None


def test_a_take_over_from_the_bot_has_no_queue_entry() -> None:
    ann = AgentFactory.create(is_online=True)
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[ann]))
    chat = services.open_chat(client=client, state=Chat.State.BOT)

    chat = services.accept_chat(chat=chat, agent=ann)

    assert chat.queue_entered_at is None and chat.first_accepted_at == chat.accepted_at


def test_transfers_and_reassignments_are_counted_and_keep_the_first_facts() -> None:
    ann, bob = AgentFactory.create(is_online=True), AgentFactory.create(is_online=True)
    sue = AgentFactory.create(role=Agent.Role.SUPERVISOR)
    channel = ChannelFactory.create(agents=[ann, bob, sue])
    chat = services.open_chat(client=ClientFactory.create(channel=channel))
    chat = services.accept_chat(chat=chat, agent=ann)
    entered, first_accepted = chat.queue_entered_at, chat.first_accepted_at

    services.transfer_chat(chat=chat, agent=ann, to_agent=bob)
    services.reassign_chat(chat=chat, by=sue, to_agent=ann)
    services.transfer_chat(chat=chat, agent=ann, department=Department.objects.create(name="X"))
    chat = services.accept_chat(chat=chat, agent=bob)

    assert chat.transfer_count == 3
    assert (chat.queue_entered_at, chat.first_accepted_at) == (entered, first_accepted)
    assert chat.accepted_at is not None and first_accepted is not None
    assert chat.accepted_at > first_accepted
    assert set(chat.handlers.all()) == {ann, bob}


def test_the_migration_gives_older_chats_their_facts() -> None:
    migration = importlib.import_module("agents.migrations.0022_reports")
    ann, bob = AgentFactory.create(), AgentFactory.create()
    chat = ChatFactory.create(
        state=Chat.State.FINISHED, queued_at=MONDAY, accepted_at=MONDAY + timedelta(seconds=9)
    )
    chat.agents.add(bob)
    for author, agent in [
        ("client", None), ("note", ann), ("agent", ann), ("system", ann), ("agent", bob),
        ("bot", None),
    ]:  # fmt: skip
        MessageFactory.create(chat=chat, author=author, agent=agent)
    MessageFactory.create(chat=chat, payload={Message.BLACKLISTED: True})

    migration.backfill_report_facts(apps, None)

    chat.refresh_from_db()
    first = chat.messages.filter(author="agent").first()
    assert first is not None
    assert (chat.queue_entered_at, chat.first_accepted_at) == (chat.queued_at, chat.accepted_at)
    assert (chat.first_response_at, chat.first_response_agent) == (first.created, ann)
    assert (chat.transfer_count, chat.shown_messages) == (1, 4)
    assert set(chat.handlers.all()) == {ann, bob}


def test_csv_cells_a_spreadsheet_would_run_start_with_a_quote() -> None:
    # An agent may name themselves "=HYPERLINK(…)"; numbers stay numbers.
    text = reports.as_csv([{"name": "=HYPERLINK(1)", "chats": -1, "other": "+1", "x": "@x"}])

    [row] = list(csv.reader(io.StringIO(text)))[1:]
    assert row == ["'=HYPERLINK(1)", "-1", "'+1", "'@x"]
