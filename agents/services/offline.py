"""Offline messages: what a visitor leaves while no agent is online, and an
agent marking one handled (docs/calls.md)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from agents import events
from agents.content import Content
from agents.models import Agent, Channel, Client, Message, OfflineMessage
from agents.services.calls import normalise_phone
from agents.services.chats import _keep_blacklisted_message
from agents.services.errors import ServiceError
from config.text import TEXT_LIMIT

OFFLINE_MESSAGE_MAX = TEXT_LIMIT


@transaction.atomic
def leave_offline_message(
    *,
    channel: Channel,
    message: str,
    name: str = "",
    email: str = "",
    phone: str = "",
    description: str = "",
    page_url: str = "",
    page_title: str = "",
    client: Client | None = None,
) -> OfflineMessage | None:
    """Store what a visitor left while no agent was online (None: kept for a
    blacklisted client, told to nobody).

    The message and a way to answer (an e-mail address or a phone number)
    are required; a malformed one is an error that names it.
    """
    message, name, email = message.strip(), name.strip(), email.strip()
    if any("\x00" in value for value in (message, name, email, phone, description, page_title)):
        raise ServiceError("the message holds a NUL character")
    if not message:
        raise ServiceError("write a message")
    if len(message) > OFFLINE_MESSAGE_MAX:
        raise ServiceError(f"the message is longer than {OFFLINE_MESSAGE_MAX} characters")
    if not email and not phone.strip():
        raise ServiceError("give an e-mail address or a phone number so that we can answer")
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ServiceError(f"{email!r} is not a valid e-mail address") from None
        if len(email) > 255:
            raise ServiceError("the e-mail address is longer than 255 characters")
    if phone.strip():
        phone = normalise_phone(phone)
    if len(name) > 255 or len(description) > TEXT_LIMIT:
        raise ServiceError("the name or the description is too long")
    if client is not None and client.is_blacklisted:
        # Taken as usual, kept with the client's other messages, told to nobody.
        reach = ", ".join(filter(None, [name, email, phone]))
        kept = Content(Message.Type.TEXT, f"{message}\n\n(offline form: {reach})"[:TEXT_LIMIT], {})
        _keep_blacklisted_message(client, kept, "")
        return None
    offline = OfflineMessage.objects.create(
        channel=channel,
        client=client,
        name=name,
        email=email,
        phone=phone,
        description=description.strip(),
        message=message,
        page_url=page_url[:1000],  # a link on the pages only when it is http(s)
        page_title=page_title[:500],
    )
    events.publish(events.OfflineMessageReceived(offline_message_id=offline.pk))
    return offline


@transaction.atomic
def mark_offline_message_handled(
    *, offline_message: OfflineMessage, agent: Agent
) -> OfflineMessage:
    offline = OfflineMessage.objects.select_for_update().get(pk=offline_message.pk)
    if offline.handled_at is None:
        offline.handled_at = timezone.now()
        offline.handled_by = agent
        offline.save(update_fields=["handled_at", "handled_by"])
        events.publish(
            events.OfflineMessageHandled(offline_message_id=offline.pk, agent_id=agent.pk)
        )
    return offline
