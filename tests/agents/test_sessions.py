"""An agent's signed-in sessions (docs/security.md, "Sessions"): recorded at
sign-in, listed on the settings page, signed out one by one or all but this
one, and by a password change or reset."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.test import Client as Browser
from django.test import RequestFactory
from django.utils import timezone

from agents import accounts, sessions
from agents.models import Agent, AgentSession, AuditEntry, LiveEvent
from devhooks.widget.services import create_widget_channel
from tests.factories import AgentFactory
from tests.limits import forget_rate

pytestmark = pytest.mark.django_db

PASSWORD = "agent-password"  # tests.factories.AgentFactory
NEW = "quiet-harbour-lantern"
CHROME = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
FIREFOX = "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    forget_rate("password-*")
    sessions._seen.clear()  # each test's sessions are new to this process


def signed_in(agent: Agent, address: str = "203.0.113.1", browser: str = CHROME) -> Browser:
    page = Browser(REMOTE_ADDR=address, HTTP_USER_AGENT=browser)
    answer = page.post("/agent/login/", {"username": agent.email, "password": PASSWORD})
    assert answer.status_code == 302 and answer["Location"] == "/agent/", answer.status_code
    return page


def is_signed_in(page: Browser) -> bool:
    answer = page.get("/agent/settings/")
    return answer.status_code == 200


def row_of(page: Browser) -> AgentSession:
    return AgentSession.objects.get(key_hash=sessions.hash_key(page.cookies["sessionid"].value))


def listed(page: Browser) -> list[str]:
    """The session list's entries as text, one per session."""
    html = page.get("/agent/settings/").content.decode()
    items = re.findall(r'<li data-testid="session">(.*?)</li>', html, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", item).split()) for item in items]


def test_a_sign_in_is_recorded_with_its_address_and_browser_and_the_key_only_sealed(
    agent: Agent,
) -> None:
    page = signed_in(agent, "198.51.100.7", CHROME)

    row = row_of(page)
    key = page.cookies["sessionid"].value
    assert (row.agent, row.ip, row.user_agent) == (agent, "198.51.100.7", CHROME)
    assert key not in row.sealed_key and row.key_hash != key
    assert timezone.now() - row.signed_in_at < timedelta(minutes=1)


def test_the_settings_page_lists_the_sessions_and_marks_this_one(agent: Agent) -> None:
    here = signed_in(agent, "203.0.113.1", CHROME)
    signed_in(agent, "198.51.100.7", FIREFOX)

    entries = listed(here)

    assert len(entries) == 2
    mine = [entry for entry in entries if "this session" in entry]
    assert len(mine) == 1 and "Chrome 131 on Linux" in mine[0] and "203.0.113.1" in mine[0]
    other = next(entry for entry in entries if "this session" not in entry)
    assert "Firefox 133 on Android" in other and "198.51.100.7" in other
    assert "Sign out" in other and "Sign out" not in mine[0]


def test_signing_out_another_session_ends_it_and_keeps_this_one(agent: Agent) -> None:
    here, there = signed_in(agent), signed_in(agent, "198.51.100.7", FIREFOX)
    target = row_of(there)

    answer = here.post(f"/agent/settings/sessions/{target.pk}/sign-out")

    assert answer.status_code == 302 and answer["Location"] == "/agent/settings/"
    assert not is_signed_in(there) and is_signed_in(here)
    assert not AgentSession.objects.filter(pk=target.pk).exists()
    assert not Session.objects.filter(session_key=there.cookies["sessionid"].value).exists()
    entry = AuditEntry.objects.get(action="session.signed_out")
    assert entry.actor == agent and entry.detail["sessions"] == 1
    assert LiveEvent.objects.filter(kind="access", data__agent_id=agent.pk).exists()


def test_another_agents_session_or_this_one_is_not_found_and_stays(agent: Agent) -> None:
    here = signed_in(agent)
    bob = AgentFactory.create(email="bob@example.com")
    bobs = signed_in(bob, "198.51.100.9")

    for row in (row_of(bobs), row_of(here)):
        answer = here.post(f"/agent/settings/sessions/{row.pk}/sign-out")
        assert answer.status_code == 404

    assert is_signed_in(bobs) and is_signed_in(here)
    assert AgentSession.objects.count() == 2
    assert not AuditEntry.objects.filter(action="session.signed_out").exists()


def test_signing_out_all_other_sessions_keeps_only_this_one(agent: Agent) -> None:
    here = signed_in(agent)
    others = [signed_in(agent, f"198.51.100.{n}") for n in (1, 2)]
    bob = AgentFactory.create(email="bob@example.com")
    bobs = signed_in(bob, "198.51.100.9")

    answer = here.post("/agent/settings/sessions/sign-out-others", follow=True)

    assert "Signed out 2 other sessions." in answer.content.decode()
    assert [is_signed_in(page) for page in others] == [False, False]
    assert is_signed_in(here) and is_signed_in(bobs)
    assert list(AgentSession.objects.filter(agent=agent)) == [row_of(here)]
    assert AuditEntry.objects.get(action="session.signed_out").detail["sessions"] == 2


def test_the_sign_out_forms_need_the_csrf_token(agent: Agent) -> None:
    here = Browser(enforce_csrf_checks=True)
    here.force_login(agent)
    there = signed_in(agent, "198.51.100.7")

    one = here.post(f"/agent/settings/sessions/{row_of(there).pk}/sign-out")
    every = here.post("/agent/settings/sessions/sign-out-others")

    assert (one.status_code, every.status_code) == (403, 403)
    assert is_signed_in(there)


def test_signing_out_removes_the_row(agent: Agent) -> None:
    page = signed_in(agent)
    row = row_of(page)

    page.post("/agent/logout/")

    assert not AgentSession.objects.filter(pk=row.pk).exists()


def test_changing_the_password_ends_the_other_sessions_and_their_rows_at_once(
    agent: Agent,
) -> None:
    here, there = signed_in(agent), signed_in(agent, "198.51.100.7")
    there_key = there.cookies["sessionid"].value

    answer = here.post(
        "/agent/settings/password",
        {"old_password": PASSWORD, "new_password1": NEW, "new_password2": NEW},
    )

    assert answer.status_code == 302
    assert not Session.objects.filter(session_key=there_key).exists()
    # This session stays, its row following the key Django gave it.
    assert is_signed_in(here) and list(AgentSession.objects.all()) == [row_of(here)]
    assert not is_signed_in(there)
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"password.changed", "session.signed_out"} <= actions


def test_a_password_reset_ends_every_session(agent: Agent) -> None:
    pages = [signed_in(agent), signed_in(agent, "198.51.100.7")]

    accounts.reset_password(agent=agent, password=NEW)

    assert [is_signed_in(page) for page in pages] == [False, False]
    assert not AgentSession.objects.exists()
    assert AuditEntry.objects.filter(action="password.reset").count() == 1
    signed_out = AuditEntry.objects.get(action="session.signed_out")
    assert (signed_out.actor_label, signed_out.detail["sessions"]) == ("system", 2)


def test_last_seen_is_written_at_most_every_few_minutes(agent: Agent) -> None:
    page = signed_in(agent)
    long_ago = timezone.now() - timedelta(hours=1)
    AgentSession.objects.update(last_seen_at=long_ago)
    page.get("/agent/settings/")
    assert row_of(page).last_seen_at == long_ago  # the sign-in a moment ago: no write

    sessions._seen.clear()  # as if SEEN_EVERY had passed
    page.get("/agent/settings/")
    assert row_of(page).last_seen_at > long_ago

    AgentSession.objects.update(last_seen_at=long_ago)
    page.get("/agent/settings/")
    assert row_of(page).last_seen_at == long_ago  # seen a moment ago: no write

    sessions._seen.clear()  # as if SEEN_EVERY had passed
    page.get("/agent/settings/")
    assert row_of(page).last_seen_at > long_ago


def test_a_session_signed_in_before_rows_were_kept_gets_one_on_its_next_request(
    agent: Agent,
) -> None:
    page = signed_in(agent, "198.51.100.7")
    AgentSession.objects.all().delete()
    sessions._seen.clear()  # a process started since (the deployment)

    page.get("/agent/")

    assert row_of(page).ip == "198.51.100.7"


def test_a_session_that_no_longer_holds_is_not_listed_and_goes_at_the_next_sign_in(
    agent: Agent,
) -> None:
    old = signed_in(agent, "198.51.100.7")
    Session.objects.filter(session_key=old.cookies["sessionid"].value).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    here = signed_in(agent)

    assert len(listed(here)) == 1
    assert list(AgentSession.objects.all()) == [row_of(here)]


def test_a_key_sealed_under_a_former_secret_key_still_signs_out(
    agent: Agent, settings: object
) -> None:
    here, there = signed_in(agent), signed_in(agent, "198.51.100.7")
    former = settings.SECRET_KEY  # type: ignore[attr-defined]
    settings.SECRET_KEY = "a-new-key-" + "x" * 50  # type: ignore[attr-defined]
    settings.SECRET_KEY_FALLBACKS = [former]  # type: ignore[attr-defined]

    count = sessions.sign_out_other_sessions(
        agent=agent, keep_session_key=here.cookies["sessionid"].value
    )

    assert count == 1
    assert not Session.objects.filter(session_key=there.cookies["sessionid"].value).exists()


def test_an_admin_sees_an_agents_sessions_read_only(agent: Agent) -> None:
    signed_in(agent, "198.51.100.7", FIREFOX)
    admin = Browser()
    admin.force_login(AgentFactory.create(role="admin", email="root@example.com"))

    page = admin.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()

    assert "Firefox 133 on Android · 198.51.100.7 · signed in" in page
    assert "sign-out" not in page


def test_a_request_that_reads_no_session_is_not_made_to_vary_by_cookie(agent: Agent) -> None:
    """The widget's script is cached by browsers and proxies alike."""
    page = signed_in(agent)
    channel = create_widget_channel(name="Site")

    script = page.get(f"/widget/{channel.widget_id}.js")

    assert script.status_code == 200 and script["Vary"] == "Accept-Encoding"


@pytest.mark.django_db(transaction=True)
def test_a_request_of_an_agent_deleted_meanwhile_is_answered_and_records_nothing(
    agent: Agent,
) -> None:
    """An admin deleted the agent while their page's request ran: the
    session's row written on the way out broke the foreign key at COMMIT,
    and the request (``/agent/live`` in a CI log) was answered 500."""
    page = signed_in(agent)
    request = RequestFactory().get("/agent/live")
    request.session = page.session
    Agent.objects.filter(pk=agent.pk).delete()
    sessions._seen.clear()  # its row is due to be written

    sessions._seen_now(request, agent, str(page.session.session_key))

    assert not AgentSession.objects.exists()
