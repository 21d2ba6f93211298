"""One URL check for every way a target URL is set: the service, the
management command, the admin form (and the model field behind it).

A host the C resolver reads as an IPv4 address in another spelling is
refused always; a canonical IP literal passes the SSRF guard as before.
"""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client as Browser

from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel, update_chat_api_channel
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

# Every spelling is 127.0.0.1 to the C resolver (socket.inet_aton, getaddrinfo).
NUMERIC = [
    ("http://2130706433:9001/", "2130706433"),
    ("http://0x7f000001/hook", "0x7f000001"),
    ("http://0X7F000001/hook", "0x7f000001"),
    ("http://0177.0.0.1/hook", "0177.0.0.1"),
    ("http://127.1/hook", "127.1"),
    ("http://0x7f.1/hook", "0x7f.1"),
    ("http://127.000.0.1/hook", "127.000.0.1"),
]
NOT_URLS = [
    "ftp://example.com/hook", "example.com/hook", "http://exa_mple.com/", "http://a..b/",
    # urlsplit reads the host evil.example, urllib3 (which sends) reads 127.0.0.1.
    "http://127.0.0.1\\@evil.example/", "https://chat.example.com/a|b",
]  # fmt: skip
GOOD = ["https://chat.example.com/hook", "http://integrator:9000/a3", "https://93.184.215.14/x"]
PRIVATE = ["http://127.0.0.1:9001/", "http://10.1.2.3/hook", "http://[::1]:9001/"]


def by_service(url: str) -> None:
    create_chat_api_channel(name="App", webhook_url=url)


def by_update(url: str) -> None:
    chat_api, _ = create_chat_api_channel(name="App", webhook_url="https://ok.example/x")
    update_chat_api_channel(
        chat_api=chat_api, name="App", webhook_url=url, chunked=False, active=True,
        agents=[], unique_message_ids=False,
    )  # fmt: skip


def by_command(url: str) -> None:
    try:
        call_command(
            "create_chat_api_channel", "--name", "App", "--webhook-url", url, stdout=StringIO()
        )
    except CommandError as error:
        raise ValidationError(str(error)) from error


def by_admin_form(url: str) -> None:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    answer = browser.post(
        "/admin/channels_api/chatapichannel/add/",
        {"name": "App", "webhook_url": url, "active": "on"},
        follow=True,
    )
    page = answer.content.decode()
    if "errorlist" in page:
        raise ValidationError(page)
    assert "signing-secret" in page, page


WAYS: list[Callable[[str], None]] = [by_service, by_update, by_command, by_admin_form]
MODES = {"production": False, "development": True}


@pytest.fixture(params=MODES, ids=list(MODES))
def mode(request: pytest.FixtureRequest, settings: Any) -> str:
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = MODES[request.param]
    return str(request.param)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(("url", "host"), NUMERIC)
def test_a_numeric_host_in_another_spelling_is_refused_always(
    mode: str, way: Callable[[str], None], url: str, host: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        way(url)

    assert "a.b.c.d" in str(refused.value) and f"{host} means 127.0.0.1" in str(refused.value)
    assert not ChatApiChannel.objects.filter(webhook_url=url).exists()


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("url", NOT_URLS)
def test_what_is_not_an_http_url_is_refused(
    mode: str, way: Callable[[str], None], url: str
) -> None:
    with pytest.raises(ValidationError):
        way(url)
    assert not ChatApiChannel.objects.filter(webhook_url=url).exists()


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("url", GOOD)
def test_a_good_url_is_accepted_every_way(mode: str, way: Callable[[str], None], url: str) -> None:
    way(url)
    assert ChatApiChannel.objects.filter(webhook_url=url).exists()


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("url", PRIVATE)
def test_a_private_ip_literal_is_refused_in_production_only(
    mode: str, way: Callable[[str], None], url: str
) -> None:
    if mode == "production":
        with pytest.raises(ValidationError, match="WEBHOOK_ALLOW_PRIVATE_NETWORKS is off"):
            way(url)
        assert not ChatApiChannel.objects.filter(webhook_url=url).exists()
    else:
        way(url)
        assert ChatApiChannel.objects.filter(webhook_url=url).exists()


def test_the_model_field_runs_the_same_check() -> None:
    with pytest.raises(ValidationError, match=r"a\.b\.c\.d"):
        ChatApiChannel(webhook_url="http://2130706433:9001/").clean_fields(
            exclude={"channel", "endpoint", "path_secret"}
        )
