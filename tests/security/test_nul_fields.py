"""A NUL character in a form or query field is refused with a 400, never
reaching the database (PostgreSQL's text refuses it: a 500), on every page
and API path that reads form fields (config/form_fields.py); a multipart
form too (the pages' scripts send FormData); the live poll takes no
impossible message id."""

from __future__ import annotations

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent, CannedReply, Chat, ChatSeen, Department, Message
from agents.tokens import issue_token
from tests.agents.test_files import png
from tests.factories import AgentFactory, ChannelFactory, ClientFactory, page_of, text

pytestmark = pytest.mark.django_db

NUL = "bad\x00text"


@pytest.fixture
def chat(agent: Agent) -> Chat:
    client = ClientFactory.create(channel=ChannelFactory.create(agents=[agent]), name="Ann")
    chat = services.post_client_message(client=client, content=text("hi")).chat
    return services.accept_chat(chat=chat, agent=agent)


@pytest.fixture
def page(agent: Agent) -> Browser:
    browser = page_of(agent)
    return browser


def test_every_form_of_the_pages_refuses_a_nul(page: Browser, chat: Chat) -> None:
    Department.objects.create(name="Billing")
    department = Department.objects.get()
    forms = {
        "/agent/canned/": {"shortcut": "hello", "text": NUL},
        "/agent/settings/": {"name": NUL, "photo_url": ""},
        f"/agent/chats/{chat.pk}/messages": {"text": NUL},
        f"/agent/chats/{chat.pk}/transfer": {"to": f"department:{department.pk}", "note": NUL},
        f"/agent/chats/{chat.pk}/transcript": {"to": f"me{NUL}@acme.example"},
        f"/agent/chats/{chat.pk}/blacklist": {"reason": NUL},
    }
    for path, fields in forms.items():
        answer = page.post(path, fields)
        assert answer.status_code == 400, path
        fetched = page.post(path, fields, headers={"X-Requested-With": "fetch"})
        assert fetched.status_code == 400, path
        assert fetched.json()["error"]["message"] == "a field holds a NUL character", path
    chat.refresh_from_db()
    assert (chat.state, chat.blacklisted, chat.department_id) == ("active", False, None)
    assert not CannedReply.objects.exists()
    assert chat.messages.count() == 1


def test_queries_with_a_nul_are_400(page: Browser) -> None:
    for path in ("/agent/history/?q=%00", "/agent/canned/search?q=%00a", "/agent/?x=%00"):
        assert page.get(path).status_code == 400, path


def test_the_apis_multipart_fields_refuse_a_nul_too(agent: Agent, chat: Chat) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=agent)}")
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("box.png", png(), content_type="image/png")
    answer = api.post(
        f"/api/agent/v1/chats/{chat.pk}/files", {"file": upload, "text": NUL}, format="multipart"
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "a field holds a NUL character"
    assert not chat.messages.filter(author=Message.Author.AGENT).exists()


def test_the_live_poll_takes_no_impossible_message_id(page: Browser, chat: Chat) -> None:
    last = chat.messages.get().pk
    for after in ("99999999999999999999", "9223372036854775807", str(last + 1000)):
        answer = page.get(f"/agent/live?chat={chat.pk}&after={after}&seen=1")
        assert answer.status_code == 200, after
    seen = ChatSeen.objects.get(chat=chat)
    assert seen.last_seen_message_id == last  # never past the chat's last message
    services.post_client_message(client=chat.client, content=text("new"))
    other = AgentFactory.create()  # (an unrelated agent's poll is a 404, not a 500)
    stranger = page_of(other)
    assert stranger.get(f"/agent/live?chat={chat.pk}&after=1&seen=1").status_code == 404
