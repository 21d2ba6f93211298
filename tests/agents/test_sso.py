"""Single sign-on (agents/sso.py) against a real OpenID provider in a second
process (tests/oidc_provider/): the provider's sign-in form and authorization
are passed as a browser would, the code is exchanged at its real token
endpoint, its ID token checked against its real keys."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django_otp.oath import TOTP

from agents import second_factor
from agents.audit import SSO_BACKEND
from agents.models import Agent, AuditEntry
from agents.sso import created_or_existing
from tests.factories import AgentFactory
from tests.oidc_provider.people import ALICE, BOB, CAROL, DAVE, ERIN, FRANK, Person
from tests.oidc_provider.server import PROVIDER_NAME, Provider
from tests.worker import ROOT

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/agent/sso/callback/"
BUTTON = f"Sign in with {PROVIDER_NAME}"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with Provider(redirect_uris=[CALLBACK]) as started:
        yield started


@pytest.fixture
def sso(settings: Any, provider: Provider) -> Any:
    """The service configured for the provider, as its environment would."""
    for name, value in provider.service_settings().items():
        setattr(settings, name, value)
    settings.SSO_ENABLED = True
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, SSO_BACKEND]
    return settings


def sign_in_with_sso(
    client: Client, provider: Provider, person: Person, next: str = "/agent/"
) -> Any:
    """ "Sign in with …", the provider's pages, and the way back."""
    start = client.get("/agent/sso/", {"next": next})
    assert start.status_code == 302
    assert start["Location"].startswith(provider.endpoint("authorization"))
    back = provider.sign_in(start["Location"], person)
    assert back.startswith(CALLBACK), back
    parts = urlsplit(back)
    return client.get(f"{parts.path}?{parts.query}")


def signed_in_as(client: Client) -> Agent | None:
    page = client.get("/agent/")
    return page.wsgi_request.user if page.status_code == 200 else None  # type: ignore[return-value]


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action))


def test_a_verified_address_signs_its_agent_in_and_lands_where_next_pointed(
    sso: Any, provider: Provider, client: Client
) -> None:
    alice = AgentFactory.create(email=ALICE.email)

    answer = sign_in_with_sso(client, provider, ALICE, next="/agent/history/")

    assert (answer.status_code, answer["Location"]) == (302, "/agent/history/")
    assert signed_in_as(client) == alice
    [entry] = entries("signin.succeeded")
    assert (entry.actor, entry.target) == (alice, f"agent {alice.pk} {ALICE.email}")
    assert entry.detail == {"via": "single sign-on"}
    assert entry.ip == "127.0.0.1"


@pytest.mark.parametrize(
    ("person", "agents_address"),
    [
        (BOB, "bob@example.com"),  # the provider says Bob@example.com
        (FRANK, FRANK.email),  # the provider says it in the ID token only
    ],
)
def test_the_address_is_matched_whatever_its_case_and_wherever_the_provider_gives_it(
    sso: Any, provider: Provider, client: Client, person: Person, agents_address: str
) -> None:
    agent = AgentFactory.create(email=agents_address)

    sign_in_with_sso(client, provider, person)

    assert signed_in_as(client) == agent


def test_a_next_on_another_site_is_not_followed(
    sso: Any, provider: Provider, client: Client
) -> None:
    AgentFactory.create(email=ALICE.email)

    answer = sign_in_with_sso(client, provider, ALICE, next="https://evil.example/agent/")

    assert answer["Location"] == "/agent/"


def refused(answer: Any, client: Client) -> str:
    """The sign-in page the refusal lands on, and what it says."""
    assert (answer.status_code, answer["Location"]) == (302, "/agent/login/")
    assert signed_in_as(client) is None
    page = client.get("/agent/login/")
    return page.content.decode()


def test_an_unknown_address_is_refused_and_no_agent_is_made(
    sso: Any, provider: Provider, client: Client
) -> None:
    page = refused(sign_in_with_sso(client, provider, DAVE), client)

    assert "No agent signs in with dave@example.com. Ask an admin to add you." in page
    assert not Agent.objects.filter(email__iexact=DAVE.email).exists()
    [entry] = entries("signin.failed")
    assert (entry.actor_label, entry.target) == ("system", "unknown account")
    assert entry.detail == {"via": "single sign-on", "reason": "no_agent"}
    assert entries("agent.created") == []


def test_with_oidc_create_agents_an_unknown_address_becomes_an_agent(
    sso: Any, provider: Provider, client: Client
) -> None:
    sso.OIDC_CREATE_AGENTS = True

    answer = sign_in_with_sso(client, provider, DAVE)

    assert answer["Location"] == "/agent/"
    dave = Agent.objects.get(email=DAVE.email)
    assert (dave.name, dave.role, dave.has_usable_password()) == (DAVE.name, "agent", False)
    assert signed_in_as(client) == dave
    [created] = entries("agent.created")
    assert created.actor_label == "single sign-on"
    assert created.target == f"agent {dave.pk} {DAVE.email}"
    assert created.detail == {"role": "agent"}
    [signed_in] = entries("signin.succeeded")
    assert signed_in.actor == dave


@pytest.mark.parametrize("create_agents", [False, True])
def test_an_unverified_address_is_refused(
    sso: Any, provider: Provider, client: Client, create_agents: bool
) -> None:
    """Anyone may type any address at many providers: only one the
    provider verified says who signs in, even when agents may be made."""
    sso.OIDC_CREATE_AGENTS = create_agents
    carol = AgentFactory.create(email=CAROL.email) if not create_agents else None

    page = refused(sign_in_with_sso(client, provider, CAROL), client)

    assert f"{PROVIDER_NAME} has not verified carol@example.com" in page
    assert Agent.objects.filter(email=CAROL.email).count() == (0 if create_agents else 1)
    [entry] = entries("signin.failed")
    assert entry.target == (f"agent {carol.pk} {CAROL.email}" if carol else "unknown account")
    assert entry.detail == {"via": "single sign-on", "reason": "email_unverified"}


def test_a_switched_off_agent_is_refused(sso: Any, provider: Provider, client: Client) -> None:
    erin = AgentFactory.create(email=ERIN.email, is_active=False)

    page = refused(sign_in_with_sso(client, provider, ERIN), client)

    assert "The agent erin@example.com is switched off. Ask an admin." in page
    [entry] = entries("signin.failed")
    assert entry.target == f"agent {erin.pk} {ERIN.email}"
    assert entry.detail == {"via": "single sign-on", "reason": "agent_inactive"}


def started(client: Client) -> str:
    """The state of a sign-in "Sign in with …" started in ``client``."""
    start = client.get("/agent/sso/")
    return parse_qs(urlsplit(start["Location"]).query)["state"][0]


def test_a_code_the_provider_never_gave_signs_no_one_in(
    sso: Any, provider: Provider, client: Client
) -> None:
    AgentFactory.create(email=ALICE.email)
    state = started(client)

    answer = client.get("/agent/sso/callback/", {"code": "made-up", "state": state})

    page = refused(answer, client)
    assert f"Signing in with {PROVIDER_NAME} did not complete. Please try again." in page
    [entry] = entries("signin.failed")
    assert (entry.target, entry.detail) == (
        "unknown account",
        {"via": "single sign-on", "reason": "provider_failed"},
    )


def test_a_sign_in_cancelled_at_the_provider_says_so(
    sso: Any, provider: Provider, client: Client
) -> None:
    state = started(client)

    answer = client.get("/agent/sso/callback/", {"error": "access_denied", "state": state})

    assert f"Signing in with {PROVIDER_NAME} did not complete." in refused(answer, client)


def test_a_way_back_replayed_in_another_browser_signs_no_one_in(
    sso: Any, provider: Provider, client: Client
) -> None:
    """The code and state are worth nothing without the session that asked
    for them: a callback address seen in a log, a history or a Referer."""
    alice = AgentFactory.create(email=ALICE.email)
    start = client.get("/agent/sso/")
    back = urlsplit(provider.sign_in(start["Location"], ALICE))
    thief = Client()

    stolen = thief.get(f"{back.path}?{back.query}")
    own = client.get(f"{back.path}?{back.query}")

    assert stolen["Location"] == "/agent/login/"
    assert signed_in_as(thief) is None
    assert (own["Location"], signed_in_as(client)) == ("/agent/", alice)


def test_two_agents_whose_addresses_differ_in_case_only_are_not_guessed_between(
    sso: Any, provider: Provider, client: Client
) -> None:
    AgentFactory.create(email="bob@example.com")
    AgentFactory.create(email="Bob@example.com")  # the admin's form keeps the case typed

    page = refused(sign_in_with_sso(client, provider, BOB), client)

    assert "Several agents have the address Bob@example.com, in different cases." in page
    [entry] = entries("signin.failed")
    assert entry.detail == {"via": "single sign-on", "reason": "several_agents"}


def test_switching_an_agent_off_ends_their_single_sign_on_session(
    sso: Any, provider: Provider, client: Client
) -> None:
    alice = AgentFactory.create(email=ALICE.email)
    sign_in_with_sso(client, provider, ALICE)
    assert signed_in_as(client) == alice

    alice.is_active = False
    alice.save(update_fields=["is_active"])

    assert signed_in_as(client) is None


def test_refused_single_sign_ons_lock_their_address_not_everyones(
    sso: Any, provider: Provider, client: Client
) -> None:
    """A single sign-on names no account: its failures count against the
    address only, not against one empty name every other one shares."""
    sso.AXES_FAILURE_LIMIT = 2
    AgentFactory.create(email=ALICE.email)
    refused(sign_in_with_sso(client, provider, DAVE), client)
    limit_reached = sign_in_with_sso(client, provider, DAVE)

    locked = sign_in_with_sso(client, provider, ALICE)
    elsewhere = Client(REMOTE_ADDR="10.0.0.7")
    start = elsewhere.get("/agent/sso/")
    back = urlsplit(provider.sign_in(start["Location"], ALICE))
    welcomed = elsewhere.get(f"{back.path}?{back.query}")

    assert (limit_reached.status_code, locked.status_code) == (429, 429)
    assert signed_in_as(client) is None
    assert welcomed["Location"] == "/agent/"
    assert signed_in_as(elsewhere) is not None


def test_the_password_still_signs_in_beside_single_sign_on(sso: Any, client: Client) -> None:
    alice = AgentFactory.create(email=ALICE.email)

    answer = client.post("/agent/login/", {"username": ALICE.email, "password": "agent-password"})

    assert (answer.status_code, answer["Location"]) == (302, "/agent/")
    assert signed_in_as(client) == alice
    assert entries("signin.succeeded")[0].detail == {}


@pytest.mark.parametrize("configured", [False, True])
@pytest.mark.parametrize("page", ["/agent/login/", "/admin/login/?next=/admin/"])
def test_the_button_shows_only_when_single_sign_on_is_configured(
    settings: Any, client: Client, configured: bool, page: str
) -> None:
    settings.SSO_ENABLED = configured
    settings.OIDC_PROVIDER_NAME = PROVIDER_NAME

    html = client.get(page).content.decode()

    assert (BUTTON in html) == configured
    assert client.get("/agent/sso/").status_code == (302 if configured else 404)


def test_the_admins_button_comes_back_to_the_admin(settings: Any, client: Client) -> None:
    settings.SSO_ENABLED = True
    html = client.get("/admin/login/?next=/admin/").content.decode()
    assert 'href="/agent/sso/?next=/admin/"' in html


def settings_error(**env: str) -> str:
    """What loading the production settings with ``env`` says (empty: nothing)."""
    ran = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env={**os.environ, "SECRET_KEY": "not-the-dev-key", **env},
        capture_output=True,
        text=True,
    )
    return ran.stderr.strip().splitlines()[-1] if ran.returncode else ""


def test_settings_need_every_endpoint_and_https_in_production(provider: Provider) -> None:
    endpoints = provider.service_settings()
    assert settings_error(OIDC_RP_CLIENT_ID="switchboard") == (
        "django.core.exceptions.ImproperlyConfigured: single sign-on needs "
        "OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, "
        "OIDC_OP_JWKS_ENDPOINT, OIDC_RP_CLIENT_SECRET"
    )
    assert settings_error(DEBUG="true", **endpoints) == ""
    assert settings_error(DEBUG="false", **endpoints).endswith(
        "single sign-on needs https:// in OIDC_OP_AUTHORIZATION_ENDPOINT, "
        "OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, OIDC_OP_JWKS_ENDPOINT"
    )
    secure = {k: v.replace("http://", "https://") for k, v in endpoints.items()}
    assert settings_error(DEBUG="false", **secure) == ""


def test_an_agent_with_a_second_factor_types_its_code_after_single_sign_on(
    sso: Any, provider: Provider, client: Client
) -> None:
    alice = AgentFactory.create(email=ALICE.email)
    app = second_factor.enrol_for_command(agent=alice).device

    answer = sign_in_with_sso(client, provider, ALICE, next="/agent/history/")
    held = client.get(answer["Location"])

    assert held.status_code == 302
    assert held["Location"].startswith("/agent/login/code")
    assert signed_in_as(client) is None  # every page sends the session to the code step
    code = TOTP(app.bin_key, app.step, app.t0, app.digits, app.drift).token()
    passed = client.post("/agent/login/code", {"code": f"{code:06d}", "next": "/agent/history/"})
    assert (passed.status_code, passed["Location"]) == (302, "/agent/history/")
    assert signed_in_as(client) == alice


def test_a_first_sign_in_that_finds_its_agent_just_made_beside_it_signs_that_agent_in() -> None:
    """Two first single sign-ons of one address at once: the second's insert
    meets the first's agent (the address is unique), and signs it in."""
    alice = AgentFactory.create(email=ALICE.email)

    assert created_or_existing(email=ALICE.email.upper(), name="Alice") == alice
    assert Agent.objects.count() == 1
    assert entries("agent.created") == []
