"""The agent page's stream dropped mid-conversation (the web process stopped
and started again): after the reconnect, with Last-Event-ID, nothing that
happened meanwhile is missing and nothing shows twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Request, expect

from agents import services
from agents.models import Agent, Chat
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.web.server import WebServer

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "agent-password"


@pytest.fixture
def own_web_process(django_db_setup: None) -> Iterator[WebServer]:
    """A web process of this test's own: the test stops and starts it."""
    server = WebServer().start()
    yield server
    server.stop()


@pytest.fixture
def chat() -> Chat:
    alice = AgentFactory.create(email="alice@example.com", name="Alice Agent")
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[alice]), name="Rita")
    chat = services.post_client_message(client=client, content=text("first")).chat
    return services.accept_chat(chat=chat, agent=alice)


def test_a_dropped_stream_misses_nothing(
    chromium: Browser, own_web_process: WebServer, chat: Chat
) -> None:
    agent = Agent.objects.get(email="alice@example.com")
    context = chromium.new_context(base_url=own_web_process.url)
    page: Page = context.new_page()
    streams: list[tuple[str, dict[str, str]]] = []

    def seen(request: Request) -> None:
        if "/agent/stream" in request.url:
            streams.append((request.url, request.all_headers()))

    page.on("request", seen)
    try:
        page.goto("/agent/login/")
        page.get_by_label("Email").fill(agent.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"/agent/chats/{chat.pk}/")
        messages = page.locator("#messages li.msg")
        expect(messages).to_have_count(1)

        services.post_client_message(client=chat.client, content=text("second"))
        expect(messages).to_have_count(2, timeout=6000)

        # The stream drops: the web process is gone while the client writes on.
        own_web_process.stop()
        services.post_client_message(client=chat.client, content=text("third, while down"))
        services.post_agent_message(chat=chat, agent=agent, content=text("fourth, from the API"))
        own_web_process.start()

        expect(messages).to_have_count(4, timeout=15000)
        services.post_client_message(client=chat.client, content=text("fifth, after"))
        expect(messages).to_have_count(5, timeout=6000)
        texts = [t.strip() for t in page.locator("#messages li.msg .body").all_inner_texts()]
        assert [t.split(",")[0] for t in texts] == ["first", "second", "third", "fourth", "fifth"]

        # The stream was opened again, saying what the page had seen: by the
        # browser's Last-Event-ID, or by the page when the browser gave up.
        first_url, _ = streams[0]
        url, headers = streams[-1]
        said = headers.get("last-event-id") or url.rsplit("last_event_id=", 1)[1]
        assert len(streams) >= 2 and int(said) > int(first_url.rsplit("=", 1)[1])
    finally:
        context.close()
