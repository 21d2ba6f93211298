"""An agent's signed-in sessions: recorded at sign-in, listed on the settings
page, signed out one by one or all but this one (docs/security.md,
"Sessions"; docs/agent-pages.md, "Settings").

``sign_out_other_sessions`` is the one verb for "every other session ends":
the settings page's "Sign out all other sessions", a password change (the
session that changed it stays), a password reset (none stays), and a change
of the second factor. It deletes the sessions from the session store and
their rows at once, so the list is true, and ends their open live streams
(docs/live.md, "Access").

The session key is a bearer secret: a row keeps its SHA-256, to find the
row of the session a request carries, and the key sealed (Fernet, with a
key derived from ``SECRET_KEY``), opened only to delete that session from
the store — whatever ``SESSION_ENGINE`` keeps it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from functools import cache
from importlib import import_module
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.contrib.sessions.backends.base import SessionBase
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from agents import audit, live
from agents.models import Agent, AgentSession
from config.signin import client_address

logger = logging.getLogger(__name__)

# Last seen is written at most this often per session (and process).
SEEN_EVERY = timedelta(minutes=5)
_SEEN_KEPT = 10_000  # sessions remembered per process before the memory starts afresh
# Key hash → when this process last wrote its row's last_seen_at (monotonic).
_seen: dict[str, float] = {}


def hash_key(session_key: str) -> str:
    return hashlib.sha256(session_key.encode()).hexdigest()


def _fernet() -> MultiFernet:
    """Seals with ``SECRET_KEY``; opens with it or a ``SECRET_KEY_FALLBACKS``
    key, so a rotation keeps the list working while old sessions hold."""
    return _fernet_of(settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS)


@cache  # derived once per process and set of keys, not on every sign-in and sign-out
def _fernet_of(*secrets: str) -> MultiFernet:
    keys = [
        salted_hmac("agents.sessions.sealed_key", "", secret=secret, algorithm="sha256").digest()
        for secret in secrets
    ]
    return MultiFernet([Fernet(base64.urlsafe_b64encode(key)) for key in keys])


def _seal(session_key: str) -> str:
    return _fernet().encrypt(session_key.encode()).decode()


def _open(sealed: str) -> str | None:
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:  # sealed under a SECRET_KEY no longer configured
        return None


def _store(session_key: str | None = None) -> SessionBase:
    store: SessionBase = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return store


def _end(rows: list[AgentSession]) -> None:
    """Delete the sessions from the store and their rows."""
    for row in rows:
        key = _open(row.sealed_key)
        if key is not None:
            _store().delete(key)
    AgentSession.objects.filter(pk__in=[row.pk for row in rows]).delete()


# --- the verbs --------------------------------------------------------------


@transaction.atomic
def record_sign_in(
    *, agent: Agent, session_key: str, ip: str | None = None, user_agent: str = ""
) -> AgentSession:
    """A row for a session just signed in; the agent's rows of sessions that
    no longer hold (expired, or from before a password change made
    elsewhere) go."""
    now, key_hash = timezone.now(), hash_key(session_key)
    _forget_dead(agent)
    _seen[key_hash] = time.monotonic()  # seen now: the middleware need not write
    row, _ = AgentSession.objects.update_or_create(
        key_hash=key_hash,
        defaults={
            "agent": agent,
            "sealed_key": _seal(session_key),
            "signed_in_at": now,
            "last_seen_at": now,
            "ip": audit.valid_address(ip),
            "user_agent": user_agent[:500],
        },
    )
    return row


@transaction.atomic
def sign_out_session(
    *, agent: Agent, session_id: int, keep_session_key: str | None
) -> AgentSession:
    """Sign out one other session of ``agent``: ``AgentSession.DoesNotExist``
    for a session not theirs, or the one kept (the caller's own)."""
    row = _others(agent, keep_session_key).select_for_update().get(pk=session_id)
    _end([row])
    live.access_changed(agent_id=agent.pk)
    audit.record(
        audit.Action.SESSION_SIGNED_OUT,
        actor=agent,
        target=audit.of_agent(agent),
        sessions=1,
        signed_in_from=row.ip,
    )
    return row


@transaction.atomic
def sign_out_other_sessions(
    *, agent: Agent, keep_session_key: str | None, by: Agent | str | None = None
) -> int:
    """Every session of ``agent`` but the one with ``keep_session_key`` (none:
    every session) ends now: deleted from the session store with its row,
    its open live streams ended. Returns how many. ``by``: who asked (the
    audit log), by default the agent. Called by the settings page, a
    password change or reset, and a change of the second factor."""
    rows = list(_others(agent, keep_session_key).select_for_update())
    _end(rows)
    live.access_changed(agent_id=agent.pk)
    if not rows:
        return 0
    audit.record(
        audit.Action.SESSION_SIGNED_OUT,
        actor=by or agent,
        target=audit.of_agent(agent),
        sessions=len(rows),
        kept_this_one=keep_session_key is not None,
    )
    return len(rows)


def keep_this_session(request: HttpRequest, agent: Agent) -> None:
    """After a password change: this session stays signed in (Django gives it
    a new key and the new password's hash) and its row follows the key."""
    old_key = request.session.session_key
    update_session_auth_hash(request, agent)
    _follow(old_key, request.session.session_key)


def cycle_key(request: HttpRequest) -> None:
    """A new key for this session (a sign-in made stronger by its second
    factor), its row following the key."""
    old_key = request.session.session_key
    request.session.cycle_key()
    _follow(old_key, request.session.session_key)


def _follow(old_key: str | None, new_key: str | None) -> None:
    if old_key and new_key and old_key != new_key:
        AgentSession.objects.filter(key_hash=hash_key(old_key)).update(
            key_hash=hash_key(new_key), sealed_key=_seal(new_key)
        )


def _others(agent: Agent, keep_session_key: str | None) -> Any:
    rows = AgentSession.objects.filter(agent=agent)
    if keep_session_key:
        rows = rows.exclude(key_hash=hash_key(keep_session_key))
    return rows


def _forget_dead(agent: Agent) -> None:
    dead = [row.pk for row in AgentSession.objects.filter(agent=agent) if not _holds(row)]
    AgentSession.objects.filter(pk__in=dead).delete()


def _holds(row: AgentSession) -> bool:
    from agents.streams import signed_in_agent_id

    key = _open(row.sealed_key)
    return key is not None and signed_in_agent_id(key) == row.agent_id


# --- reads ------------------------------------------------------------------


def sessions_of(agent: Agent) -> list[AgentSession]:
    """The agent's sessions that still hold, the most recently seen first
    (one session read each: an agent has a handful)."""
    return [row for row in AgentSession.objects.filter(agent=agent) if _holds(row)]


# --- signals and the middleware ----------------------------------------------


def on_signed_in(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    session_key = request.session.session_key if request is not None else None
    if not isinstance(user, Agent) or request is None or not session_key:
        return
    record_sign_in(
        agent=user,
        session_key=session_key,
        ip=client_address(request) or None,
        user_agent=request.headers.get("User-Agent", ""),
    )


def on_signed_out(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    session_key = request.session.session_key if request is not None else None
    if session_key:
        AgentSession.objects.filter(key_hash=hash_key(session_key)).delete()


def seen_middleware(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., Any]:
    """A signed-in request is a sign of the session: its row's last_seen_at,
    written at most every ``SEEN_EVERY`` (a session signed in before rows
    were kept gets one now)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        session = getattr(request, "session", None)
        # Only a request whose view read the session (an agent's page, the
        # admin): reading it here would add "Vary: Cookie" to every answer,
        # the widget's cached script included.
        if session is None or not session.accessed or not session.session_key:
            return response
        user = getattr(request, "user", None)
        if isinstance(user, Agent):
            _seen_now(request, user, session.session_key)
        return response

    return middleware


def _seen_now(request: HttpRequest, agent: Agent, session_key: str) -> None:
    key_hash, clock = hash_key(session_key), time.monotonic()
    if clock - _seen.get(key_hash, -1e9) < SEEN_EVERY.total_seconds():
        return
    if len(_seen) >= _SEEN_KEPT:
        _seen.clear()
    _seen[key_hash] = clock
    now = timezone.now()
    if AgentSession.objects.filter(key_hash=key_hash).update(last_seen_at=now):
        return
    if request.session.get("_auth_user_id") is None:
        return  # signed out during this request
    try:
        with transaction.atomic():
            record_sign_in(
                agent=agent,
                session_key=session_key,
                ip=client_address(request) or None,
                user_agent=request.headers.get("User-Agent", ""),
            )
    except IntegrityError:
        # The agent was deleted during this request (an admin removed them
        # while their page was open): the answer stands, and their next
        # request finds the session signed out.
        logger.info("sessions.agent_gone agent_id=%s", agent.pk)


def connect() -> None:
    user_logged_in.connect(on_signed_in, dispatch_uid="sessions.signed_in")
    user_logged_out.connect(on_signed_out, dispatch_uid="sessions.signed_out")
