"""Canned replies in the pages: the list with add, edit and delete, and the
reply box's ``/`` search (docs/agent-pages.md, "Canned replies")."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents import canned, selectors
from agents.api.parsers import id_from
from agents.models import CannedReply, Chat
from agents.pages.workspace import _agent
from agents.services import ServiceError

SEARCH_RESULTS = 8


def _reply(request: HttpRequest, reply_id: int) -> CannedReply:
    try:
        return canned.reply_for(agent=_agent(request), reply_id=reply_id)
    except CannedReply.DoesNotExist as error:
        raise Http404("no such reply") from error


@login_required
@require_http_methods(["GET", "POST"])
def replies(request: HttpRequest) -> HttpResponse:
    """The list; a POST adds one."""
    agent = _agent(request)
    form = {"shortcut": "", "text": "", "shared": False}
    if request.method == "POST":
        form = {
            "shortcut": request.POST.get("shortcut", "")[:100],
            "text": request.POST.get("text", "")[:5000],
            "shared": request.POST.get("shared") == "on",
        }
        try:
            made = canned.save_reply(agent=agent, **form)  # type: ignore[arg-type]
        except ServiceError as error:
            messages.error(request, error.message)
        else:
            messages.success(
                request,
                _("/%(shortcut)s is ready: type it in a reply box.") % {"shortcut": made.shortcut},
            )
            return redirect("agent:canned")
    return render(
        request,
        "agents/canned.html",
        {"replies": canned.replies_for(agent=agent), "form": form, "editing": None},
    )


@login_required
@require_http_methods(["GET", "POST"])
def edit(request: HttpRequest, reply_id: int) -> HttpResponse:
    agent = _agent(request)
    reply = _reply(request, reply_id)
    form = {"shortcut": reply.shortcut, "text": reply.text, "shared": reply.owner_id is None}
    if request.method == "POST":
        form.update(
            shortcut=request.POST.get("shortcut", "")[:100],
            text=request.POST.get("text", "")[:5000],
        )
        try:
            canned.save_reply(
                agent=agent, shortcut=str(form["shortcut"]), text=str(form["text"]), reply=reply
            )
        except ServiceError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, _("/%(shortcut)s is saved.") % {"shortcut": reply.shortcut})
            return redirect("agent:canned")
    return render(
        request,
        "agents/canned.html",
        {"replies": canned.replies_for(agent=agent), "form": form, "editing": reply},
    )


@login_required
@require_POST
def delete(request: HttpRequest, reply_id: int) -> HttpResponse:
    reply = _reply(request, reply_id)
    try:
        canned.delete_reply(agent=_agent(request), reply=reply)
    except ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("/%(shortcut)s is deleted.") % {"shortcut": reply.shortcut})
    return redirect("agent:canned")


@login_required
@require_GET
def search(request: HttpRequest) -> JsonResponse:
    """What ``/…`` in the reply box finds, filled for the open chat."""
    agent = _agent(request)
    chat: Chat | None = None
    chat_id = id_from(request.GET.get("chat", ""))
    if chat_id is not None:
        chat = selectors.chats_for_agent(agent=agent).filter(pk=chat_id).first()
    found = canned.replies_for(agent=agent, search=request.GET.get("q", "").strip()[:50])
    return JsonResponse(
        {
            "replies": [
                {
                    "id": reply.pk,
                    "shortcut": reply.shortcut,
                    "shared": reply.owner_id is None,
                    "text": canned.filled(reply.text, chat=chat, agent=agent),
                }
                for reply in found[:SEARCH_RESULTS]
            ]
        }
    )
