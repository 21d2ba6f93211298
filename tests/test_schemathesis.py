"""Every operation of every API, fuzzed from its OpenAPI schema (schemathesis).

The schema is the one /api/schema/ serves: the agent API (drf-spectacular),
A1 and A2 (channels_api/openapi.py), B2 (bots/openapi.py) and the widget's
actions (devhooks/widget/openapi.py). Schemathesis makes requests from it,
valid ones and ones that break it (wrong types, missing fields, hostile
strings), and sends them in-process to the Django application. Each answer
must be no 5xx, a status the schema names, with its content type, and a body
as its schema says; every 4xx must be the error body. A3 is left out: the
service sends it, it does not answer it.

Requests carry real credentials, so they reach past the door: the Chat API
channel's path secret, the bot provider's token, a widget visitor's token
and an admin agent's API token, and the ids of a real chat, message, call and
offline message in the paths (a made-up id would only test the 404).

Bounded for CI: SCHEMATHESIS_EXAMPLES examples per operation (15 by default),
derandomized, so a run is the same run each time (docs/testing.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import hypothesis
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client as Browser
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agents import services
from agents.models import Agent, Chat, Message
from agents.tokens import issue_token
from bots import services as bots
from bots.models import URL_PREFIX as BOT_PREFIX
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from devhooks.models import WidgetChannel
from devhooks.widget.services import create_widget_channel
from tests.factories import AgentFactory, text

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "15"))
BOT_TOKEN = "fuzz-bot-token-0123456789"


def _schema() -> dict[str, Any]:
    """The schema /api/schema/ serves, as JSON (its enums' labels are lazy strings)."""
    served = SchemaGenerator().get_schema(request=None, public=True)
    loaded: dict[str, Any] = json.loads(json.dumps(served, default=str))
    return loaded


schema = schemathesis.openapi.from_dict(_schema()).exclude(operation_id="chat_api_agent_message")
DJANGO = get_wsgi_application()


def in_process(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Django's WSGI application keeping the test's database connection, as
    Django's test client does: before and after each request Django closes
    it, and with it the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        answer = DJANGO(environ, start_response)
        try:
            return list(answer)
        finally:
            answer.close()  # sends request_finished
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema.app = in_process


@schemathesis.check
def refusal_has_the_error_body(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx is ``{"error": {"code", "message"}}``, both strings."""
    if not 400 <= response.status_code < 500:
        return None
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError) as failure:
        raise AssertionError(f"a {response.status_code} without the error body") from failure
    if not (isinstance(error["code"], str) and isinstance(error["message"], str)):
        raise AssertionError(f"a {response.status_code} whose error is not two strings: {error}")
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    refusal_has_the_error_body,
]


@dataclass
class World:
    """What the requests are made with: real credentials and real ids."""

    agent_token: str
    chat_api: ChatApiChannel
    bot_provider_id: str
    bot_chat: Chat
    widget: WidgetChannel
    visitor_token: str
    chat: Chat
    message: Message
    call_id: int
    offline_message_id: int


@pytest.fixture
def world(db: None, settings: Any) -> World:
    # The rate limits have tests of their own; here they would only turn the
    # later examples of an operation into 429s.
    settings.WIDGET_RATE_LIMIT = settings.WIDGET_ADDRESS_RATE_LIMIT = 100_000
    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 100_000
    settings.BOT_API_RATE_LIMIT_PER_SECOND = 100_000
    admin: Agent = AgentFactory.create(is_online=True, role=Agent.Role.ADMIN)
    colleague: Agent = AgentFactory.create(is_online=True)
    chat_api, _ = create_chat_api_channel(
        name="Fuzz", webhook_url="https://integrator.example/a3", agents=[admin, colleague]
    )
    widget = create_widget_channel(
        name="Site", agent_emails=[admin.email, colleague.email], callback=True
    )
    visitor = Browser().post(
        f"/widget/{widget.widget_id}/v1/message", {"text": "hello"}, content_type="application/json"
    )
    assert visitor.status_code == 200, visitor.content
    chat = Chat.objects.get(channel=widget.channel)
    services.accept_chat(chat=chat, agent=admin)
    message = services.post_agent_message(chat=chat, agent=admin, content=text("hi"))
    # A call and an offline message of the agent's, for the paths that name one.
    call = services.request_callback(channel=widget.channel, phone="+15551234567")
    offline = services.leave_offline_message(
        channel=widget.channel, message="call me", email="v@x.example"
    )
    assert offline is not None
    bot_channel, _ = create_chat_api_channel(
        name="Bot", webhook_url="https://integrator.example/bot", agents=[admin]
    )
    provider = bots.create_bot_provider(
        name="Fuzz bots", endpoint_url="https://bots.example/b1", display_name="Fuzz"
    )
    bots.attach_bot(channel=bot_channel.channel, provider=provider, token=BOT_TOKEN)
    client = services.create_client(channel=bot_channel.channel, external_id="u-1")
    bot_chat = services.post_client_message(client=client, content=text("hi bot")).chat
    return World(
        agent_token=issue_token(agent=admin),
        chat_api=chat_api,
        bot_provider_id=provider.provider_id,
        bot_chat=bot_chat,
        widget=widget,
        visitor_token=visitor.json()["token"],
        chat=chat,
        message=message,
        call_id=call.pk,
        offline_message_id=offline.pk,
    )


def _digits(value: Any) -> bool:
    """A well-formed B2 id (a string of digits or a positive number): worth
    pointing at the real chat, so the event reaches past the lookup."""
    if isinstance(value, bool):
        return False
    return (isinstance(value, int) and value > 0) or (isinstance(value, str) and value.isdigit())


def authenticate(case: Any, world: World) -> dict[str, str]:
    """Put the world's credentials and ids where the case's operation takes
    them; the headers to send."""
    path = case.path_parameters if case.path_parameters is not None else {}
    body = case.body if isinstance(case.body, dict) else None
    if "path_secret" in path:
        path["path_secret"] = world.chat_api.path_secret
        path["public_id"] = world.chat_api.channel.public_id
    elif case.operation.path.startswith(f"/{BOT_PREFIX}/"):
        path["provider_id"], path["token"] = world.bot_provider_id, BOT_TOKEN
        if body is not None:
            if _digits(body.get("chat_id")):
                body["chat_id"] = str(world.bot_chat.pk)
            if _digits(body.get("client_id")):
                body["client_id"] = str(world.bot_chat.client_id)
    elif "widget_id" in path:
        path["widget_id"] = world.widget.widget_id
        if body is not None and ("token" not in body or isinstance(body["token"], str)):
            body["token"] = world.visitor_token
    ids = {
        "chat_id": world.chat.pk,
        "message_id": world.message.pk,
        "call_id": world.call_id,
        "offline_message_id": world.offline_message_id,
    }
    for name, value in ids.items():
        if name in path:
            path[name] = value
    return {"Authorization": f"Token {world.agent_token}"}


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_its_schema_says(case: Any, world: World) -> None:
    headers = authenticate(case, world)
    case.call_and_validate(base_url="http://testserver", headers=headers, checks=CHECKS)


def test_a_queued_chat_and_a_lifted_blacklist_answer_as_the_schema_says(world: World) -> None:
    # Given a chat still in the queue (not accepted, not finished, no
    # department) whose only message is the client's (no agent's name)
    queued = services.post_client_message(
        client=services.create_client(channel=world.chat_api.channel, external_id="u-2"),
        content=text("anyone?"),
    ).chat
    headers = {"Authorization": f"Token {world.agent_token}"}
    asked = [
        ("/api/agent/v1/chats/{chat_id}", "GET"),
        ("/api/agent/v1/chats/{chat_id}/messages", "GET"),
        # And the lifting of a blacklist, which answers the chat (not a 204)
        ("/api/agent/v1/chats/{chat_id}/blacklist", "DELETE"),
    ]
    for path, method in asked:
        # When the agent API is asked for it
        case = schema[path][method].Case(path_parameters={"chat_id": queued.pk})
        answer = case.call(base_url="http://testserver", headers=headers)

        # Then the answer is as the schema describes it, its nulls included
        assert answer.status_code == 200, answer.content
        case.validate_response(answer, checks=CHECKS)
