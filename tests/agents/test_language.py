"""The agent pages' language (docs/translating.md): the agent's choice, else
the browser's, in English otherwise; the scripts' catalogue; the APIs stay
English."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.test import Client as Browser
from django.utils import translation
from django.utils.translation import ngettext_lazy
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, ApiToken, Chat
from config.text import TEXT_LIMIT
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

pytestmark = pytest.mark.django_db


def signed_in(agent: Agent, accept_language: str = "") -> Browser:
    page = Browser(headers={"Accept-Language": accept_language} if accept_language else {})
    page.force_login(agent)
    return page


def html_tag(body: str) -> str:
    found = re.search(r"<html[^>]*>", body)
    assert found, body[:200]
    return found.group(0)


def test_without_a_choice_the_pages_are_english() -> None:
    answer = Browser().get("/agent/login/")
    body = answer.content.decode()
    assert '<html lang="en" dir="ltr">' in body
    assert "<h1>Sign in</h1>" in body and "Forgot password?" in body


def test_the_browsers_language_is_followed_before_sign_in() -> None:
    answer = Browser(headers={"Accept-Language": "de-DE,de;q=0.9,en;q=0.5"}).get("/agent/login/")
    body = answer.content.decode()
    assert html_tag(body) == '<html lang="de" dir="ltr">'
    assert "<h1>Anmelden</h1>" in body and "Passwort vergessen?" in body
    assert answer["Content-Language"] == "de"
    assert "Accept-Language" in answer["Vary"]


def test_a_language_the_pages_do_not_speak_falls_back_to_english() -> None:
    body = Browser(headers={"Accept-Language": "ja"}).get("/agent/login/").content.decode()
    assert html_tag(body) == '<html lang="en" dir="ltr">' and "<h1>Sign in</h1>" in body


def test_the_agents_choice_overrides_the_browser(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="ru")
    body = signed_in(agent, "de").get("/agent/").content.decode()
    assert html_tag(body) == '<html lang="ru" dir="ltr">'
    assert "Очередь" in body and "Выберите чат" in body and "Warteschlange" not in body


def test_a_signed_in_agent_without_a_choice_follows_the_browser(agent: Agent) -> None:
    body = signed_in(agent, "fr").get("/agent/").content.decode()
    assert "File d'attente" in body and "Choisissez une discussion" in body


def test_arabic_pages_are_written_right_to_left(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="ar")
    body = signed_in(agent).get("/agent/settings/").content.decode()
    assert html_tag(body) == '<html lang="ar" dir="rtl">'
    assert "<h1>الإعدادات</h1>" in body


def test_the_settings_page_saves_the_language_and_blank_follows_the_browser(
    agent: Agent,
) -> None:
    page = signed_in(agent, "es")
    form = {"name": agent.name, "photo_url": "", "language": "pt-br"}
    body = page.post("/agent/settings/", form, follow=True).content.decode()
    agent.refresh_from_db()
    assert agent.language == "pt-br"
    assert "Suas configurações foram salvas." in body
    assert '<option value="pt-br" lang="pt-br" selected>Português (Brasil)</option>' in body

    body = page.post("/agent/settings/", {**form, "language": ""}, follow=True).content.decode()
    agent.refresh_from_db()
    assert agent.language == ""
    assert "Tu configuración está guardada." in body  # the browser's Spanish again


def test_a_language_not_in_the_list_is_refused(agent: Agent) -> None:
    form = {"name": agent.name, "photo_url": "", "language": "xx"}
    signed_in(agent).post("/agent/settings/", form, follow=True)
    agent.refresh_from_db()
    assert agent.language == ""


def test_the_language_lasts_only_for_the_request(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="de")
    before = translation.get_language()
    signed_in(agent).get("/agent/")
    assert translation.get_language() == before


def test_the_apis_answer_in_english_whatever_the_browser_asks(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="de")
    wrong = {"Authorization": "Token wrong"}
    english = Browser().get("/api/agent/v1/chats", headers=wrong)
    answer = signed_in(agent, "de").get("/api/agent/v1/chats", headers=wrong)
    assert answer.status_code == english.status_code == 401
    assert answer.json() == english.json()
    assert "Content-Language" not in answer


def test_the_admin_follows_djangos_own_translations() -> None:
    body = Browser(headers={"Accept-Language": "de"}).get("/admin/login/").content.decode()
    assert "Anmelden" in body


def test_dates_are_written_in_the_pages_language(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="de")
    made = datetime(2026, 3, 5, 9, tzinfo=UTC)
    ApiToken.objects.create(agent=agent, key_hash="x" * 64, created=made)
    body = signed_in(agent).get("/agent/settings/").content.decode()
    assert "05 Mär 2026 09:00" in body


def test_the_counts_take_each_languages_plural_forms() -> None:
    def said(language: str, count: int) -> str:
        with translation.override(language):
            return translation.ngettext("%(count)s message", "%(count)s messages", count) % {
                "count": count
            }

    assert [said("ru", n) for n in (1, 3, 5, 21)] == [
        "1 сообщение",
        "3 сообщения",
        "5 сообщений",
        "21 сообщение",
    ]
    assert [said("ar", n) for n in (0, 1, 2, 3, 11, 102)] == [
        "0 رسالة",
        "1 رسالة واحدة",
        "2 رسالتان",
        "3 رسائل",
        "11 رسالة",
        "102 رسالة",
    ]
    assert said("fr", 0) == "0 message" and said("de", 0) == "0 Nachrichten"


def test_the_scripts_catalogue_is_served_here_and_kept(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="de")
    body = signed_in(agent).get("/agent/").content.decode()
    address = re.search(r'<script src="(/agent/jsi18n/de\.js\?v=[0-9a-f]{12})" defer>', body)
    assert address, "the page loads its language's catalogue"
    answer = Browser().get(address.group(1))
    script = answer.content.decode()
    assert answer.status_code == 200 and "javascript" in answer["Content-Type"]
    assert "Tastenk\\u00fcrzel" in script or "Tastenkürzel" in script
    assert "max-age=31536000" in answer["Cache-Control"] and "immutable" in answer["Cache-Control"]
    assert Browser().get("/agent/jsi18n/xx.js").status_code == 404


def test_the_lists_and_the_chat_speak_the_agents_language(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="es")
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Ana")
    chat = services.post_client_message(client=client, content=text("Hola")).chat
    page = signed_in(agent)
    body = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert "Responder" in body and "Pulsa <strong>Responder</strong> para tomar este chat." in body
    live = page.get("/agent/live", {"chat": chat.pk, "after": 0}).json()
    assert "Cola" in live["lists_html"] and "Datos del cliente" not in live["lists_html"]
    assert "Transcripción" in live["chat"]["panel_html"]


def test_a_chats_state_and_a_members_role_are_said_in_the_agents_language(agent: Agent) -> None:
    # Labels of the models' choices, shown on the pages (the chat's head, the Team).
    Agent.objects.filter(pk=agent.pk).update(language="ru", role=Agent.Role.SUPERVISOR)
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Яна")
    chat = services.post_client_message(client=client, content=text("Привет")).chat
    services.accept_chat(chat=chat, agent=agent)
    page = signed_in(agent)
    head = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert '<span class="state state-active">Активен</span>' in head
    assert ">супервайзер<" in page.get("/agent/team/").content.decode()
    with translation.override("en"):  # the choice itself is untouched
        assert Chat.objects.get(pk=chat.pk).get_state_display() == "Active"


def test_a_second_agent_keeps_their_own_language() -> None:
    russian = AgentFactory.create(language="ru")
    english = AgentFactory.create()
    assert "Очередь" in signed_in(russian).get("/agent/").content.decode()
    assert "Queue" in signed_in(english).get("/agent/").content.decode()


@pytest.mark.parametrize("code", [code for code, _ in settings.LANGUAGES])
def test_every_page_speaks_every_language(code: str) -> None:
    supervisor = AgentFactory.create(role="supervisor", language=code)
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[supervisor]))
    chat = services.post_client_message(client=client, content=text("Hi")).chat
    page = signed_in(supervisor)
    with translation.override(code):
        expected = {
            "/agent/": translation.gettext("Queue"),
            f"/agent/chats/{chat.pk}/": translation.gettext("Take this chat (R)"),
            "/agent/history/": translation.gettext("Finished chats"),
            "/agent/canned/": translation.gettext("New reply"),
            "/agent/team/": translation.gettext("Waiting for a reply"),
            "/agent/settings/": translation.gettext("Language of these pages"),
            "/agent/reports/": translation.gettext("Arrivals by weekday and hour"),
            "/agent/settings/two-factor/": translation.gettext("Set up two-factor sign-in"),
        }
    for address, words in expected.items():
        answer = page.get(address)
        body = answer.content.decode()
        assert answer.status_code == 200, address
        assert f'<html lang="{code}"' in body and words in body, address


def test_an_admin_sets_an_agents_language_in_the_admin() -> None:
    admin = AgentFactory.create(role="admin")
    agent = AgentFactory.create()
    page = signed_in(admin)
    body = page.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert '<select name="language"' in body and ">Русский</option>" in body


# The service layer's refusals (agents/services/errors.py): said in the
# page's language on the pages, in English on the APIs.


def test_a_page_refusal_is_said_in_the_agents_language(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="de")
    form = {"name": agent.name, "photo_url": "ftp://example.com/me.png", "language": "de"}
    body = signed_in(agent, "en").post("/agent/settings/", form, follow=True).content.decode()
    assert "Das Foto muss eine http://- oder https://-URL sein." in body
    assert "the photo must be" not in body
    agent.refresh_from_db()
    assert agent.photo_url == ""


def test_a_transfers_and_a_reassignments_refusal_are_said_in_the_pages_language(
    agent: Agent,
) -> None:
    stranger = AgentFactory.create(is_online=True)  # not of the chat's channel
    boss = AgentFactory.create(role=Agent.Role.ADMIN)
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("Hallo")).chat
    services.accept_chat(chat=chat, agent=agent)
    with translation.override("de"):
        for attempt in (
            lambda: services.transfer_chat(chat=chat, agent=agent, to_agent=stranger),
            lambda: services.reassign_chat(chat=chat, by=boss, to_agent=stranger),
        ):
            with pytest.raises(services.ServiceError) as refused:
                attempt()
            assert refused.value.message == "Dieser Agent beantwortet diesen Kanal nicht."


def test_a_page_refusal_follows_the_browser_and_fills_in_its_number(agent: Agent) -> None:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("Hallo")).chat
    services.accept_chat(chat=chat, agent=agent)
    answer = signed_in(agent, "de-DE,de;q=0.9").post(
        f"/agent/chats/{chat.pk}/messages",
        {"text": "x" * (TEXT_LIMIT + 1)},
        headers={"X-Requested-With": "fetch"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "code": "invalid_request",
        "message": f"Schreiben Sie zuerst eine Nachricht mit bis zu {TEXT_LIMIT} Zeichen.",
    }


@pytest.mark.parametrize(
    ("days", "says"),
    [
        (1, "to: отчёт охватывает не больше 1 дня"),
        (3, "to: отчёт охватывает не больше 3 дней"),
        (21, "to: отчёт охватывает не больше 21 дня"),
        (366, "to: отчёт охватывает не больше 366 дней"),
    ],
)
def test_a_refusal_with_a_number_takes_the_languages_plural_form(days: int, says: str) -> None:
    error = services.ServiceError(
        ngettext_lazy(
            "to: a report covers at most %(days)d day",
            "to: a report covers at most %(days)d days",
            "days",
        ),
        days=days,
    )
    with translation.override("ru"):
        assert error.message == str(error) == says
    assert error.message.endswith(f"{days} day" if days == 1 else f"{days} days")


def test_the_agent_api_refuses_in_english_whatever_the_agents_language(
    agent: Agent, api: APIClient
) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="de")
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("Hallo")).chat
    services.finish_chat(chat=chat)
    page = signed_in(agent, "de")
    refused = page.post(f"/agent/chats/{chat.pk}/accept", headers={"X-Requested-With": "fetch"})
    german = "Der Chat ist im Zustand „finished“ und kann nicht angenommen werden."
    assert refused.json()["error"]["message"] == german
    answer = api.post(f"/api/agent/v1/chats/{chat.pk}/accept", HTTP_ACCEPT_LANGUAGE="de")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {"code": "invalid_state", "message": "the chat is finished and cannot be accepted"}
    }
    assert "Content-Language" not in answer


@pytest.mark.parametrize(
    ("spoken", "named"),
    [("de", "Deutsch"), ("pt-BR", "Português (Brasil)"), ("ar", "العربية"), ("", ""), ("tlh", "")],
)
def test_the_visitor_card_names_the_chats_language_in_itself(
    agent: Agent, spoken: str, named: str
) -> None:
    Agent.objects.filter(pk=agent.pk).update(language="ru")
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]))
    chat = services.post_client_message(client=client, content=text("Hallo")).chat
    Chat.objects.filter(pk=chat.pk).update(language=spoken)
    page = signed_in(agent)
    body = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    live = page.get("/agent/live", {"chat": chat.pk, "after": 0}).json()["chat"]["panel_html"]
    shown = f'<dt>Язык</dt><dd data-testid="chat-language" lang="{spoken}" dir="auto">{named}</dd>'
    for html in (body, live):
        if named:
            assert shown in html
        else:
            assert 'data-testid="chat-language"' not in html
