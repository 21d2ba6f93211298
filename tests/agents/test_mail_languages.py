"""What a person reads away from the pages speaks their language
(docs/translating.md, "The mails"): a transcript and its dates in the
chat's language (else its widget channel's, else the installation's), the
standard away message the same, the client's address confirmation (mail
and page) in their chat's, the password reset in the agent's."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client as Browser

from agents import accounts, addresses, mail, services
from agents.hours import STANDARD_AWAY_MESSAGE
from agents.models import Agent, Channel, Chat, Client, ClientAddress, Mail, Message
from devhooks.models import WidgetChannel
from devhooks.widget import services as widgets
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text
from tests.limits import forget_rate

pytestmark = pytest.mark.django_db

# A time to find in the mail, written as each language writes it.
STARTED = datetime(2026, 3, 5, 14, 7, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fresh_confirmation_limits() -> None:
    forget_rate("confirm-address*")


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(name="Alice Agent", is_online=True)


def send_all() -> None:
    for item in Mail.objects.filter(status=Mail.Status.PENDING):
        mail.send(item.pk)


def finish(client: Client, agent: Agent, *, language: str = "") -> Chat:
    """A chat of ``client`` answered by ``agent`` and finished; the widget's
    ``language`` recorded at its first message."""
    chat = services.post_client_message(client=client, content=text("Hola"), language=language).chat
    Chat.objects.filter(pk=chat.pk).update(created=STARTED)
    chat.refresh_from_db()
    services.accept_chat(chat=chat, agent=agent)
    services.post_agent_message(chat=chat, agent=agent, content=text("¿En qué te ayudo?"))
    services.finish_chat(chat=chat, agent=agent)
    return chat


def trusted_client(
    channel: Channel, address: str = "ana@example.com", *, name: str = "Ana"
) -> Client:
    client = ClientFactory.create(channel=channel, name=name, email=address)
    addresses.record_address(client=client, address=address, source=ClientAddress.Source.AGENT)
    return client


def transcript(mailoutbox: list[Any]) -> tuple[str, str, str]:
    send_all()
    [sent] = mailoutbox
    return sent.subject, sent.body, sent.alternatives[0][0]


Mailed = Callable[[str, str], tuple[str, str, str]]


@pytest.fixture
def mailed(alice: Agent, mailoutbox: list[Any]) -> Mailed:
    """The transcript (subject, text, HTML) mailed of a finished chat in
    ``language`` (blank: none) of a Chat API channel named ``channel``."""

    def mail_one(language: str, channel: str) -> tuple[str, str, str]:
        made = ChannelFactory.create(agents=[alice], name=channel)
        finish(trusted_client(made), alice, language=language)
        return transcript(mailoutbox)

    return mail_one


def test_a_chat_in_spanish_is_mailed_its_transcript_in_spanish(mailed: Mailed) -> None:
    subject, plain, html = mailed("es", "Tienda")

    assert subject == "Tu chat con Tienda"
    assert '<html lang="es" dir="ltr">' in html
    for body in (plain, html):
        assert "Tu chat con Tienda" in body and "Your chat" not in body
        assert "5 de marzo de 2026, 14:07 UTC" in body  # Spanish dates, UTC as before
        assert "atendido por Alice Agent" in body and "answered by" not in body
        assert "Correo electrónico" in body and "Nombre" in body and "Visitante" in body
        assert "Enviado por Switchboard para Tienda." in body
        assert "¿En qué te ayudo?" in body  # what was written stays as written


def test_an_arabic_chats_transcript_reads_right_to_left(mailed: Mailed) -> None:
    subject, plain, html = mailed("ar", "Souk")

    assert subject == "محادثتك مع Souk"
    assert '<html lang="ar" dir="rtl">' in html
    assert "مارس" in plain and "مارس" in html  # March, in Arabic
    assert "البريد الإلكتروني" in plain


def test_the_archive_copy_speaks_the_chats_language_under_its_english_tag(
    alice: Agent, mailoutbox: list[Any], settings: Any
) -> None:
    settings.TRANSCRIPT_ARCHIVE_EMAIL = "archive@acme.example"
    channel = ChannelFactory.create(agents=[alice], name="Loja")
    nameless = trusted_client(channel, name="")
    finish(nameless, alice, language="pt-BR")  # BCP 47, as the widget says it

    send_all()

    assert sorted(m.subject for m in mailoutbox) == [
        "Sua conversa com Loja",
        "[archive] Sua conversa com Loja",
    ]
    assert all(m.body == mailoutbox[0].body for m in mailoutbox)  # one text for both
    assert "Anônimo:" in mailoutbox[0].body  # a client without a name


def test_a_chat_without_a_language_speaks_its_widget_channels(
    alice: Agent, mailoutbox: list[Any]
) -> None:
    widget = widgets.create_widget_channel(name="Laden", agent_emails=[alice.email], language="de")
    chat = finish(trusted_client(widget.channel), alice)
    assert chat.language == ""

    subject, plain, _html = transcript(mailoutbox)

    assert subject == "Ihr Chat mit Laden"
    assert "5. März 2026, 14:07 UTC" in plain and "beantwortet von Alice Agent" in plain


def test_a_chat_api_chat_without_a_language_speaks_the_installations(
    mailed: Mailed, settings: Any
) -> None:
    settings.LANGUAGE_CODE = "fr"

    subject, plain, _html = mailed("", "Boutique")

    assert subject == "Votre discussion avec Boutique"
    assert "5 mars 2026" in plain


# --- the away message --------------------------------------------------------------


def away_message(chat: Chat) -> str:
    [away] = chat.messages.filter(payload__has_key=Message.AWAY)
    assert away.author == Message.Author.BOT
    return away.text


def widget_away(away: str, *, language: str = "en") -> WidgetChannel:
    """A widget channel no agent answers, whose away message is ``away``."""
    made = widgets.create_widget_channel(name="Laden", language=language)
    Channel.objects.filter(pk=made.channel_id).update(away_message=away)
    return WidgetChannel.objects.get(pk=made.pk)


def test_the_standard_away_message_speaks_the_visitors_language() -> None:
    widget = widget_away(STANDARD_AWAY_MESSAGE)
    german, _token = widgets.new_visitor(widget, {})
    english, _token = widgets.new_visitor(widget, {})

    in_german = widgets.send_message(widget, german, "Hallo", language="de").chat
    in_english = widgets.send_message(widget, english, "Hello").chat

    assert in_german.language == "de"
    assert away_message(in_german) == (
        "Im Moment kann niemand antworten. Sobald wieder jemand da ist, antworten wir Ihnen."
    )
    assert away_message(in_english) == STANDARD_AWAY_MESSAGE  # the channel's language: en


def test_the_standard_away_message_of_a_chat_without_a_language_speaks_the_channels() -> None:
    widget = widget_away(STANDARD_AWAY_MESSAGE, language="de")
    visitor, _token = widgets.new_visitor(widget, {})

    chat = widgets.send_message(widget, visitor, "Hallo").chat

    assert chat.language == "" and away_message(chat).startswith("Im Moment kann niemand")


def test_the_command_gives_a_channel_the_standard_away_message() -> None:
    channel = ChannelFactory.create()

    call_command("set_business_hours", "--channel", channel.public_id, "--standard-away-message")

    channel.refresh_from_db()
    assert channel.away_message == STANDARD_AWAY_MESSAGE


def test_an_away_message_of_the_channels_own_is_sent_as_written() -> None:
    own = "Wir sind gleich zurück. / We'll be right back."
    widget = widget_away(own, language="de")
    visitor, _token = widgets.new_visitor(widget, {})

    chat = widgets.send_message(widget, visitor, "Bonjour", language="fr").chat

    assert away_message(chat) == own


# --- the client's address confirmation ---------------------------------------------


def confirmation_path(body: str, settings: Any) -> str:
    [link] = re.findall(r"http\S+/mail/confirm/\S+", body)
    return link.removeprefix(settings.PUBLIC_URL)


def test_the_confirmation_mail_and_page_speak_the_visitors_chat_language(
    alice: Agent, mailoutbox: list[Any], settings: Any
) -> None:
    widget = widgets.create_widget_channel(name="Tienda", agent_emails=[alice.email])
    visitor, _token = widgets.new_visitor(widget, {})
    widgets.send_message(widget, visitor, "Hola", language="es")

    widgets.set_contact(visitor, {"email": "ana@example.com"})
    send_all()

    [asked] = mailoutbox
    assert asked.subject == "Confirma tu dirección de correo para Tienda"
    assert "el enlace funciona durante 48 horas" in asked.body
    assert "Enviado por Switchboard para Tienda." in asked.body
    path = confirmation_path(asked.body, settings)
    browser = Browser(HTTP_ACCEPT_LANGUAGE="de")  # the chat's language wins
    shown = browser.get(path).content.decode()
    assert '<html lang="es" dir="ltr">' in shown
    assert "¿Enviar las transcripciones de los chats con Tienda a" in shown and "Confirmar" in shown
    done = browser.post(path).content.decode()
    assert "Dirección confirmada" in done and "<strong>ana@example.com</strong>" in done


def test_the_confirmation_counts_its_hours_in_russian(mailoutbox: list[Any], settings: Any) -> None:
    settings.ADDRESS_CONFIRMATION_HOURS = 24
    widget = widgets.create_widget_channel(name="Магазин", language="ru")
    visitor, _token = widgets.new_visitor(widget, {})

    widgets.set_contact(visitor, {"email": "ivan@example.com"})  # before any chat
    send_all()

    [asked] = mailoutbox
    assert asked.subject == "Подтвердите адрес эл. почты для Магазин"
    assert "(она действует 24 часа)" in asked.body


def test_a_link_that_names_no_address_answers_in_the_browsers_language() -> None:
    shown = Browser(HTTP_ACCEPT_LANGUAGE="de").get("/mail/confirm/" + "A" * 43)

    page = shown.content.decode()
    assert shown.status_code == 404
    assert "Link ungültig" in page and "dieser Link ist nicht (mehr) gültig" in page


# --- the agent's password reset ----------------------------------------------------


def test_the_password_reset_mail_speaks_the_agents_language(mailoutbox: list[Any]) -> None:
    german = AgentFactory.create(name="Greta", language="de")
    english = AgentFactory.create(name="Ed")

    accounts.mail_password_reset(email=german.email)
    accounts.mail_password_reset(email=english.email)
    send_all()

    by_name = {sent.to[0]: sent for sent in mailoutbox}
    to_greta, to_ed = by_name[german.email], by_name[english.email]
    assert to_greta.subject == "Ihr Switchboard-Passwort zurücksetzen"
    assert to_greta.body.startswith("Hallo Greta,")
    assert "Der Link funktioniert einmal, 60 Minuten lang." in to_greta.body
    assert to_ed.subject == "Reset your Switchboard password"
    assert to_ed.body.startswith("Hello Ed,") and "for 60 minutes" in to_ed.body
