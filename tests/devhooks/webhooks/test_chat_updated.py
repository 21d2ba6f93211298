"""chat_updated from each way visitor data changes that exists today: new
Chat API sender fields and a bot's CLIENT_INFO (the widget's contact form and
setContactInfo come with the widget)."""

from __future__ import annotations

import pytest

from agents.models import Agent, Chat
from devhooks.models import IntegrationSettings
from tests.bots.conftest import BotSetup
from tests.channels_api.conftest import Integrator
from tests.devhooks.conftest import bodies

pytestmark = pytest.mark.django_db


def test_new_chat_api_sender_fields_send_chat_updated(
    webhook: IntegrationSettings,
    integrator: Integrator,
    agent: Agent,
) -> None:
    assert integrator.say("Hi", name="Sam").status_code == 200  # first sight: no event
    assert bodies("chat_updated") == []

    assert integrator.say("My e-mail", email="sam@example.com").status_code == 200
    assert integrator.say("Again", email="sam@example.com").status_code == 200  # no change

    [body] = bodies("chat_updated")
    chat = Chat.objects.get()
    assert body["chat_id"] == chat.pk
    assert body["visitor"]["email"] == "sam@example.com" and body["visitor"]["name"] == "Sam"
    assert body["agent"] == {"id": 0, "name": "", "email": "", "phone": ""}  # nobody has it yet


def test_a_bots_client_info_sends_chat_updated(
    webhook: IntegrationSettings,
    bot: BotSetup,
) -> None:
    assert bot.client.say("Hello bot", sender_id="c-1").status_code == 200
    chat = bot.chat()

    response = bot.b2(
        {
            "event": "CLIENT_INFO",
            "client_id": str(chat.client_id),
            "chat_id": str(chat.pk),
            "name": "Bea",
            "phone": "+49 30 777",
        }
    )
    assert response.status_code == 200, response.content

    [body] = bodies("chat_updated")
    assert body["visitor"]["name"] == "Bea" and body["visitor"]["phone"] == "+49 30 777"
