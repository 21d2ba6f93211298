"""Calls: a client's callback request, when one may be made, and how the
call goes (docs/calls.md)."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone

from agents import events, telephony
from agents.models import Agent, Call, CallbackSettings, Channel, Client
from agents.services.errors import InvalidState, ServiceError

CALLBACK_DISABLED = "Callback disabled"
# Spelled as the original platform's widget returns it; pages compare the string.
CALLBACK_UNAVAILABLE = "Callback unavaiable"
PHONE = re.compile(r"\+?[0-9][0-9 ()./-]{5,30}")


class CallbackUnavailable(ServiceError):
    code = "callback_unavailable"


def normalise_phone(phone: str) -> str:
    """``phone`` as ``+`` and digits, or ServiceError when it is no phone number."""
    phone = phone.strip()
    digits = re.sub(r"\D", "", phone)
    if not PHONE.fullmatch(phone) or not 7 <= len(digits) <= 15:
        raise ServiceError("enter a phone number: 7 to 15 digits, optionally starting with +")
    return ("+" if phone.startswith("+") else "") + digits


def callback_unavailable_reason(
    *, channel: Channel, client: Client | None = None, at: datetime | None = None
) -> str:
    """Why a callback cannot be requested now ("" when it can): switched off,
    outside the channel's working days and hours, or a call of the client's
    still open."""
    rules = CallbackSettings.objects.filter(channel=channel).first()
    if rules is None or not rules.enabled:
        return CALLBACK_DISABLED
    try:
        zone = ZoneInfo(rules.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    local = (at or timezone.now()).astimezone(zone)
    in_hours = rules.opens_at <= local.time() < rules.closes_at
    if local.isoweekday() not in (rules.working_days or []) or not in_hours:
        return CALLBACK_UNAVAILABLE
    if client is not None and client.is_blacklisted:
        return CALLBACK_UNAVAILABLE  # as offline as the chat it sees
    if client is not None and client.calls.filter(status__in=Call.OPEN_STATUSES).exists():
        return CALLBACK_UNAVAILABLE
    return ""


@transaction.atomic
def request_callback(*, channel: Channel, phone: str, client: Client | None = None) -> Call:
    """A client asks to be called back: the call waits for one of the
    channel's agents, and the telephony backend hears of it after commit."""
    number = normalise_phone(phone)
    if client is not None:
        # One open call per client: a second request waits for the first to commit.
        client = Client.objects.select_for_update().get(pk=client.pk)
    reason = callback_unavailable_reason(channel=channel, client=client)
    if reason:
        raise CallbackUnavailable(reason)
    chat = client.chats.order_by("-created", "-id").first() if client else None
    call = Call.objects.create(
        channel=channel, client=client, chat=chat, type=Call.Type.CALLBACK, phone=number
    )
    events.publish(events.CallChanged(call_id=call.pk, status=call.status))
    transaction.on_commit(lambda: telephony.backend().call_requested(call))
    return call


# Which status may follow which; "error" and "end" may follow any open one.
_CALL_STEPS: dict[str, tuple[str, ...]] = {
    Call.Status.AGENT_CONNECTED: (Call.Status.START,),
    Call.Status.CLIENT_CONNECTED: (Call.Status.START, Call.Status.AGENT_CONNECTED),
    Call.Status.END: Call.OPEN_STATUSES,
    Call.Status.ERROR: Call.OPEN_STATUSES,
}


@transaction.atomic
def record_call_progress(
    *, call: Call, agent: Agent, status: str, reason: str = "", record_url: str = ""
) -> Call:
    """An agent (or the telephony backend for one) records how a call goes."""
    call = Call.objects.select_for_update().get(pk=call.pk)
    if status not in _CALL_STEPS:
        raise ServiceError("status must be agent_connected, client_connected, end or error")
    if call.status not in _CALL_STEPS[status]:
        raise InvalidState(f"the call is {call.status} and cannot become {status}")
    reason, record_url = reason.strip(), record_url.strip()
    if status == Call.Status.ERROR and not reason:
        raise ServiceError("say why the call failed")
    if record_url and (status != Call.Status.END or not _is_http_url(record_url)):
        raise ServiceError("a recording URL is an http(s) URL, given when the call ended")
    now = timezone.now()
    call.status = status
    call.reason = reason[:500] if status == Call.Status.ERROR else ""
    call.record_url = record_url
    call.agent = call.agent or agent
    call.updated = now
    if not call.is_open:
        call.ended_at = now
    call.save()
    events.publish(events.CallChanged(call_id=call.pk, status=status))
    return call


def _is_http_url(value: str) -> bool:
    try:
        URLValidator(schemes=["http", "https"])(value)
    except ValidationError:
        return False
    return len(value) <= 1000
