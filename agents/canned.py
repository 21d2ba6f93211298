"""Canned replies: prepared answers an agent inserts by typing ``/`` in the
reply box (docs/agent-pages.md, "Canned replies").

Shared replies (no owner) are for every agent and managed by admins (staff
agents), in the pages or the admin; personal ones belong to one agent, who
alone sees and manages them. A reply's text may hold variables filled for
the chat it goes into: ``{{client.name}}``, ``{{client.email}}``,
``{{client.phone}}``, ``{{visitor.number}}``, ``{{agent.name}}``,
``{{channel.name}}`` (the double braces other chat desks use, spaces inside
allowed; the single-brace ``{client.name}`` of earlier replies still works);
anything else in braces stays as it is.
"""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy, ngettext_lazy

from agents.models import Agent, CannedReply, Chat
from agents.services import ServiceError
from config.text import TEXT_LIMIT

SHORTCUT = re.compile(r"[a-z0-9][a-z0-9_-]{0,49}")
_NAMES = r"client\.name|client\.email|client\.phone|visitor\.number|agent\.name|channel\.name"
# "{{ client.name }}" first: the single-brace form inside it would leave "{Ann}".
PLACEHOLDER = re.compile(rf"\{{\{{\s*({_NAMES})\s*\}}\}}|\{{({_NAMES})\}}")


def replies_for(*, agent: Agent, search: str = "") -> QuerySet[CannedReply]:
    """The shared replies and mine, by shortcut; ``search`` matches shortcut or text."""
    replies = CannedReply.objects.filter(Q(owner__isnull=True) | Q(owner=agent))
    if search:
        replies = replies.filter(Q(shortcut__icontains=search) | Q(text__icontains=search))
    return replies.order_by("shortcut", "owner_id", "id")


def reply_for(*, agent: Agent, reply_id: int) -> CannedReply:
    """One I may use, or ``CannedReply.DoesNotExist``."""
    return replies_for(agent=agent).get(pk=reply_id)


def _may_manage(agent: Agent, reply: CannedReply | None, shared: bool) -> None:
    if shared and not agent.supervises:
        raise ServiceError(gettext_lazy("only supervisors and admins manage shared replies"))
    if reply is not None and reply.owner_id not in (None, agent.pk):
        raise ServiceError(gettext_lazy("this reply is another agent's"))


@transaction.atomic
def save_reply(
    *,
    agent: Agent,
    shortcut: str,
    text: str,
    shared: bool = False,
    reply: CannedReply | None = None,
) -> CannedReply:
    """Create a reply, or change ``reply``; the shortcut is what ``/`` finds."""
    _may_manage(agent, reply, shared or bool(reply and reply.owner_id is None))
    shortcut = shortcut.strip().lstrip("/").lower()
    if not SHORTCUT.fullmatch(shortcut):
        raise ServiceError(
            gettext_lazy(
                "a shortcut is 1 to 50 letters, digits, '-' or '_', starting with a letter or digit"
            )
        )
    text = text.strip()
    if not text or len(text) > TEXT_LIMIT:
        raise ServiceError(
            ngettext_lazy(
                "write a reply of up to %(limit)d character",
                "write a reply of up to %(limit)d characters",
                "limit",
            ),
            limit=TEXT_LIMIT,
        )
    reply = reply or CannedReply(owner=None if shared else agent)
    reply.shortcut, reply.text, reply.updated = shortcut, text, timezone.now()
    try:
        with transaction.atomic():
            reply.save()
    except IntegrityError as error:
        raise ServiceError(
            gettext_lazy("/%(shortcut)s is taken: choose another shortcut"), shortcut=shortcut
        ) from error
    return reply


@transaction.atomic
def delete_reply(*, agent: Agent, reply: CannedReply) -> None:
    _may_manage(agent, reply, reply.owner_id is None)
    reply.delete()


def filled(text: str, *, chat: Chat | None, agent: Agent) -> str:
    """``text`` with its placeholders filled for ``chat`` (a name the client
    did not give reads "there": "Hi {client.name}" → "Hi there")."""
    client = chat.client if chat is not None else None
    values = {
        "client.name": (client.name if client else "") or "there",
        "client.email": client.email if client else "",
        "client.phone": client.phone if client else "",
        "visitor.number": str(client.visitor_number) if client else "",
        "agent.name": agent.name,
        "channel.name": chat.channel.name if chat is not None else "",
    }
    return PLACEHOLDER.sub(lambda found: values[found.group(1) or found.group(2)], text)
