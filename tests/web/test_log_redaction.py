"""Credentials carried in URL paths never reach a log (config/log_redaction.py)."""

from __future__ import annotations

import logging
import re
import secrets
import sys
from collections.abc import Iterator

import pytest
import requests
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern

from agents.models import Agent
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from config.log_redaction import RedactSecrets, redact_secrets
from tests.factories import AgentFactory
from tests.web.server import WebServer

TEXT = {"sender": {"id": "u-1"}, "message": {"type": "text", "text": "Hello"}}


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("GET /chat-api/Ab-_9x/pub1/status HTTP/1.1", "GET /chat-api/…/pub1/status HTTP/1.1"),
        ("Not Found: /chat-api/Ab-_9x/pub1", "Not Found: /chat-api/…/pub1"),
        ("https://sb.example/chat-api/s3cr%2Bt/pub1?x=1", "https://sb.example/chat-api/…/pub1?x=1"),
        ('"POST /chat-api/only-the-secret HTTP/1.1"', '"POST /chat-api/… HTTP/1.1"'),
        ("POST /webhooks/prov-1/tok.en_9 HTTP/1.1", "POST /webhooks/prov-1/… HTTP/1.1"),
        ("/webhooks/prov-1/tok/extra", "/webhooks/prov-1/…/extra"),
        ("GET /CHAT-API/Ab-_9x/pub1 HTTP/1.1", "GET /CHAT-API/…/pub1 HTTP/1.1"),
        ("GET /agent/chats/12 HTTP/1.1", "GET /agent/chats/12 HTTP/1.1"),
        ("/webhooks/prov-1", "/webhooks/prov-1"),
        (
            "GET /agent/password/reset/MQ/cz1-0123abcdef/ HTTP/1.1",
            "GET /agent/password/reset/MQ/…/ HTTP/1.1",
        ),
        ("GET /files/tOk_en-9/photo.png HTTP/1.1", "GET /files/…/photo.png HTTP/1.1"),
        ("Not Found: /files/tOk_en-9/thumb/photo.png", "Not Found: /files/…/thumb/photo.png"),
        ("GET /visitor/v1s-tok/stream HTTP/1.1", "GET /visitor/…/stream HTTP/1.1"),
    ],
)
def test_the_secret_segment_is_replaced(text: str, redacted: str) -> None:
    assert redact_secrets(text) == redacted


def record(msg: str, args: tuple[object, ...], exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("no route for /chat-api/SECRET/pub1")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("t", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_the_filter_redacts_arguments_and_keeps_their_kinds() -> None:
    given = record(
        '%s - "%s %s HTTP/%s" %d', ("1.2.3.4:5", "GET", "/chat-api/SECRET/p", "1.1", 404)
    )

    RedactSecrets().filter(given)

    assert given.getMessage() == '1.2.3.4:5 - "GET /chat-api/…/p HTTP/1.1" 404'


def test_the_filter_redacts_mapping_arguments_in_place() -> None:
    class Atoms(dict[str, object]):
        def __missing__(self, key: str) -> str:
            return "-"

    atoms = Atoms(r="GET /webhooks/p/TOKEN HTTP/1.1", s=200)
    given = record("%(r)s %(s)s %(missing)s", (atoms,))

    RedactSecrets().filter(given)

    assert given.args is atoms  # gunicorn's atoms answer "-" for what they lack
    assert given.getMessage() == "GET /webhooks/p/… HTTP/1.1 200 -"


def test_the_filter_redacts_the_traceback() -> None:
    given = record("Internal Server Error: %s", ("/chat-api/SECRET/pub1",), exc=True)

    RedactSecrets().filter(given)

    printed = logging.Formatter().format(given)
    assert "SECRET" not in printed
    assert "no route for /chat-api/…/pub1" in printed


# URL parameters that are no credential: ids a log may show. Any other
# parameter of a route is taken for a secret that SECRET_PATHS must cover.
PUBLIC_PARAMETERS = {
    "public_id",  # a Chat API channel's, beside its path secret
    "provider_id",  # a bot provider's, beside its token
    "widget_id",  # printed in every site's page source
    "action",  # the widget's visitor endpoint's verb
    "name",  # a file's name, beside its token
    "object_id",  # the admin's
    "app_label",  # the admin's
    "content_type_id",  # the admin's
    "id",  # the admin's
    "uidb64",  # the agent's id in a password-reset link, beside its token
    "url",  # the admin's catch-all
    "language",  # a language code: the agent pages' and the widget's catalogues
}


def routes(
    patterns: list[URLPattern | URLResolver], prefix: str = "/", regexes: tuple[str, ...] = ()
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every route of the URL conf as its path template, and the named groups
    of any regular expression on its way (a template cannot stand for them)."""
    for pattern in patterns:
        if isinstance(pattern.pattern, RoutePattern):
            here, groups = prefix + str(pattern.pattern), regexes
        else:
            here, groups = prefix, regexes + tuple(pattern.pattern.regex.groupindex)
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, here, groups)
        else:
            yield here, groups


def test_every_route_with_a_secret_is_redacted() -> None:
    # Given every route of the URL conf, each parameter filled with a value of its own
    covered: set[str] = set()
    for template, groups in routes(get_resolver().url_patterns):
        assert set(groups) <= PUBLIC_PARAMETERS, f"{template}: a secret in a regex route"
        ids: dict[str, str] = {}  # the values a log may show
        secret_values: dict[str, str] = {}
        for converter, parameter in re.findall(r"<(?:(\w+):)?(\w+)>", template):
            if converter == "int":
                ids[parameter] = "12345"
            elif parameter in PUBLIC_PARAMETERS:
                ids[parameter] = f"{parameter.upper()}-ID"
            else:
                secret_values[parameter] = f"{parameter.upper()}-SECRET"
        path = template
        for parameter, value in (ids | secret_values).items():
            path = re.sub(rf"<(?:\w+:)?{parameter}>", value, path)

        # When its request line is logged
        logged = redact_secrets(f"GET {path} HTTP/1.1")

        # Then no secret is left, and every id still is
        for secret in secret_values.values():
            assert secret not in logged, f"{template}: declare it in SECRET_PATHS"
        for value in ids.values():
            assert value in logged, template
        if secret_values:
            covered.add(template)

    # And each route with a secret is one the project means
    assert covered == {
        "/chat-api/<str:path_secret>/<str:public_id>/status",
        "/chat-api/<str:path_secret>/<str:public_id>",
        "/webhooks/<str:provider_id>/<str:token>",
        "/visitor/<str:token>/stream",
        "/files/<str:token>/<str:name>",
        "/files/<str:token>/thumb/<str:name>",
        "/admin/delivery/endpoint/new-secret/<str:token>/",
        "/agent/password/reset/<uidb64>/<token>/",
        "/mail/confirm/<str:token>",
    }


@pytest.fixture
def chat_api() -> ChatApiChannel:
    agent: Agent = AgentFactory.create(is_online=True)
    made, _signing_secret = create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/integrator", agents=[agent]
    )
    return made


@pytest.fixture
def server() -> Iterator[WebServer]:
    web = WebServer(CHAT_API_RATE_LIMIT_PER_SECOND="2").start()
    yield web
    web.stop()


@pytest.mark.django_db(transaction=True)
def test_a_real_run_logs_no_path_secret(server: WebServer, chat_api: ChatApiChannel) -> None:
    # Given a channel served by the real web process, access log on
    secret, public_id = chat_api.path_secret, chat_api.channel.public_id
    endpoint = f"{server.base_url}/chat-api/{secret}/{public_id}"
    wrong_secret = secrets.token_urlsafe(24)
    bot_token = secrets.token_urlsafe(24)
    http = requests.Session()

    # When an integrator makes every kind of request: answered, refused, throttled
    answers = {
        "A1": http.get(f"{endpoint}/status", timeout=10).status_code,
        "A1, wrong secret": http.get(
            f"{server.base_url}/chat-api/{wrong_secret}/{public_id}/status", timeout=10
        ).status_code,
        "A2 by GET": http.get(endpoint, timeout=10).status_code,
        "A2, too large": http.post(endpoint, data=b"x" * 100_000, timeout=10).status_code,
    }
    http.post(f"{server.base_url}/webhooks/prov-1/{bot_token}", json={}, timeout=10)
    file_token = secrets.token_urlsafe(32)
    no_file = http.get(f"{server.base_url}/files/{file_token}/photo.png", timeout=10)
    a2: list[int] = []
    while 429 not in a2 and len(a2) < 20:
        a2.append(http.post(endpoint, json=TEXT, timeout=10).status_code)

    # Then each was answered as expected, and no log holds a secret
    assert answers == {"A1": 200, "A1, wrong secret": 404, "A2 by GET": 405, "A2, too large": 413}
    assert a2[0] == 200 and 429 in a2 and no_file.status_code == 404
    server.stop()  # flushes every log line
    out, err = server.stdout(), server.stderr()
    for credential in (secret, wrong_secret, bot_token, file_token):
        assert credential not in out + err
    redacted = f"/chat-api/…/{public_id}"
    assert f'"GET {redacted}/status HTTP/1.1" 200' in out
    assert f'"POST {redacted} HTTP/1.1" 429' in out
    assert '"POST /webhooks/prov-1/… HTTP/1.1"' in out
    assert f"Too Many Requests: {redacted}" in err
    assert f"Not Found: /chat-api/…/{public_id}/status" in err
    assert f"Method Not Allowed: {redacted}" in err
    assert '"GET /files/…/photo.png HTTP/1.1" 404' in out
    assert "Not Found: /files/…/photo.png" in err


@pytest.mark.django_db(transaction=True)
def test_routine_live_requests_leave_no_access_line_but_their_failures_do(
    server: WebServer,
) -> None:
    """make run's log keeps the logins in sight: an open agent page's own
    requests (its live answers and stream) are not logged when they succeed."""
    from tests.factories import AgentFactory

    agent = AgentFactory.create(email="quiet@example.com")
    http = requests.Session()
    page = http.get(f"{server.base_url}/agent/login/", timeout=10)
    assert page.status_code == 200
    signed_in = http.post(
        f"{server.base_url}/agent/login/",
        data={
            "username": agent.email,
            "password": "agent-password",
            "csrfmiddlewaretoken": http.cookies["csrftoken"],
        },
        headers={"Referer": f"{server.base_url}/agent/login/"},
        timeout=10,
    )
    assert signed_in.status_code == 200 and signed_in.url.endswith("/agent/")
    for _ in range(3):
        assert http.get(f"{server.base_url}/agent/live", timeout=10).status_code == 200
    assert http.get(f"{server.base_url}/agent/live?chat=999999", timeout=10).status_code == 404

    server.stop()
    out = server.stdout()
    assert '"GET /agent/live HTTP/1.1" 200' not in out
    assert '"GET /agent/live?chat=999999 HTTP/1.1" 404' in out
    assert '"POST /agent/login/ HTTP/1.1" 302' in out  # everything else is still there
