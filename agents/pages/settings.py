"""The agent's own settings: name, photo, notifications, a new API token
(docs/agent-pages.md, "Settings")."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from agents import services, tokens
from agents.models import ApiToken
from agents.pages.workspace import _agent

NEW_TOKEN = "agent-settings-new-token"  # noqa: S105 - a session key, not a secret


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    agent = _agent(request)
    if request.method == "POST":
        try:
            services.update_agent_profile(
                agent=agent,
                name=request.POST.get("name", "")[:300],
                photo_url=request.POST.get("photo_url", "")[:1000],
                notify_sound=request.POST.get("notify_sound") == "on",
                notify_desktop=request.POST.get("notify_desktop") == "on",
            )
        except services.ServiceError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, "Your settings are saved.")
            return redirect("agent:settings")
    # A token made by the POST below is shown here once: it waits in the
    # session (never in a URL or a cookie) and is gone after this page.
    new_token = request.session.pop(NEW_TOKEN, None)
    return render(
        request,
        "agents/settings.html",
        {
            "new_token": new_token,
            "has_token": ApiToken.objects.filter(agent=agent).exists(),
        },
    )


@login_required
@require_POST
def new_token(request: HttpRequest) -> HttpResponse:
    """A new API token, replacing the old one (which stops working at once)."""
    request.session[NEW_TOKEN] = tokens.issue_token(agent=_agent(request))
    return redirect("agent:settings")
