from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from agents import markdown as md
from agents.content import is_http_url

register = template.Library()


@register.filter
def markdown_html(payload: object) -> SafeString:
    """The HTML rendered when the message was stored, sanitized once more."""
    if isinstance(payload, dict) and isinstance(payload.get("html"), str):
        return md.sanitized(payload["html"])
    return md.render(str(payload.get("content", "") if isinstance(payload, dict) else ""))


@register.filter
def http_url(value: object) -> bool:
    """Only http(s) links are ever put in an href."""
    return is_http_url(value)
