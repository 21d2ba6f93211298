from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from agents import transcripts
from agents.content import ContentError, clean_content
from agents.models import Call, Chat, Client, Label, Message
from agents.selectors import consent_of
from config.text import TEXT_LIMIT

AGENT_TEXT_LIMIT = TEXT_LIMIT


class ChannelOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()


class ClientOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField(source="display_name")
    email = serializers.CharField()
    phone = serializers.CharField()


class AuditEntryOut(serializers.Serializer[Any]):
    """An audit log entry (docs/security.md, "Audit log")."""

    at = serializers.DateTimeField()
    actor = serializers.CharField(source="actor_label", help_text="e-mail, or system")
    action = serializers.CharField()
    target = serializers.CharField()
    ip = serializers.IPAddressField(allow_null=True)


class LabelOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    colour = serializers.CharField(help_text="#rrggbb")


class LabelsIn(serializers.Serializer[Any]):
    """A chat's labels, all of them: the names replace the ones it has."""

    labels = serializers.ListField(
        child=serializers.CharField(max_length=Label.NAME_LENGTH),
        allow_empty=True,
        max_length=100,
        help_text="Names from the list (GET labels); [] takes every label off",
    )


class ChatOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    state = serializers.CharField()
    channel = ChannelOut()
    client = ClientOut()
    client_typing = serializers.BooleanField()
    created = serializers.DateTimeField()
    queued = serializers.DateTimeField(source="queued_at", allow_null=True)
    waiting_seconds = serializers.SerializerMethodField(
        help_text="How long the client has waited in the queue; null unless queued"
    )
    offered_to = serializers.IntegerField(
        source="offered_to_id",
        allow_null=True,
        help_text="The agent this queued chat is offered to now (docs/routing.md); null if none",
    )
    offer_expires = serializers.DateTimeField(
        source="offer_expires_at",
        allow_null=True,
        help_text="When the offer moves on to the next agent unless taken",
    )
    labels = LabelOut(many=True, source="labels.all")

    def get_waiting_seconds(self, chat: Chat) -> int | None:
        if chat.state != Chat.State.QUEUED or chat.queued_at is None:
            return None
        return max(0, int((timezone.now() - chat.queued_at).total_seconds()))


class ContactOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField(source="display_name")
    email = serializers.CharField()
    phone = serializers.CharField()
    photo = serializers.CharField(source="photo_url")
    url = serializers.CharField()
    invite = serializers.CharField(source="invite_text")
    description = serializers.CharField()
    visitor_number = serializers.IntegerField()
    visitor = serializers.JSONField(source="visitor_data")
    blacklisted = serializers.BooleanField(source="is_blacklisted")
    blacklist_reason = serializers.CharField()
    # Whether transcripts may go to the client's address: the CRM's for this
    # chat when it gave one, else ``email`` (docs/transcripts.md).
    email_confirmed = serializers.SerializerMethodField()

    def get_email_confirmed(self, client: Client) -> bool:
        chat = self.parent.instance if self.parent is not None else None  # ChatDetailOut's
        return isinstance(chat, Chat) and transcripts.client_email_trusted(chat)


class AgentRefOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ChatDetailOut(ChatOut):
    client = ContactOut()  # type: ignore[assignment]
    agents = AgentRefOut(many=True, source="agents.all")
    department = serializers.CharField(source="department.name", default=None, allow_null=True)
    rating = serializers.CharField()
    rating_comment = serializers.CharField(help_text="What the client wrote beside the rating")
    consent = serializers.SerializerMethodField(
        help_text="The consent text the client accepted before the first message "
        "(the widget's): {version, accepted_at}, or null"
    )
    blacklisted = serializers.BooleanField()
    custom_data = serializers.JSONField()
    contact_info = serializers.JSONField()
    crm_link = serializers.CharField()
    enable_assign = serializers.BooleanField()
    crm_page = serializers.JSONField()
    crm_assigned = serializers.DateTimeField(source="crm_assigned_at", allow_null=True)
    accepted = serializers.DateTimeField(source="accepted_at", allow_null=True)
    finished = serializers.DateTimeField(source="finished_at", allow_null=True)

    def get_consent(self, chat: Chat) -> dict[str, Any] | None:
        return consent_of(chat)


class CallOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    type = serializers.CharField()
    status = serializers.CharField()
    phone = serializers.CharField()
    reason = serializers.CharField()
    record_url = serializers.CharField()
    channel = ChannelOut()
    client = ClientOut(allow_null=True)
    chat_id = serializers.IntegerField(allow_null=True)
    agent = AgentRefOut(allow_null=True)
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()
    ended = serializers.DateTimeField(source="ended_at", allow_null=True)


class CallProgressIn(serializers.Serializer[Any]):
    """A step of a call; ``reason`` when it failed, ``record_url`` when it ended."""

    status = serializers.ChoiceField(
        choices=[s for s in Call.Status.values if s != Call.Status.START]
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)
    record_url = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class PageOut(serializers.Serializer[Any]):
    url = serializers.CharField(source="page_url")
    title = serializers.CharField(source="page_title")


class OfflineMessageOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    channel = ChannelOut()
    client_id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    email = serializers.CharField()
    phone = serializers.CharField()
    description = serializers.CharField()
    message = serializers.CharField()
    page = PageOut(source="*")
    created = serializers.DateTimeField()
    handled = serializers.DateTimeField(source="handled_at", allow_null=True)
    handled_by = AgentRefOut(allow_null=True)


class DeliveryOut(serializers.Serializer[Any]):
    status = serializers.CharField(source="delivery_status")
    error = serializers.CharField(source="delivery_error")


class MessageOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    author = serializers.CharField()
    agent_name = serializers.CharField(source="agent.name", default=None, allow_null=True)
    # A bot message's author as clients see it: the provider's display name.
    sender_name = serializers.CharField()
    type = serializers.CharField()
    text = serializers.CharField()
    payload = serializers.JSONField()
    created = serializers.DateTimeField()
    delivery = DeliveryOut(source="*")


class StatusIn(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=["online", "offline"])


class TypingIn(serializers.Serializer[Any]):
    typing = serializers.BooleanField()


BOT_ONLY_TYPES = (Message.Type.MARKDOWN, Message.Type.BUTTONS)


class MessageIn(serializers.Serializer[Any]):
    """``{"type": "text", "text": …}`` or a media type with its fields."""

    # What an agent may send: text, media and locations; Markdown and buttons
    # are a bot's (B2), typing has its own endpoint.
    type = serializers.ChoiceField(
        choices=[kind for kind in Message.Type.values if kind not in BOT_ONLY_TYPES],
        error_messages={"invalid_choice": "an agent sends text, media or a location, not {input}"},
    )
    text = serializers.CharField(required=False, allow_blank=True, max_length=AGENT_TEXT_LIMIT)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        fields = dict(self.initial_data)
        try:
            attrs["content"] = clean_content(attrs["type"], fields)
        except ContentError as error:
            raise serializers.ValidationError(str(error)) from error
        return attrs


class TeamAgentOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    email = serializers.CharField()
    role = serializers.CharField()
    status = serializers.CharField(help_text="online, away (silent: offered nothing) or offline")
    open_chats = serializers.IntegerField(help_text="Active chats the agent answers now")
    max_chats = serializers.IntegerField(
        source="capacity", help_text="The most chats routing gives the agent at once"
    )
    pending_offers = serializers.IntegerField(help_text="Queued chats offered to the agent now")


def _seconds_since(moment: Any) -> int:
    return max(0, int((timezone.now() - moment).total_seconds()))


class TeamQueueOut(ChatOut):
    wait_seconds = serializers.SerializerMethodField(
        help_text="How long the chat has waited in the queue"
    )

    def get_wait_seconds(self, chat: Chat) -> int:
        return _seconds_since(chat.queued_at or chat.created)


class TeamWaitingOut(ChatOut):
    agents = serializers.SerializerMethodField(help_text="The agents answering the chat")
    waiting_since = serializers.DateTimeField(help_text="The client's unanswered message")
    wait_seconds = serializers.SerializerMethodField(
        help_text="How long the client has waited for an answer"
    )

    def get_agents(self, chat: Chat) -> list[int]:
        return [agent.pk for agent in chat.agents.all()]

    def get_wait_seconds(self, chat: Chat) -> int:
        return _seconds_since(chat.waiting_since)  # type: ignore[attr-defined]


class TeamOut(serializers.Serializer[Any]):
    agents = TeamAgentOut(many=True)
    queue = TeamQueueOut(many=True)
    waiting_for_reply = TeamWaitingOut(many=True)


class ReassignIn(serializers.Serializer[Any]):
    agent = serializers.IntegerField(min_value=1, help_text="The agent who gets the chat")


class SpreadOut(serializers.Serializer[Any]):
    median = serializers.IntegerField(allow_null=True, help_text="Seconds, nearest rank")
    p90 = serializers.IntegerField(allow_null=True, help_text="Seconds, nearest rank")


class CallsByStatusOut(serializers.Serializer[Any]):
    start = serializers.IntegerField()
    agent_connected = serializers.IntegerField()
    client_connected = serializers.IntegerField()
    end = serializers.IntegerField()
    error = serializers.IntegerField()


class SummaryOut(serializers.Serializer[Any]):
    """The figures of docs/reports.md, "Summary"."""

    chats = serializers.IntegerField()
    answered = serializers.IntegerField()
    missed = serializers.IntegerField()
    bot_only = serializers.IntegerField()
    wait_seconds = SpreadOut()
    first_response_seconds = SpreadOut()
    handle_seconds = SpreadOut()
    rated = serializers.IntegerField()
    csat_percent = serializers.FloatField(allow_null=True)
    messages = serializers.IntegerField()
    transfers = serializers.IntegerField()
    offline_messages = serializers.IntegerField()
    calls = CallsByStatusOut()


class AgentRowOut(serializers.Serializer[Any]):
    agent = serializers.IntegerField()
    name = serializers.CharField()
    chats = serializers.IntegerField()
    first_response_seconds = SpreadOut()
    handle_seconds = SpreadOut()
    csat_percent = serializers.FloatField(allow_null=True)


class AgentsReportOut(serializers.Serializer[Any]):
    results = AgentRowOut(many=True)


class HourOut(serializers.Serializer[Any]):
    weekday = serializers.IntegerField(help_text="0 = Monday, in the report's time zone")
    hour = serializers.IntegerField()
    chats = serializers.IntegerField()


class HoursReportOut(serializers.Serializer[Any]):
    results = HourOut(many=True)
