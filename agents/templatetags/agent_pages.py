from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from agents import markdown as md
from agents.content import is_http_url

register = template.Library()


@register.filter
def markdown(source: object) -> SafeString:
    return md.render(str(source or ""))


@register.filter
def http_url(value: object) -> bool:
    """Only http(s) links are ever put in an href."""
    return is_http_url(value)
