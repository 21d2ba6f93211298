"""The SSRF guard: refused address families, checked on the address connected to."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from delivery import services, ssrf, transport
from delivery.models import Delivery
from tests.delivery.target import Outcomes, Target, drive, send

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.45.6.7", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.10", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("224.0.0.251", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "private"),  # reserved 240/4; Python counts it private
    ("255.255.255.255", "private"),
    ("0.0.0.0", "unspecified"),  # noqa: S104
    ("192.0.2.1", "private"),  # documentation
    ("198.18.0.1", "private"),  # benchmarking
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fc00::1", "private"),
    ("fd12:3456:789a::1", "private"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "private"),
    ("::ffff:127.0.0.1", "loopback address (embedded in"),
    ("::ffff:10.1.2.3", "private address (embedded in"),
    ("64:ff9b::a9fe:a9fe", "link-local address (embedded in"),  # NAT64 of 169.254.169.254
    ("2002:c0a8:0101::1", "private address (embedded in"),  # 6to4 of 192.168.1.1
]
ALLOWED = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "64:ff9b::808:808"]


@pytest.fixture
def guard_on(settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_address_is_refused(guard_on: None, address: str, reason: str) -> None:
    with pytest.raises(ssrf.AddressRefused) as refused:
        ssrf.check_address(address)

    assert re.search(
        f"^refused: {re.escape(address)} is an? {re.escape(reason)}", str(refused.value)
    )


@pytest.mark.parametrize("address", ALLOWED)
def test_public_address_is_allowed(guard_on: None, address: str) -> None:
    ssrf.check_address(address)


def test_everything_is_allowed_when_private_networks_are(settings: Any) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    for address, _ in REFUSED:
        ssrf.check_address(address)


# --- end to end, against real sockets ---------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("family", ["ipv4", "ipv6", "localhost"])
def test_a_loopback_target_is_refused_and_the_owner_told(
    settings: Any, request: pytest.FixtureRequest, outcomes: Outcomes, family: str
) -> None:
    server: Target = request.getfixturevalue("target_v6" if family == "ipv6" else "target")
    url = server.url()
    if family == "localhost":
        url = url.replace("127.0.0.1", "localhost")
    endpoint, _ = services.create_endpoint(url=url)  # allowed while DEBUG
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False

    delivery = drive(send(endpoint, policy="chat_api_message"))

    assert server.received == []
    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 1
    loopback = "::1" if family == "ipv6" else "127.0.0.1"
    assert delivery.last_error == (
        f"refused: {loopback} is a loopback address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is off)"
    )
    assert delivery.attempt_log.get().error == delivery.last_error
    assert outcomes.failures == [(delivery.pk, delivery.last_error)]


@pytest.mark.django_db
def test_a_kept_alive_connection_is_checked_again(settings: Any, target: Target) -> None:
    endpoint, _ = services.create_endpoint(url=target.url())
    assert drive(send(endpoint)).status == Delivery.Status.DELIVERED  # pools a connection

    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    delivery = drive(send(endpoint))

    assert len(target.received) == 1
    assert delivery.last_error.startswith("refused: 127.0.0.1 is a loopback address")


class FakeDns:
    """Answers for one host name; counts the lookups; other names resolve as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, host: str, answers: list[list[str]]):
        self.host, self.answers, self.lookups = host, answers, 0
        real = socket.getaddrinfo

        def getaddrinfo(name: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if name != host:
                return real(name, port, *args, **kwargs)
            addresses = self.answers[min(self.lookups, len(self.answers) - 1)]
            self.lookups += 1
            return [
                (
                    socket.AF_INET6 if ipaddress.ip_address(a).version == 6 else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, port),
                )
                for a in addresses
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Addresses connected to; anything but loopback is refused without a packet."""
    seen: list[str] = []
    real = transport.urllib3_connection.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        seen.append(address[0])
        if not ipaddress.ip_address(address[0]).is_loopback:
            raise ConnectionRefusedError(111, "Connection refused")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(transport.urllib3_connection, "create_connection", create_connection)
    return seen


@pytest.mark.django_db
def test_the_connection_goes_to_the_checked_address_keeping_the_host_name(
    monkeypatch: pytest.MonkeyPatch, target: Target, connects: list[str]
) -> None:
    port = target.server.port
    dns = FakeDns(monkeypatch, "hooks.example.test", [["127.0.0.1"], ["10.9.9.9"]])
    endpoint, _ = services.create_endpoint(url=f"http://hooks.example.test:{port}/x")
    endpoint.url = target.url().replace("127.0.0.1", "hooks.example.test")
    services.update_endpoint(endpoint=endpoint, url=endpoint.url)

    delivery = drive(send(endpoint))

    assert delivery.status == Delivery.Status.DELIVERED
    assert dns.lookups == 1 and connects == ["127.0.0.1"]
    assert target.received[0].headers["Host"] == f"hooks.example.test:{port}"


@pytest.mark.django_db
def test_dns_rebinding_cannot_reach_a_private_address(
    settings: Any, monkeypatch: pytest.MonkeyPatch, target: Target, connects: list[str]
) -> None:
    # The first answer is public, every later one loopback: a resolver that
    # checks one answer and lets the connection resolve again is fooled.
    dns = FakeDns(monkeypatch, "rebind.example.test", [["93.184.215.14"], ["127.0.0.1"]])
    endpoint, _ = services.create_endpoint(
        url=target.url().replace("127.0.0.1", "rebind.example.test")
    )
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False

    delivery = drive(send(endpoint, policy="chat_api_typing"))

    assert dns.lookups == 1
    assert connects == ["93.184.215.14"]  # the checked address, not the rebound one
    assert target.received == []
    assert delivery.last_error == "connection refused"


@pytest.mark.django_db
def test_a_name_with_any_private_address_is_refused(
    settings: Any, monkeypatch: pytest.MonkeyPatch, connects: list[str]
) -> None:
    FakeDns(monkeypatch, "mixed.example.test", [["93.184.215.14", "10.0.0.7"]])
    endpoint, _ = services.create_endpoint(url="http://mixed.example.test/hook")
    settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS = False

    delivery = drive(send(endpoint))

    assert connects == []
    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 1
    assert delivery.last_error.startswith("refused: 10.0.0.7 is a private address")


# --- endpoint URLs ------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/hook", "http://", "https:///path", "example.com/hook",
     "javascript:alert(1)", "http://exa mple.com/", "http://example.com:0/", "http://[::1/"],
)  # fmt: skip
def test_an_endpoint_url_must_be_http_with_a_host(url: str) -> None:
    with pytest.raises(ValidationError):
        services.validate_endpoint_url(url)


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "http://bot:8080/webhook/abc", "https://203.0.114.9/x"],
)
def test_a_good_endpoint_url_passes(url: str) -> None:
    services.validate_endpoint_url(url)


def test_a_private_ip_literal_is_refused_as_an_endpoint_url(guard_on: None) -> None:
    with pytest.raises(ValidationError, match=r"10\.1\.1\.1 is a private address"):
        services.validate_endpoint_url("http://10.1.1.1/hook")


@pytest.mark.django_db
def test_create_endpoint_validates_the_url() -> None:
    with pytest.raises(ValidationError):
        services.create_endpoint(url="gopher://example.com/")
