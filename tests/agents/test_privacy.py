"""A client's data exported and erased on request (docs/privacy.md): after
an erasure no table of the database holds the client's name, e-mail, phone
or what was written, and their files are gone from the storage."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client as Browser

from agents import attachments, privacy, services
from agents.models import (
    Agent,
    AuditEntry,
    Chat,
    Client,
    IdempotencyKey,
    LiveEvent,
    Mail,
    Message,
)
from channels_api.models import ChatApiChannel
from delivery.models import Delivery
from devhooks.models import IntegrationSettings
from devhooks.widget.services import create_widget_channel, new_visitor
from tests.agents.test_calls import callback_settings
from tests.channels_api.conftest import Integrator
from tests.factories import AgentFactory, text

pytestmark = pytest.mark.django_db(transaction=True)

NAME = "Zebulon Quartermain"
EMAIL = "zebulon.quartermain@example.org"
PHONE = "+49 170 9876543"
PHONE_DIGITS = "1709876543"
CLIENT_TEXT = "my kumquat passport number is QX-771"
AGENT_TEXT = "your kumquat refund is approved"
NOTE_TEXT = "customer sounded upset about kumquats"
OFFLINE_TEXT = "please ring me about the marmalade order"
COMMENT = "marvellous kumquat service"
FILE_NAME = "quartermain-invoice.pdf"
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
NEEDLES = [
    "Zebulon",
    "Quartermain",
    "zebulon.quartermain",
    PHONE_DIGITS,
    "kumquat",
    "marmalade",
    "QX-771",
]


@pytest.fixture(autouse=True)
def _media(settings: Any, tmp_path: Path) -> Path:
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "media")},
        },
    }
    return tmp_path / "media"


def everything_in_the_database() -> str:
    """Every row of every table, as text (what a dump would hold)."""
    lines = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            lines += [f"{table} {row!r}" for row in cursor.fetchall()]
    return "\n".join(lines).lower()


def a_client_who_said_everything(
    agent: Agent, chat_api: ChatApiChannel, integrator: Integrator
) -> Client:
    """Given a Chat API client with a name, e-mail and phone who wrote, got
    a reply, a note and a file, rated, asked for a call, left an offline
    message and was mailed a transcript."""
    callback_settings(chat_api.channel)
    answer = integrator.say(CLIENT_TEXT, "zq-1", name=NAME, email=EMAIL, phone=PHONE)
    assert answer.status_code == 200, answer.content
    client = Client.objects.get(channel=chat_api.channel, external_id="zq-1")
    chat = services.accept_chat(chat=client.chats.get(), agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text(AGENT_TEXT))
    services.post_note(chat=chat, agent=agent, text=NOTE_TEXT)
    upload = SimpleUploadedFile(FILE_NAME, PDF, content_type="application/pdf")
    attachments.send_file(chat=chat, agent=agent, upload=upload)
    services.request_callback(channel=chat_api.channel, phone=PHONE, client=client)
    services.leave_offline_message(
        channel=chat_api.channel,
        message=OFFLINE_TEXT,
        name=NAME,
        email=EMAIL,
        phone=PHONE,
        client=client,
    )
    services.finish_chat(chat=chat, agent=agent)
    services.rate_chat(chat=chat, rating="positive", comment=COMMENT)
    LogEntry.objects.log_actions(  # an admin changed the client (the history names it)
        agent.pk, [client], CHANGE, change_message=f"phone {PHONE}", single_object=True
    )
    return client


def test_an_erased_client_is_nowhere_in_the_database(
    agent: Agent,
    chat_api: ChatApiChannel,
    integrator: Integrator,
    webhook: IntegrationSettings,
    _media: Path,
) -> None:
    client = a_client_who_said_everything(agent, chat_api, integrator)
    before = everything_in_the_database()
    assert all(needle.lower() in before for needle in NEEDLES)  # the test sees them
    assert Mail.objects.filter(to=EMAIL).exists()  # a transcript
    assert Delivery.objects.filter(status="pending").exists()  # A3 and webhooks
    assert any(path.is_file() for path in _media.rglob("*"))

    out = StringIO()
    call_command(
        "erase_client", "--channel", chat_api.channel.public_id, "--client", "zq-1", "--yes",
        stdout=out,
    )  # fmt: skip

    assert json.loads(out.getvalue()) == {"client": "zq-1", "chats": 1, "messages": 4, "files": 1}
    after = everything_in_the_database()
    assert [needle for needle in NEEDLES if needle.lower() in after] == []
    assert not any(path.is_file() for path in _media.rglob("*"))
    # The chat stays, anonymous, for the reports.
    chat = Chat.objects.get(client=client)
    assert chat.state == Chat.State.FINISHED and chat.first_response_at is not None
    assert chat.rating == "positive" and chat.erased_at is not None
    assert Message.objects.filter(chat=chat).count() == 4
    assert not Delivery.objects.filter(status="pending").exists()
    assert not LiveEvent.objects.filter(client_id=client.pk).exclude(kind="access").exists()
    client.refresh_from_db()
    assert client.erased_at is not None and client.external_id == f"erased-{client.pk}"
    # The agent still opens the chat: anonymous, its messages erased.
    browser = Browser()
    browser.force_login(agent)
    for url in (f"/agent/chats/{chat.pk}/", "/agent/history/"):
        page = browser.get(url)
        assert page.status_code == 200 and "kumquat" not in page.content.decode().lower()


def test_a_returning_sender_is_a_new_client(
    chat_api: ChatApiChannel, integrator: Integrator
) -> None:
    integrator.say("hello", "zq-2", name=NAME)
    first = Client.objects.get(external_id="zq-2")
    services.finish_chat(chat=first.chats.get())
    services.erase_client(client=first)

    integrator.say("hello again", "zq-2")

    again = Client.objects.get(external_id="zq-2")
    assert again.pk != first.pk and again.name == ""


def test_an_erasure_cannot_be_repeated_nor_run_on_an_open_chat(
    chat_api: ChatApiChannel, integrator: Integrator
) -> None:
    integrator.say(CLIENT_TEXT, "zq-3", name=NAME)
    client = Client.objects.get(external_id="zq-3")

    with pytest.raises(services.InvalidState, match="open chat"):
        services.erase_client(client=client)
    assert Message.objects.get(chat__client=client).text == CLIENT_TEXT

    services.finish_chat(chat=client.chats.get())
    services.erase_client(client=client)
    with pytest.raises(services.InvalidState, match="erased already"):
        services.erase_client(client=client)


def test_the_erase_command_asks_for_yes_and_names_what_is_unknown(
    chat_api: ChatApiChannel, integrator: Integrator
) -> None:
    integrator.say(CLIENT_TEXT, "zq-4", name=NAME)
    services.finish_chat(chat=Chat.objects.get())
    channel = chat_api.channel.public_id

    with pytest.raises(CommandError, match="--yes"):
        call_command("erase_client", "--channel", channel, "--client", "zq-4")
    with pytest.raises(CommandError, match="no channel"):
        call_command("erase_client", "--channel", "nope", "--client", "zq-4", "--yes")
    with pytest.raises(CommandError, match="no client nobody"):
        call_command("erase_client", "--channel", channel, "--client", "nobody", "--yes")

    assert Client.objects.get(external_id="zq-4").name == NAME  # nothing changed
    assert Message.objects.get().text == CLIENT_TEXT


def test_export_holds_everything_about_the_client(
    agent: Agent, chat_api: ChatApiChannel, integrator: Integrator
) -> None:
    client = a_client_who_said_everything(agent, chat_api, integrator)
    out = StringIO()

    call_command(
        "export_client", "--channel", chat_api.channel.public_id, "--client", "zq-1", stdout=out
    )

    exported = json.loads(out.getvalue())
    assert exported == privacy.export_client(client)
    assert (exported["name"], exported["email"]) == (NAME, EMAIL)
    assert exported["addresses"][0]["address"] == EMAIL
    [chat] = exported["chats"]
    assert [m["text"] for m in chat["messages"] if m["author"] != "system"][:3] == [
        CLIENT_TEXT,
        AGENT_TEXT,
        NOTE_TEXT,
    ]
    assert (chat["rating"], chat["rating_comment"]) == ("positive", COMMENT)
    [file] = chat["files"]
    assert file["name"] == FILE_NAME and file["url"].endswith(f"/{FILE_NAME}")
    assert exported["offline_messages"][0]["message"] == OFFLINE_TEXT
    assert exported["calls"][0]["phone"].endswith(PHONE_DIGITS)


def test_a_widget_visitor_is_named_by_visitor_number(db: None) -> None:
    widget = create_widget_channel(name="Shop")
    visitor, _token = new_visitor(widget, {"page": {"title": NAME}})
    out = StringIO()

    call_command(
        "erase_client", "--channel", widget.channel.public_id,
        "--client", str(visitor.visitor_number), "--yes", stdout=out,
    )  # fmt: skip

    assert json.loads(out.getvalue())["client"] == visitor.visitor_number
    visitor.refresh_from_db()
    assert visitor.visitor_data == {} and visitor.visitor_key_hash is None


def test_idempotency_keys_are_not_the_clients(chat_api: ChatApiChannel) -> None:
    """Keys carry no link to a client (docs/privacy.md): they are left to
    expire after IDEMPOTENCY_KEY_HOURS. ``made`` is the id of an agent's
    reply (a bare number, no foreign key)."""
    fields = [f.name for f in IdempotencyKey._meta.get_fields()]
    assert fields == ["id", "scope", "key", "made", "created"]


def test_the_admin_exports_and_erases_after_a_confirmation(
    chat_api: ChatApiChannel, integrator: Integrator
) -> None:
    integrator.say(CLIENT_TEXT, "zq-5", name=NAME)
    client = Client.objects.get(external_id="zq-5")
    services.finish_chat(chat=client.chats.get())
    browser = Browser(enforce_csrf_checks=True)
    admin = AgentFactory.create(role="admin")
    browser.force_login(admin)
    page = f"/admin/agents/client/{client.pk}/"

    assert "Erase this client" in browser.get(f"{page}change/").content.decode()
    export = browser.get(f"{page}export/")
    assert export["Content-Disposition"].startswith("attachment")
    assert export.json()["name"] == NAME
    confirm = browser.get(f"{page}erase/")
    assert "cannot be undone" in confirm.content.decode()
    assert browser.post(f"{page}erase/").status_code == 403  # no CSRF token
    assert Client.objects.get(pk=client.pk).name == NAME

    token = confirm.context["csrf_token"]
    answer = browser.post(f"{page}erase/", {"csrfmiddlewaretoken": str(token)})

    assert answer.status_code == 302
    client.refresh_from_db()
    assert client.name == "" and client.erased_at is not None
    assert "Erase this client" not in browser.get(f"{page}change/").content.decode()
    # Both are audited as the admin's, naming the client by its row alone.
    entries = AuditEntry.objects.filter(target=f"client {client.pk}").order_by("at", "pk")
    assert [(e.action, e.actor) for e in entries] == [
        ("export.made", admin), ("client.erased", admin),
    ]  # fmt: skip
    assert entries[1].detail == {"chats": 1, "messages": 1, "files": 0}


def test_an_agent_may_not_export_nor_erase(
    agent: Agent, chat_api: ChatApiChannel, integrator: Integrator
) -> None:
    integrator.say(CLIENT_TEXT, "zq-6", name=NAME)
    client = Client.objects.get(external_id="zq-6")
    browser = Browser()
    browser.force_login(agent)

    for action in ("export", "erase"):
        answer = browser.get(f"/admin/agents/client/{client.pk}/{action}/")
        assert answer.status_code == 302 and "/login/" in answer["Location"]
    assert browser.post(f"/admin/agents/client/{client.pk}/erase/").status_code == 302
    assert Client.objects.get(pk=client.pk).erased_at is None
