"""Blacklisting the client of a chat from the chat page, and lifting it
(docs/transcripts.md, "Blacklist")."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from agents import services
from agents.pages.workspace import _act


@login_required
@require_POST
def blacklist(request: HttpRequest, chat_id: int) -> HttpResponse:
    reason = request.POST.get("reason", "").strip()[:500]
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.blacklist_client(chat=chat, agent=agent, reason=reason),
    )


@login_required
@require_POST
def lift(request: HttpRequest, chat_id: int) -> HttpResponse:
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.lift_blacklist(client=chat.client, by=agent),
    )
