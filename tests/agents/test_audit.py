"""The audit log (docs/security.md, "Audit log"): what is recorded, by whom,
from which address, and that no secret or password is ever written; the
admin's read-only list and CSV, the API, the retention."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as conf
from django.core.management import call_command
from django.test import Client as Browser
from django.utils import timezone
from rest_framework.test import APIClient

from agents import audit, services
from agents.models import Agent, AuditEntry, Channel, Chat
from agents.pages.settings import NEW_TOKEN
from agents.tasks import forget_old_audit_entries
from agents.tokens import issue_token
from bots import services as bots
from channels_api import services as chat_apis
from channels_api.models import ChatApiChannel
from devhooks.webhooks.services import set_developer_webhook
from tests.bots.conftest import TOKEN as BOT_TOKEN
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db

PASSWORD = "agent-password"  # tests.factories.AgentFactory
ADDRESS = "203.0.113.7"


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action))


def written(entry: AuditEntry) -> str:
    """Everything an entry holds, as text: what a secret must not be in."""
    return " ".join(
        str(value)
        for value in (entry.actor_label, entry.action, entry.target, entry.ip, entry.detail)
    )


def browser_of(agent: Agent) -> Browser:
    browser = Browser(REMOTE_ADDR=ADDRESS)
    browser.force_login(agent)
    return browser


def api_of(agent: Agent) -> APIClient:
    client = APIClient(REMOTE_ADDR=ADDRESS)
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    return client


# --- sign-ins ---------------------------------------------------------------


def sign_in(email: str, password: str) -> Any:
    return Browser().post(
        "/agent/login/",
        {"username": email, "password": password, "next": "/agent/"},
        REMOTE_ADDR=ADDRESS,
    )


def test_a_sign_in_is_recorded_with_the_agent_and_the_address() -> None:
    ann = AgentFactory.create(email="ann@example.com")

    assert sign_in("ann@example.com", PASSWORD).status_code == 302

    [entry] = entries("signin.succeeded")
    assert (entry.actor, entry.actor_label, entry.ip) == (ann, "ann@example.com", ADDRESS)
    assert entry.target == f"agent {ann.pk} ann@example.com"


def test_a_failed_sign_in_names_the_account_but_never_the_password() -> None:
    ann = AgentFactory.create(email="ann@example.com")

    sign_in("ann@example.com", "Wrong-horse-battery")
    sign_in("Wrong-horse-battery", "whatever")  # the password typed as the name

    named, unknown = sorted(entries("signin.failed"), key=lambda e: e.target == "unknown account")
    assert named.target == f"agent {ann.pk} ann@example.com" and named.ip == ADDRESS
    assert named.actor is None and named.actor_label == "system"
    assert unknown.target == "unknown account"
    for entry in (named, unknown):
        assert "Wrong-horse" not in written(entry) and "whatever" not in written(entry)


def test_a_locked_sign_in_is_recorded() -> None:
    AgentFactory.create(email="ann@example.com")

    for _ in range(conf.AXES_FAILURE_LIMIT):
        sign_in("ann@example.com", "wrong")

    [entry] = entries("signin.locked")
    assert entry.ip == ADDRESS and "ann@example.com" in entry.target


# --- agents, tokens ---------------------------------------------------------


def test_a_new_and_a_replaced_token_are_recorded_without_the_key() -> None:
    ann = AgentFactory.create()
    page = browser_of(ann)

    page.post("/agent/settings/token")
    page.post("/agent/settings/token")
    key = page.session[NEW_TOKEN]

    [issued], [rotated] = entries("token.issued"), entries("token.rotated")
    assert (rotated.actor, rotated.ip, rotated.target) == (ann, ADDRESS, audit.of_agent(ann))
    assert issued.actor == ann
    assert key not in written(rotated)


def test_an_admin_revoking_a_token_is_recorded(admin_client: Browser) -> None:
    ann = AgentFactory.create()
    issue_token(agent=ann)

    admin_client.post(
        "/admin/agents/apitoken/",
        {"action": "delete_selected", "_selected_action": [ann.api_token.pk], "post": "yes"},
    )

    [entry] = entries("token.revoked")
    assert entry.target == audit.of_agent(ann) and entry.actor is not None
    assert entry.actor.role == Agent.Role.ADMIN


def test_a_supervisor_setting_an_agents_chats_is_recorded() -> None:
    sue = AgentFactory.create(role=Agent.Role.SUPERVISOR)
    ann = AgentFactory.create(max_chats=2)
    ChannelFactory.create(agents=[sue, ann])

    browser_of(sue).post(f"/agent/team/agents/{ann.pk}/max-chats", {"max_chats": "4"})

    [entry] = entries("agent.capacity_changed")
    assert (entry.actor, entry.ip, entry.target) == (sue, ADDRESS, audit.of_agent(ann))
    assert entry.detail == {"before": 2, "after": 4}


def test_an_admin_changing_a_role_is_recorded(admin_client: Browser) -> None:
    ann = AgentFactory.create(email="ann@example.com", name="Ann")
    now = timezone.now()
    form = {
        "email": ann.email,
        "name": ann.name,
        "phone": "",
        "photo_url": "",
        "max_chats": "",
        "is_active": "on",
        "role": "supervisor",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": now.strftime("%Y-%m-%d"),
        "date_joined_1": now.strftime("%H:%M:%S"),
    }

    answer = admin_client.post(f"/admin/agents/agent/{ann.pk}/change/", form)

    assert answer.status_code == 302, answer.content.decode()[:2000]
    [entry] = entries("agent.role_changed")
    assert entry.target == audit.of_agent(ann)
    assert entry.detail == {"before": "agent", "after": "supervisor"}
    assert not entries("agent.capacity_changed")


# --- clients, transcripts ---------------------------------------------------


def a_chat_of(agent: Agent) -> Chat:
    channel = ChannelFactory.create(agents=[agent])
    client = ClientFactory.create(channel=channel)
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("hello"))
    return chat


def test_blacklisting_and_lifting_are_recorded_without_the_reason() -> None:
    ann = AgentFactory.create()
    chat = a_chat_of(ann)
    api = api_of(ann)

    api.post(
        f"/api/agent/v1/chats/{chat.pk}/blacklist", {"reason": "called me a cow"}, format="json"
    )
    api.delete(f"/api/agent/v1/chats/{chat.pk}/blacklist")

    [blacklisted], [lifted] = entries("client.blacklisted"), entries("client.blacklist_lifted")
    assert (blacklisted.actor, blacklisted.ip) == (ann, ADDRESS)
    assert blacklisted.target == f"client {chat.client_id}"
    assert "cow" not in written(blacklisted)
    assert (lifted.actor, lifted.target) == (ann, f"client {chat.client_id}")


def test_a_transcript_to_a_typed_address_is_recorded() -> None:
    ann = AgentFactory.create()
    chat = a_chat_of(ann)

    api_of(ann).post(
        f"/api/agent/v1/chats/{chat.pk}/transcript", {"to": "boss@acme.example"}, format="json"
    )

    [entry] = entries("transcript.mailed_to_typed_address")
    assert (entry.actor, entry.ip, entry.target) == (ann, ADDRESS, f"chat {chat.pk}")
    assert entry.detail == {"to": "boss@acme.example"}
    assert "hello" not in written(entry)


# --- channels, webhooks -----------------------------------------------------


def test_a_chat_api_channels_life_is_recorded_without_its_secrets() -> None:
    sue = AgentFactory.create(role=Agent.Role.ADMIN)

    made, signing = chat_apis.create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/in", by=sue
    )
    rotated = chat_apis.rotate_path_secret(chat_api=made, by=sue)
    new_signing = chat_apis.rotate_signing_secret(chat_api=made, by=sue)

    [created] = entries("channel.created")
    assert created.target == audit.of_channel(made.channel) and created.actor == sue
    assert created.detail == {"kind": Channel.Kind.CHAT_API}
    rotations = entries("channel.secret_rotated")
    assert sorted(e.detail["which"] for e in rotations) == ["endpoint URL", "signing secret"]
    for entry in [created, *rotations]:
        text = written(entry)
        assert signing not in text and new_signing not in text
        assert ChatApiChannel.objects.get().path_secret not in text
        assert rotated.endpoint_url not in text


def test_a_developer_webhook_change_is_recorded_without_url_or_secret() -> None:
    _settings, secret = set_developer_webhook(
        url="https://crm.example/hook?key=s3cr3t", by=audit.COMMAND_LINE
    )

    [entry] = entries("webhook.changed")
    assert entry.actor_label == "command line" and entry.ip is None
    assert secret is not None and secret not in written(entry)
    assert "s3cr3t" not in written(entry) and "crm.example" not in written(entry)


# --- the admin --------------------------------------------------------------


def test_the_admin_reads_the_log_and_changes_nothing(admin_client: Browser) -> None:
    entry = audit.record(audit.Action.CHANNEL_CHANGED, target="channel x", ip=ADDRESS)

    listed = admin_client.get("/admin/agents/auditentry/?action=channel.changed")
    found = admin_client.get(f"/admin/agents/auditentry/?q={ADDRESS}")

    assert listed.status_code == 200 and "channel x" in listed.content.decode()
    assert "channel x" in found.content.decode()
    assert admin_client.get("/admin/agents/auditentry/add/").status_code == 403
    admin_client.post(f"/admin/agents/auditentry/{entry.pk}/change/", {"target": "forged"})
    admin_client.post(f"/admin/agents/auditentry/{entry.pk}/delete/", {"post": "yes"})
    entry.refresh_from_db()
    assert entry.target == "channel x"


def test_the_admin_downloads_the_log_as_csv_with_formulas_defused(admin_client: Browser) -> None:
    older = audit.record(audit.Action.CLIENT_BLACKLISTED, actor="=cmd|' /C calc'!A0", ip=ADDRESS)
    newer = audit.record(audit.Action.CLIENT_BLACKLIST_LIFTED, target="@SUM(1)")

    answer = admin_client.post(
        "/admin/agents/auditentry/",
        {"action": "download_csv", "_selected_action": [older.pk, newer.pk]},
    )

    assert answer["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.content.decode())))
    assert [row["action"] for row in rows] == ["client.blacklist_lifted", "client.blacklisted"]
    assert rows[0]["target"] == "'@SUM(1)" and rows[1]["actor"] == "'=cmd|' /C calc'!A0"
    assert rows[1]["ip"] == ADDRESS


# --- the API ----------------------------------------------------------------


def test_admins_read_the_log_newest_first() -> None:
    admin = AgentFactory.create(role=Agent.Role.ADMIN)
    api = api_of(admin)  # its token's issue is the newest entry
    audit.record(audit.Action.CHANNEL_CHANGED, actor=admin, target="channel x", ip=ADDRESS)

    answer = api.get("/api/agent/v1/audit")

    assert answer.status_code == 200, answer.content
    first, second = answer.json()["results"]
    assert first == {
        "at": first["at"],
        "actor": admin.email,
        "action": "channel.changed",
        "target": "channel x",
        "ip": ADDRESS,
    }
    assert second["action"] == "token.issued" and second["at"] <= first["at"]


@pytest.mark.parametrize("role", [Agent.Role.AGENT, Agent.Role.SUPERVISOR])
def test_only_admins_read_the_log(role: str) -> None:
    answer = api_of(AgentFactory.create(role=role)).get("/api/agent/v1/audit")

    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "access_denied"


def test_the_log_in_pages_and_since() -> None:
    admin = AgentFactory.create(role=Agent.Role.ADMIN)
    api = api_of(admin)
    AuditEntry.objects.all().delete()
    now = timezone.now()
    for days in range(3):
        AuditEntry.objects.create(
            at=now - timedelta(days=days), action="channel.changed", target=f"day {days}"
        )

    paged = api.get("/api/agent/v1/audit?page_size=2").json()
    since = api.get("/api/agent/v1/audit", {"since": (now - timedelta(hours=36)).isoformat()})
    bad = api.get("/api/agent/v1/audit?since=yesterday")

    assert paged["count"] == 3 and [e["target"] for e in paged["results"]] == ["day 0", "day 1"]
    assert paged["next"] is not None
    assert [e["target"] for e in since.json()["results"]] == ["day 0", "day 1"]
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"


# --- retention --------------------------------------------------------------


def test_entries_older_than_the_retention_are_forgotten(settings: Any) -> None:
    now = timezone.now()
    old = AuditEntry.objects.create(at=now - timedelta(days=400), action="signin.failed")
    kept = AuditEntry.objects.create(at=now - timedelta(days=300), action="signin.failed")
    settings.AUDIT_RETENTION_DAYS = 0

    assert forget_old_audit_entries() == 0
    settings.AUDIT_RETENTION_DAYS = 365
    assert audit.forget_old_entries(batch=1) == 1

    assert list(AuditEntry.objects.all()) == [kept]
    assert not AuditEntry.objects.filter(pk=old.pk).exists()


def test_create_agent_is_recorded_as_the_command_lines_without_the_key() -> None:
    out = io.StringIO()
    call_command("create_agent", "--email", "cy@example.com", "--name", "Cy", stdout=out)
    key = json.loads(out.getvalue())["token"]

    cy = Agent.objects.get(email="cy@example.com")
    [created], [issued] = entries("agent.created"), entries("token.issued")
    assert (created.actor_label, created.target) == ("command line", audit.of_agent(cy))
    assert created.detail == {"role": "agent", "max_chats": None}
    assert (issued.actor, issued.actor_label) == (None, "command line")
    assert key not in written(issued)


def test_a_bots_signing_secret_rotation_is_recorded_without_it() -> None:
    sue = AgentFactory.create(role=Agent.Role.ADMIN)
    channel = ChannelFactory.create()
    provider = bots.create_bot_provider(name="Acme bots", endpoint_url="http://127.0.0.1:9/bot")
    attachment, first = bots.attach_bot(channel=channel, provider=provider, token=BOT_TOKEN)

    second = bots.rotate_signing_secret(attachment=attachment, by=sue)

    [entry] = entries("channel.secret_rotated")
    assert (entry.actor, entry.target) == (sue, audit.of_channel(channel))
    assert entry.detail == {"which": "bot signing secret"}
    assert first not in written(entry) and second not in written(entry)
    assert BOT_TOKEN not in written(entry)


def test_a_bots_life_on_a_channel_is_recorded_without_its_token_or_url() -> None:
    sue = AgentFactory.create(role=Agent.Role.ADMIN)
    channel = ChannelFactory.create()
    url = "http://127.0.0.1:9/bot?key=s3cr3t"
    provider = bots.create_bot_provider(name="Acme bots", endpoint_url=url, by=sue)
    attachment, _secret = bots.attach_bot(
        channel=channel, provider=provider, token=BOT_TOKEN, by=sue
    )
    bots.set_attachment_active(attachment=attachment, active=False, by=sue)
    bots.set_attachment_active(attachment=attachment, active=False, by=sue)  # no change
    bots.update_bot_provider(
        provider=provider,
        name="Acme bots",
        endpoint_url="http://127.0.0.1:9/bot2",
        display_name="",
        active=True,
        by=sue,
    )
    call_command("detach_bot", "--channel", channel.public_id, stdout=io.StringIO())

    made, switched, changed = AuditEntry.objects.filter(action="bot.changed").order_by("pk")
    assert (made.actor, made.detail) == (sue, {"change": "created"})
    assert made.target == f"bot provider {provider.provider_id} Acme bots"
    assert (switched.target, switched.detail) == (
        audit.of_channel(channel), {"change": "switched off"}
    )  # fmt: skip
    assert changed.detail == {"change": "changed", "fields": "endpoint_url"}
    [attached] = entries("bot.attached")
    assert (attached.actor, attached.target) == (sue, audit.of_channel(channel))
    assert attached.detail == {"provider": provider.provider_id}
    [detached] = entries("bot.detached")
    assert (detached.actor_label, detached.target) == ("command line", audit.of_channel(channel))
    for entry in (made, switched, changed, attached, detached):
        assert BOT_TOKEN not in written(entry) and "s3cr3t" not in written(entry)
