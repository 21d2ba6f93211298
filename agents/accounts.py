"""Agents' passwords: setting one, changing one, and the reset link mailed
to a forgotten one (docs/agent-pages.md, "Passwords").

Every password set here passes ``AUTH_PASSWORD_VALIDATORS`` (Django's
similarity, common-password, numeric and length checks), whoever sets it:
the settings page, a reset link, ``create_agent``. Django's admin forms run
the same validators themselves.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from agents import audit, languages, mail, sessions
from agents.models import Agent, Mail
from agents.services import ServiceError

logger = logging.getLogger(__name__)


class PasswordRefused(ServiceError):
    """A new password the validators refuse, or a wrong current password."""

    code = "invalid_password"


class WrongPassword(PasswordRefused):
    """The current password, asked before a change, is not the agent's."""


@transaction.atomic
def set_password(*, agent: Agent, password: str) -> Agent:
    """Give ``agent`` a new password once the validators accept it. The
    password's hash changes, so every session signed in before ends at its
    next request (Django's session auth hash); the caller keeps its own with
    ``update_session_auth_hash``."""
    try:
        validate_password(password, agent)
    except ValidationError as error:
        raise PasswordRefused(" ".join(error.messages)) from error
    agent.set_password(password)
    agent.save(update_fields=["password"])
    logger.info("agent.password_set agent=%s", agent.pk)
    return agent


@transaction.atomic
def change_password(
    *, agent: Agent, old_password: str, new_password: str, keep_session_key: str | None
) -> Agent:
    """The settings page's change: the current password first, then a new one.
    Every session but ``keep_session_key``'s (the one that asked) ends now."""
    if not agent.check_password(old_password):
        raise WrongPassword("Your current password is not right.")
    if new_password == old_password:
        raise PasswordRefused(gettext_lazy("The new password is the one you have."))
    set_password(agent=agent, password=new_password)
    sessions.sign_out_other_sessions(agent=agent, keep_session_key=keep_session_key)
    audit.record(audit.Action.PASSWORD_CHANGED, actor=agent, target=audit.of_agent(agent))
    return agent


@transaction.atomic
def reset_password(*, agent: Agent, password: str) -> Agent:
    """A reset link's new password: every session of the agent ends (whoever
    knew the old password is signed out)."""
    set_password(agent=agent, password=password)
    # Whoever opened the link is signed in nowhere: the system acts, as the
    # audit log says of a reset.
    sessions.sign_out_other_sessions(agent=agent, keep_session_key=None, by=audit.SYSTEM)
    audit.record(audit.Action.PASSWORD_RESET, target=audit.of_agent(agent))
    return agent


def ask_password_reset(*, email: str) -> None:
    """The ask of "Forgot password?". The lookup and the mail happen in a
    worker after commit, so the page's answer takes the same time and says
    the same thing whether or not an agent has ``email``."""
    transaction.on_commit(lambda: _hand_over(email))


def _hand_over(email: str) -> None:
    from agents.tasks import mail_password_reset as task

    try:
        task.delay(email)
    except Exception:  # the broker is down: the agent asks again
        logger.warning("password_reset.hand_over_failed")


@transaction.atomic
def mail_password_reset(*, email: str) -> Mail | None:
    """Queue the reset link for the active agent with ``email`` who has a
    password (an API-only agent has none to reset); nothing for anyone else."""
    # Any case: the admin's form keeps an address as it was typed.
    agent = Agent.objects.filter(email__iexact=email.strip(), is_active=True).first()
    if agent is None or not agent.has_usable_password():
        logger.info("password_reset.no_agent")
        return None
    path = reverse(
        "agent:password-reset",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(agent.pk)),
            "token": default_token_generator.make_token(agent),
        },
    )
    context = {
        "agent": agent,
        "link": settings.PUBLIC_URL + path,
        "minutes": settings.PASSWORD_RESET_TIMEOUT // 60,
    }
    logger.info("password_reset.mailed agent=%s", agent.pk)
    with translation.override(languages.of_agent(agent)):  # the agent's, as their pages
        return mail.queue_mail(
            to=agent.email,
            subject=_("Reset your Switchboard password"),
            text=render_to_string("agents/mail/password_reset.txt", context),
        )
