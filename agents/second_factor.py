"""Two-factor sign-in: the six-digit codes of an authenticator app (TOTP) and
ten single-use recovery codes (docs/security.md, "Two-factor sign-in").

Built on django-otp: the app is a ``TOTPDevice``, the recovery codes are the
tokens of a ``StaticDevice``. A device is unconfirmed from the start of the
set-up until the agent types a first code from the app; only confirmed devices
count. A session is verified (``request.user.is_verified()``) once
``django_otp.login`` named the device that accepted its code.

Every change of an agent's second factor passes through ``_changed``, which
writes the audit entry. Secrets (the key, the codes) are never logged nor
audited.
"""

from __future__ import annotations

import logging
import math
import re
from base64 import b32encode
from dataclasses import dataclass

import django_otp
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django_otp.models import Device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from agents import audit, sessions
from agents.models import Agent
from agents.services import ServiceError

logger = logging.getLogger(__name__)

RECOVERY_CODES = 10
APP_DEVICE = "authenticator app"
RECOVERY_DEVICE = "recovery codes"
_APP_CODE = re.compile(r"[0-9]{6}")


class SecondFactorRefused(ServiceError):
    """A wrong code, a set-up in the wrong state, a throttled device."""

    code = "second_factor_refused"


@dataclass(frozen=True)
class Enrolled:
    """A confirmed second factor: the app's set-up link and the recovery
    codes, shown once."""

    device: TOTPDevice
    recovery_codes: list[str]

    @property
    def otpauth_url(self) -> str:
        return str(self.device.config_url)


# --- reads ---------------------------------------------------------------------


def has_second_factor(*, agent: Agent) -> bool:
    return TOTPDevice.objects.filter(user=agent, confirmed=True).exists()


def must_have_second_factor(*, agent: Agent) -> bool:
    """Whether REQUIRE_2FA (off, admins, everyone) asks this agent for one."""
    required = settings.REQUIRE_2FA
    return required == "everyone" or (required == "admins" and agent.role == Agent.Role.ADMIN)


def pending_enrolment(*, agent: Agent) -> TOTPDevice | None:
    """The app being set up: made, not yet confirmed with a code."""
    return TOTPDevice.objects.filter(user=agent, confirmed=False).first()


def recovery_codes_left(*, agent: Agent) -> int:
    return StaticToken.objects.filter(device__user=agent, device__confirmed=True).count()


def secret_text(device: TOTPDevice) -> str:
    """The key as an app's "enter a set-up key" asks for it: base32, in fours."""
    secret = b32encode(device.bin_key).decode()
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


# --- the sign-in step ----------------------------------------------------------


def verify_code(*, agent: Agent, code: str) -> Device:
    """The device of ``agent`` that accepts ``code``: six digits from the app,
    or a recovery code (which is then used up). django-otp's throttling makes
    each wrong code double the wait before the next is checked."""
    device, token = _device_for(agent=agent, code=code)
    if device is None:
        raise SecondFactorRefused(_("That code is not right."))
    _refuse_while_throttled(device)
    verified = django_otp.verify_token(agent, device.persistent_id, token)
    if verified is None:
        raise SecondFactorRefused(_("That code is not right."))
    if isinstance(verified, StaticDevice):
        logger.info(
            "second_factor.recovery_code_used agent=%s left=%s",
            agent.pk,
            recovery_codes_left(agent=agent),
        )
    return verified


def _device_for(*, agent: Agent, code: str) -> tuple[Device | None, str]:
    token = "".join(code.split()).lower()
    model: type[Device] = TOTPDevice if _APP_CODE.fullmatch(token) else StaticDevice
    return model.objects.filter(user=agent, confirmed=True).first(), token


def _refuse_while_throttled(device: Device) -> None:
    allowed, why = device.verify_is_allowed()
    if allowed:
        return
    until = (why or {}).get("locked_until")
    seconds = max(1, math.ceil((until - timezone.now()).total_seconds())) if until else 1
    raise SecondFactorRefused(
        ngettext(
            "After wrong codes, the next is checked in %(seconds)d second.",
            "After wrong codes, the next is checked in %(seconds)d seconds.",
            seconds,
        )
        % {"seconds": seconds}
    )


def _accepted(device: TOTPDevice, code: str) -> bool:
    """Whether the app's ``code`` fits ``device``, checked in a transaction of
    its own so a failure's throttling count is kept when the caller refuses."""
    token = "".join(code.split())
    return django_otp.verify_token(device.user, device.persistent_id, token) is not None


# --- changes -------------------------------------------------------------------


@transaction.atomic
def begin_enrolment(*, agent: Agent) -> TOTPDevice:
    """A new, unconfirmed app with a new key; an earlier unfinished set-up is dropped."""
    if has_second_factor(agent=agent):
        raise SecondFactorRefused(_("Two-factor sign-in is on already."))
    TOTPDevice.objects.filter(user=agent, confirmed=False).delete()
    return TOTPDevice.objects.create(user=agent, name=APP_DEVICE, confirmed=False)


def confirm_enrolment(*, agent: Agent, code: str, keep_session_key: str | None = None) -> Enrolled:
    """The app's first code confirms it; ten recovery codes are made. The
    agent's other sessions than ``keep_session_key``'s are signed out."""
    device = pending_enrolment(agent=agent)
    if device is None:
        raise SecondFactorRefused(_("Start the set-up again: it was not started or has ended."))
    _refuse_while_throttled(device)
    if not _accepted(device, code):
        raise SecondFactorRefused(_("That code is not right: type the one your app shows now."))
    with transaction.atomic():
        confirmed = TOTPDevice.objects.filter(pk=device.pk, confirmed=False).update(confirmed=True)
        if not confirmed:  # another request confirmed it first
            raise SecondFactorRefused(_("Two-factor sign-in is on already."))
        device.refresh_from_db()
        return _enabled(agent=agent, device=device, actor=agent, keep_session_key=keep_session_key)


def disable(*, agent: Agent, proof: str, keep_session_key: str | None = None) -> None:
    """The agent turns it off, proving it is them: a code from the app or the
    password (a borrowed session has neither). The agent's other sessions
    than ``keep_session_key``'s are signed out."""
    device = TOTPDevice.objects.filter(user=agent, confirmed=True).first()
    if device is None:
        raise SecondFactorRefused(_("Two-factor sign-in is off already."))
    if _APP_CODE.fullmatch("".join(proof.split())):
        _refuse_while_throttled(device)
        proven = _accepted(device, proof)
    else:
        proven = agent.check_password(proof)
    if not proven:
        raise SecondFactorRefused(_("Type a code from your app, or your password."))
    with transaction.atomic():
        _remove(agent=agent, actor=agent, keep_session_key=keep_session_key)


@transaction.atomic
def reset(*, agent: Agent, by: Agent) -> bool:
    """An admin removes ``agent``'s second factor (a lost phone and lost
    codes): every session of the agent ends, and the agent signs in with the
    password alone and sets it up again (at once, if REQUIRE_2FA asks it of
    them). False: there was none."""
    return _remove(agent=agent, actor=by, how="reset")


@transaction.atomic
def enrol_for_command(*, agent: Agent, replace: bool = False) -> Enrolled:
    """``manage.py enrol_totp``: a confirmed app and recovery codes at once,
    for scripted set-ups. One already there is kept unless ``replace``."""
    if has_second_factor(agent=agent):
        if not replace:
            raise SecondFactorRefused(f"{agent.email} has a second factor already")
        _remove(agent=agent, actor=audit.COMMAND_LINE, how="replaced")
    TOTPDevice.objects.filter(user=agent).delete()
    device = TOTPDevice.objects.create(user=agent, name=APP_DEVICE, confirmed=True)
    return _enabled(agent=agent, device=device, actor=audit.COMMAND_LINE)


def _enabled(
    *, agent: Agent, device: TOTPDevice, actor: Agent | str, keep_session_key: str | None = None
) -> Enrolled:
    StaticDevice.objects.filter(user=agent).delete()
    recovery = StaticDevice.objects.create(user=agent, name=RECOVERY_DEVICE, confirmed=True)
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create(StaticToken(device=recovery, token=code) for code in codes)
    _changed(
        agent=agent,
        action=audit.Action.SECOND_FACTOR_ENABLED,
        actor=actor,
        keep_session_key=keep_session_key,
    )
    return Enrolled(device=device, recovery_codes=codes)


def _remove(
    *, agent: Agent, actor: Agent | str, how: str = "", keep_session_key: str | None = None
) -> bool:
    had = has_second_factor(agent=agent)
    TOTPDevice.objects.filter(user=agent).delete()
    StaticDevice.objects.filter(user=agent).delete()
    if had:
        _changed(
            agent=agent,
            action=audit.Action.SECOND_FACTOR_DISABLED,
            actor=actor,
            how=how,
            keep_session_key=keep_session_key,
        )
    return had


def _changed(
    *,
    agent: Agent,
    action: audit.Action,
    actor: Agent | str,
    how: str = "",
    keep_session_key: str | None = None,
) -> None:
    """The one place an agent's second factor is known to have changed (in
    the change's transaction): the audit entry, and every session of the
    agent but ``keep_session_key``'s (the one that made the change, if it
    was the agent's own) signed out."""
    detail = {"how": how} if how else {}  # "reset" by an admin, "replaced" by the command
    audit.record(action, actor=actor, target=audit.of_agent(agent), **detail)
    sessions.sign_out_other_sessions(agent=agent, keep_session_key=keep_session_key, by=actor)
    logger.info("%s agent=%s", action.value, agent.pk)
