"""B2: the events a bot provider POSTs to the service (docs/bot-api.md)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.content import ContentError, clean_content
from config.text import TEXT_LIMIT

EVENTS = ("BOT_MESSAGE", "INVITE_AGENT", "CLIENT_INFO")
MESSAGE_TYPES = ("TEXT", "MARKDOWN", "BUTTONS")
CONTACT_LIMITS = {"name": 255, "phone": 100, "email": 255}


class NumericIdField(serializers.Field[Any, Any, Any, Any]):
    """``chat_id`` / ``client_id``: the string of digits the service sent (a
    number is taken too)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, int) and not isinstance(data, bool) and data > 0:
            value = data
        elif isinstance(data, str) and data.isascii() and data.isdigit() and len(data) <= 18:
            value = int(data)
        else:
            raise serializers.ValidationError("must be a string of digits")
        if not 0 < value < 2**63:
            raise serializers.ValidationError("is out of range")
        return value

    def to_representation(self, value: Any) -> Any:
        return str(value)


class EventIdField(serializers.Field[Any, Any, Any, Any]):
    """The event's ``id``: for logs only; a bot may repeat the id it answers."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, bool) or not isinstance(data, str | int):
            raise serializers.ValidationError("must be a string")
        if len(str(data)) > 255:
            raise serializers.ValidationError("must be at most 255 characters")
        return str(data)

    def to_representation(self, value: Any) -> Any:
        return value


class MessageIn(serializers.Serializer[Any]):
    type = serializers.ChoiceField(
        choices=MESSAGE_TYPES, error_messages={"invalid_choice": "type {input} is not supported"}
    )
    timestamp = serializers.JSONField(required=False)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        attrs: dict[str, Any] = super().to_internal_value(data)
        attrs["fields"] = dict(data)
        return attrs

    def validate_timestamp(self, value: Any) -> Any:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        digits = isinstance(value, str) and value.isascii() and value.isdigit()
        if value is not None and not (number or digits):
            raise serializers.ValidationError("must be unix time in seconds")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        fields = attrs.pop("fields")
        text = fields.get("text")
        if isinstance(text, str) and len(text) > TEXT_LIMIT:
            raise serializers.ValidationError(f"text holds at most {TEXT_LIMIT} characters")
        try:
            attrs["content"] = clean_content(attrs["type"].lower(), fields, prefix="message.")
        except ContentError as error:
            raise serializers.ValidationError(str(error)) from error
        return attrs


class BotEventIn(serializers.Serializer[Any]):
    event = serializers.ChoiceField(
        choices=EVENTS, error_messages={"invalid_choice": "event {input} is not supported"}
    )
    id = EventIdField(required=False, allow_null=True)
    chat_id = NumericIdField()
    client_id = NumericIdField(required=False)
    message = MessageIn(required=False)
    name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=True)
    phone = serializers.CharField(required=False, allow_blank=True, trim_whitespace=True)
    email = serializers.CharField(required=False, allow_blank=True, trim_whitespace=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["event"] == "BOT_MESSAGE" and "message" not in attrs:
            raise serializers.ValidationError({"message": "This field is required."})
        if attrs["event"] == "CLIENT_INFO" and "client_id" not in attrs:
            raise serializers.ValidationError({"client_id": "This field is required."})
        return attrs

    def contact(self) -> dict[str, str]:
        """CLIENT_INFO's contact fields, cut like the Chat API's."""
        data = self.validated_data
        return {
            field: data[field][:limit] for field, limit in CONTACT_LIMITS.items() if data.get(field)
        }
