"""Every API path answers an error with the error body, never an HTML page:
wrong methods, CSRF-less posts, unknown paths, trailing slashes — with
DEBUG on (``make run``) and off."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as Http

from agents.models import Agent
from agents.tokens import issue_token
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from config.api_errors import CODES

pytestmark = pytest.mark.django_db

A1 = "{a1}"
A2 = "{a2}"

# (method, path, status, Allow when 405); {a1}/{a2} are a real channel's paths.
MATRIX = [
    ("post", A1, 405, "GET, HEAD"),
    ("put", A1, 405, "GET, HEAD"),
    ("delete", A1, 405, "GET, HEAD"),
    ("get", A1 + "/", 404, None),
    ("post", A1 + "/", 404, None),
    ("get", A2, 405, "POST"),
    ("put", A2, 405, "POST"),
    ("post", A2 + "/", 404, None),
    ("get", "/chat-api/no-such-secret/no-such-id/status", 404, None),
    ("post", "/chat-api/no-such-secret/no-such-id", 404, None),
    ("get", "/chat-api", 404, None),
    ("post", "/chat-api/", 404, None),
    ("get", "/chat-api/x/y/z/w", 404, None),
    ("delete", "/api/agent/v1/status", 405, "GET, POST, HEAD, OPTIONS"),
    ("get", "/api/agent/v1/chats/", 404, None),
    ("post", "/api/agent/v1/status/", 404, None),
    ("post", "/api/agent/v1/chats/1/accept/", 404, None),
    ("post", "/api/agent/v1/", 405, "GET, OPTIONS"),
    ("get", "/api/agent/v1", 404, None),
    ("get", "/api/agent/v1/no-such-thing", 404, None),
    ("get", "/api/agent/v2/chats", 404, None),
    ("get", "/api", 404, None),
    ("post", "/api/", 404, None),
    ("post", "/api/docs/", 405, "GET, HEAD"),
    ("post", "/api/schema/", 405, "GET, HEAD"),
    ("get", "/webhooks", 404, None),
    ("post", "/webhooks/", 404, None),
    ("get", "/webhooks/provider-1/bot-token", 405, "POST"),
]


@pytest.fixture(params=[False, True], ids=["DEBUG=False", "DEBUG=True"])
def debug(request: pytest.FixtureRequest, settings: Any) -> bool:
    settings.DEBUG = request.param
    return bool(request.param)


@pytest.fixture
def chat_api() -> ChatApiChannel:
    return create_chat_api_channel(name="App", webhook_url="https://chat.example/hook")[0]


def local(url: str) -> str:
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


@pytest.mark.parametrize(("method", "path", "status", "allow"), MATRIX)
def test_every_api_error_is_the_error_body(
    debug: bool, chat_api: ChatApiChannel, agent: Agent,
    method: str, path: str, status: int, allow: str | None,
) -> None:  # fmt: skip
    # A browser-like client: CSRF checks on, a session cookie, and the agent's token.
    http = Http(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    http.force_login(agent)
    path = path.format(a1=local(chat_api.status_url), a2=local(chat_api.endpoint_url))

    answer = getattr(http, method)(path)

    assert answer.status_code == status, answer.content[:300]
    assert answer["Content-Type"] == "application/json", answer.content[:300]
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == CODES[status] and body["error"]["message"]
    # DRF's @api_view lists its methods from a set: their order varies by process.
    allowed = answer.get("Allow")
    assert (allowed and sorted(allowed.split(", "))) == (allow and sorted(allow.split(", ")))


def test_a_trailing_slash_is_answered_with_the_path_meant(debug: bool) -> None:
    answer = Http().get("/api/agent/v1/chats/")

    assert answer.json()["error"]["message"] == (
        "no API endpoint at /api/agent/v1/chats/; did you mean /api/agent/v1/chats?"
    )


@pytest.mark.urls("tests.security.csrf_urls")
def test_a_failed_csrf_check_on_an_api_path_is_the_error_body(debug: bool) -> None:
    answer = Http(enforce_csrf_checks=True).post("/api/csrf-protected")

    assert answer.status_code == 403 and answer["Content-Type"] == "application/json"
    assert answer.json()["error"]["code"] == "access_denied"
    assert "CSRF verification failed" in answer.json()["error"]["message"]


def test_a_failed_csrf_check_on_a_page_is_still_djangos_page(debug: bool, agent: Agent) -> None:
    http = Http(enforce_csrf_checks=True)
    http.force_login(agent)

    answer = http.post("/agent/status", {"status": "online"})

    assert answer.status_code == 403 and answer["Content-Type"].startswith("text/html")


def test_an_unknown_page_is_still_an_html_page(debug: bool) -> None:
    answer = Http().get("/no-such-page/")

    assert answer.status_code == 404 and answer["Content-Type"].startswith("text/html")


def test_a_bad_host_on_an_api_path_is_the_error_body(debug: bool) -> None:
    answer = Http(HTTP_HOST="bad host").get("/api/agent/v1/")

    assert answer.status_code == 400 and answer["Content-Type"] == "application/json"
    assert answer.json()["error"]["code"] == "invalid_request"


@pytest.mark.urls("tests.security.csrf_urls")
def test_a_crash_on_an_api_path_is_the_error_body(debug: bool) -> None:
    answer = Http(raise_request_exception=False).get("/api/crash")

    assert answer.status_code == 500 and answer["Content-Type"] == "application/json"
    assert answer.json()["error"] == {"code": "server_error", "message": "internal server error"}
