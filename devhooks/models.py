"""The installation's developer-webhook settings (one row) and the Safe URL
rule, which chat each webhook delivery is about, and the widget channels."""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import urlsplit

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from agents.models import Channel, Chat, Department
from delivery.models import Delivery, Endpoint
from delivery.ssrf import stray_character
from devhooks.widget.languages import DEFAULT_LANGUAGE, WIDGET_LANGUAGES

HEX_COLOR = r"^#[0-9a-fA-F]{6}$"

EVENTS = (
    "chat_accepted",
    "chat_assigned",
    "chat_finished",
    "chat_updated",
    "offline_message",
    "call_event",
)


class IntegrationSettings(models.Model):
    """Settings, Integration settings for developers: where events go, which
    ones, and the Safe URL rule. One row per installation (``load()``)."""

    SINGLETON: ClassVar[int] = 1

    # The webhook URL and its signing secret live on the delivery endpoint.
    endpoint = models.OneToOneField(
        Endpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="devhooks"
    )
    # The events sent; empty means all of them.
    events = models.JSONField(default=list, blank=True)
    safe_url = models.BooleanField(
        default=False,
        help_text="Drop links to other domains from custom data and CRM answers: "
        "the agent never sees them.",
    )
    safe_url_domains = models.JSONField(default=list, blank=True)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "integration settings for developers"
        verbose_name_plural = "integration settings for developers"

    def __str__(self) -> str:
        return "Integration settings for developers"

    @classmethod
    def load(cls) -> IntegrationSettings:
        found = cls.objects.select_related("endpoint").filter(pk=cls.SINGLETON).first()
        return found if found is not None else cls(pk=cls.SINGLETON)

    @property
    def url(self) -> str:
        return self.endpoint.url if self.endpoint else ""

    def sends(self, event_name: str) -> bool:
        """Whether ``event_name`` goes out: a webhook URL is set, switched on,
        and the event is chosen (no choice means all)."""
        if self.endpoint is None or not self.endpoint.active:
            return False
        return not self.events or event_name in self.events

    def link_allowed(self, url: str) -> bool:
        """With Safe URL on, only links to the allowed domains (and their
        subdomains) are shown; links that are not http(s) never are, nor
        links a browser may read otherwise than we do (``\\`` in
        ``https://evil.net\\@example.com/`` takes a browser to evil.net)."""
        url = url.strip()
        if stray_character(url) is not None:
            return False
        try:
            parts = urlsplit(url)
        except ValueError:
            return False
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return False
        if not self.safe_url:
            return True
        host = parts.hostname.lower().rstrip(".")
        return any(
            host == domain or host.endswith("." + domain) for domain in self.safe_url_domains
        )


def default_rules() -> dict[str, object]:
    return {"invitations": []}


class WebhookDelivery(models.Model):
    """Which chat a developer-webhook delivery is about: one row per delivery
    of a chat's event, written with it (``webhooks.services.send``), so the
    CRM's answer reaches its chat by a link, as A3's and B1's do
    (``channels_api.MessageDelivery``, ``bots.BotEvent``)."""

    delivery = models.OneToOneField(
        Delivery, on_delete=models.CASCADE, related_name="developer_webhook"
    )
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return f"chat {self.chat_id} → delivery {self.delivery_id}"


CONSENT_TEXT_LIMIT = 2000


# The label's and the header's title unless the channel names its own; the
# widget says it in the visitor's language (docs/translating.md).
DEFAULT_WIDGET_TITLE = "Chat with us"


class WidgetChannel(models.Model):
    """A website chat widget: one ``<script>`` on the site owner's pages
    (docs/widget.md). Its ``widget_id`` is the channel's public id."""

    class Ask(models.TextChoices):
        """Whether the pre-chat form asks for a field (docs/widget.md)."""

        OFF = "off", "Not asked"
        OPTIONAL = "optional", "Optional"
        REQUIRED = "required", "Required"

    channel = models.OneToOneField(Channel, on_delete=models.CASCADE, related_name="widget")
    title = models.CharField(max_length=100, default=DEFAULT_WIDGET_TITLE)
    color = models.CharField(
        max_length=7, default="#1f6feb", validators=[RegexValidator(HEX_COLOR)],
        help_text="The label's and the header's colour, #rrggbb.",
    )  # fmt: skip
    color2 = models.CharField(
        max_length=7, default="#ffffff", validators=[RegexValidator(HEX_COLOR)],
        help_text="The text colour on it, #rrggbb.",
    )  # fmt: skip
    departments = models.ManyToManyField(
        Department, blank=True, related_name="widgets", help_text="Offered to the visitor."
    )
    offline_form = models.BooleanField(
        default=True, help_text="With no agent online, visitors may leave a message."
    )
    waiting_text = models.CharField(
        max_length=300, blank=True,
        help_text='Shown to the visitor after its first message while the chat waits for an '
        'agent; empty: "An agent will answer shortly."',
    )  # fmt: skip
    # The pre-chat form: asked before the visitor's first message of a chat.
    prechat_name = models.CharField(
        "pre-chat: name", max_length=8, choices=Ask.choices, default=Ask.OFF
    )
    prechat_email = models.CharField(
        "pre-chat: e-mail", max_length=8, choices=Ask.choices, default=Ask.OFF
    )
    prechat_phone = models.CharField(
        "pre-chat: phone", max_length=8, choices=Ask.choices, default=Ask.OFF
    )
    # Consent (docs/widget.md, "Consent"): accepted before a chat's first
    # message; the version goes up whenever the text changes.
    consent_text = models.TextField(
        blank=True, max_length=CONSENT_TEXT_LIMIT,
        help_text="Shown to the visitor, who accepts it before their first message; "
        "empty: none asked.",
    )  # fmt: skip
    consent_version = models.PositiveIntegerField(
        default=0, editable=False, help_text="Goes up whenever the consent text changes."
    )
    # What the widget speaks where the page's <html lang> names none of its
    # languages (docs/widget.md, "Languages").
    language = models.CharField(
        max_length=8, choices=list(WIDGET_LANGUAGES.items()), default=DEFAULT_LANGUAGE,
        help_text="The widget's language unless the page's <html lang> or "
        "svc_api.setLocale names another it speaks.",
    )  # fmt: skip
    # Proactive invitations (docs/widget.md, "Rules"); svc_api.setRules replaces
    # them in one visitor's browser only.
    rules = models.JSONField(default=default_rules, blank=True)

    class Meta:
        verbose_name = "website widget"

    def __str__(self) -> str:
        return self.channel.name

    @property
    def prechat(self) -> dict[str, str]:
        """The fields the pre-chat form asks for: field → optional or required."""
        asked = {
            "name": self.prechat_name,
            "email": self.prechat_email,
            "phone": self.prechat_phone,
        }
        return {field: ask for field, ask in asked.items() if ask != self.Ask.OFF}

    @property
    def widget_id(self) -> str:
        return self.channel.public_id

    @property
    def script_url(self) -> str:
        return f"{settings.PUBLIC_URL}/widget/{self.widget_id}.js"

    @property
    def embed_code(self) -> str:
        return f'<script src="{self.script_url}" async></script>'

    @property
    def stub_code(self) -> str:
        """The optional pre-load stub: calls made before the script loads are
        queued and run in order once it has (docs/widget.md)."""
        return STUB


STUB = (
    "<script>window.svc_api=window.svc_api||new Proxy({q:[]},{get:(t,n)=>n==='q'?t.q:"
    "(...a)=>{t.q.push([n,a])}});</script>"
)
