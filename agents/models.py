"""The conversation core: agents, channels, clients, chats and their messages.

Fields, constraints and small derived properties only; every state change
lives in ``agents/services/``.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import time as datetime_time
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from config.text import CLIENT_TEXT_LIMIT, TEXT_LIMIT


def new_public_id(nbytes: int = 12) -> str:
    """A channel's public id (and any id an admin types on a command line):
    URL-safe, unguessable enough to not enumerate, and never starting with "-"
    (a command line would read it as an option) or "_"."""
    while True:
        public_id = secrets.token_urlsafe(nbytes)
        if public_id[0] not in "-_":
            return public_id


class AgentManager(BaseUserManager["Agent"]):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **fields: Any) -> Agent:
        if not email:
            raise ValueError("An agent needs an email address")
        agent = self.model(email=self.normalize_email(email).lower(), **fields)
        agent.set_password(password)
        agent.save(using=self._db)
        return agent

    def create_superuser(self, email: str, password: str | None = None, **fields: Any) -> Agent:
        fields["role"] = Agent.Role.ADMIN
        return self.create_user(email, password, **fields)


class Department(models.Model):
    name = models.CharField(max_length=200, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


MAX_CHATS_LIMIT = 100  # the most chats an agent may be set to answer at once
IDLE_CLOSE_MIN, IDLE_CLOSE_MAX = 1, 1440  # a channel's idle close, in minutes (a day at most)


class Agent(AbstractBaseUser, PermissionsMixin):
    """A person who answers chats; supervisors also watch their channels'
    team, and admins every channel and the Django admin (docs/routing.md)."""

    class Role(models.TextChoices):
        AGENT = "agent", pgettext_lazy("role", "Agent")
        SUPERVISOR = "supervisor", pgettext_lazy("role", "Supervisor")
        ADMIN = "admin", pgettext_lazy("role", "Admin")

    email = models.EmailField(unique=True)
    name = models.CharField(max_length=200)
    phone = models.CharField(max_length=50, blank=True)
    photo_url = models.URLField(max_length=500, blank=True)
    is_online = models.BooleanField(default=False)
    # Notifications in the agent pages (agents/pages/settings.py): a sound and
    # a desktop notification for a new queued chat and for a new message in
    # my chats while the tab is hidden.
    notify_sound = models.BooleanField(default=True)
    notify_desktop = models.BooleanField(default=True)
    # The agent pages' language (agents/pages/language.py); blank: the browser's.
    language = models.CharField(max_length=10, blank=True, choices=settings.LANGUAGES)
    departments = models.ManyToManyField(Department, blank=True, related_name="agents")
    # Routing (docs/routing.md): how many chats the agent answers at once
    # (blank: the installation's AGENT_MAX_CHATS), and when a chat was last
    # offered to them (the longest without one is offered first on a tie).
    max_chats = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_CHATS_LIMIT)],
        help_text="Chats this agent answers at once; blank: the installation's default.",
    )
    last_offered_at = models.DateTimeField(null=True, blank=True)
    # The last sign of life: a page or API request, an open stream's check
    # (agents/presence.py); an online agent silent for AGENT_AWAY_MINUTES is away.
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # The role is the one source of rights; ``is_staff`` and ``is_superuser``
    # (what Django's admin reads) follow it on every save.
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.AGENT)
    is_staff = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    date_joined = models.DateTimeField(default=timezone.now)

    objects = AgentManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS = ["name"]

    class Meta:
        ordering = ["name"]
        constraints = [
            # Django's admin reads the flags, the agent pages the role: an
            # update() that skips save() cannot make them disagree.
            models.CheckConstraint(
                condition=Q(role="admin", is_staff=True, is_superuser=True)
                | (~Q(role="admin") & Q(is_staff=False, is_superuser=False)),
                name="agent_flags_follow_role",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.is_staff = self.is_superuser = self.role == self.Role.ADMIN
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "role" in update_fields:
            kwargs["update_fields"] = {*update_fields, "is_staff", "is_superuser"}
        super().save(*args, **kwargs)

    @property
    def supervises(self) -> bool:
        """Whether the agent sees the Team view and may reassign chats."""
        return self.role in (self.Role.SUPERVISOR, self.Role.ADMIN)

    @property
    def status(self) -> str:
        """``online``, ``away`` (online, but silent for AGENT_AWAY_MINUTES:
        offered nothing) or ``offline``."""
        if not self.is_online:
            return "offline"
        from agents.presence import is_away

        return "away" if is_away(self) else "online"

    @property
    def capacity(self) -> int:
        """How many chats routing lets this agent hold at once."""
        return self.max_chats or settings.AGENT_MAX_CHATS


class ApiToken(models.Model):
    """An agent's API token. Only its SHA-256 is stored; the key is shown once.

    A lookup by the hash of what the caller sent leaks nothing usable through
    timing (the attacker cannot steer the hash), which is the constant-time
    property a direct key comparison would need.
    """

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, related_name="api_token")
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(default=timezone.now)
    # When a request last authenticated with it, to the minute
    # (agents.tokens.LAST_USED_EVERY): not a write per request.
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"
        verbose_name_plural = "API tokens"

    def __str__(self) -> str:
        return f"token of {self.agent.email}"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()


class AgentSession(models.Model):
    """One signed-in session of an agent (agents/sessions.py, docs/security.md
    "Sessions"): the settings page lists them and signs them out.

    The session key is a bearer secret. ``key_hash`` (its SHA-256) finds the
    row of the session a request carries; ``sealed_key`` is the key encrypted
    with a key derived from ``SECRET_KEY``, opened only to delete the session
    from the session store when the agent signs it out from the list.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="signed_in_sessions")
    key_hash = models.CharField(max_length=64, unique=True)
    sealed_key = models.TextField()
    signed_in_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-last_seen_at", "-id"]
        verbose_name = "signed-in session"
        verbose_name_plural = "signed-in sessions"

    def __str__(self) -> str:
        return f"session of {self.agent.email} since {self.signed_in_at:%Y-%m-%d %H:%M}"


class OnlineSpan(models.Model):
    """A stretch of time an agent's switch was online: opened when the
    status verb turns them online, closed (``ended``) when it turns them
    offline. The reports' time online reads them (docs/reports.md)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="online_spans")
    started = models.DateTimeField()
    ended = models.DateTimeField(null=True, blank=True)  # null: online now

    class Meta:
        indexes = [models.Index(fields=["agent", "started"], name="onlinespan_agent_started_idx")]
        constraints = [
            # At most one open span per agent: the verb closes it before another opens.
            models.UniqueConstraint(
                fields=["agent"], condition=Q(ended__isnull=True), name="onlinespan_one_open"
            )
        ]

    def __str__(self) -> str:
        return f"agent {self.agent_id} online from {self.started:%Y-%m-%d %H:%M}"


class Channel(models.Model):
    """The base every kind of channel points to (Chat API, website widget, …)."""

    class Kind(models.TextChoices):
        CHAT_API = "chat_api", _("Chat API")
        WIDGET = "widget", _("Website widget")

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    public_id = models.CharField(max_length=32, unique=True, default=new_public_id)
    is_active = models.BooleanField(default=True)
    send_transcripts = models.BooleanField(
        default=True,
        help_text="Mail the client the chat's log when a chat ends (the client gave an e-mail).",
    )

    class RoutingMode(models.TextChoices):
        MANUAL = "manual", _("Manual: every agent sees the queue and presses Reply")
        OFFER = "offer", _("Offer: each new chat is offered to one agent at a time")

    routing_mode = models.CharField(
        max_length=10, choices=RoutingMode.choices, default=RoutingMode.MANUAL
    )
    offer_seconds = models.PositiveSmallIntegerField(
        default=30,
        validators=[MinValueValidator(5), MaxValueValidator(600)],
        help_text="How long an agent has to take an offered chat before it goes to the next.",
    )
    # Business hours (agents/hours.py, docs/routing.md): outside them the
    # channel is unavailable whoever is online. None and no dates: always open.
    business_time_zone = models.CharField(max_length=64, default="UTC")
    business_hours = models.JSONField(default=dict, blank=True)
    closed_dates = models.JSONField(default=list, blank=True)
    away_message = models.TextField(
        blank=True,
        max_length=TEXT_LIMIT,
        help_text="Sent to the client once per chat when they write while nobody can "
        "answer (outside the hours, or no agent online). Blank: none.",
    )
    # Idle close (agents/services/idle.py, docs/routing.md): an active chat
    # whose last shown message is the agent's, unanswered this many minutes,
    # is finished as an agent's Finish would, after the warning if any.
    idle_close_minutes = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(IDLE_CLOSE_MIN), MaxValueValidator(IDLE_CLOSE_MAX)],
        help_text="Finish an active chat the client has not answered for this many minutes "
        "since the agent wrote (1-1440). Blank: never.",
    )
    idle_warning = models.TextField(
        blank=True,
        max_length=TEXT_LIMIT,
        help_text="Sent to the client from the channel just before an idle chat is finished. "
        "Blank: none.",
    )
    agents = models.ManyToManyField(Agent, blank=True, related_name="channels")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"


class Counter(models.Model):
    """Named gap-free counters (the installation-wide visitor number)."""

    name = models.CharField(max_length=50, primary_key=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class Client(models.Model):
    """A customer on one channel, known by the integrator's id for them."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="clients")
    external_id = models.CharField(max_length=255)
    # The id exactly as the integrator sent it (string or number), returned unchanged.
    external_id_raw = models.JSONField(null=True, blank=True)
    # name and email: trigram-indexed on PostgreSQL for the history search
    # (agents 0032, as Message.text).
    name = models.CharField(max_length=255, blank=True)
    phone = models.CharField(max_length=100, blank=True)
    email = models.CharField(max_length=255, blank=True)
    photo_url = models.URLField(max_length=1000, blank=True)
    url = models.URLField(max_length=1000, blank=True)
    invite_text = models.TextField(blank=True)
    description = models.TextField(blank=True)
    user_token = models.CharField(max_length=255, blank=True)
    visitor_number = models.PositiveBigIntegerField(unique=True)
    # What the site knows of the visitor: page, UTM, geoip, user agent, ip.
    visitor_data = models.JSONField(default=dict, blank=True)
    # The SHA-256 of the visitor's token (devhooks.widget.tokens.issue_visitor_token):
    # what the visitor's own browser presents to read its chat.
    visitor_key_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    # Blacklisted (agents.services.blacklist_client): the client's messages are
    # still taken and kept, but open no chat and reach no one.
    blacklisted_at = models.DateTimeField(null=True, blank=True, db_index=True)
    blacklist_reason = models.CharField(max_length=500, blank=True)
    blacklisted_by = models.ForeignKey(
        "Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)
    # Erased on request (agents.privacy.erase_client, docs/privacy.md): the
    # details are blanked and cannot come back; the row stays for the reports.
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "external_id"], name="client_unique_per_channel"
            )
        ]

    def __str__(self) -> str:
        return f"{self.display_name} #{self.visitor_number}"

    @property
    def display_name(self) -> str:
        # In the language active where it is shown: a page's, a mail's; the
        # APIs' answers are English.
        return self.name or gettext("Anonymous")

    @property
    def is_blacklisted(self) -> bool:
        return self.blacklisted_at is not None


class ClientAddress(models.Model):
    """An e-mail address a client was given by, and whether the service may
    mail transcripts to it (docs/transcripts.md, "Which addresses get a
    transcript"): one the client's visitor typed (the widget, a bot) is
    trusted once the visitor opened the link mailed to it; one an agent
    entered or confirmed, or a signed-in integrator sent (the Chat API, the
    CRM's answer), is trusted as it comes."""

    class Source(models.TextChoices):
        VISITOR = "visitor", _("typed by the visitor")
        BOT = "bot", _("collected by a bot")
        INTEGRATOR = "integrator", _("sent by the Chat API integrator")
        CRM = "crm", _("the CRM's answer")
        AGENT = "agent", _("entered or confirmed by an agent")

    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="addresses")
    # Lower-cased: one row per address however it was typed.
    address = models.CharField(max_length=255)
    source = models.CharField(max_length=20, choices=Source.choices)
    created = models.DateTimeField(default=timezone.now)
    # Set when the address became trusted: at once for a trusted source, when
    # the visitor opened the link for a typed one.
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(
        "Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The confirmation link's token, as its SHA-256 (agents.addresses), while it may be used.
    token_hash = models.CharField(max_length=64, blank=True, db_index=True)
    confirmation_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "address"], name="client_address_once")
        ]

    def __str__(self) -> str:
        return f"{self.address} of client {self.client_id}"

    @property
    def trusted(self) -> bool:
        return self.confirmed_at is not None


class BlacklistedClientManager(models.Manager["BlacklistedClient"]):
    def get_queryset(self) -> models.QuerySet[BlacklistedClient]:
        return super().get_queryset().filter(blacklisted_at__isnull=False)


class BlacklistedClient(Client):
    """The admin's list of blacklisted clients (a view of ``Client``)."""

    objects: ClassVar[BlacklistedClientManager] = BlacklistedClientManager()

    class Meta:
        proxy = True
        verbose_name = "blacklisted client"


class Label(models.Model):
    """A tag agents put on chats, from the list admins keep (docs/reports.md):
    the reports and the history filter by it."""

    NAME_LENGTH: ClassVar[int] = 50

    name = models.CharField(max_length=NAME_LENGTH, unique=True)
    colour = models.CharField(
        max_length=7,
        default="#1f77b4",
        validators=[RegexValidator(r"^#[0-9a-fA-F]{6}$", "A colour is #rrggbb.")],
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Chat(models.Model):
    class State(models.TextChoices):
        BOT = "bot", _("With bot")
        QUEUED = "queued", _("Queued")
        ACTIVE = "active", _("Active")
        FINISHED = "finished", _("Finished")

    class Rating(models.TextChoices):
        POSITIVE = "positive", _("Positive")
        NEGATIVE = "negative", _("Negative")

    OPEN_STATES: ClassVar[tuple[str, ...]] = (State.BOT, State.QUEUED, State.ACTIVE)

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="chats")
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="chats")
    state = models.CharField(max_length=10, choices=State.choices, db_index=True)
    agents = models.ManyToManyField(Agent, blank=True, related_name="chats")
    labels = models.ManyToManyField(Label, blank=True, related_name="chats")
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats"
    )
    rating = models.CharField(max_length=10, choices=Rating.choices, blank=True)
    # What the client wrote beside the rating at the chat's end (the widget).
    rating_comment = models.TextField(blank=True, max_length=CLIENT_TEXT_LIMIT)
    # The consent text the client accepted before the chat's first message
    # (the widget's, docs/widget.md "Consent"): its version, and when.
    consent_version = models.PositiveIntegerField(null=True, blank=True)
    consent_at = models.DateTimeField(null=True, blank=True)
    blacklisted = models.BooleanField(default=False)
    # The language the client's widget spoke when the chat started (a code of
    # devhooks.widget.languages, e.g. "pt-BR"); blank: unknown (docs/widget.md).
    language = models.CharField(max_length=16, blank=True)
    # The CRM side panel (chat_accepted reply, setCustomData).
    custom_data = models.JSONField(default=list, blank=True)
    contact_info = models.JSONField(default=dict, blank=True)
    crm_link = models.URLField(max_length=1000, blank=True)
    enable_assign = models.BooleanField(default=False)
    crm_page = models.JSONField(default=dict, blank=True)  # {url, title} from the CRM
    crm_assigned_at = models.DateTimeField(null=True, blank=True)
    # The last transfer (agents.services.transfer_chat): who handed the chat on,
    # when, and the note for the agent who takes it.
    transferred_at = models.DateTimeField(null=True, blank=True)
    transferred_by = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    transfer_note = models.TextField(blank=True)
    # Routing (docs/routing.md): the agent a queued chat is offered to now,
    # and until when; null while nobody is offered it.
    offered_to = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="offered_chats"
    )
    offer_expires_at = models.DateTimeField(null=True, blank=True)
    # When the last message of any author was written: the lists put the most
    # recently active chat first.
    last_message_at = models.DateTimeField(null=True, blank=True, db_index=True)
    client_typing_until = models.DateTimeField(null=True, blank=True)
    agent_typing_until = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    # The last time the chat entered the queue and the last Reply (a transfer
    # to a department queues it again): what the queue's order and estimate read.
    queued_at = models.DateTimeField(null=True, blank=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The reports' facts (docs/reports.md), kept by the verbs as they happen,
    # so a report reads one row per chat. When the chat entered the queue for
    # the wait its first Reply ended (null: taken over from the bot unqueued,
    # or handed back to the bot); the first Reply; the first agent message
    # and its author; transfers and reassignments; messages the client saw.
    queue_entered_at = models.DateTimeField(null=True, blank=True)
    first_accepted_at = models.DateTimeField(null=True, blank=True)
    first_response_at = models.DateTimeField(null=True, blank=True)
    first_response_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    transfer_count = models.PositiveIntegerField(default=0)
    shown_messages = models.PositiveIntegerField(default=0)
    # Every agent who has held the chat (took it with Reply, or had it
    # transferred or reassigned to them); ``agents`` holds only who has it now.
    handlers = models.ManyToManyField(Agent, blank=True, related_name="handled_chats")
    # When the chat's texts, files and payloads were erased (agents.privacy:
    # its client's erasure or DATA_RETENTION_DAYS); the row and its facts stay.
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            # The reports read a channel's chats by date (docs/reports.md).
            models.Index(fields=["channel", "created"], name="chat_channel_created_idx"),
            # The history page, newest finished first: read in order and
            # stopped at a page, not sorted whole (docs/performance.md).
            models.Index(
                fields=["-finished_at", "-id"],
                condition=Q(state="finished"),
                name="chat_history_idx",
            ),
        ]
        constraints = [
            # A client has at most one open chat; a new one opens after finish.
            models.UniqueConstraint(
                fields=["client"],
                condition=Q(state__in=["bot", "queued", "active"]),
                name="one_open_chat_per_client",
            )
        ]

    def __str__(self) -> str:
        return f"chat {self.pk} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.state in self.OPEN_STATES

    @property
    def client_typing(self) -> bool:
        return bool(self.client_typing_until and self.client_typing_until > timezone.now())

    @property
    def agent_typing(self) -> bool:
        return bool(self.agent_typing_until and self.agent_typing_until > timezone.now())


class ChatOffer(models.Model):
    """One offer of a queued chat to one agent, and how it ended
    (docs/routing.md): who declined or let it lapse is not offered that
    chat again while another agent can take it."""

    class Outcome(models.TextChoices):
        PENDING = "pending", _("Pending")
        ACCEPTED = "accepted", _("Accepted")
        DECLINED = "declined", _("Declined")
        LAPSED = "lapsed", _("Lapsed")
        WITHDRAWN = "withdrawn", _("Withdrawn")

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="offers")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="chat_offers")
    offered_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=10, choices=Outcome.choices, default=Outcome.PENDING, db_index=True
    )

    class Meta:
        ordering = ["-offered_at"]
        constraints = [
            # One pending offer per chat: never offered to two agents at once.
            models.UniqueConstraint(
                fields=["chat"], condition=Q(outcome="pending"), name="one_pending_offer_per_chat"
            )
        ]

    def __str__(self) -> str:
        return f"offer of chat {self.chat_id} to agent {self.agent_id} ({self.outcome})"


class Message(models.Model):
    # The payload key of the channel's away message (docs/routing.md): sent
    # once per chat, so the chat's messages say whether it was.
    AWAY = "away_message"
    # The payload key of the channel's idle warning (docs/routing.md, "Idle
    # chats close"): the last word before the idle rule finishes the chat.
    IDLE_WARNING = "idle_warning"
    # The payload key of what a blacklisted client wrote after the blacklisting
    # (agents.services.chats._keep_blacklisted_message): kept, for no agent's eyes,
    # flagged in chat_finished's log.
    BLACKLISTED: ClassVar[str] = "blacklisted"

    class Author(models.TextChoices):
        CLIENT = "client", _("Client")
        AGENT = "agent", _("Agent")
        BOT = "bot", _("Bot")
        SYSTEM = "system", _("System")
        # An agent's internal note: for agents only, never sent to the client,
        # a bot or a webhook (every subscriber picks the authors it sends).
        NOTE = "note", "Internal note"

    class Type(models.TextChoices):
        TEXT = "text", _("Text")
        VIDEO = "video", _("Video")
        AUDIO = "audio", _("Audio")
        VOICE = "voice", _("Voice")
        PHOTO = "photo", _("Photo")
        STICKER = "sticker", _("Sticker")
        DOCUMENT = "document", _("Document")
        LOCATION = "location", _("Location")
        MARKDOWN = "markdown", _("Markdown")
        BUTTONS = "buttons", _("Buttons")

    class Delivery(models.TextChoices):
        NONE = "", _("Not sent anywhere")
        PENDING = "pending", _("Sending")
        DELIVERED = "delivered", _("Delivered")
        FAILED = "failed", _("Not delivered")

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    author = models.CharField(max_length=10, choices=Author.choices)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    type = models.CharField(max_length=10, choices=Type.choices, default=Type.TEXT)
    text = models.TextField(blank=True)
    # Type-specific fields (file, file_name, latitude, buttons, content, …).
    payload = models.JSONField(default=dict, blank=True)
    external_id = models.CharField(max_length=255, blank=True)
    # The author's name as shown, where no Agent row names it: a bot's display name.
    sender_name = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    delivery_status = models.CharField(
        max_length=10, choices=Delivery.choices, blank=True, default=Delivery.NONE
    )
    delivery_error = models.TextField(blank=True)

    class Meta:
        ordering = ["created", "id"]
        # On PostgreSQL the history search (``text__icontains``, that is
        # ``UPPER(text) LIKE UPPER('%…%')``) reads a trigram index of
        # ``UPPER(text)``, made by agents 0032 outside Django's model state:
        # the expression with its operator class is SQL Django cannot write
        # without django.contrib.postgres installed (docs/performance.md).
        indexes = [models.Index(fields=["chat", "created"])]

    def __str__(self) -> str:
        return f"{self.author} {self.type} in chat {self.chat_id}"


class IdempotencyKey(models.Model):
    """An ``Idempotency-Key`` an API (A2, B2, the agent API's reply) has acted on, per scope.

    Claimed in the transaction of the request it belongs to: a retry that
    comes while the first is running waits for it, and one that comes after
    finds the key and changes nothing (``agents.idempotency``). ``made`` is
    the id of the row the first request made, when its answer shows that row
    (the agent API answers a retried reply with the reply it stored).
    """

    scope = models.CharField(max_length=100)
    key = models.CharField(max_length=255)
    made = models.PositiveBigIntegerField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "key"], name="idempotency_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.key}"


class RateLimitHit(models.Model):
    """One admitted request of a rate limit kept in the database (``agents.ratelimit``).

    Used when there is no Redis: rows older than their window are deleted as
    the key is counted again, and by a periodic task.
    """

    key = models.CharField(max_length=200)
    at = models.FloatField(help_text="Unix time, seconds.")

    class Meta:
        indexes = [models.Index(fields=["key", "at"], name="ratelimit_key_at_idx")]

    def __str__(self) -> str:
        return f"{self.key} @ {self.at}"


class CallbackSettings(models.Model):
    """When a channel takes callback requests (``agents.calls.availability``)."""

    channel = models.OneToOneField(Channel, on_delete=models.CASCADE, related_name="callback")
    enabled = models.BooleanField(default=False)
    # ISO weekdays, 1 = Monday … 7 = Sunday.
    working_days = models.JSONField(default=list, blank=True, help_text="e.g. [1, 2, 3, 4, 5]")
    opens_at = models.TimeField(default=datetime_time(9, 0))
    closes_at = models.TimeField(default=datetime_time(18, 0))
    time_zone = models.CharField(max_length=64, default="UTC")

    class Meta:
        verbose_name_plural = "callback settings"

    def __str__(self) -> str:
        return f"callback settings of {self.channel}"


class Call(models.Model):
    """A phone call with a client: a callback request, or a call in or out."""

    class Type(models.TextChoices):
        CALLBACK = "callback", _("Callback request")
        INCOMING = "incoming", _("Incoming")
        OUTGOING = "outgoing", _("Outgoing")

    class Status(models.TextChoices):
        START = "start", _("Waiting for an agent")
        AGENT_CONNECTED = "agent_connected", _("Agent connected")
        CLIENT_CONNECTED = "client_connected", _("Client connected")
        END = "end", _("Ended")
        ERROR = "error", _("Failed")

    OPEN_STATUSES: ClassVar[tuple[str, ...]] = (
        Status.START,
        Status.AGENT_CONNECTED,
        Status.CLIENT_CONNECTED,
    )

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="calls")
    client = models.ForeignKey(
        Client, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    chat = models.ForeignKey(
        Chat, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    type = models.CharField(max_length=10, choices=Type.choices, default=Type.CALLBACK)
    phone = models.CharField(max_length=40)
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.START, db_index=True
    )
    reason = models.CharField(max_length=500, blank=True)
    record_url = models.URLField(max_length=1000, blank=True)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    created = models.DateTimeField(default=timezone.now, db_index=True)
    updated = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.get_type_display()} {self.phone} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES


class OfflineMessage(models.Model):
    """What a visitor left while no agent was online (the offline form)."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="offline_messages")
    client = models.ForeignKey(
        Client, null=True, blank=True, on_delete=models.SET_NULL, related_name="offline_messages"
    )
    name = models.CharField(max_length=255, blank=True)
    email = models.CharField(max_length=255, blank=True)
    phone = models.CharField(max_length=40, blank=True)
    description = models.TextField(blank=True)
    message = models.TextField()
    page_url = models.CharField(max_length=1000, blank=True)
    page_title = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    handled_at = models.DateTimeField(null=True, blank=True)
    handled_by = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"offline message {self.pk} from {self.name or self.email or self.phone}"


class StreamLease(models.Model):
    """A slot an open live stream holds under a limit (``agents.leases``),
    kept in the database when there is no Redis. It counts until ``expires``;
    its stream renews it while open, so a process that died leaves slots
    that free themselves."""

    key = models.CharField(max_length=200)
    holder = models.CharField(max_length=32, db_index=True)
    expires = models.FloatField(db_index=True, help_text="Unix time, seconds.")

    class Meta:
        indexes = [models.Index(fields=["key", "expires"], name="streamlease_key_expires_idx")]

    def __str__(self) -> str:
        return f"{self.key} held by {self.holder}"


class LiveEvent(models.Model):
    """One change a live stream tells (docs/live.md): kept for replay after a
    reconnect (``Last-Event-ID``), and read by each web process in the
    embedded default, where there is no Redis to fan it out."""

    id = models.BigAutoField(primary_key=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=40)
    # Who hears it: the agents of the channel; the client (its visitor stream)
    # only when ``for_client``.
    channel_id = models.BigIntegerField()
    client_id = models.BigIntegerField(null=True, blank=True)
    for_client = models.BooleanField(default=False)
    data = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["channel_id", "id"], name="live_channel_idx")]

    def __str__(self) -> str:
        return f"live {self.pk} {self.kind}"


class ChatSeen(models.Model):
    """How far an agent has read a chat: the lists count what came after."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="seen_by")
    last_seen_message_id = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "chat"], name="chat_seen_once_per_agent")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} saw chat {self.chat_id} up to {self.last_seen_message_id}"


class CannedReply(models.Model):
    """A prepared answer an agent inserts by typing ``/`` in the reply box:
    shared (no owner: every agent sees it) or personal (its owner's only)."""

    owner = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="canned_replies"
    )
    shortcut = models.CharField(max_length=50)
    text = models.TextField(max_length=TEXT_LIMIT)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["shortcut", "id"]
        verbose_name_plural = "canned replies"
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "shortcut"], name="canned_reply_shortcut_per_owner"
            ),
            models.UniqueConstraint(
                fields=["shortcut"],
                condition=Q(owner__isnull=True),
                name="canned_reply_shortcut_shared",
            ),
        ]

    def __str__(self) -> str:
        return f"/{self.shortcut}"


def new_file_token() -> str:
    """The unguessable part of an attachment's URL (256 bits)."""
    return secrets.token_urlsafe(32)


class Attachment(models.Model):
    """A file an agent sent from the reply box, kept through Django's storage
    API and served at an unguessable URL (``token``)."""

    token = models.CharField(max_length=64, unique=True, default=new_file_token)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="attachments")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    file = models.FileField(upload_to="attachments/%Y/%m/", max_length=300)
    thumb = models.FileField(upload_to="attachments/%Y/%m/", max_length=300, blank=True)
    file_name = models.CharField(max_length=255)
    file_size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.file_name} in chat {self.chat_id}"


class Mail(models.Model):
    """An e-mail the service sends (a chat transcript). Written in the
    transaction that decided to send it and sent by a Celery task, retried
    with backoff; one that keeps failing stays here, visible in the admin
    (``agents/mail.py``)."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting to be sent")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")

    chat = models.ForeignKey(
        Chat, null=True, blank=True, on_delete=models.SET_NULL, related_name="mails"
    )
    to = models.CharField(max_length=254)
    subject = models.CharField(max_length=300)
    text = models.TextField()
    html = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)
    next_try_at = models.DateTimeField(default=timezone.now, db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"mail to {self.to}: {self.subject}"


class AuditEntry(models.Model):
    """Who did what to what, when, from which address (agents/audit.py,
    docs/security.md "Audit log"). Written once, never changed; never a
    secret nor message text."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who it was at the time (an agent's e-mail, "system", "command line"):
    # kept when the agent row is gone.
    actor_label = models.CharField(max_length=254, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=300, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label} at {self.at:%Y-%m-%d %H:%M:%S}"
