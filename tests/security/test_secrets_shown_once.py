"""A new signing secret is shown once, on a page no cache keeps, and never
travels in a cookie (Django's messages cookie is signed, not encrypted)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.messages.storage.base import Message
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpRequest
from django.test import Client as Browser

from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from delivery import services
from delivery.models import Endpoint
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser() -> Browser:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    return browser


def shown_secret(page: Any) -> str:
    [secret] = re.findall(
        r'<code class="signing-secret">(whsec_[^<]+)</code>', page.content.decode()
    )
    return secret


def onward(browser: Browser, page: Any) -> list[Any]:
    """Follow the page's onward link, then open the admin's home (where a
    message left in the cookie or the session would be shown)."""
    link = re.search(r'href="([^"]+)" data-testid="onward"', page.content.decode())
    assert link, page.content.decode()
    return [browser.get(link.group(1)), browser.get("/admin/")]


def messages_in(cookie: str) -> list[Message]:
    """The messages a cookie value carries, as Django's messages cookie."""
    request = HttpRequest()
    request.COOKIES[CookieStorage.cookie_name] = cookie
    return list(CookieStorage(request))


def assert_kept_nowhere(browser: Browser, responses: list[Any], secret: str) -> None:
    for response in responses:
        for name, morsel in response.cookies.items():
            assert secret not in morsel.value, name
            assert all(secret not in str(message) for message in messages_in(morsel.value)), name
        if response is not responses[0]:
            assert secret not in response.content.decode()
    session = dict(browser.session.items())
    assert secret not in json.dumps(session, default=str)


def test_a_new_chat_api_channel_shows_its_secret_once(browser: Browser) -> None:
    page = browser.post(
        "/admin/channels_api/chatapichannel/add/",
        {"name": "Mobile app", "webhook_url": "https://chat.example.com/hook", "active": "on"},
        follow=True,
    )

    chat_api = ChatApiChannel.objects.get()
    secret = shown_secret(page)
    assert secret == chat_api.endpoint.secret
    assert "no-store" in page["Cache-Control"]
    channel_page, home = onward(browser, page)
    assert channel_page.request["PATH_INFO"] == (
        f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/"
    )
    assert chat_api.endpoint_url in channel_page.content.decode()
    assert_kept_nowhere(browser, [page, channel_page, home], secret)


def test_rotating_a_chat_api_channels_secret_shows_it_once(browser: Browser) -> None:
    chat_api, old = create_chat_api_channel(name="App", webhook_url="https://a.example/x")

    page = browser.post(
        "/admin/channels_api/chatapichannel/",
        {"action": "rotate_secret", "_selected_action": [chat_api.pk]},
        follow=True,
    )

    secret = shown_secret(page)
    assert secret == ChatApiChannel.objects.get().endpoint.secret != old
    assert "no-store" in page["Cache-Control"]
    assert_kept_nowhere(browser, [page, *onward(browser, page)], secret)


def test_a_new_endpoint_shows_its_secret_once(browser: Browser) -> None:
    page = browser.post(
        "/admin/delivery/endpoint/add/",
        {"url": "https://crm.example.com/hook", "active": "on"},
        follow=True,
    )

    secret = shown_secret(page)
    assert secret == Endpoint.objects.get().secret and "no-store" in page["Cache-Control"]
    assert_kept_nowhere(browser, [page, *onward(browser, page)], secret)


def test_rotating_an_endpoints_secret_shows_it_once(browser: Browser) -> None:
    endpoint, _ = services.create_endpoint(url="https://crm.example.com/hook")

    page = browser.post(
        "/admin/delivery/endpoint/",
        {"action": "rotate_secret", "_selected_action": [endpoint.pk]},
        follow=True,
    )

    secret = shown_secret(page)
    assert secret == Endpoint.objects.get().secret and "no-store" in page["Cache-Control"]
    assert_kept_nowhere(browser, [page, *onward(browser, page)], secret)


def test_the_secret_page_is_reached_by_a_redirect_and_a_reload_changes_nothing(
    browser: Browser,
) -> None:
    """Post/Redirect/Get: reloading the page that shows a rotated secret
    neither rotates it again (which would end the old secret's grace period
    at once) nor shows it again."""
    endpoint, _ = services.create_endpoint(url="https://crm.example.com/hook")

    answer = browser.post(
        "/admin/delivery/endpoint/",
        {"action": "rotate_secret", "_selected_action": [endpoint.pk]},
    )
    page = browser.get(answer["Location"])
    again = browser.get(answer["Location"])

    assert answer.status_code == 303 and answer["Location"].startswith(
        "/admin/delivery/endpoint/new-secret/"
    )
    secret = shown_secret(page)
    assert secret == Endpoint.objects.get().secret
    assert again.status_code == 410 and "no-store" in again["Cache-Control"]
    assert "has been shown already" in again.content.decode() and "whsec_" not in (
        again.content.decode()
    )
    assert Endpoint.objects.get().secret == secret  # not rotated a second time
