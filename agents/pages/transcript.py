"""The chat page's "Send transcript": the chat's log by e-mail, and the
client card's "Confirm" of the client's address (docs/transcripts.md)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from agents import services, transcripts
from agents.pages.workspace import _act, _agent, _chat, _refused, _wants_json


@login_required
@require_POST
def send(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = _chat(request, chat_id)
    try:
        mail = transcripts.send_transcript(
            chat=chat, to=request.POST.get("to", ""), agent=_agent(request)
        )
    except transcripts.TranscriptError as error:
        return _refused(request, error, chat)
    done = _("The transcript is on its way to %(address)s.") % {"address": mail.to}
    if _wants_json(request):
        return JsonResponse({"ok": True, "message": done})
    messages.success(request, done)
    return redirect("agent:chat", chat.pk)


@login_required
@require_POST
def confirm_email(request: HttpRequest, chat_id: int) -> HttpResponse:
    """The agent vouches for the client's address (or enters one)."""
    email = request.POST.get("email", "")
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.confirm_client_email(chat=chat, agent=agent, email=email),
    )
