"""The visitor's place in the queue (``POST /widget/<id>/v1/queue``;
docs/widget.md, "Your place in the queue"): its own chat only, the line the
widget shows, and refusals in the error body."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client as Browser
from django.utils import timezone

from agents import services
from agents.models import Agent, Channel, Chat, Department
from devhooks.models import WidgetChannel
from devhooks.widget.selectors import ordinal, queue_text
from devhooks.widget.services import create_widget_channel
from tests.devhooks.widget.test_api import Visitor, error_of, unique_address
from tests.factories import AgentFactory
from tests.limits import rate_limit_statements

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def generous_limits(settings: Any) -> None:
    settings.WIDGET_RATE_LIMIT = 100_000
    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 100_000
    settings.WIDGET_ADDRESS_RATE_LIMIT = 100_000
    settings.WIDGET_QUEUE_REFRESH_SECONDS = 10


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(name="Alice", email="alice@example.com", is_online=True)


@pytest.fixture
def widget(alice: Agent) -> WidgetChannel:
    return create_widget_channel(name="Shop", agent_emails=[alice.email], title="Talk to us")


def waiting(widget: WidgetChannel, words: str = "Hello?") -> Visitor:
    visitor = Visitor(widget, address=unique_address())
    assert visitor.ok("message", text=words)["state"] == "queued"
    return visitor


def chat_of(visitor: Visitor) -> Chat:
    return Chat.objects.get(client=visitor.client)


def test_a_waiting_visitor_reads_its_place_and_moves_up_as_chats_ahead_are_taken(
    widget: WidgetChannel, alice: Agent
) -> None:
    ann, ben = waiting(widget), waiting(widget)

    assert ben.ok("queue")["queue"] == {
        "position": 2,
        "wait_seconds": None,  # no chat of the channel was answered yet
        "text": "You are 2nd in line",
        "refresh_seconds": 20,
    }
    assert ann.ok("queue")["queue"]["text"] == "You are next in line"

    services.accept_chat(chat=chat_of(ann), agent=alice)
    assert ann.ok("queue") == {"result": "ok", "queue": None}  # an agent has it: no line
    assert ben.ok("queue")["queue"]["position"] == 1


def test_the_estimate_comes_from_the_channels_recent_waits(
    widget: WidgetChannel, alice: Agent
) -> None:
    earlier = waiting(widget)
    services.accept_chat(chat=chat_of(earlier), agent=alice)
    now = timezone.now()
    Chat.objects.filter(client=earlier.client).update(
        queued_at=now - timedelta(seconds=100), accepted_at=now
    )
    waiting(widget)
    ben = waiting(widget)

    queue = ben.ok("queue")["queue"]
    assert queue["wait_seconds"] == 200
    assert queue["text"] == "You are 2nd in line, about 3 minutes"


def test_a_visitor_sees_only_its_own_chats_place(widget: WidgetChannel) -> None:
    ann, ben = waiting(widget), waiting(widget)

    # Naming another chat changes nothing: the token is the only name.
    answer = ben.ok("queue", chat_id=chat_of(ann).pk, client_id=ann.client.pk)
    assert answer["queue"]["position"] == 2
    # Another widget's visitor is nobody here.
    other = create_widget_channel(name="Other shop", agent_emails=["alice@example.com"])
    stranger = Visitor(other, token=ann.token, address=unique_address())
    assert "no visitor" in stranger.refused("queue")


def test_a_visitor_without_a_chat_in_the_queue_has_no_line(widget: WidgetChannel) -> None:
    visitor = Visitor(widget, address=unique_address())
    visitor.ok("contact", name="Vera")  # a visitor, without a chat

    assert visitor.ok("queue") == {"result": "ok", "queue": None}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"token": 42},
        {"token": ["a"]},
        {"token": "not-a-token"},
        {"token": "x" * 10_000},
        {"token": None, "page": "nope"},
    ],
)
def test_a_queue_request_without_a_visitor_is_refused_in_the_error_body(
    widget: WidgetChannel, body: dict[str, Any]
) -> None:
    browser = Browser(REMOTE_ADDR=unique_address())
    answer = browser.post(
        f"/widget/{widget.widget_id}/v1/queue", json.dumps(body), content_type="text/plain"
    )

    error_of(answer, 400)


@pytest.mark.parametrize("raw", ["[1, 2]", "not json", '{"token": "\\u0000"}', "null"])
def test_a_body_that_is_no_json_object_is_refused(widget: WidgetChannel, raw: str) -> None:
    browser = Browser(REMOTE_ADDR=unique_address())
    answer = browser.post(f"/widget/{widget.widget_id}/v1/queue", raw, content_type="text/plain")

    error_of(answer, 400)


def test_the_queue_answers_only_post(widget: WidgetChannel) -> None:
    answer = Browser(REMOTE_ADDR=unique_address()).get(f"/widget/{widget.widget_id}/v1/queue")

    error_of(answer, 405)


def test_further_back_asks_less_often_and_never_less_than_once_a_minute(
    widget: WidgetChannel,
) -> None:
    visitors = [waiting(widget) for _ in range(8)]

    asked = [visitor.ok("queue")["queue"]["refresh_seconds"] for visitor in visitors]
    assert asked == [10, 20, 30, 40, 50, 60, 60, 60]


def test_the_queue_request_stays_within_its_query_budget(
    widget: WidgetChannel, alice: Agent, django_assert_max_num_queries: Any
) -> None:
    # The costliest case: a department's chat on an offer channel, with history.
    billing = Department.objects.create(name="Billing")
    widget.departments.add(billing)
    services.set_routing(channel=widget.channel, mode=Channel.RoutingMode.OFFER)
    services.accept_chat(chat=chat_of(waiting(widget)), agent=alice)
    for _ in range(5):
        waiting(widget)
    ben = Visitor(widget, address=unique_address())
    ben.ok("message", text="Billing, please", department_id=billing.pk)

    # The widget, the visitor, its chat, the place, the waits, and the
    # action's savepoint (two statements): however long the queue.
    with django_assert_max_num_queries(7 + rate_limit_statements(admits=2)):
        assert ben.ok("queue")["queue"]["position"] == 6


def test_ordinals() -> None:
    numbers = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112]
    said = "1st 2nd 3rd 4th 11th 12th 13th 21st 22nd 23rd 101st 111th 112th"

    assert " ".join(ordinal(number) for number in numbers) == said


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (None, "You are 3rd in line"),
        (0, "You are 3rd in line, less than a minute"),
        (59, "You are 3rd in line, less than a minute"),
        (60, "You are 3rd in line, about 1 minute"),
        (89, "You are 3rd in line, about 1 minute"),
        (90, "You are 3rd in line, about 2 minutes"),
        (150, "You are 3rd in line, about 3 minutes"),
        (3629, "You are 3rd in line, about 60 minutes"),
        (3630, "You are 3rd in line, more than an hour"),
    ],
)
def test_the_wait_is_said_in_whole_minutes(seconds: int | None, said: str) -> None:
    assert queue_text(3, seconds) == said


def test_the_first_place_is_next(widget: WidgetChannel) -> None:
    assert queue_text(1, 30) == "You are next in line, less than a minute"
