"""Creating a Chat API channel: the admin form and the management command."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client as Browser

from agents.models import Agent, Channel
from channels_api.models import ChatApiChannel
from tests.channels_api.conftest import path_of
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_browser() -> Browser:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    return browser


def test_add_chat_api_channel_in_the_admin(admin_browser: Browser, agent: Agent) -> None:
    form = admin_browser.get("/admin/channels_api/chatapichannel/add/").content.decode()
    for field in ("name", "webhook_url", "chunked", "agents", "unique_message_ids"):
        assert f'name="{field}"' in form

    answer = admin_browser.post(
        "/admin/channels_api/chatapichannel/add/",
        {
            "name": "Mobile app",
            "webhook_url": "https://chat.example.com/hook",
            "chunked": "on",
            "agents": [agent.pk],
            "active": "on",
        },
        follow=True,
    )

    chat_api = ChatApiChannel.objects.get()
    assert chat_api.channel.name == "Mobile app" and chat_api.channel.kind == "chat_api"
    assert list(chat_api.channel.agents.all()) == [agent]
    assert chat_api.endpoint.chunked and chat_api.endpoint.url == (
        f"https://chat.example.com/hook/{chat_api.channel.public_id}"
    )
    # The secret, once, on a page no cache keeps; then on to the channel's page.
    assert answer.status_code == 200 and "no-store" in answer["Cache-Control"]
    assert secret_on(answer.content.decode()) == chat_api.endpoint.secret
    channel_page = f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/"
    assert f'href="{channel_page}"' in answer.content.decode()
    page = admin_browser.get(channel_page).content.decode()
    assert chat_api.endpoint_url in page and chat_api.status_url in page
    assert page.count(">Copy</button>") == 2  # endpoint URL, status URL
    assert "whsec_" not in page  # shown once


def test_the_admin_form_refuses_a_bad_webhook_url(admin_browser: Browser) -> None:
    answer = admin_browser.post(
        "/admin/channels_api/chatapichannel/add/",
        {"name": "x", "webhook_url": "ftp://example.com/hook", "active": "on"},
    )
    assert answer.status_code == 200 and "errorlist" in answer.content.decode()
    assert not Channel.objects.exists()


def test_the_admin_edits_a_channel(admin_browser: Browser, agent: Agent) -> None:
    made = run_create("--name", "Old", "--webhook-url", "https://a.example/x")
    chat_api = ChatApiChannel.objects.get(channel_id=made["id"])

    admin_browser.post(
        f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/",
        {"name": "New", "webhook_url": "https://b.example/y", "agents": [agent.pk]},
    )

    chat_api.refresh_from_db()
    assert chat_api.channel.name == "New" and not chat_api.channel.is_active
    assert chat_api.endpoint.url == f"https://b.example/y/{chat_api.channel.public_id}"


def test_the_admin_rotates_the_secret(admin_browser: Browser) -> None:
    made = run_create("--name", "A", "--webhook-url", "https://a.example/x")
    chat_api = ChatApiChannel.objects.get(channel_id=made["id"])
    answer = admin_browser.post(
        "/admin/channels_api/chatapichannel/",
        {"action": "rotate_secret", "_selected_action": [chat_api.pk]},
        follow=True,
    )
    new = ChatApiChannel.objects.get(pk=chat_api.pk).endpoint.secret
    assert new != made["signing_secret"]
    assert "no-store" in answer["Cache-Control"] and secret_on(answer.content.decode()) == new


def test_the_admin_rotates_the_endpoint_url_and_the_old_one_stops_at_once(
    admin_browser: Browser,
) -> None:
    # Given a channel whose URL the integrator uses
    made = run_create("--name", "A", "--webhook-url", "https://a.example/x")
    chat_api = ChatApiChannel.objects.get(channel_id=made["id"])
    assert Browser().get(path_of(made["status_url"])).status_code == 200

    # When an admin rotates its URL
    answer = admin_browser.post(
        "/admin/channels_api/chatapichannel/",
        {"action": "rotate_path_secret", "_selected_action": [chat_api.pk]},
    )
    shown = admin_browser.get(answer["Location"])
    again = admin_browser.get(answer["Location"])

    # Then the new URL is shown once, the old one is refused and the new one works
    new_url = ChatApiChannel.objects.get(pk=chat_api.pk).endpoint_url
    assert answer.status_code == 303 and new_url != made["endpoint_url"]
    assert shown.status_code == 200 and "no-store" in shown["Cache-Control"]
    assert new_url in shown.content.decode() and "stopped working" in shown.content.decode()
    assert again.status_code == 410 and new_url not in again.content.decode()
    assert Browser().get(path_of(made["status_url"])).status_code == 404
    assert Browser().get(path_of(f"{new_url}/status")).status_code == 200


def test_the_channels_page_has_a_button_that_rotates_its_url(
    admin_browser: Browser, agent: Agent
) -> None:
    made = run_create("--name", "A", "--webhook-url", "https://a.example/x", "--agent", agent.email)
    chat_api = ChatApiChannel.objects.get(channel_id=made["id"])
    change = f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/"
    page = admin_browser.get(change).content.decode()
    assert 'name="_rotate_path_secret"' in page
    # Enter in a field presses the form's first submit button: Save, never Rotate.
    form = page[page.index('id="chatapichannel_form"') :]
    first_submit = re.search(r'<(?:input|button)[^>]*type="submit"[^>]*>', form)
    assert first_submit is not None and 'name="_save"' in first_submit[0]

    answer = admin_browser.post(
        change,
        {
            "name": "A",
            "webhook_url": "https://a.example/x",
            "agents": [agent.pk],
            "active": "on",
            "_rotate_path_secret": "",
        },
    )

    new_url = ChatApiChannel.objects.get(pk=chat_api.pk).endpoint_url
    assert answer.status_code == 303 and new_url != made["endpoint_url"]
    assert new_url in admin_browser.get(answer["Location"]).content.decode()
    assert Browser().get(path_of(made["status_url"])).status_code == 404


def test_rotate_chat_api_secret_command() -> None:
    made = run_create("--name", "A", "--webhook-url", "https://a.example/x")
    out = StringIO()

    call_command("rotate_chat_api_secret", "--channel", made["public_id"], stdout=out)

    printed = json.loads(out.getvalue())
    chat_api = ChatApiChannel.objects.get(channel_id=made["id"])
    assert printed == {
        "id": made["id"],
        "public_id": made["public_id"],
        "endpoint_url": chat_api.endpoint_url,
        "status_url": chat_api.status_url,
    }
    assert printed["endpoint_url"] != made["endpoint_url"]
    assert Browser().get(path_of(made["status_url"])).status_code == 404
    assert Browser().get(path_of(printed["status_url"])).status_code == 200
    with pytest.raises(CommandError, match="no Chat API channel with public id 'nope'"):
        call_command("rotate_chat_api_secret", "--channel", "nope", stdout=StringIO())


def secret_on(page: str) -> str:
    [secret] = re.findall(r'<code class="signing-secret">(whsec_[^<]+)</code>', page)
    return secret


def run_create(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("create_chat_api_channel", *args, stdout=out)
    return json.loads(out.getvalue())


def test_create_chat_api_channel_command(agent: Agent) -> None:
    made = run_create(
        "--name", "App", "--webhook-url", "https://chat.example/hook", "--chunked",
        "--agent", agent.email.upper(),
    )  # fmt: skip

    assert set(made) == {"id", "public_id", "endpoint_url", "status_url", "signing_secret"}
    chat_api = ChatApiChannel.objects.get(channel_id=made["id"])
    assert made["public_id"] == chat_api.channel.public_id
    assert made["endpoint_url"] == chat_api.endpoint_url
    assert made["status_url"] == made["endpoint_url"] + "/status"
    assert made["signing_secret"].startswith("whsec_")
    assert chat_api.endpoint.chunked and list(chat_api.channel.agents.all()) == [agent]
    status = Browser().get(made["status_url"].replace("http://127.0.0.1:8000", ""))
    assert status.content == b"1"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--webhook-url", "not a url"], "URL"),
        (["--webhook-url", "https://x.example", "--agent", "ghost@example.com"], "ghost"),
    ],
)
def test_create_chat_api_channel_refuses_bad_input(args: list[str], says: str) -> None:
    with pytest.raises(CommandError, match=says):
        run_create("--name", "App", *args)
    assert not Channel.objects.exists()


def test_seed_demo_makes_a_chat_api_channel() -> None:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    [channel] = [c for c in json.loads(out.getvalue())["channels"] if c["kind"] == "chat_api"]
    again = StringIO()
    call_command("seed_demo", stdout=again)

    assert channel["signing_secret"].startswith("whsec_")
    assert json.loads(again.getvalue())["channels"][0]["endpoint_url"] == channel["endpoint_url"]
    assert ChatApiChannel.objects.filter(channel__name=channel["name"]).count() == 1
    status = Browser().get(channel["status_url"].replace("http://127.0.0.1:8000", ""))
    assert status.content == b"1"  # the demo's first agent is online
