"""The audit log: who did what to what, when, from which address
(docs/security.md, "Audit log").

The verbs that make a change worth auditing call ``record`` themselves, in
their transaction, as they write their row (the Zulip way: a ``do_*`` writes
its audit row): most of these changes publish no event of
``agents/events.py``, and a row written in the verb's transaction is never
missing for a change that committed, nor present for one rolled back.
Sign-ins are Django's and django-axes' signals (``connect``); a backend
that refuses for a reason the credentials do not show (single sign-on)
leaves it on the request (``refuse``).

The address is the request's, derived as sign-in throttling derives it
(``config.signin.client_address``); ``address_middleware`` keeps it for the
length of a request, so a verb need not be handed the request. Outside a
request (a command, a task) there is none.

Nothing secret and no message text is written: ``target`` names a row
("agent 12 ann@example.com"), ``detail`` holds small values the caller
chooses (a role before and after, a channel's kind).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import models
from django.http import HttpRequest, HttpResponseBase
from django.utils import timezone

from agents.models import Agent, AuditEntry, Channel, Client
from config.signin import client_address

SYSTEM = "system"
COMMAND_LINE = "command line"
VIA_SSO = "single sign-on"  # a sign-in's ``via``; the actor of an agent it created
SSO_BACKEND = "agents.sso.AgentBackend"
DETAIL_VALUE_LIMIT = 200  # characters of one detail value: a name, a kind, a role


class Action(models.TextChoices):
    """Every action the log knows; docs/security.md describes each."""

    SIGNIN_SUCCEEDED = "signin.succeeded", "Sign-in succeeded"
    SIGNIN_FAILED = "signin.failed", "Sign-in failed"
    SIGNIN_LOCKED = "signin.locked", "Sign-in locked"
    SESSION_SIGNED_OUT = "session.signed_out", "Sessions signed out"
    PASSWORD_CHANGED = "password.changed", "Password changed"
    PASSWORD_RESET = "password.reset", "Password reset"
    SECOND_FACTOR_ENABLED = "second_factor.enabled", "Second factor enabled"
    SECOND_FACTOR_DISABLED = "second_factor.disabled", "Second factor disabled"
    AGENT_CREATED = "agent.created", "Agent created"
    AGENT_ROLE_CHANGED = "agent.role_changed", "Agent's role changed"
    AGENT_CAPACITY_CHANGED = "agent.capacity_changed", "Agent's maximum of chats changed"
    TOKEN_ISSUED = "token.issued", "API token issued"
    TOKEN_ROTATED = "token.rotated", "API token replaced"
    TOKEN_REVOKED = "token.revoked", "API token revoked"
    CHANNEL_CREATED = "channel.created", "Channel created"
    CHANNEL_CHANGED = "channel.changed", "Channel changed"
    CHANNEL_SECRET_ROTATED = "channel.secret_rotated", "Channel secret rotated"
    BOT_ATTACHED = "bot.attached", "Bot attached to a channel"
    BOT_DETACHED = "bot.detached", "Bot taken off a channel"
    BOT_CHANGED = "bot.changed", "Bot provider or attachment changed"
    WEBHOOK_CHANGED = "webhook.changed", "Developer webhook changed"
    CLIENT_BLACKLISTED = "client.blacklisted", "Client blacklisted"
    CLIENT_BLACKLIST_LIFTED = "client.blacklist_lifted", "Client's blacklist lifted"
    TRANSCRIPT_MAILED = "transcript.mailed_to_typed_address", "Transcript mailed to a typed address"
    EXPORT_MADE = "export.made", "Data exported"
    CLIENT_ERASED = "client.erased", "Client's data erased"


_address: ContextVar[str | None] = ContextVar("audit_address", default=None)


def address_middleware(
    get_response: Callable[[HttpRequest], Any],
) -> Callable[[HttpRequest], Any]:
    """Keeps the request's client address for ``record`` (sync and async views alike)."""

    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            token = _address.set(client_address(request) or None)
            try:
                response: HttpResponseBase = await get_response(request)
                return response
            finally:
                _address.reset(token)

        markcoroutinefunction(middleware_async)
        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponseBase:
        token = _address.set(client_address(request) or None)
        try:
            response: HttpResponseBase = get_response(request)
            return response
        finally:
            _address.reset(token)

    return middleware


address_middleware.sync_capable = True  # type: ignore[attr-defined]
address_middleware.async_capable = True  # type: ignore[attr-defined]


def record(
    action: Action,
    *,
    actor: Agent | str | None = None,
    target: str = "",
    ip: str | None = None,
    **detail: str | int | bool | None,
) -> AuditEntry:
    """Write one entry. ``actor``: the agent who acted, or a label for who
    else did ("command line"); none is the system. ``ip``: by default the
    current request's client address. ``detail``: small scalar values, never
    a secret or message text."""
    agent = actor if isinstance(actor, Agent) else None
    label = agent.email if agent is not None else (actor or SYSTEM)
    kept = {
        key: value[:DETAIL_VALUE_LIMIT] if isinstance(value, str) else value
        for key, value in detail.items()
    }
    return AuditEntry.objects.create(
        actor=agent,
        actor_label=str(label)[:254],
        action=Action(action).value,
        target=target[:300],
        ip=valid_address(ip or _address.get()),
        detail=kept,
    )


ROW_FIELDS = ("at", "actor", "action", "target", "ip")


def as_row(entry: AuditEntry) -> dict[str, Any]:
    """An entry as the API and the CSV show it."""
    return {
        "at": entry.at.isoformat(),
        "actor": entry.actor_label,
        "action": entry.action,
        "target": entry.target,
        "ip": entry.ip,
    }


def actor_of(request: HttpRequest) -> Agent | None:
    """Who acts in a request (an admin page's, an agent page's)."""
    user = getattr(request, "user", None)
    return user if isinstance(user, Agent) else None


def valid_address(address: str | None) -> str | None:
    """An address the column can keep: a peer's REMOTE_ADDR may be no address
    at all (a Unix socket's)."""
    try:
        return str(ipaddress.ip_address(address or ""))
    except ValueError:
        return None


def of_agent(agent: Agent) -> str:
    return f"agent {agent.pk} {agent.email}"


def of_channel(channel: Channel) -> str:
    return f"channel {channel.public_id} {channel.name}"


def of_client(client: Client) -> str:
    return f"client {client.pk}"


def forget_old_entries(*, batch: int = 1000) -> int:
    """Delete entries older than AUDIT_RETENTION_DAYS (0: keep them all), a
    batch at a time so no statement holds the table long; returns how many."""
    days = settings.AUDIT_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    deleted = 0
    while True:
        ids = list(AuditEntry.objects.filter(at__lt=cutoff).values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        deleted += AuditEntry.objects.filter(pk__in=ids).delete()[0]


# --- sign-ins ---------------------------------------------------------------


@dataclass(frozen=True)
class SigninRefusal:
    """What a sign-in backend knows of a refusal that the credentials do not
    say: a single sign-on names no account, yet its backend knows which
    agent the provider vouched for, and why it refused."""

    via: str
    reason: str
    agent: Agent | None = None


def refuse(request: HttpRequest, refusal: SigninRefusal) -> None:
    """Leave ``refusal`` on the request for the failed sign-in's entry."""
    request.signin_refusal = refusal  # type: ignore[attr-defined]


def refusal_of(request: HttpRequest | None) -> SigninRefusal | None:
    return getattr(request, "signin_refusal", None)


def on_signed_in(sender: Any, request: HttpRequest | None, user: Agent, **kwargs: Any) -> None:
    # Django names the backend that signed the agent in; a password's is not named.
    via = {"via": VIA_SSO} if getattr(user, "backend", "") == SSO_BACKEND else {}
    record(Action.SIGNIN_SUCCEEDED, actor=user, target=of_agent(user), ip=_ip_of(request), **via)


def on_signin_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    refusal = refusal_of(request)
    if refusal is not None:
        target = of_agent(refusal.agent) if refusal.agent else "unknown account"
        record(
            Action.SIGNIN_FAILED,
            target=target,
            ip=_ip_of(request),
            via=refusal.via,
            reason=refusal.reason,
        )
        return
    record(Action.SIGNIN_FAILED, target=_account(credentials.get("username")), ip=_ip_of(request))


def on_locked_out(
    sender: Any, request: HttpRequest | None, username: str | None, ip_address: str, **kwargs: Any
) -> None:
    record(Action.SIGNIN_LOCKED, target=_account(username), ip=ip_address or _ip_of(request))


def _account(username: Any) -> str:
    """The agent a sign-in named, or "unknown account": what was typed as a
    name is kept only when it is an agent's address, as people type their
    password into the name field too."""
    agent = Agent.objects.filter(email__iexact=str(username or "")).first()
    return of_agent(agent) if agent is not None else "unknown account"


def _ip_of(request: HttpRequest | None) -> str | None:
    return (client_address(request) or None) if request is not None else None


def connect() -> None:
    user_logged_in.connect(on_signed_in, dispatch_uid="audit.signed_in")
    user_login_failed.connect(on_signin_failed, dispatch_uid="audit.signin_failed")
    user_locked_out.connect(on_locked_out, dispatch_uid="audit.locked_out")
