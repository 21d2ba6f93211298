"""Parsing of the A2 user message (spec A. Chat Channel API messages)."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from rest_framework import serializers

from agents.content import ContentError, clean_content, is_http_url
from agents.models import Message
from channels_api.services import UserMessage
from config.text import CLIENT_TEXT_LIMIT

logger = logging.getLogger(__name__)

TEXT_LIMIT = CLIENT_TEXT_LIMIT  # spec, Limits: longer text is cut
TYPING_TYPES = ("typein", "typeout")


class ExternalIdField(serializers.Field[Any, Any, Any, Any]):
    """``sender.id``: a string or an integer, kept as sent."""

    default_error_messages = {"null": "This field is required."}

    def to_internal_value(self, data: Any) -> str | int:
        if isinstance(data, bool) or not isinstance(data, str | int):
            raise serializers.ValidationError("must be a string or an integer")
        if isinstance(data, str) and not data.strip():
            self.fail("required")
        if len(str(data)) > 255:
            raise serializers.ValidationError("must be at most 255 characters")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


def _url(value: str) -> str:
    if value and not is_http_url(value):
        raise serializers.ValidationError("must be an http:// or https:// URL")
    return value


def _text() -> serializers.CharField:
    return serializers.CharField(required=False, allow_blank=True, allow_null=True)


# Optional display fields longer than this are cut, like message.text: a
# long name is no reason to lose the customer's message.
CONTACT_LIMITS = {"name": 255, "phone": 100, "email": 255, "invite": 5000}


class SenderIn(serializers.Serializer[Any]):
    id = ExternalIdField()
    name = _text()
    phone = _text()
    email = _text()
    photo = _text()
    url = _text()
    invite = _text()

    def validate_photo(self, value: str | None) -> str:
        return _url(value or "")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # An optional field never costs the customer's message (docs/chat-api.md):
        # an address that is none ("x\r\nBcc: …") is taken as absent, so it
        # reaches no agent, transcript or CRM, and the log says so.
        email = (attrs.get("email") or "").strip()
        try:
            if email:
                validate_email(email)
            if len(email) > CONTACT_LIMITS["email"]:
                raise ValidationError("too long")  # cut, it would be another address
        except ValidationError:
            logger.warning("chat_api.sender_email_ignored sender=%r reason=invalid", attrs["id"])
            email = ""
        attrs["email"] = email
        return attrs

    def validate_url(self, value: str | None) -> str:
        return _url(value or "")


class MessageIn(serializers.Serializer[Any]):
    type = serializers.ChoiceField(choices=[*Message.Type.values, *TYPING_TYPES])
    id = ExternalIdField(required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        attrs: dict[str, Any] = super().to_internal_value(data)
        attrs["fields"] = dict(data)  # the type's own fields, checked in validate()
        return attrs

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        fields = attrs.pop("fields")
        if attrs["type"] in TYPING_TYPES:
            return attrs  # all other fields of a typing message are ignored
        if attrs["type"] in ("markdown", "buttons"):
            raise serializers.ValidationError(f"type {attrs['type']} is sent by bots only")
        text = fields.get("text")
        cut = isinstance(text, str) and len(text) > TEXT_LIMIT
        if cut:
            fields["text"] = text[:TEXT_LIMIT]  # cut, not rejected
        try:
            attrs["content"] = clean_content(attrs["type"], fields, prefix="message.")
        except ContentError as error:
            raise serializers.ValidationError(str(error)) from error
        if cut:  # the agent pages say so
            attrs["content"].payload["text_cut_from"] = len(text)
        return attrs


class UserMessageIn(serializers.Serializer[Any]):
    sender = SenderIn()
    message = MessageIn()

    def user_message(self) -> UserMessage:
        """The validated body as ``services.receive_user_message`` takes it."""
        message = self.validated_data["message"]
        return UserMessage(
            sender_id=self.validated_data["sender"]["id"],
            contact=self.contact(),
            type=message["type"],
            message_id=str(message.get("id") or ""),
            content=message.get("content"),
        )

    def contact(self) -> dict[str, str]:
        """The sender's contact fields, in the core's names."""
        sender = self.validated_data["sender"]
        names = {
            "name": "name",
            "phone": "phone",
            "email": "email",
            "photo": "photo_url",
            "url": "url",
            "invite": "invite_text",
        }
        return {
            ours: sender[theirs][: CONTACT_LIMITS.get(theirs)]
            for theirs, ours in names.items()
            if sender.get(theirs)
        }
