"""Sign-in throttling with django-axes (docs/operations.md, "Sign-in").

After ``SIGNIN_FAILURE_LIMIT`` failed sign-ins for one account, or from one
address, further sign-ins there are refused for ``SIGNIN_COOLOFF_MINUTES``,
on the agent pages and in the admin alike.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any

from axes.helpers import get_client_username, get_cool_off
from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_address(request: HttpRequest) -> str:
    """The address a sign-in comes from (AXES_CLIENT_IP_CALLABLE).

    With ``TRUSTED_PROXY_COUNT`` proxies in front of the web process, each
    appending to ``X-Forwarded-For``, the client is the entry that many places
    from the right: entries further left were sent by the client and may be
    forged. With none, it is the peer of the connection.
    """
    peer = str(request.META.get("REMOTE_ADDR") or "")
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return peer
    header = str(request.META.get("HTTP_X_FORWARDED_FOR") or "")
    forwarded = [part.strip() for part in header.split(",") if part.strip()]
    if len(forwarded) < count:
        return peer  # not through all the proxies: only the peer is known
    try:
        return str(ipaddress.ip_address(forwarded[-count]))
    except ValueError:
        return peer


def sender(request: HttpRequest) -> str:
    """Who sends, for the limits: the address, or an IPv6 address's /64
    (one customer's network; its addresses cost an attacker nothing)."""
    address = client_address(request)
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if parsed.version == 6 and parsed.ipv4_mapped:  # ::ffff:1.2.3.4 on a dual-stack bind
        return str(parsed.ipv4_mapped)
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return address


def lockout_parameters(
    request_or_attempt: Any, credentials: dict[str, Any] | None = None
) -> list[str]:
    """What a failed sign-in counts against (AXES_LOCKOUT_PARAMETERS): the
    account and the address. A single sign-on names no account: counted by
    one shared empty name, five refused ones anywhere would lock everyone's
    single sign-on, so it counts against its address only."""
    if isinstance(request_or_attempt, HttpRequest):
        username = get_client_username(request_or_attempt, credentials)
    else:  # a stored attempt (the admin's list, a reset)
        username = request_or_attempt.username
    return ["username", "ip_address"] if username else ["ip_address"]


def locked_out(request: HttpRequest, *args: Any) -> HttpResponse:
    """The page for a refused sign-in (AXES_LOCKOUT_CALLABLE): 429, and for how long."""
    cool_off = get_cool_off(request)
    minutes = max(1, math.ceil(cool_off.total_seconds() / 60)) if cool_off else None
    context: dict[str, Any] = {"minutes": minutes, "title": "Sign-in locked"}
    if request.path.startswith("/admin/"):
        context.update(admin.site.each_context(request))
        template = "admin/signin_locked.html"
    else:
        template = "agents/signin_locked.html"
    response = render(request, template, context, status=429)
    if minutes:
        response["Retry-After"] = str(minutes * 60)
    return response
