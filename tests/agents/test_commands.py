from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.http import HttpRequest
from rest_framework.test import APIClient

from agents.models import Agent

pytestmark = pytest.mark.django_db

PASSWORD = "quiet-harbour-lantern"


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_create_agent_prints_a_working_token() -> None:
    made = run("create_agent", "--email", "Ann@Example.com", "--name", "Ann", "--online")

    assert set(made) == {"id", "email", "role", "token"} and made["email"] == "ann@example.com"
    agent = Agent.objects.get(pk=made["id"])
    assert agent.is_online and agent.name == "Ann" and not agent.has_usable_password()
    assert made["role"] == agent.role == "agent"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {made['token']}")
    assert api.get("/api/agent/v1/chats").status_code == 200


def test_create_agent_with_password_can_sign_in(client) -> None:
    run("create_agent", "--email", "bo@example.com", "--name", "Bo", "--password", PASSWORD)
    # django-axes checks every sign-in, and needs the request it comes with.
    assert client.login(request=HttpRequest(), email="bo@example.com", password=PASSWORD)


@pytest.mark.parametrize("role", ["supervisor", "admin"])
def test_create_agent_with_a_role(role: str) -> None:
    made = run("create_agent", "--email", "sue@example.com", "--name", "Sue", "--role", role)

    agent = Agent.objects.get(pk=made["id"])
    assert made["role"] == agent.role == role and agent.supervises
    assert agent.is_staff == agent.is_superuser == (role == "admin")  # the Django admin


def test_create_agent_refuses_an_unknown_role() -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        run("create_agent", "--email", "x@example.com", "--name", "X", "--role", "boss")
    assert not Agent.objects.exists()


@pytest.mark.parametrize("email", ["not-an-email", "dup@example.com"])
def test_create_agent_refuses_bad_or_taken_email(email: str) -> None:
    run("create_agent", "--email", "dup@example.com", "--name", "Dup")
    with pytest.raises(CommandError):
        run("create_agent", "--email", email, "--name", "X")
    assert Agent.objects.count() == 1


def test_seed_demo_is_repeatable_and_prints_logins(client) -> None:
    first = run("seed_demo")
    second = run("seed_demo")

    assert Agent.objects.count() == 4
    assert first["admin"] == second["admin"]
    admin = second["admin"]
    assert isinstance(admin, dict)
    assert client.login(request=HttpRequest(), email=admin["email"], password=admin["password"])
    assert client.get("/admin/").status_code == 200
    agents = second["agents"]
    assert isinstance(agents, list) and len(agents) == 3
    assert [a["role"] for a in agents] == ["agent", "agent", "supervisor"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {agents[0]['token']}")
    assert api.get("/api/agent/v1/chats").status_code == 200
    urls = second["urls"]
    assert isinstance(urls, dict) and urls["admin"].endswith("/admin/")


def test_seed_demo_keeps_tokens_and_urls_and_a_waiting_customer(settings, tmp_path) -> None:
    from agents import services
    from agents.models import Chat
    from agents.tokens import issue_token

    settings.VAR_DIR = tmp_path
    first = run("seed_demo")
    second = run("seed_demo")

    # Logins, tokens and channel URLs survive a second run, and still work.
    assert [a["token"] for a in first["agents"]] == [a["token"] for a in second["agents"]]

    def shown(channels: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if k != "signing_secret"} for c in channels]

    assert shown(first["channels"]) == shown(second["channels"])  # a secret shows once
    for agent in second["agents"]:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {agent['token']}")
        assert api.get("/api/agent/v1/chats").status_code == 200
    assert oct((tmp_path / "demo-tokens.json").stat().st_mode & 0o777) == "0o600"

    # One demo customer waits; once Alice took that chat, the next run brings another.
    [waiting] = Chat.objects.filter(state=Chat.State.QUEUED, channel__name="Demo Chat API")
    alice = Agent.objects.get(email="alice@example.com")
    services.accept_chat(chat=waiting, agent=alice)
    run("seed_demo")
    [new] = Chat.objects.filter(state=Chat.State.QUEUED, channel__name="Demo Chat API")
    assert new.client.external_id == "demo-customer-2"

    # A token replaced meanwhile (the settings page) is replaced in the next print.
    issue_token(agent=alice)
    third = run("seed_demo")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {third['agents'][0]['token']}")
    assert api.get("/api/agent/v1/chats").status_code == 200


def test_seed_demo_brings_shared_canned_replies_with_variables(settings, tmp_path) -> None:
    from agents.models import CannedReply, Chat
    from tests.factories import page_of

    settings.VAR_DIR = tmp_path
    run("seed_demo")
    run("seed_demo")  # a second run adds none twice

    shared = CannedReply.objects.filter(owner=None)
    assert sorted(shared.values_list("shortcut", flat=True)) == ["bye", "hello", "wait"]
    # Alice types "/hel" in the waiting demo customer's chat: the reply, filled.
    alice = Agent.objects.get(email="alice@example.com")
    waiting = Chat.objects.get(state=Chat.State.QUEUED, channel__name="Demo Chat API")
    found = page_of(alice).get(f"/agent/canned/search?q=hel&chat={waiting.pk}").json()
    assert found["replies"][0]["text"] == (
        f"Hi {waiting.client.display_name}, I'm Alice Agent. How can I help?"
    )


def test_seed_demo_brings_labels_and_leaves_an_admins_changes(settings, tmp_path) -> None:
    from agents.models import Label

    settings.VAR_DIR = tmp_path
    run("seed_demo")
    assert dict(Label.objects.values_list("name", "colour")) == {
        "billing": "#1f77b4", "bug": "#d62728", "feedback": "#2ca02c",
    }  # fmt: skip
    Label.objects.filter(name="bug").update(name="Bug", colour="#000000")
    run("seed_demo")  # the admin's rename stays; none is added twice
    assert sorted(Label.objects.values_list("name", flat=True)) == ["Bug", "billing", "feedback"]
