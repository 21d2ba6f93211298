"""The chat page's "Send transcript": the chat's log by e-mail (docs/transcripts.md)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from agents import transcripts
from agents.pages.workspace import _agent, _chat, _refused, _wants_json


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
    done = f"The transcript is on its way to {mail.to}."
    if _wants_json(request):
        return JsonResponse({"ok": True, "message": done})
    messages.success(request, done)
    return redirect("agent:chat", chat.pk)
