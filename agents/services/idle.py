"""Idle chats close by themselves (docs/routing.md, "Idle chats close"): on
a channel with ``idle_close_minutes``, an active chat whose last shown
message is the agent's and older than that is finished as an agent's
Finish would, after the channel's ``idle_warning`` if it has one.

Shown messages are the ones the client sees: the client's, the agent's and
the bot's (the channel's own answers: the away message, the warning).
Internal notes and system notes neither start nor stop the count. A chat
whose last shown message is the client's is waiting for the agent, and is
never closed this way.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q, QuerySet, Subquery
from django.db.models.expressions import OuterRef
from django.utils import timezone

from agents.live import CLIENT_VISIBLE_AUTHORS
from agents.models import Channel, Chat, Message
from agents.services.chats import finish_chat, post_channel_message

# How many due chats one sweep closes; the rest wait for the next (a minute).
SWEEP_LIMIT = 500


def _shown(messages: QuerySet[Message]) -> QuerySet[Message]:
    """``messages`` the client sees, the last first."""
    return messages.filter(author__in=CLIENT_VISIBLE_AUTHORS).order_by("-created", "-id")


def due_idle_chats(now: datetime | None = None) -> list[int]:
    """The ids of the active chats due to close now, oldest first.

    Only the channels with idle close on are looked at; each one's active
    chats (``Chat.state`` is indexed, and active chats are at most the
    agents' capacity) are read with their last shown message (the
    message's ``(chat, created)`` index). ``Chat.last_message_at`` cannot
    stand in for it: a note or a system message moves it too."""
    now = now or timezone.now()
    on = Channel.objects.filter(idle_close_minutes__isnull=False)
    minutes = {n for n in on.values_list("idle_close_minutes", flat=True) if n is not None}
    if not minutes:
        return []
    past = Q()
    for n in minutes:
        past |= Q(channel__idle_close_minutes=n, last_shown_at__lte=now - timedelta(minutes=n))
    last = _shown(Message.objects.filter(chat=OuterRef("pk")))
    due = (
        Chat.objects.filter(state=Chat.State.ACTIVE, channel__idle_close_minutes__in=minutes)
        .annotate(
            last_shown_by=Subquery(last.values("author")[:1]),
            last_shown_at=Subquery(last.values("created")[:1]),
        )
        .filter(past, last_shown_by=Message.Author.AGENT)
        .order_by("last_shown_at", "pk")
    )
    return list(due.values_list("pk", flat=True)[:SWEEP_LIMIT])


@transaction.atomic
def close_idle_chat(*, chat_id: int, now: datetime | None = None) -> bool:
    """Close the chat if the idle rule holds for it now, read again under
    the chat's lock: a client's message that came meanwhile keeps it open.
    The warning (if any) goes out first, from the channel as the away
    message does; then the chat is finished as an agent's Finish would
    (``ChatFinished.idle``). False when the rule no longer holds."""
    chat = Chat.objects.select_for_update().filter(pk=chat_id).first()
    if chat is None or chat.state != Chat.State.ACTIVE:
        return False
    channel = Channel.objects.get(pk=chat.channel_id)
    if channel.idle_close_minutes is None:
        return False
    last = _shown(chat.messages.all()).values_list("author", "created").first()
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=channel.idle_close_minutes)
    if last is None or last[0] != Message.Author.AGENT or last[1] > cutoff:
        return False
    if channel.idle_warning:
        post_channel_message(
            chat=chat, channel=channel, text=channel.idle_warning, mark=Message.IDLE_WARNING
        )
    finish_chat(chat=chat, idle=True)
    return True


def close_idle_chats() -> int:
    """The beat's sweep: every chat due closes, each in its own
    transaction; returns how many closed."""
    now = timezone.now()
    return sum(close_idle_chat(chat_id=chat_id, now=now) for chat_id in due_idle_chats(now))
