"""Consent in the widget (docs/widget.md, "Consent"): a channel's text the
visitor accepts before a chat's first message, refused without it, kept
with the chat and shown to agents, in the agent API and in an export."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents import privacy, services
from agents.models import Agent, AuditEntry, Chat
from devhooks.models import WidgetChannel
from tests.devhooks.widget.test_admin_and_commands import admin_browser, form  # noqa: F401
from tests.devhooks.widget.test_api import (  # noqa: F401 (fixtures)
    Visitor,
    alice,
    billing,
    generous_limits,
    vera,
    visitor_count,
    widget,
)
from tests.factories import page_of

pytestmark = pytest.mark.django_db

TEXT = "We keep this chat for 90 days to answer you."


@pytest.fixture
def asking(widget: WidgetChannel) -> WidgetChannel:  # noqa: F811
    WidgetChannel.objects.filter(pk=widget.pk).update(consent_text=TEXT, consent_version=3)
    widget.refresh_from_db()
    return widget


@pytest.fixture
def consented(asking: WidgetChannel, vera: Visitor) -> Chat:  # noqa: F811
    """Vera's chat, its first message accepting version 3."""
    vera.ok("message", text="Hi", consent_version=3)
    chat = Chat.objects.get()
    assert chat.consent_version == 3 and chat.consent_at is not None
    return chat


def refusal(answer: Any) -> dict[str, str]:
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert list(body) == ["error"]
    error: dict[str, str] = body["error"]
    return error


def test_the_config_carries_the_text_and_its_version_or_null(
    widget: WidgetChannel,  # noqa: F811
) -> None:
    assert Visitor(widget).ok("session")["config"]["consent"] is None

    WidgetChannel.objects.filter(pk=widget.pk).update(consent_text=TEXT, consent_version=3)

    assert Visitor(widget).ok("session")["config"]["consent"] == {"text": TEXT, "version": 3}


@pytest.mark.parametrize("accepted", [None, 2, 4], ids=["none", "an older version", "a later one"])
def test_a_first_message_without_the_current_versions_acceptance_is_refused(
    asking: WidgetChannel,
    vera: Visitor,  # noqa: F811
    accepted: int | None,
) -> None:
    body = {} if accepted is None else {"consent_version": accepted}

    error = refusal(vera.post("message", text="Hi", **body))

    assert error == {
        "code": "consent_required",
        "message": "accept the consent text (version 3) before the first message",
    }
    assert not Chat.objects.exists() and visitor_count() == 0


def test_the_acceptance_is_kept_with_the_chat_once_and_asked_again_for_a_new_chat(
    consented: Chat,
    vera: Visitor,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:
    chat, first_at = consented, consented.consent_at

    # Inside the chat nothing more is asked, and nothing changes.
    vera.ok("message", text="Still there?")
    chat.refresh_from_db()
    assert (chat.consent_version, chat.consent_at) == (3, first_at)

    # A new chat after this one ends asks again.
    services.accept_chat(chat=chat, agent=alice)
    services.finish_chat(chat=chat, agent=alice)
    assert refusal(vera.post("message", text="Me again"))["code"] == "consent_required"
    vera.ok("message", text="Me again", consent_version=3)
    assert Chat.objects.filter(consent_version=3).count() == 2


def test_a_widget_without_a_text_asks_nothing_and_keeps_nothing(
    widget: WidgetChannel,  # noqa: F811
    vera: Visitor,  # noqa: F811
) -> None:
    vera.ok("message", text="Hi", consent_version=7)

    chat = Chat.objects.get()
    assert (chat.consent_version, chat.consent_at) == (None, None)


@pytest.mark.parametrize("sent", ["3", 3.5, True, -1, [3]])
def test_a_version_that_is_no_whole_number_is_refused(
    asking: WidgetChannel,
    vera: Visitor,  # noqa: F811
    sent: Any,
) -> None:
    error = refusal(vera.post("message", text="Hi", consent_version=sent))

    assert error == {
        "code": "invalid_request",
        "message": "consent_version must be a whole number",
    }


def test_a_new_text_in_the_admin_is_a_new_version_and_is_audited(
    admin_browser: Browser,  # noqa: F811
    widget: WidgetChannel,  # noqa: F811
) -> None:
    change = f"/admin/devhooks/widgetchannel/{widget.pk}/change/"
    # The admin's page shows the text's field and its version.
    assert 'name="consent_text"' in admin_browser.get(change).content.decode()

    admin_browser.post(change, form(name="Shop", title="Talk to us", consent_text=TEXT))
    widget.refresh_from_db()
    assert (widget.consent_text, widget.consent_version) == (TEXT, 1)

    admin_browser.post(change, form(name="Shop", title="Hello", consent_text=TEXT))
    widget.refresh_from_db()
    assert widget.consent_version == 1  # other settings changed, not the text

    admin_browser.post(change, form(name="Shop", title="Hello", consent_text=TEXT + " Thanks."))
    widget.refresh_from_db()
    assert widget.consent_version == 2
    fields = [
        entry.detail["fields"] for entry in AuditEntry.objects.filter(action="channel.changed")
    ]
    assert sum("consent_text" in changed.split(",") for changed in fields) == 2


def test_agents_see_the_consent_in_the_panel_the_api_and_the_export(
    consented: Chat,
    alice: Agent,  # noqa: F811
) -> None:
    chat = consented
    assert chat.consent_at is not None
    at = chat.consent_at.isoformat()

    panel = page_of(alice).get(f"/agent/chats/{chat.pk}/").content.decode()
    assert "Consent</dt>" in panel and "version 3 accepted at" in panel
    assert f'datetime="{at}"' in panel

    api = APIClient()
    api.force_authenticate(alice)
    detail = api.get(f"/api/agent/v1/chats/{chat.pk}").json()
    assert detail["consent"] == {"version": 3, "accepted_at": at}

    exported = privacy.export_client(chat.client, by="command line")
    assert exported["chats"][0]["consent"] == {"version": 3, "accepted_at": at}
    json.dumps(exported)  # as the export is written out


def test_a_chat_without_consent_says_nothing_of_it(
    widget: WidgetChannel,  # noqa: F811
    vera: Visitor,  # noqa: F811
    alice: Agent,  # noqa: F811
) -> None:
    vera.ok("message", text="Hi")
    chat = Chat.objects.get()

    panel = page_of(alice).get(f"/agent/chats/{chat.pk}/").content.decode()
    api = APIClient()
    api.force_authenticate(alice)

    assert "Consent</dt>" not in panel
    assert api.get(f"/api/agent/v1/chats/{chat.pk}").json()["consent"] is None
