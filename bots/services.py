"""Bot providers and attachments, and the Bot API's verbs (docs/bot-api.md).

Verbs change state in a transaction and raise a ``BotError`` when a request
cannot be done; they know no HTTP status (``bots/views.py`` maps the errors
to the spec's codes).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from agents import audit, idempotency
from agents import services as chats
from agents.content import Content
from agents.models import Agent, Channel, Chat, Message
from agents.selectors import agents_online
from bots import payloads, selectors
from bots.models import BotAttachment, BotEvent, BotProvider, token_hash
from delivery import services as delivery

PURPOSE = "bot_event"

logger = logging.getLogger(__name__)

# The token travels as the last path segment both ways: URL-safe characters only.
TOKEN = re.compile(r"[A-Za-z0-9._~-]{8,255}")


class BotError(Exception):
    """A Bot API request or an admin change that cannot be done."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidBotRequest(BotError):
    """Missing or malformed fields, an unknown event or type (400 invalid_request)."""


class UnknownBot(BotError):
    """No attachment has this provider id and token (401 invalid_client)."""


class BotSwitchedOff(BotError):
    """The provider or its attachment is switched off (403 unauthorized_client)."""


class ChatNotFound(BotError):
    """The chat is not one of this bot's channels' (404)."""


class ChatNotWithBot(BotError):
    """The chat is with an agent now, or finished (403)."""


# --- providers and attachments ---------------------------------------------


@transaction.atomic
def create_bot_provider(
    *, name: str, endpoint_url: str, display_name: str = "", by: Agent | str | None = None
) -> BotProvider:
    if BotProvider.objects.filter(name=name).exists():
        raise BotError(f"a bot provider named {name!r} exists already")
    delivery.validate_endpoint_url(endpoint_url)
    provider = BotProvider.objects.create(
        name=name, endpoint_url=endpoint_url, display_name=display_name
    )
    logger.info("bots.provider_created provider=%s", provider.pk)
    audit.record(
        audit.Action.BOT_CHANGED, actor=by, target=_of_provider(provider), change="created"
    )
    return provider


def _of_provider(provider: BotProvider) -> str:
    return f"bot provider {provider.provider_id} {provider.name}"


@transaction.atomic
def update_bot_provider(
    *,
    provider: BotProvider,
    name: str,
    endpoint_url: str,
    display_name: str,
    active: bool,
    by: Agent | str | None = None,
) -> BotProvider:
    """Change a provider; a new endpoint URL takes effect for every attachment.
    Audited with the names of the fields that changed (never the URL: it may
    hold a secret of the provider's)."""
    delivery.validate_endpoint_url(endpoint_url)
    before = (provider.name, provider.display_name, provider.endpoint_url, provider.is_active)
    after = (name, display_name, endpoint_url, active)
    changed = [
        field
        for field, old, new in zip(
            ("name", "display_name", "endpoint_url", "is_active"), before, after, strict=True
        )
        if old != new
    ]
    provider.name, provider.display_name = name, display_name
    provider.endpoint_url, provider.is_active = endpoint_url, active
    provider.save(update_fields=["name", "display_name", "endpoint_url", "is_active"])
    for attachment in provider.attachments.select_related("endpoint"):
        attachment.provider = provider
        delivery.update_endpoint(endpoint=attachment.endpoint, url=attachment.target_url)
    if changed:
        audit.record(
            audit.Action.BOT_CHANGED,
            actor=by,
            target=_of_provider(provider),
            change="changed",
            fields=", ".join(changed),
        )
    return provider


def _check_token(token: str) -> None:
    if not TOKEN.fullmatch(token):
        raise BotError(
            "the token must be 8 to 255 characters of letters, digits and . _ ~ - "
            "(it is the last segment of a URL)"
        )


@transaction.atomic
def attach_bot(
    *, channel: Channel, provider: BotProvider, token: str, by: Agent | str | None = None
) -> tuple[BotAttachment, str]:
    """Attach ``provider`` to ``channel`` (one bot per channel: a new one replaces
    the old). Returns the attachment and the secret its B1 requests are signed
    with (shown once)."""
    _check_token(token)
    detach_bot(channel=channel, by=by)
    attachment = BotAttachment(channel=channel, provider=provider, token=token)
    attachment.token_hash = token_hash(token)
    attachment.endpoint, secret = delivery.create_endpoint(url=attachment.target_url)
    attachment.save()
    logger.info("bots.attached channel=%s provider=%s", channel.public_id, provider.pk)
    audit.record(
        audit.Action.BOT_ATTACHED,
        actor=by,
        target=audit.of_channel(channel),
        provider=provider.provider_id,
    )
    return attachment, secret


@transaction.atomic
def rotate_signing_secret(*, attachment: BotAttachment, by: Agent | str | None = None) -> str:
    """A new secret signing the attachment's B1 requests (the old one signs
    too for DELIVERY_SECRET_GRACE_SECONDS); returned once."""
    secret = delivery.rotate_secret(endpoint=attachment.endpoint)
    audit.record(
        audit.Action.CHANNEL_SECRET_ROTATED,
        actor=by,
        target=audit.of_channel(attachment.channel),
        which="bot signing secret",
    )
    return secret


@transaction.atomic
def set_attachment_active(
    *, attachment: BotAttachment, active: bool, by: Agent | str | None = None
) -> BotAttachment:
    if attachment.is_active != active:
        audit.record(
            audit.Action.BOT_CHANGED,
            actor=by,
            target=audit.of_channel(attachment.channel),
            change="switched on" if active else "switched off",
        )
    attachment.is_active = active
    attachment.save(update_fields=["is_active"])
    return attachment


@transaction.atomic
def detach_bot(*, channel: Channel, by: Agent | str | None = None) -> bool:
    """Take the channel's bot off; its chats stay as they are. False if it had none."""
    attachment = BotAttachment.objects.filter(channel=channel).select_related("endpoint").first()
    if attachment is None:
        return False
    endpoint = attachment.endpoint
    attachment.delete()
    # The endpoint keeps the delivery log of the events sent; it only stops sending.
    delivery.update_endpoint(endpoint=endpoint, active=False)
    logger.info("bots.detached channel=%s", channel.public_id)
    audit.record(
        audit.Action.BOT_DETACHED,
        actor=by,
        target=audit.of_channel(channel),
        provider=attachment.provider.provider_id,
    )
    return True


# --- B1: events to the provider --------------------------------------------


def send_event(
    *, attachment: BotAttachment, chat: Chat, kind: str, message: Message | None = None
) -> BotEvent:
    """Write a B1 event to the outbox, in the caller's transaction; events of
    one chat arrive in the order written."""
    bot_event = BotEvent(attachment=attachment, chat=chat, kind=kind)
    body = payloads.event(
        bot_event,
        chat=chat,
        agents_online=agents_online(channel=chat.channel),
        message=message,
    )
    bot_event.delivery = delivery.enqueue(
        endpoint=attachment.endpoint,
        purpose=PURPOSE,
        event=kind,
        body=body,
        policy=PURPOSE,
        ordering_key=f"chat:{chat.pk}",
        subject=f"chat:{chat.pk}",
    )
    bot_event.save()
    logger.info("bots.event_sent chat=%s event=%s id=%s", chat.pk, kind, bot_event.pk)
    return bot_event


@transaction.atomic
def forward_client_message(*, message: Message) -> BotEvent | None:
    """CLIENT_MESSAGE for a client message in a chat the bot owns. A bot that
    was switched off meanwhile loses the chat to the agents."""
    chat = Chat.objects.select_related("channel", "client").get(pk=message.chat_id)
    if chat.state != Chat.State.BOT:
        return None  # with an agent (or queued for one): the bot is quiet
    attachment = selectors.active_attachment_of(channel_id=chat.channel_id)
    if attachment is None:
        _hand_over(chat, note="The bot is switched off: the chat goes to the agents.")
        return None
    return send_event(
        attachment=attachment, chat=chat, kind=BotEvent.Kind.CLIENT_MESSAGE, message=message
    )


def _hand_over(chat: Chat, *, note: str) -> Chat:
    """The bot failed the chat: it waits in the queue for an agent, with a note."""
    chat = chats.queue_chat(chat=chat, reason=note)
    chats.post_system_message(chat=chat, text=note)
    return chat


def _answered(chat: Chat) -> None:
    if getattr(chat, "bot_answer_due", True) is False:
        return  # read under the chat's lock: nothing waits (B2's next messages)
    BotEvent.objects.filter(
        chat=chat, kind=BotEvent.Kind.CLIENT_MESSAGE, answered_at__isnull=True
    ).update(answered_at=timezone.now())


@transaction.atomic
def event_acknowledged(*, bot_event: BotEvent) -> BotEvent:
    """The provider took a CLIENT_MESSAGE: its answer is due within the reply timeout."""
    if bot_event.kind == BotEvent.Kind.CLIENT_MESSAGE and bot_event.acknowledged_at is None:
        bot_event.acknowledged_at = timezone.now()
        bot_event.save(update_fields=["acknowledged_at"])
    return bot_event


@transaction.atomic
def event_failed(*, bot_event: BotEvent, error: str) -> Chat | None:
    """Every send of a CLIENT_MESSAGE failed: the chat goes to the agents."""
    if bot_event.kind != BotEvent.Kind.CLIENT_MESSAGE:
        return None  # the log shows it; nobody waits for these
    chat = Chat.objects.select_for_update().get(pk=bot_event.chat_id)
    if chat.state != Chat.State.BOT:
        return None
    _answered(chat)
    return _hand_over(chat, note=f"The bot did not answer: {error}")


@transaction.atomic
def hand_over_if_silent(*, bot_event: BotEvent) -> bool:
    """A CLIENT_MESSAGE acknowledged longer than BOT_REPLY_TIMEOUT_SECONDS ago
    and never answered hands its chat to the agents. True when it did."""
    chat = Chat.objects.select_for_update().get(pk=bot_event.chat_id)
    bot_event.refresh_from_db()
    timeout = settings.BOT_REPLY_TIMEOUT_SECONDS
    due = timezone.now() - timedelta(seconds=timeout)
    silent = (
        bot_event.answered_at is None
        and bot_event.acknowledged_at is not None
        and bot_event.acknowledged_at <= due
    )
    if not silent or chat.state != Chat.State.BOT:
        return False
    _answered(chat)
    _hand_over(
        chat, note=f"The bot did not answer within {timeout} s: the chat goes to the agents."
    )
    return True


def silent_events() -> list[BotEvent]:
    due = timezone.now() - timedelta(seconds=settings.BOT_REPLY_TIMEOUT_SECONDS)
    return list(
        BotEvent.objects.filter(
            kind=BotEvent.Kind.CLIENT_MESSAGE,
            answered_at__isnull=True,
            acknowledged_at__lte=due,
            chat__state=Chat.State.BOT,
        )[:500]
    )


@transaction.atomic
def agent_joined(*, chat: Chat) -> BotEvent | None:
    """AGENT_JOINED to the bot that had the chat (after INVITE_AGENT or a take-over)."""
    attachment = selectors.attachment_that_had(chat=chat)
    if attachment is None:
        return None
    _answered(chat)
    return send_event(attachment=attachment, chat=chat, kind=BotEvent.Kind.AGENT_JOINED)


@transaction.atomic
def chat_closed(*, chat: Chat) -> BotEvent | None:
    attachment = selectors.attachment_that_had(chat=chat)
    if attachment is None:
        return None
    _answered(chat)
    return send_event(attachment=attachment, chat=chat, kind=BotEvent.Kind.CHAT_CLOSED)


# --- B2: events from the provider ------------------------------------------


@dataclass(frozen=True)
class BotRequest:
    """One parsed B2 event (``bots/serializers.py``)."""

    event: str
    chat_id: int
    client_id: int | None = None
    content: Content | None = None
    contact: dict[str, str] = field(default_factory=dict)


@transaction.atomic
def receive_event(
    *, attachments: list[BotAttachment], request: BotRequest, idempotency_key: str = ""
) -> None:
    """Act on a B2 event. A repeated ``Idempotency-Key`` changes nothing."""
    attachment, chat = _attachment_and_locked_chat(attachments, request)
    scope = selectors.idempotency_scope(provider_pk=attachment.provider_id)
    if idempotency_key and not idempotency.claim(scope=scope, key=idempotency_key):
        return
    if request.event == "CLIENT_INFO":
        chats.update_client_contact(client=chat.client, contact=request.contact, source="bot")
    elif request.event == "INVITE_AGENT":
        _invite_agent(attachment, chat)
    else:
        assert request.content is not None
        _post_bot_message(attachment, chat, request.content)
    logger.info("bots.event_received chat=%s event=%s", chat.pk, request.event)


def _attachment_and_locked_chat(
    attachments: list[BotAttachment], request: BotRequest
) -> tuple[BotAttachment, Chat]:
    """The attachment the event's chat belongs to, and the chat, locked, with
    its channel and the channel's Chat API row: one query."""
    if not attachments:
        raise UnknownBot("unknown provider id and token")
    if not attachments[0].provider.is_active:
        raise BotSwitchedOff("the bot provider is switched off")
    by_channel = {attachment.channel_id: attachment for attachment in attachments}
    # Whether a client message waits for the bot's answer is read with the
    # chat: a client message takes the chat's lock too, so it holds.
    waiting = BotEvent.objects.filter(
        chat=OuterRef("pk"), kind=BotEvent.Kind.CLIENT_MESSAGE, answered_at__isnull=True
    )
    # The channel's Chat API row and endpoint come with it (none on another
    # kind's channel): the A3 of a bot message is written without reading them.
    chat = (
        Chat.objects.select_for_update(of=("self",))
        .select_related("channel__chat_api__endpoint", "client")
        .annotate(bot_answer_due=Exists(waiting))
        .filter(pk=request.chat_id, channel_id__in=by_channel)
        .first()
    )
    if chat is None or (request.client_id is not None and chat.client_id != request.client_id):
        raise ChatNotFound(f"no chat {request.chat_id} of this client on this bot's channels")
    attachment = by_channel[chat.channel_id]
    if not attachment.is_active:
        raise BotSwitchedOff("the bot is switched off on this channel")
    return attachment, chat


def _refuse_unless_with_bot(chat: Chat) -> None:
    if chat.state == Chat.State.FINISHED:
        raise ChatNotWithBot("the chat is finished")
    if chat.state != Chat.State.BOT:
        raise ChatNotWithBot(
            "the chat was handed to the agents; the bot may not write in it "
            "unless it is handed back (AGENT_UNAVAILABLE)"
        )


def _post_bot_message(attachment: BotAttachment, chat: Chat, content: Content) -> None:
    _refuse_unless_with_bot(chat)
    _answered(chat)
    chats.post_bot_message(
        chat=chat, content=content, sender_name=attachment.provider.shown_name, chat_locked=True
    )


def _invite_agent(attachment: BotAttachment, chat: Chat) -> None:
    """INVITE_AGENT: the chat goes to the queue; with no agent of the channel
    online it comes straight back and the bot hears AGENT_UNAVAILABLE."""
    if chat.state in (Chat.State.QUEUED, Chat.State.ACTIVE):
        return  # invited already (a retry): nothing more to do
    _refuse_unless_with_bot(chat)
    _answered(chat)
    chats.queue_chat(chat=chat, reason="the bot invited an agent")
    if agents_online(channel=chat.channel):
        chats.post_system_message(chat=chat, text="The bot invited an agent.")
        return
    chats.return_chat_to_bot(chat=chat, reason="no agent of the channel is online")
    chats.post_system_message(
        chat=chat, text="The bot invited an agent, but none is online: the bot has the chat again."
    )
    send_event(attachment=attachment, chat=chat, kind=BotEvent.Kind.AGENT_UNAVAILABLE)
