"""docs/bot-api.md says what the code does: its examples are checked against
real envelopes, its B2 examples are posted and answered as it says, its error
table is reproduced row by row, and its numbers are the code's."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client as HttpClient

from agents import services as chats
from agents.content import MAX_BUTTONS
from agents.models import Agent, Chat, Client, Message
from bots import services
from bots.serializers import TEXT_LIMIT
from delivery.models import Delivery
from delivery.policies import get_policy
from tests.bots.conftest import BotSetup
from tests.delivery.target import drive
from tests.web.server import WebServer
from tests.worker import ROOT

DOC = (ROOT / "docs" / "bot-api.md").read_text()
SETTINGS_SOURCE = (ROOT / "config" / "settings.py").read_text()
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.DOTALL)


def examples() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, _language, text in EXAMPLE.findall(DOC):
        assert name not in found, f"two examples named {name}"
        found[name] = text
    return found


def example(name: str) -> Any:
    return json.loads(examples()[name])


def shape(value: Any) -> Any:
    """What a peer's strict schema sees: keys, JSON types, digits or not."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    if isinstance(value, str):
        return "digits" if value.isdigit() else "string"
    return type(value).__name__


def test_every_json_block_is_a_checked_example() -> None:
    blocks = re.findall(r"^```json$", DOC, re.MULTILINE)
    named = EXAMPLE.findall(DOC)

    assert len(blocks) == len([name for name, language, _ in named if language == "json"])
    assert set(examples()) == CHECKED
    for _name, language, text in named:
        if language == "json":
            json.loads(text)


# --- B1: the envelopes ---------------------------------------------------------------


def _client_message(bot: BotSetup, agent: Agent) -> dict[str, Any]:
    bot.say("Hello! Where is my order?", name="Ann", email="ann@example.com")
    return bot.events()[0]


def _agent_unavailable(bot: BotSetup, agent: Agent) -> dict[str, Any]:
    chats.set_agent_status(agent=agent, online=False)
    bot.say("a person, please")
    assert bot.invite_agent().status_code == 200
    return bot.events()[1]


def _agent_joined(bot: BotSetup, agent: Agent) -> dict[str, Any]:
    chat = bot.say("a person, please")
    assert bot.invite_agent().status_code == 200
    chats.accept_chat(chat=Chat.objects.get(pk=chat.pk), agent=agent)
    return bot.events()[1]


def _chat_closed(bot: BotSetup, agent: Agent) -> dict[str, Any]:
    _agent_joined(bot, agent)
    chats.finish_chat(chat=bot.chat(), agent=agent)
    return bot.events()[2]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "scenario"),
    [
        ("b1-client-message", _client_message),
        ("b1-agent-unavailable", _agent_unavailable),
        ("b1-agent-joined", _agent_joined),
        ("b1-chat-closed", _chat_closed),
    ],
)
def test_b1_examples_are_what_the_provider_receives(
    bot: BotSetup,
    agent: Agent,
    name: str,
    scenario: Callable[[BotSetup, Agent], dict[str, Any]],
) -> None:
    documented = example(name)

    sent = scenario(bot, agent)

    assert shape(documented) == shape(sent)
    assert documented["event"] == sent["event"]
    assert documented["agents_online"] == sent["agents_online"]
    assert documented["channel"]["type"] == sent["channel"]["type"]
    assert documented["sender"]["id"] == int(documented["client_id"])
    assert sent["sender"]["id"] == int(sent["client_id"])
    if "message" in sent:
        assert documented["message"]["type"] == sent["message"]["type"]


# --- B2: the doc's requests, posted ----------------------------------------------------


def post_example(bot: BotSetup, name: str) -> tuple[Chat, dict[str, Any], Any]:
    chat = bot.say("hi")
    body = example(name)
    assert body["chat_id"].isdigit() and body["client_id"].isdigit()  # as documented
    body.update(chat_id=str(chat.pk), client_id=str(chat.client_id))
    return chat, body, bot.b2(body)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["b2-bot-message-text", "b2-bot-message-markdown", "b2-bot-message-buttons"]
)
def test_b2_bot_message_examples_are_answered_and_shown(bot: BotSetup, name: str) -> None:
    chat, body, answer = post_example(bot, name)

    assert (answer.status_code, answer.json()) == (200, example("b2-answer"))
    stored = chat.messages.get(author=Message.Author.BOT)
    assert stored.type == body["message"]["type"].lower()
    assert stored.text == body["message"]["text"]
    for field in ("content", "title", "buttons"):
        if field in body["message"]:
            assert stored.payload[field] == body["message"][field]


@pytest.mark.django_db
def test_b2_invite_agent_example_queues_the_chat(bot: BotSetup) -> None:
    chat, _body, answer = post_example(bot, "b2-invite-agent")

    assert (answer.status_code, answer.json()) == (200, example("b2-answer"))
    chat.refresh_from_db()
    assert chat.state == Chat.State.QUEUED


@pytest.mark.django_db
def test_b2_client_info_example_saves_the_contact(bot: BotSetup) -> None:
    chat, body, answer = post_example(bot, "b2-client-info")

    assert (answer.status_code, answer.json()) == (200, example("b2-answer"))
    client = Client.objects.get(pk=chat.client_id)
    assert (client.name, client.phone, client.email) == (body["name"], body["phone"], body["email"])


@pytest.mark.django_db
def test_the_error_example_is_the_answer_to_a_bot_writing_after_handover(bot: BotSetup) -> None:
    bot.say("a person, please")
    assert bot.invite_agent().status_code == 200

    answer = bot.bot_says("still here")

    assert answer.status_code == 403
    assert answer.json() == example("b2-error")


@pytest.mark.django_db
def test_the_markdown_example_is_rendered_as_shown(bot: BotSetup) -> None:
    chat, _body, answer = post_example(bot, "b2-bot-message-markdown")

    assert answer.status_code == 200
    stored = chat.messages.get(author=Message.Author.BOT)
    assert stored.payload["html"] == examples()["markdown-html"]


@pytest.mark.django_db
def test_the_fallback_example_is_what_a_chat_api_integrator_receives(bot: BotSetup) -> None:
    _chat, body, answer = post_example(bot, "b2-bot-message-buttons")
    assert answer.status_code == 200

    for item in Delivery.objects.filter(purpose="chat_api_message"):
        drive(item)
    [request] = bot.integrator.received
    sent = json.loads(request.body)
    documented = example("a3-fallback")

    assert shape(documented) == shape(sent)
    assert documented["message"]["text"] == sent["message"]["text"] == body["message"]["text"]
    assert documented["sender"] == sent["sender"]  # the fixture's display name, as in the doc


# --- the error table, row by row -------------------------------------------------------


def error_rows() -> set[tuple[int, str]]:
    section = DOC.split("## 5. Errors", 1)[1].split("\n## ", 1)[0]
    return {
        (int(status), code)
        for status, code in re.findall(r"^\| (\d{3}) \| `(\w+)` \|", section, re.MULTILINE)
    }


def _message(bot: BotSetup, **message: Any) -> Any:
    chat = bot.chat()
    return bot.b2(
        {
            "event": "BOT_MESSAGE",
            "chat_id": str(chat.pk),
            "client_id": str(chat.client_id),
            "message": message,
        }
    )


def _400(bot: BotSetup, settings: Any) -> list[Any]:
    chat = bot.chat()
    ids = {"chat_id": str(chat.pk), "client_id": str(chat.client_id)}
    return [
        bot.b2(b"{not json"),
        bot.b2(b'{"event": NaN}'),
        bot.b2({**ids, "event": "NOPE"}),
        bot.b2({**ids, "event": "BOT_MESSAGE", "chat_id": "12a"}),
        bot.b2({**ids, "event": "BOT_MESSAGE"}),
        bot.b2({"event": "CLIENT_INFO", "chat_id": ids["chat_id"], "email": "a@b.example"}),
        _message(bot, type="VIDEO", text="x"),
        _message(bot, type="TEXT"),
        _message(bot, type="MARKDOWN", text="x"),
        _message(bot, type="BUTTONS", buttons=[{"text": str(n)} for n in range(4)]),
        _message(bot, type="TEXT", text="x" * (TEXT_LIMIT + 1)),
        bot.b2(
            {**ids, "event": "INVITE_AGENT"},
            **{"Idempotency-Key": "k" * 256},
        ),
    ]


def _401(bot: BotSetup, settings: Any) -> list[Any]:
    chat = bot.chat()
    return [
        HttpClient().post(
            bot.webhook_path + "x",
            {"event": "INVITE_AGENT", "chat_id": str(chat.pk)},
            content_type="application/json",
        )
    ]


def _403_unauthorized(bot: BotSetup, settings: Any) -> list[Any]:
    services.set_attachment_active(attachment=bot.attachment, active=False)
    attachment_off = bot.bot_says("x")
    services.set_attachment_active(attachment=bot.attachment, active=True)
    provider = bot.provider
    services.update_bot_provider(
        provider=provider,
        name=provider.name,
        endpoint_url=provider.endpoint_url,
        display_name=provider.display_name,
        active=False,
    )
    return [attachment_off, bot.bot_says("x")]


def _403_access_denied(bot: BotSetup, settings: Any) -> list[Any]:
    chat = bot.chat()
    assert bot.invite_agent().status_code == 200
    with_agents = bot.bot_says("x")
    chats.finish_chat(chat=Chat.objects.get(pk=chat.pk))
    return [with_agents, bot.bot_says("x"), bot.invite_agent()]


def _404(bot: BotSetup, settings: Any) -> list[Any]:
    chat = bot.chat()
    return [
        bot.b2({"event": "INVITE_AGENT", "chat_id": "999999"}),
        bot.b2({"event": "INVITE_AGENT", "chat_id": str(chat.pk), "client_id": "999999"}),
        HttpClient().post("/webhooks/elsewhere", "{}", content_type="application/json"),
    ]


def _405(bot: BotSetup, settings: Any) -> list[Any]:
    return [getattr(HttpClient(), method)(bot.webhook_path) for method in ("get", "put")]


def _413(bot: BotSetup, settings: Any) -> list[Any]:
    settings.BOT_API_MAX_BODY_BYTES = 100
    return [_message(bot, type="TEXT", text="x" * 200)]


def _429(bot: BotSetup, settings: Any) -> list[Any]:
    settings.BOT_API_RATE_LIMIT_PER_SECOND = 1
    _message(bot, type="TEXT", text="one")
    answer = _message(bot, type="TEXT", text="two")
    assert answer["Retry-After"] == "1"
    return [answer]


TRIGGERS: dict[tuple[int, str], Callable[[BotSetup, Any], list[Any]]] = {
    (400, "invalid_request"): _400,
    (401, "invalid_client"): _401,
    (403, "unauthorized_client"): _403_unauthorized,
    (403, "access_denied"): _403_access_denied,
    (404, "not_found"): _404,
    (405, "method_not_allowed"): _405,
    (413, "payload_too_large"): _413,
    (429, "too_many_requests"): _429,
}
WEB_TIER = {(408, "request_timeout")}  # before Django: test_a_body_that_arrives_too_slowly
# PostgreSQL stopped: tests/reliability/test_postgres_down.py knocks on B2 then.
DATABASE_DOWN = {(503, "service_unavailable")}


def test_every_row_of_the_error_table_is_reproduced() -> None:
    assert error_rows() == set(TRIGGERS) | WEB_TIER | DATABASE_DOWN


@pytest.mark.django_db
@pytest.mark.parametrize(("status", "code"), list(TRIGGERS))
def test_each_documented_error_is_answered_as_documented(
    bot: BotSetup, settings: Any, status: int, code: str
) -> None:
    bot.say("hi")

    answers = TRIGGERS[(status, code)](bot, settings)

    for answer in answers:
        assert answer.status_code == status, answer.content
        body = answer.json()
        assert set(body) == {"error"} and body["error"]["code"] == code
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert bot.chat().messages.filter(author=Message.Author.BOT).count() <= (
        1 if code == "too_many_requests" else 0
    )  # a refused request changes nothing


@pytest.fixture(scope="module")
def impatient_server(django_db_setup: None) -> Iterator[WebServer]:
    server = WebServer(HTTP_BODY_TIMEOUT_SECONDS="1").start()
    yield server
    server.stop()


def test_a_body_that_arrives_too_slowly(impatient_server: WebServer) -> None:
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /webhooks/p/t HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        received = b""
        while chunk := sock.recv(4096):
            received += chunk

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert "`HTTP_BODY_TIMEOUT_SECONDS` (30)" in DOC
    assert '"HTTP_BODY_TIMEOUT_SECONDS", default=30.0)' in (ROOT / "config" / "asgi.py").read_text()


# --- the numbers ---------------------------------------------------------------------


def default_of(name: str) -> int:
    match = re.search(rf'env\.int\("{name}", default=([\d *]+)\)', SETTINGS_SOURCE)
    assert match, name
    return int(eval(match.group(1)))  # noqa: S307 (a product of literals from our settings.py)


def test_the_numbers_in_the_doc_are_the_codes() -> None:
    policy = get_policy("bot_event")
    [delay] = set(policy.retry_delays)
    limits = DOC.split("## 10. Limits", 1)[1].split("\n## ", 1)[0]
    expected = [
        f"`BOT_API_RATE_LIMIT_PER_SECOND` ({default_of('BOT_API_RATE_LIMIT_PER_SECOND')})",
        f"`BOT_API_MAX_BODY_BYTES` ({default_of('BOT_API_MAX_BODY_BYTES') // 1024} KiB)",
        f"`BOT_REPLY_TIMEOUT_SECONDS` ({default_of('BOT_REPLY_TIMEOUT_SECONDS')} s)",
        f"{policy.timeout:g} s timeout, {policy.max_attempts} tries, {delay:g} s apart",
        f"| buttons | {MAX_BUTTONS} per message |",
        f"| {TEXT_LIMIT:,} characters |",
    ]

    for text in expected:
        assert text in limits, text
    assert f"`IDEMPOTENCY_KEY_HOURS` ({default_of('IDEMPOTENCY_KEY_HOURS')})" in DOC
    assert f"default **{default_of('BOT_REPLY_TIMEOUT_SECONDS')}**" in DOC


CHECKED = {
    "b1-client-message",
    "b1-agent-unavailable",
    "b1-agent-joined",
    "b1-chat-closed",
    "b2-answer",
    "b2-bot-message-text",
    "b2-bot-message-markdown",
    "b2-bot-message-buttons",
    "b2-invite-agent",
    "b2-client-info",
    "b2-error",
    "markdown-html",
    "a3-fallback",
}
