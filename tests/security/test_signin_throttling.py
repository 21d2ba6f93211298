"""Sign-in throttling (django-axes) on the agent pages and the admin: after
too many failures for one account OR from one address, sign-in there is
refused for a while, with a page that says so."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client as Browser
from django.test import RequestFactory

from agents.models import Agent
from config.signin import client_address, sender
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

PASSWORD = "agent-password"  # tests.factories.AgentFactory
SIGN_IN = {"agent": ("/agent/login/", "/agent/"), "admin": ("/admin/login/", "/admin/")}


@pytest.fixture(params=SIGN_IN, ids=list(SIGN_IN))
def page(request: pytest.FixtureRequest) -> tuple[str, str]:
    return SIGN_IN[request.param]


def staff(email: str) -> Agent:
    return AgentFactory.create(email=email, role="admin")


def sign_in(
    page: tuple[str, str], email: str, password: str, address: str = "203.0.113.1", **meta: Any
) -> Any:
    login, home = page
    return Browser().post(
        login, {"username": email, "password": password, "next": home}, REMOTE_ADDR=address, **meta
    )


def signed_in(answer: Any, page: tuple[str, str]) -> bool:
    return answer.status_code == 302 and answer["Location"] == page[1]


def cool_off_minutes() -> int:
    return max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))


def locked(answer: Any) -> bool:
    text = answer.content.decode()
    minutes = cool_off_minutes()
    return answer.status_code == 429 and (
        f"Sign-in is locked for {minutes} minute" in text and 'data-testid="signin-locked"' in text
    )


def fail_until_locked(page: tuple[str, str], email: str, address: str = "203.0.113.1") -> None:
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(1, limit + 1):
        answer = sign_in(page, email, "wrong password", address)
        assert locked(answer) == (attempt == limit), (attempt, answer.status_code)


def test_the_right_password_is_refused_too_after_repeated_failures(page: tuple[str, str]) -> None:
    staff("ann@example.com")

    fail_until_locked(page, "ann@example.com")
    answer = sign_in(page, "ann@example.com", PASSWORD)

    assert locked(answer) and not signed_in(answer, page)
    assert "sessionid" not in answer.cookies
    assert answer["Retry-After"] == str(cool_off_minutes() * 60)


def test_another_account_from_another_address_is_not_affected(page: tuple[str, str]) -> None:
    staff("ann@example.com")
    staff("bob@example.com")
    fail_until_locked(page, "ann@example.com", address="203.0.113.1")

    assert signed_in(sign_in(page, "bob@example.com", PASSWORD, "198.51.100.9"), page)
    # The lock holds for the account from anywhere, and for the address for anyone.
    assert locked(sign_in(page, "ann@example.com", PASSWORD, "198.51.100.9"))
    assert locked(sign_in(page, "bob@example.com", PASSWORD, "203.0.113.1"))


def test_one_address_trying_many_accounts_is_locked(page: tuple[str, str]) -> None:
    staff("bob@example.com")
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(page, f"guess{n}@example.com", "wrong password", "203.0.113.1")

    assert locked(sign_in(page, "bob@example.com", PASSWORD, "203.0.113.1"))
    assert signed_in(sign_in(page, "bob@example.com", PASSWORD, "198.51.100.9"), page)


def test_sign_in_works_again_after_the_cool_off(page: tuple[str, str], settings: Any) -> None:
    settings.AXES_COOLOFF_TIME = timedelta(seconds=2)
    # Five sign-ins must fit in the cool-off: with the slow default hash a
    # busy machine took 1.5 s each, and the first failures expired before the
    # fifth (the lock never came).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    staff("ann@example.com")
    fail_until_locked(page, "ann@example.com")
    assert locked(sign_in(page, "ann@example.com", PASSWORD))

    time.sleep(2.1)

    assert signed_in(sign_in(page, "ann@example.com", PASSWORD), page)


def test_behind_a_proxy_clients_are_told_apart(page: tuple[str, str], settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    staff("bob@example.com")
    proxy = "10.0.0.2"  # every request comes from the proxy
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(
            page, f"guess{n}@example.com", "wrong", proxy,
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.1",  # a forged entry, then the proxy's
        )  # fmt: skip

    assert locked(
        sign_in(page, "bob@example.com", PASSWORD, proxy, HTTP_X_FORWARDED_FOR="203.0.113.1")
    )
    other = sign_in(page, "bob@example.com", PASSWORD, proxy, HTTP_X_FORWARDED_FOR="203.0.113.50")
    assert signed_in(other, page)


@pytest.mark.parametrize(
    ("proxies", "forwarded", "address"),
    [
        (0, "198.51.100.1", "10.0.0.2"),  # no proxy: the header is the client's word
        (1, "198.51.100.1", "198.51.100.1"),
        (1, "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # the left entry is forged
        (2, "6.6.6.6, 198.51.100.1, 10.0.0.9", "198.51.100.1"),
        (2, "198.51.100.1", "10.0.0.2"),  # fewer entries than proxies: only the peer is known
        (1, "not-an-address", "10.0.0.2"),
        (1, "2001:db8::7", "2001:db8::7"),
    ],
)
def test_the_client_address(proxies: int, forwarded: str, address: str, settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)

    assert client_address(request) == address


@pytest.mark.parametrize(
    ("peer", "counted_as"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("::ffff:203.0.113.9", "203.0.113.9"),  # an IPv4 peer on a dual-stack bind
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
    ],
)
def test_the_sender_the_limits_count(peer: str, counted_as: str, settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 0
    assert sender(RequestFactory().get("/", REMOTE_ADDR=peer)) == counted_as
