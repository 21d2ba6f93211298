"""The Team view for supervisors and admins (docs/routing.md, "Team"): each
agent's status, open chats against capacity and pending offers; the queue
with each chat's wait and who it is offered to; the chats waiting for an
agent's reply. Live: the page's stream cues a new rendering. A supervisor
reassigns a chat and sets an agent's maximum of chats here."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, ngettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from agents import selectors, services
from agents.api.parsers import id_from
from agents.models import MAX_CHATS_LIMIT, Agent, Channel
from agents.pages.workspace import _agent, _chat, _wants_json

LENGTH = 200  # of each list, as the API's
LIMITS = ngettext_lazy(
    "a number of chats from 1 to %(limit)d, or empty for the default",
    "a number of chats from 1 to %(limit)d, or empty for the default",
    "limit",
)


def _supervisor(request: HttpRequest) -> Agent:
    agent = _agent(request)
    if not agent.supervises:
        raise PermissionDenied("The Team view is for supervisors and admins.")
    return agent


def _team(agent: Agent) -> dict[str, Any]:
    members = selectors.team(agent=agent)
    queue = list(selectors.team_queue(agent=agent)[:LENGTH])
    waiting = list(selectors.waiting_for_reply(agent=agent)[:LENGTH])
    # Whom each chat may go to: the online agents of its channel.
    online: dict[int, list[Agent]] = defaultdict(list)
    by_id = {member.pk: member for member in members if member.is_online}
    assigned = Channel.agents.through.objects.filter(
        channel__in={chat.channel_id for chat in [*queue, *waiting]}, agent_id__in=by_id
    )
    for channel_id, agent_id in assigned.values_list("channel_id", "agent_id"):
        online[channel_id].append(by_id[agent_id])
    for chat in [*queue, *waiting]:
        chat.reassign_to = sorted(online[chat.channel_id], key=lambda a: a.name)  # type: ignore[attr-defined]
    return {"members": members, "queue": queue, "waiting": waiting}


@never_cache
@login_required
@require_GET
def team(request: HttpRequest) -> HttpResponse:
    return render(request, "agents/team.html", _team(_supervisor(request)))


@never_cache
@login_required
@require_GET
def team_live(request: HttpRequest) -> JsonResponse:
    """The team's lists rendered anew, for the page's script."""
    html = render_to_string("agents/_team.html", _team(_supervisor(request)), request=request)
    return JsonResponse({"html": html})


def _answer(request: HttpRequest, error: services.ServiceError | None, done: str) -> HttpResponse:
    if _wants_json(request):
        if error is not None:
            body = {"error": {"code": error.code, "message": error.message}}
            return JsonResponse(body, status=403 if isinstance(error, services.NotAllowed) else 400)
        return JsonResponse({"ok": True, "message": done})
    if error is not None:
        messages.error(request, error.message)
    else:
        messages.success(request, done)
    return redirect("agent:team")


@login_required
@require_POST
def reassign(request: HttpRequest, chat_id: int) -> HttpResponse:
    supervisor = _supervisor(request)
    chat = _chat(request, chat_id)
    to_agent = Agent.objects.filter(pk=id_from(request.POST.get("agent", "")) or 0).first()
    try:
        if to_agent is None:
            raise services.ServiceError(_("choose an online agent of the chat's channel"))
        services.reassign_chat(chat=chat, by=supervisor, to_agent=to_agent)
    except services.ServiceError as error:
        return _answer(request, error, "")
    assert to_agent is not None
    name = chat.client.display_name
    if chat.state == chat.State.QUEUED:
        done = _("%(client)s's chat is offered to %(agent)s now.")
    else:
        done = _("%(client)s's chat is %(agent)s's now.")
    return _answer(request, None, done % {"client": name, "agent": to_agent.name})


@login_required
@require_POST
def max_chats(request: HttpRequest, agent_id: int) -> HttpResponse:
    supervisor = _supervisor(request)
    member = next((m for m in selectors.team(agent=supervisor) if m.pk == agent_id), None)
    if member is None:
        raise Http404("no such agent on your channels")
    raw = request.POST.get("max_chats", "").strip()
    try:
        if raw and not (raw.isascii() and raw.isdigit() and len(raw) <= 3):
            raise services.ServiceError(LIMITS, limit=MAX_CHATS_LIMIT)
        services.set_max_chats(agent=member, by=supervisor, max_chats=int(raw) if raw else None)
    except services.ServiceError as error:
        return _answer(request, error, "")
    done = ngettext(
        "%(agent)s answers up to %(count)d chat now.",
        "%(agent)s answers up to %(count)d chats now.",
        member.capacity,
    )
    return _answer(request, None, done % {"agent": member.name, "count": member.capacity})
