"""Whether an online agent is at their desk (docs/routing.md, "Presence").

An online agent whose pages, API and live stream have all been silent for
``AGENT_AWAY_MINUTES`` is **away**: routing offers them nothing and moves
their pending offers on; the chats they took stay theirs. Any sign of them
(a page or API request, their open stream's periodic check) makes them
present again, and they are offered what waits. ``Agent.last_seen_at`` is
written at most once every ``SEEN_EVERY`` per agent, so a busy agent costs
one small UPDATE a few times a minute, not one per request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from agents.models import Agent, ChatOffer

SEEN_EVERY = timedelta(seconds=30)
# Agent id → when this process last wrote their last_seen_at (monotonic).
_written: dict[int, float] = {}


def away_since(now: datetime | None = None) -> datetime:
    """An online agent last seen before this is away."""
    return (now or timezone.now()) - timedelta(minutes=settings.AGENT_AWAY_MINUTES)


def present() -> Q:
    """Agents not away (never seen counts as present: an agent made online
    by a command or the admin is offered chats until they fall silent)."""
    return Q(last_seen_at__isnull=True) | Q(last_seen_at__gte=away_since())


def is_away(agent: Agent) -> bool:
    return bool(agent.is_online and agent.last_seen_at and agent.last_seen_at < away_since())


def seen(agent_ids: Iterable[int]) -> datetime:
    """The agents showed a sign of life now (returned). One who was away is
    back: they are offered the chats that wait."""
    from agents.services.offers import offer_waiting

    clock, now = time.monotonic(), timezone.now()
    # Written by this process a moment ago: present, and nothing to write.
    ids = [i for i in agent_ids if clock - _written.get(i, -1e9) >= SEEN_EVERY.total_seconds()]
    if not ids:
        return now
    _written.update((i, clock) for i in ids)
    agents = Agent.objects.filter(pk__in=ids)
    back = list(
        agents.filter(is_online=True, last_seen_at__lt=away_since(now)).values_list("pk", flat=True)
    )
    stale = Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=now - SEEN_EVERY)
    agents.filter(stale).update(last_seen_at=now)
    if back:
        with transaction.atomic():
            offer_waiting(back)
    return now


def move_offers_of_away_agents() -> int:
    """The offers of agents who turned away move on; returns how many agents."""
    from agents.services.offers import withdraw_offers_of

    away = (
        ChatOffer.objects.filter(
            outcome=ChatOffer.Outcome.PENDING, agent__last_seen_at__lt=away_since()
        )
        .values_list("agent_id", flat=True)
        .distinct()
    )
    agent_ids = list(away)
    for agent_id in agent_ids:
        with transaction.atomic():
            withdraw_offers_of(agent_id)
    return len(agent_ids)


def seen_middleware(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., Any]:
    """An agent's page request is a sign of life (the API's token
    authentication and the live stream's checks say so for theirs)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        user = getattr(request, "user", None)
        page = request.path.startswith("/agent/") and request.path != "/agent/stream"
        if page and isinstance(user, Agent):
            seen([user.pk])
        return response

    return middleware
