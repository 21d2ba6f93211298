from __future__ import annotations

import re

import ua_parser
from django import template
from django.conf import settings
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from agents import markdown as md
from agents.content import is_http_url
from agents.pages import language

register = template.Library()


@register.filter
def markdown_html(payload: object) -> SafeString:
    """The HTML rendered when the message was stored, sanitized once more."""
    if isinstance(payload, dict) and isinstance(payload.get("html"), str):
        return md.sanitized(payload["html"])
    return md.render(str(payload.get("content", "") if isinstance(payload, dict) else ""))


@register.filter
def seconds(value: float | None) -> str:
    """Whole seconds as people read them: 45 s, 3 min 5 s, 2 h 10 min; — for none."""
    if value is None:
        return "—"
    sign, whole = ("-" if value < 0 else ""), abs(int(value))
    hours, minutes, rest = whole // 3600, whole // 60 % 60, whole % 60
    if not hours and not minutes:
        return f"{sign}{rest} s"
    if not hours:
        return f"{sign}{minutes} min" + (f" {rest} s" if rest else "")
    return f"{sign}{hours} h" + (f" {minutes} min" if minutes else "")


@register.filter
def http_url(value: object) -> bool:
    """Only http(s) links are ever put in an href."""
    return is_http_url(value)


@register.filter
def place(geoip: object) -> str:
    """Where the visitor is, as far as known ("Lyon, France", "France"), or
    "" when the lookup found nothing (no "Location" row without a value)."""
    if not isinstance(geoip, dict):
        return ""
    parts = (geoip.get("city"), geoip.get("region"), geoip.get("country"))
    known = [str(part) for part in parts if part]
    # The region only where it is all there is besides the country.
    if geoip.get("city") and geoip.get("region"):
        known.remove(str(geoip["region"]))
    return ", ".join(known)


# The words ua-parser's families repeat that the OS already says.
_BROWSER_NAMES = {"Chrome Mobile": "Chrome", "Firefox Mobile": "Firefox", "Mobile Safari": "Safari"}
_OS_NAMES = {"Mac OS X": "macOS"}


@register.filter
def language_name(tag: object) -> str:
    """A chat's language (the widget's tag, ``pt-BR``) named in itself, as
    ``LANGUAGES`` names it ("Deutsch"); ``""`` for none the service speaks."""
    return dict(settings.LANGUAGES).get(str(tag or "").lower(), "")


@register.filter
def browser(user_agent: object) -> str:
    """A user-agent string as people say it: "Chrome 131 on Android". The
    rules are ua-parser's (the uap-core patterns, kept current upstream),
    not a list of our own; a string they do not know stays as it is."""
    found = ua_parser.parse(str(user_agent or ""))
    agent, system = found.user_agent, found.os
    if agent is None or agent.family == "Other":
        return str(user_agent or "")
    name = " ".join(filter(None, (_BROWSER_NAMES.get(agent.family, agent.family), agent.major)))
    if system is None or system.family == "Other":
        return name
    return f"{name} on {_OS_NAMES.get(system.family, system.family)}"


@register.filter
def email_breaks(address: object) -> SafeString:
    """An e-mail address that may wrap only before an "@" or a dot, as
    typesetters break one, never inside a word nor after its hyphens: each
    part is a box of its own (app.css: ``dd.email span``)."""
    pieces = re.split(r"(?=[@.])", str(address or ""))
    return format_html_join("", "<span>{}</span>", ((piece,) for piece in pieces))


# The pages' icons: inline SVG drawn with the text colour, so no icon font and
# no emoji font is needed (a machine without one shows empty boxes).
ICONS = {
    "attach": "M20 11.5l-8 8a5 5 0 0 1-7-7l8.5-8.5a3.5 3.5 0 0 1 5 5L10 17.5a2 2 0 0 1-3-3L14.5 7",
    "back": "M15 18l-6-6 6-6",
    "check": "M5 12.5l4.5 4.5L19 7.5",
    "client": "M12 12a4 4 0 1 0 0-8 4 4 0 0 0 0 8zM4 21a8 8 0 0 1 16 0",
    "file": (
        "M14 3H6.5A1.5 1.5 0 0 0 5 4.5v15A1.5 1.5 0 0 0 6.5 21h11a1.5 1.5 0 0 0 1.5-1.5V8zM14 3v5h5"
    ),
    "location": (
        "M12 21s-6.5-6-6.5-11.5a6.5 6.5 0 0 1 13 0C18.5 15 12 21 12 21z"
        "M12 12a2.5 2.5 0 1 0 0-5 2.5 2.5 0 0 0 0 5z"
    ),
    "lock": "M6 11h12v10H6zM8.5 11V7.5a3.5 3.5 0 0 1 7 0V11",
    "menu": "M4 7h16M4 12h16M4 17h16",
}


@register.simple_tag
def icon(name: str, label: str = "") -> SafeString:
    """``{% icon "attach" %}``: a decorative icon; with a label, a named one."""
    path = ICONS[name]
    if label:
        return format_html(
            '<svg class="icon" viewBox="0 0 24 24" role="img" aria-label="{}"><path d="{}"/></svg>',
            label,
            path,
        )
    return mark_safe(  # noqa: S308 - our own constant
        f'<svg class="icon" viewBox="0 0 24 24" aria-hidden="true" focusable="false">'
        f'<path d="{path}"/></svg>'
    )


@register.simple_tag
def sso_name() -> str:
    """The provider's name for "Sign in with …", or "" when single sign-on is off."""
    return str(settings.OIDC_PROVIDER_NAME) if settings.SSO_ENABLED else ""


@register.simple_tag
def catalogue_url() -> str:
    """The address of the scripts' catalogue in the page's language."""
    return language.catalogue_url()
