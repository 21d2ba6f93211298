"""``seed_report_data`` (agents/reportdata.py): a history whose facts are
each chat's as the verbs would have written them."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agents import reportdata
from agents.models import Agent, Channel, Chat, Client, Message

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 30, 9, 0, tzinfo=UTC)


def seed(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("seed_report_data", *args, stdout=out)
    return json.loads(out.getvalue())


def test_every_chats_facts_are_as_its_messages_and_verbs_tell() -> None:
    made = reportdata.seed(chats=200, days=3, seed=3, now=NOW)

    assert (made["chats"], Chat.objects.count()) == (200, 200)
    assert made["messages"] == Message.objects.count() > 1000
    assert Agent.objects.count() == 30 and Channel.objects.count() == 4
    said: dict[int, list[Message]] = defaultdict(list)
    for message in Message.objects.order_by("created", "pk"):
        said[message.chat_id].append(message)
    handlers: dict[int, set[int]] = defaultdict(set)
    for chat_id, agent_id in Chat.handlers.through.objects.values_list("chat_id", "agent_id"):
        handlers[chat_id].add(agent_id)
    states = set()
    for chat in Chat.objects.all():
        messages = said[chat.pk]
        answers = [m for m in messages if m.author == Message.Author.AGENT]
        states.add(chat.state)
        assert NOW - timedelta(days=3) <= chat.created <= NOW
        assert messages[0].created == chat.created == min(m.created for m in messages)
        assert chat.last_message_at == messages[-1].created <= NOW
        assert (chat.state == Chat.State.FINISHED) == (chat.finished_at is not None)
        assert chat.finished_at is None or chat.finished_at >= messages[-1].created
        if chat.blacklisted:  # kept for a blacklisted client: created finished, unseen
            assert chat.finished_at == chat.created and chat.shown_messages == 0
            continue
        assert chat.shown_messages == sum(m.author in ("client", "agent", "bot") for m in messages)
        assert chat.transfer_count == sum(m.author == "system" for m in messages)
        if answers:
            assert (chat.first_response_at, chat.first_response_agent_id) == (
                answers[0].created,
                answers[0].agent_id,
            )
            assert chat.first_accepted_at is not None
            assert chat.first_accepted_at <= answers[0].created
        else:
            assert chat.first_response_at is None and chat.rating == ""
        assert {m.agent_id for m in answers} <= handlers[chat.pk]
        if chat.queue_entered_at is not None:
            assert chat.queue_entered_at >= chat.created
            assert chat.first_accepted_at is None or chat.first_accepted_at >= chat.queue_entered_at
        assert (chat.first_accepted_at is None) == (not handlers[chat.pk])
        if chat.accepted_at is not None:
            assert chat.first_accepted_at is not None
            assert chat.first_accepted_at <= chat.accepted_at
    # Finished (answered, missed, the bot's alone) and, at "now", still open.
    assert Chat.State.FINISHED in states and len(states) > 1
    assert Chat.objects.filter(first_response_at__isnull=True, state="finished").exists()


def test_a_client_has_one_open_chat_and_writes_again_only_after_a_finish() -> None:
    reportdata.seed(chats=300, days=2, seed=4, now=NOW)

    returning = 0
    for client in Client.objects.all():
        chats = list(client.chats.order_by("created"))
        returning += len(chats) > 1
        for earlier, later in itertools.pairwise(chats):
            assert earlier.finished_at is not None and earlier.finished_at < later.created
    assert returning > 5


def test_the_same_seed_makes_the_same_history() -> None:
    def history() -> list[tuple[Any, ...]]:
        return list(
            Chat.objects.order_by("created").values_list(
                "created", "state", "first_response_at", "finished_at", "shown_messages"
            )
        )

    reportdata.seed(chats=50, days=2, seed=9, now=NOW)
    first = history()
    Chat.objects.all().delete()
    reportdata.seed(chats=50, days=2, seed=9, now=NOW)

    assert history() == first


def test_the_command_prints_what_it_made(settings: Any) -> None:
    settings.DEBUG = True
    made = seed("--chats", "200", "--days", "3")

    assert made["chats"] == 200 and made["messages"] == Message.objects.count()
    assert [c["name"] for c in made["channels"]] == [
        "Website",
        "Shop app",
        "Support bot",
        "Partners",
    ]
    assert {login["role"] for login in made["logins"]} == {"supervisor", "admin"}


def test_the_command_refuses_a_database_with_chats_or_debug_off(settings: Any) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG is off"):
        seed("--chats", "5", "--days", "1")
    settings.DEBUG = True
    seed("--chats", "5", "--days", "1")
    with pytest.raises(CommandError, match="holds chats already"):
        seed("--chats", "5", "--days", "1")

    assert seed("--chats", "5", "--days", "1", "--yes")["chats"] == 5
    assert Chat.objects.count() == 10 and Agent.objects.count() == 30
