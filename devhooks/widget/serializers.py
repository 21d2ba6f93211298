"""What each visitor action of the widget reads of its body (docs/widget.md):
one serializer per action of ``window.svc_api``, read after the inbound edge
(size, JSON, rate limits) and before the verb, which gets clean, typed values.

A refusal is the sentence the visitor's page shows, word for word, and each
names its field itself ("name must be a string", "write a message"), so the
view answers ``refusal()`` as it is. A field the body lacks is read as
``null``, as the widget has always read it. What needs the database or the
widget's settings (the widget's departments, the pre-chat form, a chat to
rate, the callback hours, the offline form) the verbs check
(devhooks/widget/services.py).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from rest_framework import serializers
from rest_framework.fields import empty

from agents import services as chats
from agents.api.parsers import id_from
from config.text import CLIENT_TEXT_LIMIT, TEXT_LIMIT
from devhooks.widget.languages import WIDGET_LANGUAGES

MAX_MESSAGE = CLIENT_TEXT_LIMIT  # as a Chat API message: the rest is cut (spec, Limits)
MAX_INVITATION = 1000
MAX_CUSTOM_FIELDS = 10
MAX_USER_TOKEN = 255
MAX_LANDING_URL = 2000
CONTACT_LIMITS = {"name": 255, "email": 255, "phone": 100, "description": TEXT_LIMIT}
RATINGS = ("positive", "negative")


def page_of(url: Any, title: Any) -> dict[str, str]:
    """The page agents see: its url and title when they are strings, cut;
    ``{}`` when neither tells anything."""
    page = {
        "url": url[:1000] if isinstance(url, str) else "",
        "title": title[:500] if isinstance(title, str) else "",
    }
    return page if any(page.values()) else {}


# --- fields ---------------------------------------------------------------------


class BodyField(serializers.Field[Any, Any, Any, Any]):
    """A field of the body: absent is read as ``None``, and every value, null
    included, goes to ``to_internal_value``."""

    def run_validation(self, data: Any = empty) -> Any:
        return self.to_internal_value(None if data is empty else data)

    def to_representation(self, value: Any) -> Any:
        return value


class FormText(BodyField):
    """A field of the contact or offline form: ``""`` when null, else a string
    without NUL, stripped."""

    def to_internal_value(self, data: Any) -> str:
        if data is None:
            return ""
        if not isinstance(data, str):
            raise serializers.ValidationError(f"{self.field_name} must be a string")
        if "\x00" in data:
            raise serializers.ValidationError(f"{self.field_name} holds a NUL character")
        return data.strip()


class Cut(BodyField):
    """Text kept at most ``limit`` characters long; anything but a string is ``""``."""

    def __init__(self, limit: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limit = limit

    def to_internal_value(self, data: Any) -> str:
        return data[: self.limit] if isinstance(data, str) else ""


class LandingUrl(BodyField):
    """The URL the visit began on, for its UTM; ``""`` when it is no URL of a sane length."""

    def to_internal_value(self, data: Any) -> str:
        return data if isinstance(data, str) and len(data) <= MAX_LANDING_URL else ""


class Page(BodyField):
    """``{"url", "title"}`` of the page the visitor is on (``page_of``)."""

    def to_internal_value(self, data: Any) -> dict[str, str]:
        return page_of(data.get("url"), data.get("title")) if isinstance(data, dict) else {}


class MessageText(BodyField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or not data.strip():
            raise serializers.ValidationError("write a message")
        if "\x00" in data:
            raise serializers.ValidationError("the message holds a NUL character")
        return data[:MAX_MESSAGE]


class DepartmentId(BodyField):
    """The id of a department, ``None`` for none (or one no row could have)."""

    def to_internal_value(self, data: Any) -> int | None:
        if data in (None, "", 0):
            return None
        is_number = isinstance(data, int) and not isinstance(data, bool)
        digits = isinstance(data, str) and data.isascii() and data.isdigit()
        if not (is_number or digits):
            raise serializers.ValidationError("department_id must be a number")
        return id_from(str(data))


class ConsentVersion(BodyField):
    """The version of the consent text the visitor accepted, ``None`` for none."""

    def to_internal_value(self, data: Any) -> int | None:
        if data is None:
            return None
        if not isinstance(data, int) or isinstance(data, bool) or data < 0:
            raise serializers.ValidationError("consent_version must be a whole number")
        return data


class Invitation(BodyField):
    """The invitation the visitor answers, ``""`` when there is none."""

    def to_internal_value(self, data: Any) -> str:
        return data.strip()[:MAX_INVITATION] if isinstance(data, str) else ""


class Language(BodyField):
    """The widget's language at a chat's start; ``""`` when absent or not one
    it speaks (an old script's, a page's forgery): the chat's is then unknown."""

    def to_internal_value(self, data: Any) -> str:
        return data if isinstance(data, str) and data in WIDGET_LANGUAGES else ""


class Typing(BodyField):
    def to_internal_value(self, data: Any) -> bool:
        return data is True


class CustomFields(BodyField):
    def to_internal_value(self, data: Any) -> list[Any]:
        if not isinstance(data, list):
            raise serializers.ValidationError("Custom data must be array.")  # the spec's words
        if len(data) > MAX_CUSTOM_FIELDS:
            raise serializers.ValidationError(
                f"Custom data holds at most {MAX_CUSTOM_FIELDS} fields."
            )
        return data


class UserToken(BodyField):
    """``setUserToken``'s id: a string or a number, kept as a string."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str | int) or isinstance(data, bool):
            raise serializers.ValidationError("the token must be a string")
        token = str(data).strip()
        if not token or len(token) > MAX_USER_TOKEN or not token.isprintable():
            raise serializers.ValidationError(
                f"the token must be 1 to {MAX_USER_TOKEN} printable characters"
            )
        return token


class Rating(BodyField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or data not in RATINGS:
            raise serializers.ValidationError("rating must be positive or negative")
        return data


class Phone(BodyField):
    """The number to call, as typed: the callback normalises it
    (``agents.services.normalise_phone``) and names what is wrong."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("enter a phone number")
        return data


# --- one serializer per action ----------------------------------------------------


class VisitIn(serializers.Serializer[Any]):
    """``session`` and what every action reads besides its own fields: the
    page the visitor is on and the URL it landed on, kept with a visitor the
    request makes (``services.session_data``). ``callback`` and ``visitor``
    read nothing else."""

    landing_url = LandingUrl()
    page = Page()

    def own(self) -> dict[str, Any]:
        """The action's own fields, without the visit's."""
        visit = VisitIn._declared_fields
        return {name: value for name, value in self.validated_data.items() if name not in visit}

    def refusal(self) -> str:
        """The first fault of an invalid body, in the words the page shows."""
        detail: Any = self.errors
        while isinstance(detail, dict | list):
            detail = next(iter(detail.values())) if isinstance(detail, dict) else detail[0]
        return str(detail)


class MessageIn(VisitIn):
    text = MessageText()
    department_id = DepartmentId()
    invitation = Invitation()
    consent_version = ConsentVersion()
    language = Language()


class TypingIn(VisitIn):
    typing = Typing()


class ContactIn(VisitIn):
    """``setContactInfo`` and the contact form: each field a string first,
    then each within its limit, then the address and the number."""

    name = FormText()
    email = FormText()
    phone = FormText()
    description = FormText()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name, limit in CONTACT_LIMITS.items():
            if len(attrs[name]) > limit:
                raise serializers.ValidationError(f"{name} is longer than {limit} characters")
        if attrs["email"]:
            try:
                validate_email(attrs["email"])
            except DjangoValidationError:
                raise serializers.ValidationError(
                    f"{attrs['email']!r} is not a valid e-mail address"
                ) from None
        if attrs["phone"]:
            try:
                attrs["phone"] = chats.normalise_phone(attrs["phone"])
            except chats.ServiceError as error:
                raise serializers.ValidationError(error.message) from None
        return attrs


class CustomDataIn(VisitIn):
    # The body's name; DRF's metaclass takes it out of the class, so it does
    # not hide Serializer.fields (which mypy cannot see).
    fields = CustomFields()  # type: ignore[assignment]


class UserTokenIn(VisitIn):
    user_token = UserToken()


class PageIn(VisitIn):
    """``sendPageTitle``: the page opened now, ``viewed`` (``{}`` when it tells nothing)."""

    url = Cut(1000)
    title = Cut(500)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["viewed"] = page_of(attrs.pop("url"), attrs.pop("title"))
        return attrs


class RateIn(VisitIn):
    rating = Rating()
    # Optional: what the visitor wrote beside the rating (the core limits it).
    comment = FormText()


class CallIn(VisitIn):
    phone = Phone()


class OfflineIn(VisitIn):
    """``sendOfflineMessage`` and the offline form: strings; what they must
    hold the core checks (``agents.services.leave_offline_message``)."""

    name = FormText()
    email = FormText()
    phone = FormText()
    description = FormText()
    message = FormText()
