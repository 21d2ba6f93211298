"""Two-factor sign-in (docs/security.md, "Two-factor sign-in"): the set-up
from the settings page, the code asked after the password on the agent pages
and the admin, recovery codes, throttling, turning it off, the admin's
reset, REQUIRE_2FA, ``manage.py enrol_totp`` and the audit entries."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings as conf
from django.core.management import CommandError, call_command, execute_from_command_line
from django.db import connection
from django.test import Client as Browser
from django.test.utils import CaptureQueriesContext
from django_otp.oath import TOTP
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from agents import audit, second_factor, sessions
from agents.models import Agent, AgentSession, ApiToken, AuditEntry
from agents.pages.second_factor import CODE_TRIES
from agents.tokens import issue_token
from tests.factories import AgentFactory
from tests.limits import forget_rate

pytestmark = pytest.mark.django_db

PASSWORD = "agent-password"  # tests.factories.AgentFactory
CODE_PAGE = "/agent/login/code"
SETUP_PAGE = "/agent/settings/two-factor/"


@pytest.fixture(autouse=True)
def _fresh_rates() -> None:
    forget_rate("second-factor:*")  # a Redis count outlives the test database


def code_for(device: TOTPDevice, *, steps_ahead: int = 0) -> str:
    """What the agent's app shows now (or ``steps_ahead`` periods on: a code
    already used is refused, so a second sign-in in one period takes the next)."""
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():0{device.digits}d}"


def enrolled(agent: Agent) -> second_factor.Enrolled:
    return second_factor.enrol_for_command(agent=agent)


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("pk"))


def password_step(agent: Agent, url: str = "/agent/login/", next_: str = "") -> Browser:
    browser = Browser(REMOTE_ADDR="203.0.113.9")
    data = {"username": agent.email, "password": PASSWORD, "next": next_}
    answer = browser.post(url, data)
    assert answer.status_code == 302, answer.status_code
    return browser


def landing(answer: Any) -> str:
    assert answer.status_code == 302, answer.status_code
    return str(answer["Location"])


# --- the set-up ------------------------------------------------------------------


def test_setting_up_shows_a_qr_code_and_the_key_and_the_first_code_turns_it_on() -> None:
    ann = AgentFactory.create(email="ann@example.com")
    browser = password_step(ann)
    settings_page = browser.get("/agent/settings/").content.decode()
    assert "Off: your password alone signs you in." in settings_page

    assert landing(browser.post("/agent/settings/two-factor/begin")) == SETUP_PAGE
    page = browser.get(SETUP_PAGE).content.decode()
    device = TOTPDevice.objects.get(user=ann)
    assert not device.confirmed
    # The QR code is drawn in the page (no image fetched from anywhere), and
    # the key is there as text for typing.
    assert "<svg" in page and "<img" not in page
    [shown] = re.findall(r'data-testid="second-factor-secret">([A-Z2-7 ]+)<', page)
    assert shown.replace(" ", "") in device.config_url
    assert "otpauth://" not in page  # the key is in the drawing, not as a link

    wrong = browser.post("/agent/settings/two-factor/confirm", {"code": "000000"})
    assert wrong.status_code == 400 and b"That code is not right" in wrong.content
    assert not second_factor.has_second_factor(agent=ann)
    waits = browser.post("/agent/settings/two-factor/confirm", {"code": code_for(device)})
    assert b"After wrong codes, the next is checked in 1 second." in waits.content
    time.sleep(1)  # django-otp's wait after one wrong code

    done = browser.post("/agent/settings/two-factor/confirm", {"code": code_for(device)})
    assert landing(done) == "/agent/settings/#two-factor"
    assert second_factor.has_second_factor(agent=ann)
    first = browser.get("/agent/settings/").content.decode()
    codes = re.findall(r'<li><code class="secret">([a-z2-7]{8})</code></li>', first)
    assert len(set(codes)) == second_factor.RECOVERY_CODES
    assert sorted(codes) == sorted(StaticToken.objects.values_list("token", flat=True))
    assert "On: signing in asks for a code" in first
    # Shown once: the next visit has none of them; this session stays verified.
    again = browser.get("/agent/settings/")
    assert again.status_code == 200
    assert not any(code in again.content.decode() for code in codes)
    assert "10 recovery codes left." in again.content.decode()

    [entry] = entries("second_factor.enabled")
    assert (entry.actor, entry.target) == (ann, f"agent {ann.pk} ann@example.com")
    assert entry.ip == "203.0.113.9"


def test_setting_up_again_drops_the_unfinished_key_and_is_refused_once_on() -> None:
    ann = AgentFactory.create()
    first = second_factor.begin_enrolment(agent=ann)
    second = second_factor.begin_enrolment(agent=ann)
    assert list(TOTPDevice.objects.filter(user=ann)) == [second]
    assert first.key != second.key
    second_factor.confirm_enrolment(agent=ann, code=code_for(second))
    with pytest.raises(second_factor.SecondFactorRefused, match="on already"):
        second_factor.begin_enrolment(agent=ann)
    with pytest.raises(second_factor.SecondFactorRefused, match="Start the set-up again"):
        second_factor.confirm_enrolment(agent=ann, code=code_for(second))


def test_a_wrong_first_code_is_counted_and_no_secret_is_logged_or_audited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ann = AgentFactory.create()
    device = second_factor.begin_enrolment(agent=ann)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(second_factor.SecondFactorRefused):
        second_factor.confirm_enrolment(agent=ann, code="123456")
    device.refresh_from_db()
    assert device.throttling_failure_count == 1  # kept although the verb refused
    device.throttle_reset()  # no wait for the next
    made = second_factor.confirm_enrolment(agent=ann, code=code_for(device))
    secrets = [device.key, second_factor.secret_text(device).replace(" ", ""), *made.recovery_codes]
    logged = caplog.text + json.dumps(list(AuditEntry.objects.values()), default=str)
    assert all(secret.lower() not in logged.lower() for secret in secrets)


# --- the sign-in step --------------------------------------------------------------


def test_after_the_password_an_agent_with_a_second_factor_reaches_only_the_code_step() -> None:
    ann = AgentFactory.create()
    device = enrolled(ann).device
    browser = password_step(ann)
    for page in ("/agent/", "/agent/settings/", "/agent/history/", "/agent/login/"):
        location = landing(browser.get(page))
        assert urlsplit(location).path == CODE_PAGE
        assert parse_qs(urlsplit(location).query)["next"] == [page]
    # A form sent from a page opened before is refused too: no new token.
    assert urlsplit(landing(browser.post("/agent/settings/token"))).path == CODE_PAGE
    assert not ApiToken.objects.filter(agent=ann).exists()
    assert browser.get(CODE_PAGE).status_code == 200

    wrong = browser.post(CODE_PAGE, {"code": "000000", "next": "/agent/history/"})
    assert wrong.status_code == 400 and b"That code is not right" in wrong.content
    TOTPDevice.objects.get(pk=device.pk).throttle_reset()  # no wait for the next
    right = browser.post(CODE_PAGE, {"code": code_for(device), "next": "/agent/history/"})
    assert landing(right) == "/agent/history/"
    assert browser.get("/agent/").status_code == 200
    assert browser.get("/agent/settings/").status_code == 200


def test_the_code_step_keeps_next_on_this_site_and_signing_out_stays_open() -> None:
    ann = AgentFactory.create()
    device = enrolled(ann).device
    browser = password_step(ann)
    outside = browser.post(CODE_PAGE, {"code": code_for(device), "next": "https://evil.example/"})
    assert landing(outside) == "/agent/"
    other = password_step(ann)
    assert landing(other.post("/agent/logout/")) == "/agent/login/"
    assert "_auth_user_id" not in other.session


def test_a_code_is_not_taken_twice_and_an_agent_without_a_second_factor_skips_the_step() -> None:
    ann, bob = AgentFactory.create(), AgentFactory.create()
    device = enrolled(ann).device
    code = code_for(device)
    assert landing(password_step(ann).post(CODE_PAGE, {"code": code})) == "/agent/"
    replayed = password_step(ann).post(CODE_PAGE, {"code": code})
    assert replayed.status_code == 400

    bobs = password_step(bob)
    assert bobs.get("/agent/").status_code == 200
    assert landing(bobs.get(CODE_PAGE)) == "/agent/"


def test_a_session_without_a_second_factor_asks_for_one_once_and_again_after_enrolment() -> None:
    """The middleware keeps "no second factor" in the session (issue 28): the
    first page asks, the next ones do not; the agent's set-up elsewhere signs
    this session out, so the kept answer is never a stale one."""
    bob = AgentFactory.create()
    browser = password_step(bob)
    asked = TOTPDevice._meta.db_table

    def asks_for_devices(path: str) -> bool:
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(path).status_code == 200
        return any(asked in query["sql"] for query in queries.captured_queries)

    assert asks_for_devices("/agent/")
    assert not asks_for_devices("/agent/")

    enrolled(bob)  # by the command: every session of bob's is signed out

    assert landing(browser.get("/agent/")).startswith("/agent/login/")


def test_a_recovery_code_signs_in_once() -> None:
    ann = AgentFactory.create()
    codes = enrolled(ann).recovery_codes
    browser = password_step(ann)
    answer = browser.post(CODE_PAGE, {"code": f" {codes[3].upper()} "}, follow=True)
    assert answer.redirect_chain[0] == ("/agent/", 302)
    assert b"You used a recovery code: 9 left." in answer.content
    again = password_step(ann).post(CODE_PAGE, {"code": codes[3]})
    assert again.status_code == 400
    assert second_factor.recovery_codes_left(agent=ann) == 9


def test_codes_tried_are_limited_per_agent_and_wrong_ones_throttle_the_app() -> None:
    ann = AgentFactory.create()
    device = enrolled(ann).device
    browser = password_step(ann)
    assert b"That code is not right" in browser.post(CODE_PAGE, {"code": "000000"}).content
    # django-otp doubles the wait after each wrong code: the right one, at
    # once after a wrong one, is not even checked.
    throttled = browser.post(CODE_PAGE, {"code": code_for(device)})
    assert throttled.status_code == 400
    assert b"After wrong codes, the next is checked in 1 second." in throttled.content
    # And the agent has CODE_TRIES tries in five minutes, whatever the session.
    assert CODE_TRIES == 5
    for _ in range(CODE_TRIES - 2):
        assert password_step(ann).post(CODE_PAGE, {"code": "000000"}).status_code == 400
    TOTPDevice.objects.get(pk=device.pk).throttle_reset()
    refused = password_step(ann).post(CODE_PAGE, {"code": code_for(device)})
    assert refused.status_code == 429 and b"Too many tries" in refused.content
    assert urlsplit(landing(browser.get("/agent/"))).path == CODE_PAGE


def test_api_tokens_keep_working_without_the_second_factor(settings: Any) -> None:
    settings.REQUIRE_2FA = "everyone"
    ann, bob = AgentFactory.create(), AgentFactory.create()
    enrolled(ann)
    for agent in (ann, bob):  # with a second factor; required and missing
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
        assert api.get("/api/agent/v1/status").status_code == 200


# --- the admin ---------------------------------------------------------------------


def test_the_admin_asks_for_the_code_too() -> None:
    boss = AgentFactory.create(role="admin")
    device = enrolled(boss).device
    browser = password_step(boss, url="/admin/login/", next_="/admin/")
    for page in ("/admin/", "/admin/agents/agent/", "/admin/login/"):
        location = landing(browser.get(page))
        assert urlsplit(location).path == CODE_PAGE
        assert parse_qs(urlsplit(location).query)["next"] == [page]
    assert browser.get("/admin/agents/agent/").status_code == 302
    verified = browser.post(CODE_PAGE, {"code": code_for(device), "next": "/admin/"})
    assert landing(verified) == "/admin/"
    assert browser.get("/admin/agents/agent/").status_code == 200


def test_an_admin_resets_an_agents_second_factor_and_the_log_says_who() -> None:
    boss, ann, bob = (AgentFactory.create(role=role) for role in ("admin", "agent", "agent"))
    enrolled(ann)
    admin = Browser()
    admin.force_login(boss)
    answer = admin.post(
        "/admin/agents/agent/",
        {"action": "reset_second_factor", "_selected_action": [ann.pk, bob.pk]},
        follow=True,
    )
    assert f"Two-factor sign-in reset for {ann.email}.".encode() in answer.content
    assert not TOTPDevice.objects.filter(user=ann).exists()
    assert not StaticDevice.objects.filter(user=ann).exists()
    [entry] = entries("second_factor.disabled")
    assert (entry.actor, entry.target, entry.detail) == (
        boss, audit.of_agent(ann), {"how": "reset"}
    )  # fmt: skip
    # The password alone signs ann in again.
    assert password_step(ann).get("/agent/").status_code == 200

    again = admin.post(
        "/admin/agents/agent/",
        {"action": "reset_second_factor", "_selected_action": [ann.pk]},
        follow=True,
    )
    assert b"None of them had two-factor sign-in." in again.content
    assert len(entries("second_factor.disabled")) == 1
    # django-otp's own device pages (keys, devices added unaudited) are not in the admin.
    assert admin.get("/admin/otp_totp/totpdevice/").status_code == 404
    assert admin.get("/admin/otp_static/staticdevice/").status_code == 404


# --- turning it off ----------------------------------------------------------------


@pytest.mark.parametrize("proof", ["password", "code"])
def test_the_agent_turns_it_off_with_the_password_or_a_code(proof: str) -> None:
    ann = AgentFactory.create()
    device = enrolled(ann).device
    browser = password_step(ann)
    browser.post(CODE_PAGE, {"code": code_for(device)})

    off = "/agent/settings/two-factor/off"
    wrong = browser.post(off, {"proof": "not-my-password"}, follow=True)
    assert b"Type a code from your app, or your password." in wrong.content
    assert second_factor.has_second_factor(agent=ann)

    given = PASSWORD if proof == "password" else code_for(device, steps_ahead=1)
    done = browser.post(off, {"proof": given}, follow=True)
    assert b"Two-factor sign-in is off." in done.content
    assert not TOTPDevice.objects.filter(user=ann).exists()
    assert not StaticDevice.objects.filter(user=ann).exists()
    [entry] = entries("second_factor.disabled")
    assert (entry.actor, entry.detail) == (ann, {})
    assert password_step(ann).get("/agent/").status_code == 200


# --- REQUIRE_2FA ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("required", "role", "must"),
    [
        ("off", "agent", False),
        ("off", "admin", False),
        ("admins", "agent", False),
        ("admins", "supervisor", False),
        ("admins", "admin", True),
        ("everyone", "agent", True),
        ("everyone", "admin", True),
    ],
)
def test_require_2fa_sends_who_must_have_one_to_the_set_up(
    settings: Any, required: str, role: str, must: bool
) -> None:
    settings.REQUIRE_2FA = required
    ann = AgentFactory.create(role=role)
    assert second_factor.must_have_second_factor(agent=ann) is must
    browser = password_step(ann)
    pages = ["/agent/", "/agent/settings/", *(["/admin/"] if role == "admin" else [])]
    for page in pages:
        answer = browser.get(page)
        if must:
            assert landing(answer) == SETUP_PAGE, page
        else:
            assert answer.status_code == 200, page
    if not must:
        return
    setup = browser.get(SETUP_PAGE)
    assert b"This service asks you for a second factor" in setup.content
    browser.post("/agent/settings/two-factor/begin")
    device = TOTPDevice.objects.get(user=ann)
    browser.post("/agent/settings/two-factor/confirm", {"code": code_for(device)})
    assert browser.get("/agent/").status_code == 200


def test_require_2fa_with_an_unknown_value_refuses_to_start() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "REQUIRE_2FA": "sometimes", "DJANGO_SETTINGS_MODULE": "config.settings"}
    run = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=root, env=env, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert "REQUIRE_2FA must be off, admins or everyone, not 'sometimes'" in run.stderr
    assert conf.REQUIRE_2FA == "off"  # the default


# --- manage.py enrol_totp ---------------------------------------------------------------


def enrol_totp(*args: str) -> dict[str, Any]:
    from io import StringIO

    out = StringIO()
    call_command("enrol_totp", *args, stdout=out)
    made: dict[str, Any] = json.loads(out.getvalue())
    return made


def test_enrol_totp_prints_a_working_link_and_ten_recovery_codes() -> None:
    ann = AgentFactory.create(email="ann@example.com")
    made = enrol_totp("--email", "ANN@example.com")
    assert set(made) == {"otpauth_url", "recovery_codes"}
    assert made["otpauth_url"].startswith("otpauth://totp/Switchboard%3Aann%40example.com?")
    assert len(set(made["recovery_codes"])) == 10
    device = TOTPDevice.objects.get(user=ann, confirmed=True)
    assert parse_qs(urlsplit(made["otpauth_url"]).query)["secret"] == [
        second_factor.secret_text(device).replace(" ", "")
    ]
    browser = password_step(ann)
    assert landing(browser.post(CODE_PAGE, {"code": code_for(device)})) == "/agent/"
    [entry] = entries("second_factor.enabled")
    assert (entry.actor, entry.actor_label) == (None, audit.COMMAND_LINE)


def test_enrol_totp_keeps_a_second_factor_unless_told_to_replace_it() -> None:
    ann = AgentFactory.create()
    first = enrol_totp("--email", ann.email)
    with pytest.raises(CommandError, match="has a second factor already: --replace makes"):
        enrol_totp("--email", ann.email)
    second = enrol_totp("--email", ann.email, "--replace")
    assert second["otpauth_url"] != first["otpauth_url"]
    assert not set(first["recovery_codes"]) & set(
        StaticToken.objects.values_list("token", flat=True)
    )
    assert TOTPDevice.objects.filter(user=ann).count() == 1
    actions = [(e.action, e.actor_label, e.detail) for e in AuditEntry.objects.order_by("pk")]
    assert actions == [
        ("second_factor.enabled", "command line", {}),
        ("second_factor.disabled", "command line", {"how": "replaced"}),
        ("second_factor.enabled", "command line", {}),
    ]


def test_enrol_totp_for_an_unknown_address_fails_with_a_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        execute_from_command_line(["manage.py", "enrol_totp", "--email", "nobody@example.com"])
    assert exit_.value.code != 0
    captured = capsys.readouterr()
    assert "no agent with email nobody@example.com" in captured.err
    assert captured.out == ""


# --- a change of the second factor signs out the other sessions ------------------


def session_row(browser: Browser) -> AgentSession | None:
    key_hash = sessions.hash_key(browser.cookies["sessionid"].value)
    return AgentSession.objects.filter(key_hash=key_hash).first()


def test_turning_it_on_and_off_signs_out_the_agents_other_sessions_and_keeps_this_one() -> None:
    ann = AgentFactory.create()
    here, elsewhere = password_step(ann), password_step(ann)
    here.post("/agent/settings/two-factor/begin")
    device = TOTPDevice.objects.get(user=ann)

    on = here.post("/agent/settings/two-factor/confirm", {"code": code_for(device)})

    assert landing(on) == "/agent/settings/#two-factor"
    assert here.get("/agent/settings/").status_code == 200
    assert landing(elsewhere.get("/agent/settings/")).startswith("/agent/login/")
    assert AgentSession.objects.filter(agent=ann).count() == 1
    [signed_out] = entries("session.signed_out")
    assert signed_out.actor == ann and signed_out.detail["sessions"] == 1

    third = password_step(ann)
    TOTPDevice.objects.get(pk=device.pk).throttle_reset()
    assert landing(third.post(CODE_PAGE, {"code": code_for(device, steps_ahead=1)})) == "/agent/"
    off = here.post("/agent/settings/two-factor/off", {"proof": PASSWORD})
    assert landing(off) == "/agent/settings/#two-factor"
    assert not second_factor.has_second_factor(agent=ann)
    assert here.get("/agent/settings/").status_code == 200
    assert landing(third.get("/agent/")).startswith("/agent/login/")


def test_the_code_step_gives_the_session_a_new_key_and_its_row_follows() -> None:
    ann = AgentFactory.create()
    device = enrolled(ann).device
    browser = password_step(ann)
    before = browser.cookies["sessionid"].value

    assert landing(browser.post(CODE_PAGE, {"code": code_for(device)})) == "/agent/"

    assert browser.cookies["sessionid"].value != before
    row = session_row(browser)
    assert row is not None and row.agent == ann
    assert AgentSession.objects.filter(agent=ann).count() == 1


def test_an_admins_reset_signs_out_every_session_of_the_agent() -> None:
    boss, ann = AgentFactory.create(role="admin"), AgentFactory.create()
    device = enrolled(ann).device
    anns = password_step(ann)
    assert landing(anns.post(CODE_PAGE, {"code": code_for(device)})) == "/agent/"

    assert second_factor.reset(agent=ann, by=boss)

    assert landing(anns.get("/agent/")).startswith("/agent/login/")
    assert not AgentSession.objects.filter(agent=ann).exists()
    [signed_out] = entries("session.signed_out")
    assert signed_out.actor == boss
