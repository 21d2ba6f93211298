"""Bot providers and attachments: the management commands and the admin."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client as Browser

from agents.models import Channel
from bots.models import BotAttachment, BotProvider
from tests.factories import AgentFactory, ChannelFactory

pytestmark = pytest.mark.django_db

TOKEN = "provider-made-token-42"


@pytest.fixture
def admin_browser() -> Browser:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    return browser


@pytest.fixture
def channel() -> Channel:
    return ChannelFactory.create(name="Support")


def run(command: str, *args: str) -> tuple[Any, str]:
    out, err = StringIO(), StringIO()
    call_command(command, *args, stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


def attach(channel: Channel, provider_id: str, token: str = TOKEN) -> tuple[Any, str]:
    # "--opt=value": a random id may start with "-", which argparse would take for an option.
    return run(
        "attach_bot", f"--channel={channel.public_id}", f"--provider={provider_id}",
        f"--token={token}",
    )  # fmt: skip


def new_provider(name: str = "Acme") -> dict[str, Any]:
    made, _ = run(
        "create_bot_provider", "--name", name, "--endpoint", "https://bots.example/hook",
        "--display-name", "Acme Assistant",
    )  # fmt: skip
    return made


def test_create_bot_provider_prints_its_ids() -> None:
    made = new_provider()

    provider = BotProvider.objects.get()
    assert made == {
        "id": provider.pk,
        "provider_id": provider.provider_id,
        "webhook_url_prefix": f"http://127.0.0.1:8000/webhooks/{provider.provider_id}/",
    }
    assert len(provider.provider_id) >= 32  # 192 random bits, URL-safe
    assert (provider.name, provider.display_name, provider.endpoint_url) == (
        "Acme",
        "Acme Assistant",
        "https://bots.example/hook",
    )


def test_attach_and_detach_bot(channel: Channel) -> None:
    provider_id = new_provider()["provider_id"]

    attached, note = attach(channel, provider_id)
    attachment = BotAttachment.objects.get()
    assert attached == {"ok": True}
    assert attachment.channel == channel and attachment.is_active
    assert attachment.endpoint.url == f"https://bots.example/hook/{TOKEN}"
    assert note.strip().endswith(attachment.endpoint.secret)  # shown once, on stderr

    detached, _ = run("detach_bot", f"--channel={channel.public_id}")
    assert detached == {"ok": True}
    assert not BotAttachment.objects.exists()
    attachment.endpoint.refresh_from_db()
    assert not attachment.endpoint.active


@pytest.mark.parametrize(
    ("command", "args", "says"),
    [
        ("create_bot_provider", ["--name", "B", "--endpoint", "ftp://bots.example"], "http"),
        ("create_bot_provider", ["--name", "Acme", "--endpoint", "https://b.example"], "exists"),
        ("attach_bot", ["--channel=nope", "--provider={provider}", f"--token={TOKEN}"], "nope"),
        ("attach_bot", ["--channel={channel}", "--provider=nope", f"--token={TOKEN}"], "nope"),
        ("attach_bot", ["--channel={channel}", "--provider={provider}", "--token=a b"], "8 to"),
        ("detach_bot", ["--channel={channel}"], "has no bot"),
        ("detach_bot", ["--channel=nope"], "nope"),
    ],
)  # fmt: skip
def test_commands_refuse_bad_input(
    channel: Channel, command: str, args: list[str], says: str
) -> None:
    provider_id = new_provider()["provider_id"]
    filled = [a.format(channel=channel.public_id, provider=provider_id) for a in args]

    with pytest.raises(CommandError, match=says):
        run(command, *filled)
    assert BotProvider.objects.count() == 1 and not BotAttachment.objects.exists()


def test_the_admin_adds_a_provider_and_shows_its_webhook_prefix(admin_browser: Browser) -> None:
    admin_browser.post(
        "/admin/bots/botprovider/add/",
        {"name": "Acme", "display_name": "Ann Bot", "endpoint_url": "https://bots.example/h",
         "is_active": "on"},
    )  # fmt: skip

    provider = BotProvider.objects.get()
    assert provider.display_name == "Ann Bot" and provider.is_active
    page = admin_browser.get(f"/admin/bots/botprovider/{provider.pk}/change/").content.decode()
    assert provider.webhook_url_prefix in page and ">Copy</button>" in page

    refused = admin_browser.post(
        "/admin/bots/botprovider/add/", {"name": "B", "endpoint_url": "ftp://x.example"}
    )
    assert "errorlist" in refused.content.decode() and BotProvider.objects.count() == 1


def test_the_admin_attaches_switches_off_and_detaches(
    admin_browser: Browser, channel: Channel
) -> None:
    provider = BotProvider.objects.get(pk=new_provider()["id"])

    answer = admin_browser.post(
        "/admin/bots/botattachment/add/",
        {"channel": channel.pk, "provider": provider.pk, "bot_token": TOKEN},
        follow=True,
    )
    attachment = BotAttachment.objects.get()
    [secret] = re.findall(
        r'<code class="signing-secret">(whsec_[^<]+)</code>', answer.content.decode()
    )
    assert secret == attachment.endpoint.secret and "no-store" in answer["Cache-Control"]
    page = f"/admin/bots/botattachment/{attachment.pk}/change/"
    shown = admin_browser.get(page).content.decode()
    assert secret not in shown and attachment.target_url in shown

    admin_browser.post(page, {})  # the "active" box unticked
    attachment.refresh_from_db()
    assert not attachment.is_active

    admin_browser.post(f"/admin/bots/botattachment/{attachment.pk}/delete/", {"post": "yes"})
    assert not BotAttachment.objects.exists()
    attachment.endpoint.refresh_from_db()
    assert not attachment.endpoint.active


def test_the_admin_refuses_a_bad_token(admin_browser: Browser, channel: Channel) -> None:
    provider = BotProvider.objects.get(pk=new_provider()["id"])
    answer = admin_browser.post(
        "/admin/bots/botattachment/add/",
        {"channel": channel.pk, "provider": provider.pk, "bot_token": "short"},
    )
    assert "errorlist" in answer.content.decode() and not BotAttachment.objects.exists()


def test_the_secret_page_shows_the_secret_once(admin_browser: Browser, channel: Channel) -> None:
    provider = BotProvider.objects.get(pk=new_provider()["id"])
    answer = admin_browser.post(
        "/admin/bots/botattachment/add/",
        {"channel": channel.pk, "provider": provider.pk, "bot_token": TOKEN},
        follow=True,
    )
    [(secret_url, status)] = answer.redirect_chain
    attachment = BotAttachment.objects.get()
    assert status == 303 and attachment.endpoint.secret in answer.content.decode()
    page = f"/admin/bots/botattachment/{attachment.pk}/change/"
    assert f'href="{page}"' in answer.content.decode()

    again = admin_browser.get(secret_url).content.decode()
    assert attachment.endpoint.secret not in again and "whsec_" not in again


def test_the_admin_attaches_a_second_bot_only_after_detaching(
    admin_browser: Browser, channel: Channel
) -> None:
    provider = BotProvider.objects.get(pk=new_provider()["id"])
    attach(channel, provider.provider_id)
    answer = admin_browser.post(
        "/admin/bots/botattachment/add/",
        {"channel": channel.pk, "provider": provider.pk, "bot_token": "another-token-1"},
    )
    assert "errorlist" in answer.content.decode()
    assert BotAttachment.objects.get().token == TOKEN


def test_the_provider_list_shows_ids_and_attachment_counts(
    admin_browser: Browser, channel: Channel
) -> None:
    acme, other = new_provider("Acme"), new_provider("Other")
    attach(channel, acme["provider_id"])

    page = admin_browser.get("/admin/bots/botprovider/").content.decode()
    assert acme["provider_id"] in page and other["provider_id"] in page
    counts = re.findall(r'<td class="field-attachment_count">(\d+)</td>', page)
    assert counts == ["1", "0"]  # ordered by name


def test_the_admin_changes_a_provider_and_its_attachments_follow(
    admin_browser: Browser, channel: Channel
) -> None:
    provider = BotProvider.objects.get(pk=new_provider()["id"])
    attach(channel, provider.provider_id)

    admin_browser.post(
        f"/admin/bots/botprovider/{provider.pk}/change/",
        {"name": "Acme", "display_name": "", "endpoint_url": "https://new.example/b1"},
    )  # "active" unticked

    provider.refresh_from_db()
    assert not provider.is_active and provider.display_name == ""
    endpoint = BotAttachment.objects.get().endpoint
    assert endpoint.url == f"https://new.example/b1/{TOKEN}"


def test_the_admin_rotates_an_attachments_secret(admin_browser: Browser, channel: Channel) -> None:
    provider_id = new_provider()["provider_id"]
    attach(channel, provider_id)
    old = BotAttachment.objects.get().endpoint.secret

    answer = admin_browser.post(
        "/admin/bots/botattachment/",
        {"action": "rotate_secret", "_selected_action": [BotAttachment.objects.get().pk]},
        follow=True,
    )
    endpoint = BotAttachment.objects.get().endpoint
    assert endpoint.secret != old and endpoint.previous_secret == old
    [shown] = re.findall(
        r'<code class="signing-secret">(whsec_[^<]+)</code>', answer.content.decode()
    )
    assert shown == endpoint.secret


def test_ids_that_start_with_a_dash_work_in_the_option_equals_form() -> None:
    channel = ChannelFactory.create(public_id="-starts-with-a-dash")
    provider = BotProvider.objects.get(pk=new_provider()["id"])
    BotProvider.objects.filter(pk=provider.pk).update(provider_id="-also-a-dash")

    assert attach(channel, "-also-a-dash")[0] == {"ok": True}
    assert BotAttachment.objects.get().channel == channel
    assert run("detach_bot", "--channel=-starts-with-a-dash")[0] == {"ok": True}


def test_a_new_provider_id_never_starts_with_a_dash(
    channel: Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # About 1 random id in 64 starts with "-": the first draw here does.
    draws = iter(["-" + "a" * 31, "_" + "b" * 31, "c" * 32])
    monkeypatch.setattr("secrets.token_urlsafe", lambda nbytes=None: next(draws))

    provider_id = new_provider()["provider_id"]

    assert provider_id == "c" * 32
    # The form an admin types: "--provider <id>", not only "--provider=<id>".
    attached, _ = run(
        "attach_bot", "--channel", channel.public_id, "--provider", provider_id, "--token", TOKEN
    )
    assert attached == {"ok": True}
