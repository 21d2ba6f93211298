"""Message content: the fields each message type carries, and their rules.

One table for the spec's media types (A. Multimedia messages) and the bot
types (B. Message kinds), used for client, agent and bot messages alike.
``clean_content`` returns the text and the typed payload to store, or raises
``ContentError`` with a message fit for a 400 answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agents import markdown
from config.text import TEXT_LIMIT, storable

MEDIA_TYPES = ("video", "audio", "voice", "photo", "sticker", "document")
MAX_BUTTONS = 3
MAX_INTEGER = 2**53 - 1  # beyond this a number is not exact in JSON readers
MAX_MARKDOWN = TEXT_LIMIT

URL_FIELDS = ("file", "thumb")
STRING_FIELDS = ("file_name", "emoji", "performer", "title")
POSITIVE_INT_FIELDS = ("file_size", "duration", "width", "height")


# Text every column can keep (config/text.py): NULs go, lone surrogates
# become U+FFFD. The name the core's callers know it by.
scrub = storable


class ContentError(ValueError):
    """A message's content breaks a rule of its type."""


@dataclass(frozen=True)
class Content:
    type: str
    text: str
    payload: dict[str, Any]


def is_http_url(value: object) -> bool:
    if not isinstance(value, str) or len(value) > 1000:
        return False
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. "http://[x/": no URL at all
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive_int(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return isinstance(value, int) and 0 < value <= MAX_INTEGER


def _optional_text(fields: Mapping[str, Any], prefix: str) -> str:
    text = fields.get("text", "")
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ContentError(f"{prefix}text must be a string")
    return text


def _clean_media(kind: str, fields: Mapping[str, Any], prefix: str) -> Content:
    for name in ("file", "file_name", "file_size"):
        if fields.get(name) in (None, ""):
            raise ContentError(f"{prefix}{name} is required for type {kind}")
    payload: dict[str, Any] = {}
    for name in URL_FIELDS:
        if name in fields and fields[name] not in (None, ""):
            if not is_http_url(fields[name]):
                raise ContentError(f"{prefix}{name} must be an http:// or https:// URL")
            payload[name] = fields[name]
    for name in STRING_FIELDS:
        if name in fields and fields[name] is not None:
            if not isinstance(fields[name], str):
                raise ContentError(f"{prefix}{name} must be a string")
            payload[name] = fields[name]
    for name in POSITIVE_INT_FIELDS:
        if name in fields and fields[name] is not None:
            if not _positive_int(fields[name]):
                raise ContentError(
                    f"{prefix}{name} must be a positive integer (at most {MAX_INTEGER})"
                )
            payload[name] = int(fields[name])
    return Content(kind, _optional_text(fields, prefix), payload)


def _clean_location(fields: Mapping[str, Any], prefix: str) -> Content:
    payload: dict[str, Any] = {}
    for name, bound in (("latitude", 90), ("longitude", 180)):
        value = fields.get(name)
        if value is None:
            raise ContentError(f"{prefix}{name} is required for type location")
        if not _is_number(value) or not -bound <= value <= bound:
            raise ContentError(f"{prefix}{name} must be a number from -{bound} to {bound}")
        payload[name] = value
    if "title" in fields and fields["title"] is not None:
        if not isinstance(fields["title"], str):
            raise ContentError(f"{prefix}title must be a string")
        payload["title"] = fields["title"]
    return Content("location", _optional_text(fields, prefix), payload)


def _clean_markdown(fields: Mapping[str, Any], prefix: str) -> Content:
    content = fields.get("content")
    if not isinstance(content, str) or not content:
        raise ContentError(f"{prefix}content is required for type markdown")
    if len(content) > MAX_MARKDOWN:
        raise ContentError(f"{prefix}content holds at most {MAX_MARKDOWN} characters")
    # Rendered once, here; pages and the widget show this HTML (agents/markdown.py).
    html = str(markdown.render(content))
    return Content("markdown", _optional_text(fields, prefix), {"content": content, "html": html})


def _clean_buttons(fields: Mapping[str, Any], prefix: str) -> Content:
    buttons = fields.get("buttons")
    if not isinstance(buttons, list) or not buttons:
        raise ContentError(f"{prefix}buttons must be a non-empty array")
    if len(buttons) > MAX_BUTTONS:
        raise ContentError(f"{prefix}buttons holds at most {MAX_BUTTONS} buttons")
    cleaned = []
    for button in buttons:
        if not isinstance(button, dict) or not isinstance(button.get("text"), str):
            raise ContentError(f"{prefix}each button needs a text")
        cleaned.append({"text": button["text"]})
    payload: dict[str, Any] = {"buttons": cleaned}
    title = fields.get("title")
    if title is not None:
        if not isinstance(title, str):
            raise ContentError(f"{prefix}title must be a string")
        payload["title"] = title
    return Content("buttons", _optional_text(fields, prefix), payload)


def clean_content(kind: object, fields: Mapping[str, Any], *, prefix: str = "") -> Content:
    """Check ``fields`` against the rules of message type ``kind``.

    ``prefix`` names the object in error messages (``"message."`` for A2).
    """
    fields = scrub(fields)
    if kind == "text":
        text = fields.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ContentError(f"{prefix}text is required for type text")
        return Content("text", text, {})
    if kind in MEDIA_TYPES:
        return _clean_media(str(kind), fields, prefix)
    if kind == "location":
        return _clean_location(fields, prefix)
    if kind == "markdown":
        return _clean_markdown(fields, prefix)
    if kind == "buttons":
        return _clean_buttons(fields, prefix)
    raise ContentError(f"{prefix}type {kind!r} is not supported")
