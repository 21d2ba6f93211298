"""Chat transcripts by e-mail: what a finished chat mails, what it leaves out,
the mail outbox's retries and failures, on a file backend and a real SMTP
server (aiosmtpd), and the agent's on-demand transcript (docs/transcripts.md)."""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from datetime import timedelta
from email.message import Message as MimeMessage
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.core import mail as django_mail
from django.test import Client as Browser
from django.utils import timezone
from rest_framework.test import APIClient

from agents import mail, services
from agents.content import Content
from agents.models import Agent, Chat, Client, ClientAddress, Mail, Message
from agents.tasks import finish_inactive_chats, send_due_mails
from agents.transcripts import TranscriptError, send_transcript
from devhooks.models import WidgetChannel
from devhooks.webhooks.services import read_accept_reply
from devhooks.widget import services as widgets
from tests.bots.conftest import BotSetup
from tests.channels_api.conftest import Integrator
from tests.factories import (
    AgentFactory,
    ChannelFactory,
    ClientFactory,
    MessageFactory,
    page_of,
    text,
)
from tests.limits import forget_rate
from tests.web.server import free_port

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(name="Alice Agent", is_online=True)


@pytest.fixture(autouse=True)
def fresh_confirmation_limits() -> None:
    """Each test mails its links to confirm afresh, whatever earlier runs sent."""
    forget_rate("confirm-address*")


def finished_chat(alice: Agent, *, email_address: str = "ann@example.com") -> Chat:
    channel = ChannelFactory.create(agents=[alice], name="Acme shop")
    client = ClientFactory.create(channel=channel, name=f"Ann {EVIL}", email=email_address)
    chat = services.post_client_message(client=client, content=text(f"Hi {EVIL}")).chat
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=text("Hello Ann, how can I help?"))
    photo = {"file": "https://files.example/box.jpg", "file_name": "box.jpg", "file_size": 20}
    services.post_client_message(client=client, content=Content("photo", "the box", photo))
    MessageFactory.create(  # an internal note
        chat=chat, author=Message.Author.NOTE, agent=alice, text="SECRET NOTE: refund approved"
    )
    services.post_system_message(chat=chat, text="SYSTEM NOTE: bot unreachable")
    crm_answer = {  # the CRM's answer to chat_accepted, as the delivery reads it
        "result": "ok",
        "contact_info": {"name": "Ann Lee", "phone": "+1 555 0100", "email": "ann.lee@crm.example"},
    }
    assert read_accept_reply(chat, crm_answer)
    services.finish_chat(chat=chat, agent=alice)
    return chat


def parts(message: MimeMessage) -> dict[str, str]:
    found = {}
    for part in message.walk():
        if part.get_content_type() in ("text/plain", "text/html"):
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            found[part.get_content_type()] = payload.decode()
    return found


def send_all() -> None:
    for item in Mail.objects.filter(status=Mail.Status.PENDING):
        mail.send(item.pk)


def test_a_finished_chat_mails_its_transcript_to_the_client(
    alice: Agent, mailoutbox: list[Any]
) -> None:
    chat = finished_chat(alice)

    [queued] = Mail.objects.all()
    assert (queued.to, queued.status, queued.chat_id) == ("ann.lee@crm.example", "pending", chat.pk)
    send_all()

    [sent] = mailoutbox
    assert sent.to == ["ann.lee@crm.example"] and sent.subject == "Your chat with Acme shop"
    plain, (html, kind) = sent.body, sent.alternatives[0]
    assert kind == "text/html"
    for body in (plain, html):
        assert "Acme shop" in body and "Alice Agent" in body
        assert "Hello Ann, how can I help?" in body
        assert "https://files.example/box.jpg" in body and "box.jpg" in body
        assert "+1 555 0100" in body and "ann.lee@crm.example" in body  # the CRM's answer
        assert "SECRET NOTE" not in body and "SYSTEM NOTE" not in body
    assert EVIL in plain  # plain text is text
    assert EVIL not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert Mail.objects.get().status == Mail.Status.SENT


def test_no_address_or_transcripts_off_sends_nothing_but_the_archive_copy(
    alice: Agent, settings: Any
) -> None:
    finished_without = ChannelFactory.create(agents=[alice])
    client = ClientFactory.create(channel=finished_without, email="")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.finish_chat(chat=chat)
    assert not Mail.objects.exists()

    off = ChannelFactory.create(agents=[alice], send_transcripts=False)
    client = ClientFactory.create(channel=off, email="bo@example.com")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    settings.TRANSCRIPT_ARCHIVE_EMAIL = "archive@acme.example"
    services.finish_chat(chat=chat)
    [archived] = Mail.objects.all()
    assert archived.to == "archive@acme.example" and archived.subject.startswith("[archive]")


def test_the_file_backend_writes_each_mail_under_var_mail(
    alice: Agent, settings: Any, tmp_path: Path
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    finished_chat(alice)
    send_all()

    [written] = list((tmp_path / "mail").iterdir())
    content = written.read_text()
    assert "Subject: Your chat with Acme shop" in content and "text/html" in content


class Inbox:
    def __init__(self) -> None:
        self.messages: list[MimeMessage] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content, policy=default_policy))
        return "250 OK"


@pytest.fixture
def smtp_server(settings: Any) -> Iterator[Inbox]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    yield inbox
    controller.stop()


def test_a_real_smtp_server_receives_both_parts(alice: Agent, smtp_server: Inbox) -> None:
    finished_chat(alice)
    send_all()

    [received] = smtp_server.messages
    assert received["To"] == "ann.lee@crm.example"
    found = parts(received)
    assert set(found) == {"text/plain", "text/html"}
    assert "Hello Ann, how can I help?" in found["text/plain"]
    assert "&lt;script&gt;" in found["text/html"] and "SECRET NOTE" not in found["text/html"]


def test_a_mail_that_fails_is_retried_then_shown_failed_and_can_be_sent_again(
    alice: Agent, settings: Any, admin_client: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nobody listens
    settings.MAIL_MAX_ATTEMPTS, settings.MAIL_RETRY_SECONDS = 3, 60
    finished_chat(alice)
    [queued] = Mail.objects.all()

    assert mail.send(queued.pk) == "pending"
    queued.refresh_from_db()
    assert queued.attempts == 1 and "ConnectionRefusedError" in queued.last_error
    assert queued.next_try_at > timezone.now() + timedelta(seconds=50)
    assert send_due_mails() == 0  # not due yet: the pause holds
    Mail.objects.filter(pk=queued.pk).update(next_try_at=timezone.now())
    assert send_due_mails() == 1
    queued.refresh_from_db()
    assert queued.attempts == 2 and queued.status == Mail.Status.PENDING
    assert queued.next_try_at > timezone.now() + timedelta(seconds=110)  # the pause doubled
    Mail.objects.filter(pk=queued.pk).update(next_try_at=timezone.now())
    send_due_mails()
    queued.refresh_from_db()
    assert (queued.attempts, queued.status) == (3, Mail.Status.FAILED)
    [logged] = [r for r in caplog.records if r.getMessage().startswith("mail.failed")]
    assert logged.levelname == "ERROR" and f"mail={queued.pk} attempts=3" in logged.getMessage()
    assert send_due_mails() == 0  # a failed mail waits for a person

    listed = admin_client.get("/admin/agents/mail/?status=failed").content.decode()
    assert "ann.lee@crm.example" in listed and "ConnectionRefusedError" in listed
    admin_client.post(
        "/admin/agents/mail/", {"action": "send_again", "_selected_action": [queued.pk]}
    )
    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (Mail.Status.PENDING, 0)


def test_an_agent_sends_a_transcript_on_demand(alice: Agent, mailoutbox: list[Any]) -> None:
    chat = finished_chat(alice)
    Mail.objects.all().delete()
    page = page_of(alice)
    fetch = {"X-Requested-With": "fetch"}

    sent = page.post(
        f"/agent/chats/{chat.pk}/transcript", {"to": "boss@acme.example"}, headers=fetch
    )
    assert sent.json() == {
        "ok": True,
        "message": "The transcript is on its way to boss@acme.example.",
    }
    refused = page.post(
        f"/agent/chats/{chat.pk}/transcript", {"to": "not an address"}, headers=fetch
    )
    assert (
        refused.status_code == 400 and "not an e-mail address" in refused.json()["error"]["message"]
    )
    to_client = page.post(f"/agent/chats/{chat.pk}/transcript", {"to": ""})
    assert to_client.status_code == 302

    assert list(Mail.objects.order_by("id").values_list("to", flat=True)) == [
        "boss@acme.example",
        "ann.lee@crm.example",
    ]
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert 'data-testid="send-transcript"' in html


def test_the_agent_api_sends_a_transcript(alice: Agent) -> None:
    from agents.tokens import issue_token

    chat = finished_chat(alice, email_address="")
    Chat.objects.filter(pk=chat.pk).update(contact_info={})  # nor did the CRM give one
    Client.objects.filter(pk=chat.client_id).update(email="")
    Mail.objects.all().delete()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=alice)}")

    nobody = api.post(f"/api/agent/v1/chats/{chat.pk}/transcript", {}, format="json")
    assert nobody.status_code == 400 and "no e-mail address" in nobody.json()["error"]["message"]
    sent = api.post(
        f"/api/agent/v1/chats/{chat.pk}/transcript", {"to": "me@acme.example"}, format="json"
    )
    assert sent.status_code == 200 and sent.json() == {"to": "me@acme.example", "status": "pending"}
    other = AgentFactory.create()
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=other)}")
    assert stranger.post(f"/api/agent/v1/chats/{chat.pk}/transcript", {}).status_code == 404
    assert Mail.objects.count() == 1
    assert django_mail.outbox == []  # queued, sent by the worker


def test_a_client_blacklisted_in_the_chat_is_mailed_nothing_but_the_archive_is(
    alice: Agent, settings: Any
) -> None:
    settings.TRANSCRIPT_ARCHIVE_EMAIL = "archive@acme.example"
    channel = ChannelFactory.create(agents=[alice])
    client = ClientFactory.create(channel=channel, email="troll@example.com")
    chat = services.post_client_message(client=client, content=text("rude words")).chat

    services.blacklist_client(chat=chat, agent=alice)

    assert [m.to for m in Mail.objects.all()] == ["archive@acme.example"]


def test_an_address_smtp_cannot_carry_mails_nothing_and_the_chat_still_finishes(
    alice: Agent,
) -> None:
    channel = ChannelFactory.create(agents=[alice])
    too_long = "a" * 64 + "@" + ".".join(["b" * 60] * 3) + ".example"  # 255: valid, > 254
    client = ClientFactory.create(channel=channel, email=too_long)
    chat = services.post_client_message(client=client, content=text("hi")).chat

    services.finish_chat(chat=chat)

    assert Chat.objects.get(pk=chat.pk).state == Chat.State.FINISHED
    assert not Mail.objects.exists()
    with pytest.raises(TranscriptError):
        send_transcript(chat=chat)


def test_a_crm_address_that_is_none_falls_back_to_the_clients_own(alice: Agent) -> None:
    channel = ChannelFactory.create(agents=[alice])
    client = ClientFactory.create(channel=channel, email="own@example.com", email_from="integrator")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    Chat.objects.filter(pk=chat.pk).update(contact_info={"email": "not an address"})

    services.finish_chat(chat=chat)

    assert [m.to for m in Mail.objects.all()] == ["own@example.com"]


def test_a_mail_that_cannot_be_built_fails_at_once_and_the_others_still_go(
    alice: Agent, mailoutbox: list[Any]
) -> None:
    broken = Mail.objects.create(
        to="ann@example.com\nBcc: eve@example.com", subject="x", text="injected?"
    )
    good = Mail.objects.create(to="bo@example.com", subject="y", text="fine")

    assert send_due_mails() == 2

    broken.refresh_from_db()
    assert (broken.status, broken.attempts) == (Mail.Status.FAILED, 1)
    assert "BadHeaderError" in broken.last_error or "ValueError" in broken.last_error
    assert Mail.objects.get(pk=good.pk).status == Mail.Status.SENT
    assert [m.to for m in mailoutbox] == [["bo@example.com"]]


def test_a_channel_name_on_two_lines_still_makes_a_one_line_subject(
    alice: Agent, mailoutbox: list[Any]
) -> None:
    channel = ChannelFactory.create(agents=[alice], name="Acme\nBcc: eve@example.com")
    client = ClientFactory.create(channel=channel, email="ann@example.com", email_from="integrator")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.finish_chat(chat=chat)

    send_all()

    [sent] = mailoutbox
    assert sent.subject == "Your chat with Acme Bcc: eve@example.com" and sent.to == [
        "ann@example.com"
    ]


# --- the client's address, from every channel ------------------------------------


def test_a_chat_api_senders_address_gets_the_transcript(integrator: Integrator) -> None:
    integrator.say("hello", sender_id="u-7", email="ann@example.com")

    services.finish_chat(chat=Chat.objects.get())

    assert [m.to for m in Mail.objects.all()] == ["ann@example.com"]


def confirmation_link(body: str) -> str:
    [link] = re.findall(r"http\S+/mail/confirm/\S+", body)
    return link


def widget_visitor(alice: Agent) -> tuple[Client, Chat]:
    widget = widgets.create_widget_channel(name="Site", agent_emails=[alice.email])
    visitor, _token = widgets.new_visitor(widget, {})
    chat = widgets.send_message(widget, visitor, "hi").chat
    return visitor, chat


def answered(chat: Chat, agent: Agent) -> Chat:
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("Hello"))
    return chat


def test_an_address_a_bot_collected_gets_a_link_to_confirm_not_the_transcript(
    bot: BotSetup, mailoutbox: list[Any]
) -> None:
    chat = bot.say("my mail?")
    info = {"event": "CLIENT_INFO", "client_id": str(chat.client_id), "chat_id": str(chat.pk)}
    assert bot.b2({**info, "email": "bo@example.com"}).status_code == 200

    services.finish_chat(chat=Chat.objects.get(pk=chat.pk))
    send_all()

    [asked] = mailoutbox
    assert asked.to == ["bo@example.com"] and asked.subject == "Confirm your e-mail address for App"
    assert "my mail?" not in asked.body


def test_a_visitor_typed_address_is_mailed_a_fixed_link_and_no_transcript_until_confirmed(
    alice: Agent, mailoutbox: list[Any], settings: Any
) -> None:
    """The phishing case: a stranger types a victim's address and a lure."""
    visitor, chat = widget_visitor(alice)
    lure = "Your account is locked: log in at https://evil.example"
    widgets.set_contact(visitor, {"name": f"Bank {lure}", "email": "victim@example.com"})
    widgets.send_message(WidgetChannel.objects.get(), visitor, lure)
    widgets.set_contact(visitor, {"email": "victim@example.com"})  # again: no second mail
    services.finish_chat(chat=answered(Chat.objects.get(pk=chat.pk), alice), agent=alice)
    send_all()

    [asked] = mailoutbox
    assert (
        asked.to == ["victim@example.com"]
        and asked.subject == "Confirm your e-mail address for Site"
    )
    assert "evil.example" not in asked.body and "Bank" not in asked.body and not asked.alternatives
    assert Mail.objects.get().chat_id is None  # no transcript queued at all

    # The link shows a question; only its button (a POST) confirms.
    link = confirmation_link(asked.body)
    path = link.removeprefix(settings.PUBLIC_URL)
    browser = Browser(enforce_csrf_checks=True)
    shown = browser.get(path)
    assert shown.status_code == 200 and "victim@example.com" in shown.content.decode()
    assert not ClientAddress.objects.get().trusted
    assert browser.post(path).status_code == 403  # no CSRF token: nothing confirmed
    token = shown.cookies["csrftoken"].value
    done = browser.post(path, {"csrfmiddlewaretoken": token})
    assert done.status_code == 200 and "Address confirmed" in done.content.decode()
    assert browser.post(path, {"csrfmiddlewaretoken": token}).status_code == 404  # used once

    # The next chat, answered and finished, is mailed to the confirmed address.
    again = widgets.send_message(WidgetChannel.objects.get(), visitor, "thanks").chat
    services.finish_chat(chat=answered(again, alice), agent=alice)
    assert Mail.objects.filter(chat=again, to="victim@example.com").count() == 1


def test_a_real_smtp_server_receives_the_link_to_confirm(
    alice: Agent, smtp_server: Inbox, settings: Any
) -> None:
    visitor, _chat = widget_visitor(alice)
    widgets.set_contact(visitor, {"name": "Mallory", "email": "cy@example.com"})
    send_all()

    [received] = smtp_server.messages
    assert received["To"] == "cy@example.com"
    assert received["Subject"] == "Confirm your e-mail address for Site"
    assert set(parts(received)) == {"text/plain"}
    body = parts(received)["text/plain"]
    assert "Mallory" not in body
    link = confirmation_link(body)
    assert (
        link.startswith(f"{settings.PUBLIC_URL}/mail/confirm/") and len(link.rsplit("/")[-1]) >= 43
    )


def test_the_crms_answer_trusts_the_address_the_visitor_typed(alice: Agent) -> None:
    visitor, chat = widget_visitor(alice)
    widgets.set_contact(visitor, {"email": "cy@example.com"})
    Mail.objects.all().delete()  # the link to confirm, never opened
    chat = answered(Chat.objects.get(pk=chat.pk), alice)

    assert read_accept_reply(chat, {"result": "ok", "contact_info": {"email": "cy@example.com"}})
    services.finish_chat(chat=chat, agent=alice)

    assert [m.to for m in Mail.objects.all()] == ["cy@example.com"]
    assert ClientAddress.objects.get().source == ClientAddress.Source.CRM


def test_the_agent_page_and_api_show_the_trust_of_the_address_the_transcript_goes_to(
    alice: Agent,
) -> None:
    from agents.tokens import issue_token

    visitor, chat = widget_visitor(alice)
    chat = answered(chat, alice)
    assert read_accept_reply(chat, {"result": "ok", "contact_info": {"email": "cy@crm.example"}})
    # Afterwards the visitor types another address: not trusted, and not the
    # one this chat's transcript goes to (the CRM's is).
    widgets.set_contact(visitor, {"email": "someone@else.example"})
    page = page_of(alice).get(f"/agent/chats/{chat.pk}/").content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=alice)}")
    detail = api.get(f"/api/agent/v1/chats/{chat.pk}").json()

    assert 'data-testid="email-unconfirmed"' not in page
    assert detail["client"]["email_confirmed"] is True
    Mail.objects.all().delete()  # the link to confirm the typed one
    services.finish_chat(chat=chat, agent=alice)
    assert [m.to for m in Mail.objects.all()] == ["cy@crm.example"]


def test_a_confirmation_link_that_is_unknown_or_expired_confirms_nothing(
    alice: Agent, settings: Any
) -> None:
    visitor, _chat = widget_visitor(alice)
    widgets.set_contact(visitor, {"email": "cy@example.com"})
    path = confirmation_link(Mail.objects.get().text).removeprefix(settings.PUBLIC_URL)
    browser = Browser()

    unknown = browser.get("/mail/confirm/" + "A" * 43)
    assert unknown.status_code == 404 and "not valid" in unknown.content.decode()
    sent = timezone.now() - timedelta(hours=settings.ADDRESS_CONFIRMATION_HOURS, minutes=1)
    ClientAddress.objects.update(confirmation_sent_at=sent)
    expired = browser.post(path)
    assert expired.status_code == 404 and "expired" in expired.content.decode()
    assert not ClientAddress.objects.get().trusted


def test_confirmation_mails_to_one_address_and_from_one_channel_are_limited(
    alice: Agent, settings: Any
) -> None:
    settings.ADDRESS_CONFIRMATIONS_PER_ADDRESS_PER_DAY = 2
    settings.ADDRESS_CONFIRMATIONS_PER_CHANNEL_PER_HOUR = 3
    widget = widgets.create_widget_channel(name="Site", agent_emails=[alice.email])

    for _n in range(3):  # three fresh visitors, one victim
        visitor, _token = widgets.new_visitor(widget, {})
        widgets.set_contact(visitor, {"email": "victim@example.com"})
    for n in range(3):
        visitor, _token = widgets.new_visitor(widget, {})
        widgets.set_contact(visitor, {"email": f"other{n}@example.com"})

    assert sorted(Mail.objects.values_list("to", flat=True)) == [
        "other0@example.com",
        "victim@example.com",
        "victim@example.com",
    ]


def test_an_address_from_the_widgets_contact_form_gets_the_transcript_once_an_agent_confirms_it(
    alice: Agent,
) -> None:
    from agents.tokens import issue_token

    visitor, chat = widget_visitor(alice)
    widgets.set_contact(visitor, {"name": "Cy", "email": "cy@example.com"})
    Mail.objects.all().delete()  # the link to confirm
    chat = answered(Chat.objects.get(pk=chat.pk), alice)
    page = page_of(alice)
    assert 'data-testid="confirm-email"' in page.get(f"/agent/chats/{chat.pk}/").content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=alice)}")
    url = f"/api/agent/v1/chats/{chat.pk}/client-email"

    detail = f"/api/agent/v1/chats/{chat.pk}"
    assert api.get(detail).json()["client"]["email_confirmed"] is False
    refused = api.post(url, {"email": "not an address"}, format="json")
    assert (
        refused.status_code == 400 and "not an e-mail address" in refused.json()["error"]["message"]
    )
    assert api.post(url, {}, format="json").json() == {"email": "cy@example.com", "confirmed": True}
    assert api.get(detail).json()["client"]["email_confirmed"] is True
    assert (
        'data-testid="confirm-email"' not in page.get(f"/agent/chats/{chat.pk}/").content.decode()
    )
    services.finish_chat(chat=chat, agent=alice)

    assert [m.to for m in Mail.objects.all()] == ["cy@example.com"]
    assert ClientAddress.objects.get().confirmed_by == alice


def test_confirm_address_vouches_for_the_address_the_agent_saw(alice: Agent) -> None:
    visitor, chat = widget_visitor(alice)
    widgets.set_contact(visitor, {"name": "Cy", "email": "cy@example.com"})
    chat = answered(Chat.objects.get(pk=chat.pk), alice)
    page = page_of(alice)
    shown = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    form = re.search(r'name="email" value="([^"]*)"', shown)
    assert form is not None and form[1] == "cy@example.com"
    # The visitor's page changes the address between the agent's look and click.
    widgets.set_contact(visitor, {"email": "victim@example.net"})

    page.post(f"/agent/chats/{chat.pk}/client-email", {"email": form[1]})

    trusted = ClientAddress.objects.filter(confirmed_by=alice)
    assert [a.address for a in trusted] == ["cy@example.com"]


def test_an_agent_enters_an_address_on_the_chat_page(alice: Agent) -> None:
    visitor, chat = widget_visitor(alice)
    chat = answered(Chat.objects.get(pk=chat.pk), alice)

    page_of(alice).post(f"/agent/chats/{chat.pk}/client-email", {"email": "dee@example.com"})
    services.finish_chat(chat=chat, agent=alice)

    assert Client.objects.get(pk=visitor.pk).email == "dee@example.com"
    assert [m.to for m in Mail.objects.all()] == ["dee@example.com"]


def test_an_idle_chat_nobody_answered_is_mailed_only_to_the_archive(
    alice: Agent, settings: Any
) -> None:
    settings.TRANSCRIPT_ARCHIVE_EMAIL = "archive@acme.example"
    channel = ChannelFactory.create(agents=[alice])
    quiet = ClientFactory.create(channel=channel, email="q@example.com", email_from="integrator")
    talked = ClientFactory.create(channel=channel, email="t@example.com", email_from="integrator")
    services.post_client_message(client=quiet, content=text("anyone?"))
    answered(services.post_client_message(client=talked, content=text("hi")).chat, alice)
    Message.objects.update(
        created=timezone.now() - timedelta(hours=settings.INACTIVE_CHAT_HOURS + 1)
    )
    Chat.objects.update(created=timezone.now() - timedelta(hours=settings.INACTIVE_CHAT_HOURS + 1))

    assert finish_inactive_chats() == 2

    assert sorted(Mail.objects.values_list("to", flat=True)) == [
        "archive@acme.example",
        "archive@acme.example",
        "t@example.com",
    ]


def test_the_clients_unconfirmed_address_needs_the_agent_to_type_it(alice: Agent) -> None:
    visitor, chat = widget_visitor(alice)
    widgets.set_contact(visitor, {"email": "cy@example.com"})
    Mail.objects.all().delete()
    page = page_of(alice)
    fetch = {"X-Requested-With": "fetch"}

    refused = page.post(f"/agent/chats/{chat.pk}/transcript", {"to": ""}, headers=fetch)
    assert refused.status_code == 400 and "not confirmed" in refused.json()["error"]["message"]
    typed = page.post(f"/agent/chats/{chat.pk}/transcript", {"to": "cy@example.com"}, headers=fetch)
    assert typed.json()["ok"] is True
    assert [m.to for m in Mail.objects.all()] == ["cy@example.com"]


def test_transcripts_on_demand_are_limited_per_agent_to_the_clients_address_too(
    alice: Agent, settings: Any
) -> None:
    from agents.tokens import issue_token

    settings.TRANSCRIPTS_TO_TYPED_ADDRESSES_PER_HOUR = 3
    forget_rate(f"transcript-on-demand:{alice.pk}")
    chat = finished_chat(alice)  # the client's address: ann.lee@crm.example (the CRM's)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=alice)}")
    url = f"/api/agent/v1/chats/{chat.pk}/transcript"

    for n in range(2):
        assert api.post(url, {"to": f"me{n}@acme.example"}, format="json").status_code == 200
    assert api.post(url, {}, format="json").status_code == 200  # the client's own: counted
    refused = api.post(url, {}, format="json")

    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_requests"
    assert "try again later" in refused.json()["error"]["message"]
    page = page_of(alice)
    page.post(f"/agent/chats/{chat.pk}/transcript", {"to": "me4@acme.example"})
    assert not Mail.objects.filter(to="me4@acme.example").exists()
    assert Mail.objects.filter(to="ann.lee@crm.example").count() == 2  # at finishing, on demand


def test_the_transcript_names_every_agent_who_answered_a_transferred_chat(
    alice: Agent, mailoutbox: list[Any]
) -> None:
    bob = AgentFactory.create(name="Bob Agent", is_online=True)
    channel = ChannelFactory.create(agents=[alice, bob])
    client = ClientFactory.create(channel=channel, email="ann@example.com", email_from="integrator")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=text("Hi, Alice here"))
    services.transfer_chat(chat=chat, agent=alice, to_agent=bob)

    services.finish_chat(chat=chat, agent=bob)

    [queued] = Mail.objects.all()
    assert "answered by Alice Agent, Bob Agent" in queued.text
