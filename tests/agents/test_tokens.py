"""The agent's API token on the settings page (docs/agent-pages.md,
"Settings"): whether one exists, when it was made and last used, and its
revocation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client as Browser
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from agents.models import Agent, ApiToken, AuditEntry
from agents.tokens import issue_token
from tests.factories import page_of

pytestmark = pytest.mark.django_db


def token_state(page: Browser) -> str:
    html = page.get("/agent/settings/").content.decode()
    start = html.index('data-testid="token-state"')
    return html[start : html.index("</p>", start)]


def call_api(key: str) -> int:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return int(api.get("/api/agent/v1/chats").status_code)


def token_writes(queries: CaptureQueriesContext) -> list[str]:
    return [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith("UPDATE") and "agents_apitoken" in query["sql"]
    ]


def test_the_page_says_when_there_is_no_token(agent: Agent) -> None:
    page = page_of(agent)

    assert "You have no token." in token_state(page)
    assert 'data-testid="revoke-token-button"' not in page.get("/agent/settings/").content.decode()


def test_the_page_shows_when_the_token_was_made_and_last_used(agent: Agent) -> None:
    page = page_of(agent)
    key = issue_token(agent=agent)
    assert "never used" in token_state(page)

    assert call_api(key) == 200

    token = ApiToken.objects.get(agent=agent)
    assert token.last_used is not None and timezone.now() - token.last_used < timedelta(minutes=1)
    state = token_state(page)
    assert "last used" in state and f'datetime="{token.created.isoformat()}"' in state


def test_last_used_is_written_at_most_once_a_minute(agent: Agent) -> None:
    key = issue_token(agent=agent)

    with CaptureQueriesContext(connection) as first:
        call_api(key)
    with CaptureQueriesContext(connection) as second:
        call_api(key)
    minute_ago = timezone.now() - timedelta(minutes=1, seconds=1)
    ApiToken.objects.update(last_used=minute_ago)
    with CaptureQueriesContext(connection) as later:
        call_api(key)

    assert (len(token_writes(first)), len(token_writes(second)), len(token_writes(later))) == (
        1,
        0,
        1,
    )
    assert ApiToken.objects.get().last_used > minute_ago  # type: ignore[operator]


def test_a_new_token_is_made_now_and_not_yet_used(agent: Agent) -> None:
    key = issue_token(agent=agent)
    call_api(key)
    ApiToken.objects.update(created=timezone.now() - timedelta(days=3))

    issue_token(agent=agent)

    token = ApiToken.objects.get()
    assert token.last_used is None and timezone.now() - token.created < timedelta(minutes=1)


def test_revoke_ends_the_token_and_is_audited(agent: Agent) -> None:
    page = page_of(agent)
    key = issue_token(agent=agent)

    answer = page.post("/agent/settings/token/revoke", follow=True)

    assert "Your API token is revoked." in answer.content.decode()
    assert not ApiToken.objects.exists() and call_api(key) == 401
    entry = AuditEntry.objects.get(action="token.revoked")
    assert entry.actor == agent and entry.target == f"agent {agent.pk} {agent.email}"


def test_revoke_needs_the_csrf_token(agent: Agent) -> None:
    key = issue_token(agent=agent)
    forged = Browser(enforce_csrf_checks=True)
    forged.force_login(agent)

    assert forged.post("/agent/settings/token/revoke").status_code == 403
    assert call_api(key) == 200
