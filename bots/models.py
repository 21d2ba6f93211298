"""Bot providers, their attachment to channels, and the B1 events sent to them."""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.html import escape

from agents.models import Channel, Chat, new_public_id
from delivery.models import Delivery, Endpoint
from delivery.ssrf import validate_endpoint_url

URL_PREFIX = "webhooks"


def new_provider_id() -> str:
    """The provider's id in B2 URLs: 192 random bits (less the first
    character's two choices), URL-safe, never starting with "-" like a
    channel's public id (``attach_bot --provider <id>`` takes it)."""
    return new_public_id(24)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class BotProvider(models.Model):
    """A bot platform: where B1 events go, and the id its B2 requests carry."""

    name = models.CharField(max_length=200, unique=True)
    display_name = models.CharField(
        max_length=200, blank=True, help_text="The name clients and agents see on bot messages."
    )
    # The one endpoint-URL check, as for Chat API channels (delivery/ssrf.py).
    endpoint_url = models.CharField(
        max_length=1000,
        validators=[validate_endpoint_url],
        # Escaped: the admin shows help texts as HTML.
        help_text=escape("The provider's endpoint; events go to <url>/<token>."),
    )
    provider_id = models.CharField(
        max_length=64, unique=True, default=new_provider_id, editable=False
    )
    is_active = models.BooleanField(default=True)
    created = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def shown_name(self) -> str:
        return self.display_name or self.name

    @property
    def webhook_url_prefix(self) -> str:
        """B2 URLs up to and including ``/webhooks/{provider_id}/``; the token follows."""
        return f"{settings.PUBLIC_URL}/{URL_PREFIX}/{self.provider_id}/"


class BotAttachment(models.Model):
    """A provider attached to one channel with the token the provider generated.

    One bot per channel. The token is the last path segment both ways; its
    SHA-256 finds the attachment of a B2 request, and the token itself is
    then compared in constant time.
    """

    channel = models.OneToOneField(Channel, on_delete=models.CASCADE, related_name="bot")
    provider = models.ForeignKey(BotProvider, on_delete=models.CASCADE, related_name="attachments")
    token = models.CharField(max_length=255, editable=False)
    token_hash = models.CharField(max_length=64, db_index=True, editable=False)
    # B1 events go here: ``{provider endpoint}/<token>``, signed with its secret.
    endpoint = models.OneToOneField(Endpoint, on_delete=models.PROTECT, related_name="bot")
    is_active = models.BooleanField(default=True)
    created = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = "bot attachment"

    def __str__(self) -> str:
        return f"{self.provider} on {self.channel.name}"

    @property
    def target_url(self) -> str:
        return f"{self.provider.endpoint_url.rstrip('/')}/{self.token}"


class BotEvent(models.Model):
    """A B1 event sent for a chat, and the delivery that carries it.

    ``id`` is the envelope's ``id``. A CLIENT_MESSAGE the provider
    acknowledged waits for its answer (BOT_MESSAGE or INVITE_AGENT) until
    BOT_REPLY_TIMEOUT_SECONDS after ``acknowledged_at``.
    """

    class Kind(models.TextChoices):
        CLIENT_MESSAGE = "CLIENT_MESSAGE"
        AGENT_JOINED = "AGENT_JOINED"
        AGENT_UNAVAILABLE = "AGENT_UNAVAILABLE"
        CHAT_CLOSED = "CHAT_CLOSED"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    attachment = models.ForeignKey(BotAttachment, on_delete=models.CASCADE, related_name="events")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="bot_events")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    delivery = models.OneToOneField(
        Delivery, null=True, on_delete=models.SET_NULL, related_name="bot_event"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created"]
        indexes = [
            models.Index(
                fields=["acknowledged_at"],
                name="bot_event_awaiting_answer",
                condition=models.Q(kind="CLIENT_MESSAGE", answered_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"
