"""The visitor's stream and its slots (docs/live.md, "Limits"), through
Django's ASGI handler, as the web server calls it: a visitor who leaves
before its stream begins gives its slot back at once, not when the lease
lapses. (The stream over the real web server: test_stream_over_the_web.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIHandler

from agents import leases
from agents.streams import lease_seconds
from devhooks.widget.tokens import issue_visitor_token
from tests.aio import run_async
from tests.factories import ChannelFactory, ClientFactory
from tests.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


async def leave_as_the_answer_starts(path: str) -> list[Mapping[str, Any]]:
    """GET ``path`` and hang up while the answer's head is on its way: the
    handler is cancelled before the stream's first byte."""
    asked, left = False, asyncio.Event()
    sent: list[Mapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.start":
            left.set()
            await asyncio.Event().wait()  # the head never arrives

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("203.0.113.5", 40000),
        "server": ("testserver", 80),
    }
    await asyncio.wait_for(ASGIHandler()(scope, receive, send), timeout=15)
    return sent


def test_a_visitor_who_leaves_before_its_stream_begins_frees_its_slot(settings: Any) -> None:
    settings.LIVE_STREAMS_PER_VISITOR = 1
    visitor = ClientFactory.create(channel=ChannelFactory.create())
    token = issue_visitor_token(client=visitor)

    sent = run_async(leave_as_the_answer_starts(f"/visitor/{token}/stream"))

    assert sent[0]["status"] == 200  # the stream was admitted: its slot taken
    # Free well before the lease would lapse.
    assert lease_seconds() >= 30
    wait_for(
        lambda: leases.acquire(
            holder="the next stream", limits={f"stream-visitor:{visitor.pk}": 1}, seconds=30
        ),
        timeout=10,
    )
