"""Two-factor sign-in in the pages (docs/agent-pages.md, "Two-factor
sign-in"): the code asked after the password, the set-up from the settings
page, turning it off; and the middleware that keeps a session owing its
second factor out of every other page of /agent/ and /admin/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_otp
import segno
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from agents import ratelimit, second_factor, sessions
from agents.models import Agent
from agents.pages.workspace import _agent

NEW_RECOVERY_CODES = "agent-settings-new-recovery-codes"
# Codes one agent may try in CODE_WINDOW seconds, at sign-in, at set-up and to
# turn it off together; django-otp's throttling doubles the wait after each
# wrong one besides. A million codes cannot be walked through.
CODE_TRIES = 5
CODE_WINDOW = 300


def _too_many() -> str:
    return _("Too many tries: wait five minutes, then try again.")


# What a session owing its code may open, and one owing its set-up.
_SIGNING_IN = {"agent:signin-code", "agent:logout", "admin:logout", "agent:catalogue"}
_SETTING_UP = {
    "agent:second-factor",
    "agent:second-factor-begin",
    "agent:second-factor-confirm",
    "agent:logout",
    "agent:catalogue",
    "admin:logout",
}


def second_factor_middleware(
    get_response: Callable[[HttpRequest], Any],
) -> Callable[[HttpRequest], Any]:
    """After OTPMiddleware: a signed-in agent with a second factor whose
    session has not passed it is sent to the code step; one whom REQUIRE_2FA
    asks for a second factor and who has none, to its set-up. API tokens are
    another credential: /api/ is not concerned."""

    def middleware(request: HttpRequest) -> Any:
        detour = _detour(request)
        return redirect(detour) if detour else get_response(request)

    return middleware


def _detour(request: HttpRequest) -> str | None:
    user = getattr(request, "user", None)
    if not request.path.startswith(("/agent/", "/admin/")) or not isinstance(user, Agent):
        return None
    if _verified(request):
        return None
    try:
        view = resolve(request.path_info).view_name
    except Resolver404:
        return None
    if _has_second_factor(request, user):
        if view in _SIGNING_IN:
            return None
        back = {"next": request.get_full_path()} if request.method == "GET" else {}
        return f"{reverse('agent:signin-code')}?{urlencode(back)}".rstrip("?")
    if second_factor.must_have_second_factor(agent=user) and view not in _SETTING_UP:
        return reverse("agent:second-factor")
    return None


# A session whose agent has no second factor keeps that answer (the agent's
# id), so its pages do not ask the database again: every change of an agent's
# second factor signs out the agent's other sessions
# (agents.second_factor._changed), and the session that made one is verified.
NO_SECOND_FACTOR = "agent-no-second-factor"


def _has_second_factor(request: HttpRequest, agent: Agent) -> bool:
    if request.session.get(NO_SECOND_FACTOR) == agent.pk:
        return False
    has = second_factor.has_second_factor(agent=agent)
    if not has:
        request.session[NO_SECOND_FACTOR] = agent.pk
    return has


def _verified(request: HttpRequest) -> bool:
    """Whether the session passed the second factor (OTPMiddleware's answer)."""
    return bool(getattr(request.user, "is_verified", bool)())


def _next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return reverse("agent:home")


def _tried(request: HttpRequest, agent: Agent) -> bool:
    """One more code tried by ``agent``; False once they are too many."""
    return ratelimit.admit(key=f"second-factor:{agent.pk}", limit=CODE_TRIES, window=CODE_WINDOW)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def signin_code(request: HttpRequest) -> HttpResponse:
    """The sign-in's second step, after the password: a code from the app or
    a recovery code. Only then is the session verified."""
    agent, target = _agent(request), _next(request)
    if _verified(request) or not second_factor.has_second_factor(agent=agent):
        return redirect(target)
    if request.method == "GET":
        return render(request, "agents/signin_code.html", {"next": target})
    if not _tried(request, agent):
        context = {"next": target, "error": _too_many()}
        return render(request, "agents/signin_code.html", context, status=429)
    try:
        device = second_factor.verify_code(agent=agent, code=request.POST.get("code", "")[:100])
    except second_factor.SecondFactorRefused as error:
        context = {"next": target, "error": error.message}
        return render(request, "agents/signin_code.html", context, status=400)
    sessions.cycle_key(request)  # a new session id for the now stronger session
    django_otp.login(request, device)
    if device.name == second_factor.RECOVERY_DEVICE:
        left = second_factor.recovery_codes_left(agent=agent)
        messages.warning(
            request,
            ngettext(
                "You used a recovery code: %(left)d left.",
                "You used a recovery code: %(left)d left.",
                left,
            )
            % {"left": left},
        )
    return redirect(target)


@never_cache
@login_required
def setup_page(request: HttpRequest) -> HttpResponse:
    """The set-up: the QR code (drawn here as inline SVG: no outside service
    sees the key) and the key as text, and the field for the app's first code."""
    agent = _agent(request)
    if second_factor.has_second_factor(agent=agent):
        return redirect(reverse("agent:settings") + "#two-factor")
    return _setup(request, agent)


def _setup(request: HttpRequest, agent: Agent, error: str = "", status: int = 200) -> HttpResponse:
    device = second_factor.pending_enrolment(agent=agent)
    context: dict[str, Any] = {
        "required": second_factor.must_have_second_factor(agent=agent),
        "error": error,
    }
    if device is not None:
        qr = segno.make(device.config_url, error="m")
        svg = qr.svg_inline(scale=4, title="QR code for your authenticator app")
        context.update(qr=mark_safe(svg), secret=second_factor.secret_text(device))  # noqa: S308 - segno's own markup
    return render(request, "agents/second_factor.html", context, status=status)


@login_required
@require_POST
def begin_setup(request: HttpRequest) -> HttpResponse:
    try:
        second_factor.begin_enrolment(agent=_agent(request))
    except second_factor.SecondFactorRefused as error:
        messages.error(request, error.message)
        return redirect("agent:settings")
    return redirect("agent:second-factor")


@never_cache
@login_required
@require_POST
def confirm_setup(request: HttpRequest) -> HttpResponse:
    """The app's first code: two-factor sign-in is on, this session is
    verified, and the recovery codes wait in the session to be shown once."""
    agent = _agent(request)
    if not _tried(request, agent):
        return _setup(request, agent, _too_many(), status=429)
    try:
        enrolled = second_factor.confirm_enrolment(
            agent=agent,
            code=request.POST.get("code", "")[:100],
            keep_session_key=request.session.session_key,
        )
    except second_factor.SecondFactorRefused as error:
        return _setup(request, agent, error.message, status=400)
    django_otp.login(request, enrolled.device)
    request.session[NEW_RECOVERY_CODES] = enrolled.recovery_codes
    messages.success(request, _("Two-factor sign-in is on."))
    return redirect(reverse("agent:settings") + "#two-factor")


@never_cache
@login_required
@require_POST
def turn_off(request: HttpRequest) -> HttpResponse:
    agent = _agent(request)
    if not _tried(request, agent):
        messages.error(request, _too_many())
        return redirect(reverse("agent:settings") + "#two-factor")
    try:
        second_factor.disable(
            agent=agent,
            proof=request.POST.get("proof", "")[:4096],
            keep_session_key=request.session.session_key,
        )
    except second_factor.SecondFactorRefused as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("Two-factor sign-in is off."))
    return redirect(reverse("agent:settings") + "#two-factor")
