"""Agents' passwords: the validators everywhere a password is set, the
change on the settings page, and the reset link mailed through the outbox."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import global_settings
from django.conf import settings as django_settings
from django.contrib.auth.password_validation import validate_password
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client as Browser
from django.test.utils import CaptureQueriesContext

from agents import demo
from agents.models import Agent, Mail
from tests.factories import AgentFactory
from tests.limits import forget_rate

pytestmark = pytest.mark.django_db

PASSWORD = "agent-password"  # tests.factories.AgentFactory
NEW = "quiet-harbour-lantern"
WEAK = ["password", "a", "1234567890", "ann-lee-example", "short-pw"]


@pytest.fixture(autouse=True)
def _fresh_rates() -> None:
    """The reset and change limits start afresh (a Redis count outlives the
    test database)."""
    forget_rate("password-*")


def signed_in(agent: Agent, password: str = PASSWORD, address: str = "203.0.113.1") -> Browser:
    browser = Browser(REMOTE_ADDR=address)
    answer = browser.post("/agent/login/", {"username": agent.email, "password": password})
    assert answer.status_code == 302 and answer["Location"] == "/agent/", answer.status_code
    return browser


def can_sign_in(agent: Agent, password: str) -> bool:
    answer = Browser().post("/agent/login/", {"username": agent.email, "password": password})
    return answer.status_code == 302 and answer["Location"] == "/agent/"


# --- the hash -------------------------------------------------------------------


def test_production_hashes_with_pbkdf2_and_a_password_so_hashed_signs_in(settings: Any) -> None:
    """The suite hashes with MD5 for speed (tests/settings.py); production's
    own hasher, at its real cost, is this test's."""
    import config.settings

    # config/settings.py keeps Django's hashers; PBKDF2 comes first.
    settings.PASSWORD_HASHERS = getattr(
        config.settings, "PASSWORD_HASHERS", global_settings.PASSWORD_HASHERS
    )
    agent = AgentFactory.create()
    assert agent.password.startswith("pbkdf2_sha256$")
    assert can_sign_in(agent, PASSWORD) and not can_sign_in(agent, "not-" + PASSWORD)


# --- the validators -------------------------------------------------------------


@pytest.mark.parametrize("weak", WEAK)
def test_create_agent_refuses_a_weak_password_and_makes_no_agent(weak: str) -> None:
    with pytest.raises(CommandError, match="password refused"):
        call_command(
            "create_agent", "--email", "ann.lee@example.com", "--name", "Ann Lee",
            "--password", weak,
        )  # fmt: skip

    assert not Agent.objects.exists()


@pytest.mark.parametrize("weak", WEAK)
def test_the_admin_refuses_a_weak_password_for_a_new_agent_and_a_changed_one(weak: str) -> None:
    admin = AgentFactory.create(email="ann.lee@example.com", name="Ann Lee", role="admin")
    browser = Browser()
    browser.force_login(admin)

    added = browser.post(
        "/admin/agents/agent/add/",
        {
            "email": "ann.lee@example.org",
            "name": "Ann Lee",
            "usable_password": "true",
            "password1": weak,
            "password2": weak,
        },
    )
    changed = browser.post(
        f"/admin/agents/agent/{admin.pk}/password/",
        {"usable_password": "true", "password1": weak, "password2": weak},
    )

    assert added.status_code == 200 and 'class="errorlist' in added.content.decode()
    assert not Agent.objects.filter(email="ann.lee@example.org").exists()
    assert changed.status_code == 200 and 'class="errorlist' in changed.content.decode()
    admin.refresh_from_db()
    assert admin.check_password(PASSWORD)


def test_the_demo_and_the_test_factories_passwords_pass_the_validators() -> None:
    for spec in [demo.ADMIN, *demo.AGENTS]:
        validate_password(spec["password"], Agent(email=spec["email"], name=spec["name"]))
    validate_password(PASSWORD, AgentFactory.build())


# --- the change on the settings page --------------------------------------------


def change(browser: Browser, old: str, new: str, again: str | None = None) -> Any:
    return browser.post(
        "/agent/settings/password",
        {"old_password": old, "new_password1": new, "new_password2": again or new},
    )


def test_changing_the_password_keeps_this_session_and_signs_out_the_others(agent: Agent) -> None:
    here = signed_in(agent)
    elsewhere = signed_in(agent, address="198.51.100.7")

    answer = change(here, PASSWORD, NEW)

    assert answer.status_code == 302 and answer["Location"] == "/agent/settings/"
    page = here.get("/agent/settings/")
    assert page.status_code == 200 and "Your password is changed" in page.content.decode()
    gone = elsewhere.get("/agent/")
    assert gone.status_code == 302 and gone["Location"].startswith("/agent/login/")
    assert can_sign_in(agent, NEW) and not can_sign_in(agent, PASSWORD)


@pytest.mark.parametrize(
    ("old", "new", "again", "says"),
    [
        ("not-my-password", NEW, NEW, "Your current password is not right."),
        (PASSWORD, "password", "password", "This password is too common."),
        (PASSWORD, "1234567890123", "1234567890123", "This password is entirely numeric."),
        (PASSWORD, NEW, NEW + "x", "The two new passwords differ."),
        (PASSWORD, "", "", "This field is required."),
    ],
)
def test_a_refused_change_says_why_and_changes_nothing(
    agent: Agent, old: str, new: str, again: str, says: str
) -> None:
    here = signed_in(agent)
    elsewhere = signed_in(agent, address="198.51.100.7")

    answer = change(here, old, new, again)

    assert answer.status_code == 400 and says in answer.content.decode()
    assert can_sign_in(agent, PASSWORD)
    assert elsewhere.get("/agent/").status_code == 200


def test_guessing_the_current_password_is_throttled(agent: Agent, settings: Any) -> None:
    here = signed_in(agent)
    for _ in range(10):
        assert change(here, "a-wrong-guess", NEW).status_code == 400

    answer = change(here, PASSWORD, NEW)

    assert answer.status_code == 429 and "Too many tries" in answer.content.decode()
    assert can_sign_in(agent, PASSWORD)


def test_the_change_needs_a_signed_in_agent_and_a_csrf_token(agent: Agent) -> None:
    anonymous = change(Browser(), PASSWORD, NEW)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/agent/login/")
    strict = Browser(enforce_csrf_checks=True)
    strict.force_login(agent)
    assert change(strict, PASSWORD, NEW).status_code == 403
    assert can_sign_in(agent, PASSWORD)


# --- the reset link --------------------------------------------------------------


Forgot = Callable[..., Any]


@pytest.fixture
def forgot(django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch) -> Forgot:
    """ "Forgot password?" sent from ``address``, and then what a worker does:
    Celery tasks run at once, and what waits for the commit runs when it
    would (the reset's lookup, then the mail's send to the test outbox)."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)

    def send(email: str, address: str = "203.0.113.1") -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return Browser(REMOTE_ADDR=address).post("/agent/password/forgot/", {"email": email})

    return send


def link_in(message: Any) -> str:
    found = re.search(r"http://\S+/agent/password/reset/\S+/", message.body)
    assert found, message.body
    return found.group(0).removeprefix(django_settings.PUBLIC_URL)


def test_a_forgotten_password_is_reset_by_the_link_mailed_through_the_outbox(
    agent: Agent, forgot: Forgot, mailoutbox: list[Any]
) -> None:
    answer = forgot(agent.email.upper())

    assert answer.status_code == 302 and answer["Location"] == "/agent/password/forgot/sent/"
    [row] = Mail.objects.all()
    assert row.to == agent.email and row.status == Mail.Status.SENT
    [message] = mailoutbox
    assert message.to == [agent.email] and message.subject == "Reset your Switchboard password"
    browser = Browser()
    opened = browser.get(link_in(message))
    # The token leaves the address bar (and so any Referer) for the session.
    assert opened.status_code == 302 and opened["Location"].endswith("/set-password/")
    form = browser.get(opened["Location"])
    assert "Choose a new password" in form.content.decode()

    weak = browser.post(opened["Location"], {"new_password1": "a", "new_password2": "a"})
    assert weak.status_code == 200 and "too short" in weak.content.decode()
    done = browser.post(opened["Location"], {"new_password1": NEW, "new_password2": NEW})

    assert done.status_code == 302 and done["Location"] == "/agent/login/"
    assert can_sign_in(agent, NEW) and not can_sign_in(agent, PASSWORD)
    again = Browser().get(link_in(message))
    assert again.status_code == 200 and 'data-testid="reset-invalid"' in again.content.decode()


def test_a_link_mailed_before_the_agent_was_deactivated_sets_no_password(
    agent: Agent, forgot: Forgot, mailoutbox: list[Any]
) -> None:
    forgot(agent.email)
    [message] = mailoutbox
    opened_before = Browser()
    form = opened_before.get(opened_before.get(link_in(message))["Location"])
    assert "Choose a new password" in form.content.decode()

    Agent.objects.filter(pk=agent.pk).update(is_active=False)  # as the admin's form does

    fresh = Browser().get(link_in(message), follow=True)
    assert 'data-testid="reset-invalid"' in fresh.content.decode()
    posted = opened_before.post(
        form.request["PATH_INFO"], {"new_password1": NEW, "new_password2": NEW}
    )
    assert posted.status_code == 200 and 'data-testid="reset-invalid"' in posted.content.decode()
    agent.refresh_from_db()
    assert agent.check_password(PASSWORD) and not agent.check_password(NEW)


def test_the_admins_sign_in_offers_the_same_reset() -> None:
    page = Browser().get("/admin/login/").content.decode()
    assert 'href="/admin/password_reset/"' in page

    answer = Browser().get("/admin/password_reset/")

    assert answer.status_code == 302 and answer["Location"] == "/agent/password/forgot/"


def test_the_answer_is_the_same_whether_or_not_an_agent_has_the_address(
    agent: Agent, forgot: Forgot, mailoutbox: list[Any]
) -> None:
    known = forgot(agent.email)
    unknown = forgot("nobody@example.com")
    no_password = forgot(AgentFactory.create(password=None).email)
    inactive = forgot(AgentFactory.create(is_active=False).email)

    answers = {(a.status_code, a["Location"]) for a in (known, unknown, no_password, inactive)}
    assert answers == {(302, "/agent/password/forgot/sent/")}
    assert [m.to for m in mailoutbox] == [[agent.email]]
    page = Browser().get("/agent/password/forgot/sent/").content.decode()
    assert "If an agent signs in with that address" in page


def test_the_request_itself_does_not_look_the_address_up(
    agent: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    browser = Browser()
    # What takes time differently for a known address (the lookup, the
    # token, the mail's row) happens in the worker, after the answer.
    for email in (agent.email, "nobody@example.com"):
        with (
            CaptureQueriesContext(connection) as queries,
            django_capture_on_commit_callbacks(execute=False) as callbacks,
        ):
            assert browser.post("/agent/password/forgot/", {"email": email}).status_code == 302
        assert not [q for q in queries.captured_queries if "agents_agent" in q["sql"]]
        assert len(callbacks) == 1
    assert not Mail.objects.exists()


def test_reset_requests_are_throttled_per_address_and_per_network_address(
    agent: Agent, forgot: Forgot, mailoutbox: list[Any], settings: Any
) -> None:
    settings.PASSWORD_RESETS_PER_ADDRESS_PER_HOUR = 2
    settings.PASSWORD_RESETS_PER_IP_PER_HOUR = 4
    for n in range(2):
        assert forgot(agent.email, address=f"198.51.100.{n}").status_code == 302
    refused = forgot(agent.email, address="198.51.100.9")
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert 'data-testid="reset-throttled"' in refused.content.decode()
    assert len(mailoutbox) == 2

    for n in range(4):
        assert forgot(f"guess{n}@example.com", address="203.0.113.5").status_code == 302
    assert forgot("guess9@example.com", address="203.0.113.5").status_code == 429
    assert forgot("guess9@example.com", address="203.0.113.6").status_code == 302


def test_the_longest_address_is_counted_like_any(forgot: Forgot, mailoutbox: list[Any]) -> None:
    longest = "x" * 64 + "@" + ".".join(["d" * 60] * 3) + ".com"  # 251 characters
    agent = AgentFactory.create(email=longest)

    assert forgot(longest).status_code == 302
    assert [m.to for m in mailoutbox] == [[agent.email]]


@pytest.mark.parametrize(
    "path",
    [
        "/agent/password/reset/MQ/abc-123/",
        "/agent/password/reset/{uid}/set-password/",
        "/agent/password/reset/" + "9" * 5000 + "/abc-123/",
        "/agent/password/reset/OTk5OTk5OTk5OTk5OTk5OTk5OTk5/abc-123/",  # past a bigint
        "/agent/password/reset/%00%ff/abc/",
    ],
)
def test_a_bad_link_shows_that_it_does_not_work(agent: Agent, path: str) -> None:
    from django.utils.http import urlsafe_base64_encode

    answer = Browser().get(path.format(uid=urlsafe_base64_encode(str(agent.pk).encode())))

    assert answer.status_code == 200 and 'data-testid="reset-invalid"' in answer.content.decode()


@pytest.mark.parametrize("email", ["", "not-an-address", "a@b\r\nBcc: x@y.z"])
def test_a_malformed_address_is_asked_again_and_mails_nobody(
    email: str, forgot: Forgot, mailoutbox: list[Any]
) -> None:
    answer = forgot(email)

    assert answer.status_code == 200 and 'id="email-error"' in answer.content.decode()
    assert not mailoutbox


def test_an_address_kept_with_capitals_gets_its_link_too(
    forgot: Forgot, mailoutbox: list[Any]
) -> None:
    """The admin's form keeps an address as typed; the agent types it in any case."""
    ann = AgentFactory.create(email="Ann.Lee@Example.com")

    forgot("ann.lee@example.com")

    [message] = mailoutbox
    assert message.to == [ann.email]
