"""Reads of the Bot API: the attachment a B2 URL names, the bot a chat had."""

from __future__ import annotations

import hmac

from agents import idempotency
from agents.models import Chat
from bots.models import BotAttachment, BotEvent, token_hash

SEGMENT_LIMIT = 255


def idempotency_scope(*, provider_pk: int) -> str:
    """The scope of a provider's B2 ``Idempotency-Key``s (``agents.idempotency``)."""
    return f"bot-api:{provider_pk}"


def idempotency_key_seen(*, provider_pk: int, key: str) -> bool:
    """Whether a B2 request with this ``Idempotency-Key`` was acted on."""
    return idempotency.seen(scope=idempotency_scope(provider_pk=provider_pk), key=key)


def attachments_for_path(*, provider_id: str, token: str) -> list[BotAttachment]:
    """The attachments a ``/webhooks/{provider_id}/<token>`` URL names (one
    token may be used on several channels); empty for an unknown pair.

    The lookup goes by the token's SHA-256, which an attacker cannot steer;
    the provider id and the token are then compared in constant time.
    """
    if len(provider_id) > SEGMENT_LIMIT or len(token) > SEGMENT_LIMIT:
        return []
    candidates = BotAttachment.objects.select_related("provider", "channel", "endpoint").filter(
        token_hash=token_hash(token)
    )
    return [
        attachment
        for attachment in candidates
        if hmac.compare_digest(attachment.provider.provider_id.encode(), provider_id.encode())
        and hmac.compare_digest(attachment.token.encode(), token.encode())
    ]


def active_attachment_of(*, channel_id: int) -> BotAttachment | None:
    """The channel's bot, when it and its provider are switched on."""
    return (
        BotAttachment.objects.select_related("provider", "endpoint")
        .filter(channel_id=channel_id, is_active=True, provider__is_active=True)
        .first()
    )


def attachment_that_had(*, chat: Chat) -> BotAttachment | None:
    """The bot the chat was with, if any (still attached): it hears
    AGENT_JOINED and CHAT_CLOSED."""
    last = (
        BotEvent.objects.filter(chat=chat)
        .select_related("attachment__provider", "attachment__endpoint")
        .order_by("-created")
        .first()
    )
    return last.attachment if last else None
