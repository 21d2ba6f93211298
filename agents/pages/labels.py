"""A chat's labels from the chat page's side panel (docs/agent-pages.md, "Labels")."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from agents import services
from agents.pages.workspace import _act


@login_required
@require_POST
def labels(request: HttpRequest, chat_id: int) -> HttpResponse:
    """The panel's checkboxes: every label checked, none for no label."""
    names = request.POST.getlist("label")
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.set_chat_labels(chat=chat, agent=agent, names=names),
    )
