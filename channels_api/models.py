"""A Chat API channel: where an integrator's own chat front end plugs in."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils.html import escape

from agents.models import Channel, Message
from delivery.models import Delivery, Endpoint
from delivery.ssrf import validate_endpoint_url

URL_PREFIX = "chat-api"


def new_path_secret() -> str:
    """The random string of the endpoint URL: 192 bits, URL-safe."""
    return secrets.token_urlsafe(24)


class ChatApiChannel(models.Model):
    channel = models.OneToOneField(Channel, on_delete=models.CASCADE, related_name="chat_api")
    path_secret = models.CharField(max_length=64, default=new_path_secret, editable=False)
    # A CharField with the one endpoint-URL check, not a URLField: its own URL
    # rules would disagree with the services' (delivery/ssrf.py).
    webhook_url = models.CharField(
        max_length=1000,
        validators=[validate_endpoint_url],
        verbose_name="Webhook URL",
        # Escaped: the admin shows help texts as HTML.
        help_text=escape("The integrator's server; agent messages go to <url>/<id>."),
    )
    endpoint = models.OneToOneField(Endpoint, on_delete=models.PROTECT, related_name="chat_api")
    unique_message_ids = models.BooleanField(
        default=False,
        help_text="De-duplicate user messages by message.id. Off by default: many "
        "integrators send the same message.id on every message.",
    )

    class Meta:
        verbose_name = "Chat API channel"

    def __str__(self) -> str:
        return self.channel.name

    @property
    def endpoint_url(self) -> str:
        return f"{settings.PUBLIC_URL}/{URL_PREFIX}/{self.path_secret}/{self.channel.public_id}"

    @property
    def status_url(self) -> str:
        return f"{self.endpoint_url}/status"

    @property
    def target_url(self) -> str:
        """Where A3 agent messages are POSTed: ``{webhook URL}/<CHANNEL_PUBLIC_ID>``."""
        return f"{self.webhook_url.rstrip('/')}/{self.channel.public_id}"

    @property
    def idempotency_scope(self) -> str:
        """The scope of this channel's A2 ``Idempotency-Key``s (``agents.idempotency``)."""
        return f"chat-api:{self.channel_id}"


class MessageDelivery(models.Model):
    """Which A3 delivery carried which message: one row per delivery.

    Written with the delivery (``services.send_message``); a message sent
    again by hand has one row per delivery, the newest last.
    """

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    delivery = models.OneToOneField(
        Delivery, on_delete=models.CASCADE, related_name="chat_api_message"
    )

    def __str__(self) -> str:
        return f"message {self.message_id} → delivery {self.delivery_id}"
