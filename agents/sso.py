"""Single sign-on with OpenID Connect (docs/security.md, "Single sign-on").

mozilla-django-oidc runs the code flow: the state, the nonce, PKCE, the
exchange of the code at the provider's token endpoint and the ID token's
signature. This module decides who that is: the agent whose address
(any case) the provider says it verified, if that agent is active. An
address no agent has is refused, or becomes an agent when
``OIDC_CREATE_AGENTS`` allows it.

A refusal is left on the request for the sign-in page, which says why, and
for the audit log's failed sign-in (``audit.refuse``); the success is
Django's ``user_logged_in``, which the audit log records as any sign-in.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from jwt import InvalidTokenError
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from agents import audit
from agents.models import Agent

logger = logging.getLogger(__name__)

# Why a single sign-on was refused: the audit entry's ``reason``, and what
# the sign-in page says ({provider}: OIDC_PROVIDER_NAME; {email}: the address).
REFUSALS = {
    "no_email": "{provider} did not give your email address: Switchboard cannot tell who you are.",
    "email_unverified": "{provider} has not verified {email}: verify it there, then sign in again.",
    "no_agent": "No agent signs in with {email}. Ask an admin to add you.",
    "agent_inactive": "The agent {email} is switched off. Ask an admin.",
    "several_agents": "Several agents have the address {email}, in different cases. Ask an admin.",
    "provider_failed": "Signing in with {provider} did not complete. Please try again.",
}


class AgentBackend(OIDCAuthenticationBackend):
    """Signs in the agent the provider vouches for, by verified address."""

    def authenticate(self, request: HttpRequest | None, **credentials: Any) -> Agent | None:
        # Only the callback view hands over a nonce: a password sign-in whose
        # address happens to carry ?code=&state= is none of this backend's.
        if request is None or "nonce" not in credentials:
            return None
        try:
            agent: Agent | None = super().authenticate(request, **credentials)
        # OSError: requests' errors (the provider unreachable or answering an
        # error); the others: its token failed a check (signature, nonce, audience).
        except (OSError, SuspiciousOperation, InvalidTokenError) as error:
            logger.warning("sso.provider_failed error=%s", type(error).__name__)
            return self._refuse("provider_failed")
        return agent

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        # The library leaves the audience unchecked: a token the provider
        # made for another of its clients is not for this service.
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token is for another client")
        return payload

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> Agent | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):  # OpenID Connect Core 5.3.2
            logger.warning("sso.provider_failed error=userinfo_of_another_subject")
            return self._refuse("provider_failed")
        # Some providers put the address in the ID token only, some in the
        # userinfo only: the userinfo's if it has one, and the flag saying it
        # was verified from the same place as the address.
        claims = userinfo if "email" in userinfo else payload
        email = str(claims.get("email") or "").strip()
        if not email:
            return self._refuse("no_email")
        # The admin's form keeps an address as typed: two agents may differ
        # in case only, and neither is picked at random.
        matches = list(Agent.objects.filter(email__iexact=email)[:2])
        agent = matches[0] if len(matches) == 1 else None
        # Some providers send the flag as a string.
        if claims.get("email_verified") not in (True, "true"):
            return self._refuse("email_unverified", email=email, agent=agent)
        if len(matches) > 1:
            return self._refuse("several_agents", email=email)
        if agent is None:
            if not settings.OIDC_CREATE_AGENTS:
                return self._refuse("no_agent", email=email)
            name = userinfo.get("name") or payload.get("name") or ""
            return created_or_existing(email=email, name=str(name))
        if not agent.is_active:
            return self._refuse("agent_inactive", email=email, agent=agent)
        return agent

    def _refuse(self, reason: str, *, email: str = "", agent: Agent | None = None) -> Agent | None:
        """Nobody signs in; the sign-in page and the audit log say why."""
        refusal = audit.SigninRefusal(via=audit.VIA_SSO, reason=reason, agent=agent)
        audit.refuse(self.request, refusal)
        message = REFUSALS[reason].format(provider=settings.OIDC_PROVIDER_NAME, email=email)
        messages.error(self.request, message)
        return None

    def get_user(self, user_id: int) -> Agent | None:
        # Django's, which reads is_active: the library's would keep a
        # switched-off agent's single sign-on sessions going.
        user: Agent | None = ModelBackend.get_user(self, user_id)
        return user


@transaction.atomic
def create_agent(*, email: str, name: str) -> Agent:
    """An agent for an address the provider verified (OIDC_CREATE_AGENTS):
    role "agent", no password (they sign in through the provider)."""
    longest = Agent._meta.get_field("name").max_length
    agent = Agent.objects.create_user(email, name=(name or email.split("@")[0])[:longest])
    audit.record(
        audit.Action.AGENT_CREATED,
        actor=audit.VIA_SSO,
        target=audit.of_agent(agent),
        role=agent.role,
    )
    logger.info("sso.agent_created agent=%s", agent.pk)
    return agent


def created_or_existing(*, email: str, name: str) -> Agent | None:
    """The agent ``create_agent`` makes, or, when a first sign-in beside
    this one made it a moment earlier (the address is unique), that one."""
    try:
        return create_agent(email=email, name=name)
    except IntegrityError:
        return Agent.objects.filter(email__iexact=email, is_active=True).first()


class StartView(OIDCAuthenticationRequestView):
    """Off to the provider ("Sign in with …"), ``next`` kept (when safe) for the way back."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.SSO_ENABLED:
            raise Http404("single sign-on is off")
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        return response


class CallbackView(OIDCAuthenticationCallbackView):
    """The provider's way back: signed in and on to ``next``, or back to the
    sign-in page, which says why not."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.SSO_ENABLED:
            raise Http404("single sign-on is off")
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        return response

    def login_failure(self) -> HttpResponse:
        # Cancelled at the provider, or the exchange failed; a locked address
        # is django-axes' page (its middleware), which says so itself.
        locked = getattr(self.request, "axes_locked_out", False)
        if not audit.refusal_of(self.request) and not locked:
            message = REFUSALS["provider_failed"].format(provider=settings.OIDC_PROVIDER_NAME)
            messages.error(self.request, message)
        response: HttpResponse = super().login_failure()
        return response
