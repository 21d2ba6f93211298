"""A forgotten password: "Forgot password?" on the sign-in page mails a
link through the outbox; the link's page sets a new password
(docs/agent-pages.md, "Passwords")."""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import SetPasswordForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from agents import accounts, ratelimit
from agents.models import Agent
from config.signin import client_address

HOUR = 3600.0


class ForgotPasswordForm(forms.Form):
    email = forms.EmailField(max_length=254)


@never_cache
@require_http_methods(["GET", "POST"])
def forgot(request: HttpRequest) -> HttpResponse:
    form = ForgotPasswordForm(request.POST if request.method == "POST" else None)
    if not form.is_valid():
        return render(request, "agents/password_forgot.html", {"form": form})
    email = form.cleaned_data["email"].strip().lower()
    # Both limits count every request, whether or not an agent has the
    # address, so being refused tells nothing either.
    if not (
        ratelimit.admit(
            key=f"password-reset-ip:{client_address(request)}",
            limit=settings.PASSWORD_RESETS_PER_IP_PER_HOUR,
            window=HOUR,
        )
        and ratelimit.admit(
            # A digest: the key's length is bounded (an address may be 254
            # characters) and no address is kept in the counter's name.
            key=f"password-reset-address:{hashlib.sha256(email.encode()).hexdigest()}",
            limit=settings.PASSWORD_RESETS_PER_ADDRESS_PER_HOUR,
            window=HOUR,
        )
    ):
        context = {"form": form, "throttled": True}
        response = render(request, "agents/password_forgot.html", context, status=429)
        response["Retry-After"] = str(int(HOUR))
        return response
    accounts.ask_password_reset(email=email)
    return redirect("agent:password-forgot-sent")


def _link_minutes() -> int:
    return int(settings.PASSWORD_RESET_TIMEOUT // 60)


@never_cache
def sent(request: HttpRequest) -> HttpResponse:
    return render(request, "agents/password_sent.html", {"minutes": _link_minutes()})


class NewPasswordForm(SetPasswordForm):
    """Django's form (the validators, the two fields match); the password is
    set by the service verb."""

    def save(self, commit: bool = True) -> Agent:
        return accounts.reset_password(agent=self.user, password=self.cleaned_data["new_password1"])


class ResetView(auth_views.PasswordResetConfirmView):
    """Django's view: the token leaves the URL for the session before the
    form shows (no Referer carries it), and works once."""

    form_class = NewPasswordForm
    template_name = "agents/password_reset.html"
    success_url = reverse_lazy("agent:login")

    def get_user(self, uidb64: str) -> Any:
        # Django's view and token ignore ``is_active``: a link mailed before
        # the agent was deactivated would still set a password. The view asks
        # on every request, so a link opened before and used after is refused.
        user = super().get_user(uidb64)
        return user if user is not None and user.is_active else None

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "minutes": _link_minutes()}

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        messages.success(self.request, _("Your new password is set: sign in with it."))
        return response
