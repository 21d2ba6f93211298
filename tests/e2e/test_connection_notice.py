"""The agent page while the server cannot be reached (issue 29, "the agent
pages show a notice"): a PostgreSQL of the module's own, stopped under a
real web process (tests/reliability/outage.py), and a real browser."""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import expect

from tests.reliability.pg_server import PostgresServer
from tests.web.server import WebServer

# The page's EventSources, for the test to wait until its stream is open.
RECORD_STREAMS = """
window.streams = [];
window.EventSource = class extends window.EventSource {
  constructor(...args) { super(...args); window.streams.push(this); }
};
"""


def test_the_agent_page_says_while_the_server_cannot_be_reached_and_keeps_a_reply_typed(
    outage_web: WebServer, outage_seed: dict[str, Any], outage_postgres: PostgresServer,
    chromium: Any,
) -> None:  # fmt: skip
    """Before, the page went on as if nothing were wrong: its open stream
    stayed quiet, and a reply sent into the outage was refused with a
    generic 'the server answered 503'. Now the stream whose session cannot
    be checked ends (agents/streams.py), the page polls, and from the second
    failed poll says so until a poll is answered again (static/agent/app.js)."""
    context = chromium.new_context(base_url=outage_web.base_url)
    context.add_init_script(RECORD_STREAMS)
    page = context.new_page()
    page.goto("/agent/login/")
    page.get_by_label("Email").fill("alice@example.com")
    page.get_by_label("Password").fill("x-unused-x")
    page.get_by_role("button", name="Sign in").click()
    # Its stream opens, and the poll that follows is answered.
    with page.expect_response(lambda response: "/agent/live?chat=" in response.url):
        page.goto(f"/agent/chats/{outage_seed['chat']}/")
    page.wait_for_function("() => window.streams.some((each) => each.readyState === 1)")
    notice = page.locator("#connection")
    box = page.get_by_label("Reply to the client")
    expect(notice).to_be_hidden()

    outage_postgres.stop()
    try:
        started = time.monotonic()
        # The stream's next access check (LIVE_ACCESS_SECONDS, 10) finds no
        # database; the page's reconnect and two polls follow.
        expect(notice).to_be_visible(timeout=20_000)
        shown_after = time.monotonic() - started
        box.fill("Still there?")
        box.press("Enter")
        expect(page.locator("#notice")).to_have_text(
            "The server could not be reached. Try again in a moment."
        )
        expect(box).to_have_value("Still there?")
    finally:
        outage_postgres.start()
    started = time.monotonic()
    expect(notice).to_be_hidden(timeout=15_000)
    hidden_after = time.monotonic() - started
    context.close()
    print(f"\nnotice shown {shown_after:.1f} s into the outage, gone {hidden_after:.1f} s after")
