"""Which targets outbound requests may reach (docs/delivery.md, "SSRF guard").

Unless ``WEBHOOK_ALLOW_PRIVATE_NETWORKS`` is true, a request may only connect
to a globally routable unicast address. The check runs where the socket is
made (``delivery.transport``): the host is resolved once, every address it
resolves to is checked, and the connection goes to a checked address, so a
DNS answer that changes between a check and the connect (DNS rebinding)
cannot slip through.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import cast
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class AddressRefused(Exception):
    """The target resolves to an address the guard does not allow.

    Deliberately not an ``OSError``: urllib3 and requests let it through
    unwrapped and unretried, so the caller can tell it from a network error.
    """


def private_networks_allowed() -> bool:
    return bool(settings.WEBHOOK_ALLOW_PRIVATE_NETWORKS)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, bool] | None:
    """The IPv4 address inside ``ip``, and whether it alone decides (mapped, NAT64)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, True
    if any(ip in net for net in _NAT64):
        # DNS64 answers every IPv4-only name this way on IPv6-only networks.
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), True
    if ip.sixtofour is not None:
        return ip.sixtofour, False
    if ip.teredo is not None:
        return ip.teredo[1], False
    return None


def why_refused(ip: Address) -> str | None:
    """Why ``ip`` is not a public target (``None`` when it is one)."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner, decides = embedded
            inner_reason = why_refused(inner)
            if inner_reason:
                return f"{inner_reason} (embedded in {ip})"
            if decides:
                return None
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a carrier-grade NAT (shared) address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "not a globally routable address"
    return None


def check_address(address: str) -> None:
    """Raise ``AddressRefused`` unless a request may connect to ``address``."""
    if private_networks_allowed():
        return
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    reason = why_refused(ip)
    if reason:
        raise AddressRefused(
            f"refused: {address} is {reason} (WEBHOOK_ALLOW_PRIVATE_NETWORKS is off)"
        )


# Django's URL rules with http/https, where a host name of one label (a
# container or service name: ``http://integrator:9000/``) is a host too, as
# ``localhost`` is for Django. Built from Django's own pattern.
_HOST = "(" + URLValidator.host_re + "|" + URLValidator.hostname_re + ")"
_URL_RULES = URLValidator(
    schemes=["http", "https"],
    regex=cast("re.Pattern[str]", URLValidator.regex).pattern.replace(
        URLValidator.host_re, _HOST, 1
    ),
    flags=re.IGNORECASE,
)


# The ASCII characters RFC 3986 allows in a URI (non-ASCII ones are an IDN
# host's or a path's, and Django's rules judge them).
_URL_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"
)


def _numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address the C resolver reads in ``host`` (``2130706433``,
    ``0x7f000001``, ``0177.0.0.1`` and ``127.1`` are all 127.0.0.1), if any."""
    if not host.isascii() or any(ch.isspace() for ch in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def stray_character(url: str) -> str | None:
    """The first ASCII character a URL may not hold unencoded (a backslash, a
    space, a quote, a control character), or None. Parsers disagree on URLs
    with such characters, so a check by one parser proves nothing about
    where another — a browser, an HTTP client — goes."""
    return next((ch for ch in url if ch.isascii() and ch not in _URL_CHARACTERS), None)


def validate_endpoint_url(url: str) -> None:
    """The one check of an outbound target URL, wherever it is set.

    Django's URL rules with http or https (a one-label host name is a host
    too); a host the resolver reads as an IPv4 address must be written a.b.c.d;
    a literal IP must pass the guard. Host names are resolved only when a
    request is made (see module doc).
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError as error:
        raise ValidationError(f"Not a valid URL: {error}.", code="invalid") from error
    if parts.scheme not in ("http", "https"):
        raise ValidationError("The URL must start with http:// or https://.", code="scheme")
    if not host:
        raise ValidationError("The URL must have a host.", code="host")
    if any(ch.isspace() for ch in url):
        raise ValidationError("The URL must not contain spaces.", code="invalid")
    stray = stray_character(url)
    if stray is not None:
        # Parsers disagree on such URLs: with a backslash, http://127.0.0.1\@evil.com/
        # is evil.com to urlsplit and 127.0.0.1 to urllib3, which sends the request.
        raise ValidationError(
            f"The URL must not contain {stray!r}; percent-encode it.", code="invalid"
        )
    numeric = _numeric_ipv4(host)
    if numeric is not None and str(numeric) != host:
        raise ValidationError(
            f"Write the IP address as four decimal numbers a.b.c.d: {host} means {numeric}.",
            code="address",
        )
    if port == 0:
        raise ValidationError("The URL's port must not be 0.", code="invalid")
    try:
        _URL_RULES(url)
    except ValidationError as error:
        raise ValidationError("Not a valid URL.", code="invalid") from error
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return
    try:
        check_address(str(literal))
    except AddressRefused as refused:
        raise ValidationError(str(refused), code="address") from refused
