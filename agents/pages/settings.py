"""The agent's own settings: name, photo, notifications, the password,
two-factor sign-in, the API token, the signed-in sessions
(docs/agent-pages.md, "Settings", "Passwords" and "Two-factor sign-in")."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from agents import accounts, ratelimit, second_factor, services, sessions, tokens
from agents.models import Agent, AgentSession, ApiToken
from agents.pages import language
from agents.pages.second_factor import NEW_RECOVERY_CODES
from agents.pages.workspace import _agent

NEW_TOKEN = "agent-settings-new-token"  # noqa: S105 - a session key, not a secret
# Tries of the current password per agent and hour: a borrowed session
# cannot guess it (and so keep a way back in after the owner changes it).
PASSWORD_CHANGES_PER_HOUR = 10


class PasswordChangeForm(forms.Form):
    old_password = forms.CharField(strip=False, max_length=4096)
    new_password1 = forms.CharField(strip=False, max_length=4096)
    new_password2 = forms.CharField(strip=False, max_length=4096)

    def clean(self) -> dict[str, Any] | None:
        data = super().clean()
        if self.cleaned_data.get("new_password1") != self.cleaned_data.get("new_password2"):
            self.add_error("new_password2", _("The two new passwords differ."))
        return data


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
                language=request.POST.get("language", "")[:10],
            )
        except services.ServiceError as error:
            messages.error(request, error.message)
        else:
            # Said in the language just chosen, as the next page will be.
            with translation.override(language.language_of(request)):
                messages.success(request, _("Your settings are saved."))
            return redirect("agent:settings")
    return _page(request, agent)


def _page(
    request: HttpRequest,
    agent: Agent,
    password_form: PasswordChangeForm | None = None,
    status: int = 200,
) -> HttpResponse:
    # A token made by the POST below is shown here once: it waits in the
    # session (never in a URL or a cookie) and is gone after this page.
    new_token = request.session.pop(NEW_TOKEN, None)
    this_one = sessions.hash_key(request.session.session_key or "")
    context = {
        "new_token": new_token,
        # Likewise the recovery codes, made when two-factor sign-in was turned on.
        "new_recovery_codes": request.session.pop(NEW_RECOVERY_CODES, None),
        "has_second_factor": second_factor.has_second_factor(agent=agent),
        "second_factor_required": second_factor.must_have_second_factor(agent=agent),
        "recovery_codes_left": second_factor.recovery_codes_left(agent=agent),
        "token": ApiToken.objects.filter(agent=agent).first(),
        "password_form": password_form or PasswordChangeForm(),
        "sessions": [(row, row.key_hash == this_one) for row in sessions.sessions_of(agent)],
        "languages": settings.LANGUAGES,
    }
    return render(request, "agents/settings.html", context, status=status)


@never_cache
@login_required
@require_POST
def change_password(request: HttpRequest) -> HttpResponse:
    """Current password, then the new one twice. This session stays signed
    in; every other session of the agent ends now."""
    agent = _agent(request)
    form = PasswordChangeForm(request.POST)
    if not form.is_valid():
        return _page(request, agent, form, status=400)
    if not ratelimit.admit(
        key=f"password-change:{agent.pk}", limit=PASSWORD_CHANGES_PER_HOUR, window=3600
    ):
        form.add_error(None, _("Too many tries: wait an hour before trying again."))
        return _page(request, agent, form, status=429)
    try:
        accounts.change_password(
            agent=agent,
            old_password=form.cleaned_data["old_password"],
            new_password=form.cleaned_data["new_password1"],
            keep_session_key=request.session.session_key,
        )
    except accounts.PasswordRefused as error:
        field = "old_password" if isinstance(error, accounts.WrongPassword) else "new_password1"
        form.add_error(field, error.message)
        return _page(request, agent, form, status=400)
    sessions.keep_this_session(request, agent)
    messages.success(request, _("Your password is changed; your other sessions are signed out."))
    return redirect("agent:settings")


@login_required
@require_POST
def new_token(request: HttpRequest) -> HttpResponse:
    """A new API token, replacing the old one (which stops working at once)."""
    request.session[NEW_TOKEN] = tokens.issue_token(agent=_agent(request))
    return redirect("agent:settings")


@login_required
@require_POST
def revoke_token(request: HttpRequest) -> HttpResponse:
    """The API token stops working, its open streams included."""
    agent = _agent(request)
    tokens.revoke_token(agent=agent, by=agent)
    messages.success(request, _("Your API token is revoked."))
    return redirect("agent:settings")


@login_required
@require_POST
def sign_out_session(request: HttpRequest, session_id: int) -> HttpResponse:
    """One other session of the agent's own ends (another's, or this one: 404)."""
    try:
        sessions.sign_out_session(
            agent=_agent(request),
            session_id=session_id,
            keep_session_key=request.session.session_key,
        )
    except AgentSession.DoesNotExist as error:
        raise Http404 from error
    messages.success(request, _("That session is signed out."))
    return redirect("agent:settings")


@login_required
@require_POST
def sign_out_other_sessions(request: HttpRequest) -> HttpResponse:
    count = sessions.sign_out_other_sessions(
        agent=_agent(request), keep_session_key=request.session.session_key
    )
    messages.success(
        request,
        ngettext(
            "Signed out %(count)d other session.", "Signed out %(count)d other sessions.", count
        )
        % {"count": count},
    )
    return redirect("agent:settings")
