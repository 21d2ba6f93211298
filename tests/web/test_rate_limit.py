"""The per-channel A2 rate limit holds under concurrent requests to the real
web process (the review's finding: with a limit of 20 a second, 56 to 74 of
120 concurrent requests got in, in rounds spanning at most three seconds).

A1's window is one second, and a burst of 120 requests on a busy 2-core
machine spans several, so this asserts the bound per second spanned; the
exact count under concurrency, in one long window, is asserted in
tests/agents/test_ratelimit.py."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from agents.models import Message
from channels_api.services import create_chat_api_channel
from tests.factories import AgentFactory
from tests.web.server import WebServer

LIMIT = 20
REQUESTS = 120


@pytest.fixture(scope="module")
def limited_server(django_db_setup: None) -> Iterator[WebServer]:
    web = WebServer(CHAT_API_RATE_LIMIT_PER_SECOND=str(LIMIT)).start()
    yield web
    web.stop()


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_get_no_more_than_the_limit_in_any_second(
    limited_server: WebServer,
) -> None:
    made, _ = create_chat_api_channel(
        name="Busy app",
        webhook_url="http://127.0.0.1:9/integrator",
        agents=[AgentFactory.create(is_online=True)],
    )
    url = f"{limited_server.base_url}/chat-api/{made.path_secret}/{made.channel.public_id}"
    ready = threading.Barrier(REQUESTS)

    def post(n: int) -> tuple[int, float, float]:
        with requests.Session() as session:
            ready.wait()
            started = time.monotonic()
            answer = session.post(
                url, json={"sender": {"id": f"u{n}"}, "message": {"type": "text", "text": "hi"}},
                timeout=60,
            )  # fmt: skip
            return answer.status_code, started, time.monotonic()

    with ThreadPoolExecutor(REQUESTS) as pool:
        answers = list(pool.map(post, range(REQUESTS)))

    statuses = [status for status, _, _ in answers]
    span = max(end for _, _, end in answers) - min(start for _, start, _ in answers)
    admitted = statuses.count(200)
    assert set(statuses) <= {200, 429}, statuses
    # A sliding window admits at most LIMIT in each second the burst spans.
    assert LIMIT <= admitted <= LIMIT * math.ceil(span), (admitted, span)
    assert Message.objects.count() == admitted  # every admitted message, none other
