"""What both halves of the Developer API know of a visitor: the session
fields the widget records in ``Client.visitor_data`` and the webhooks send
(geoip, UTM), and custom data and links as Safe URL lets agents see them —
from the widget's ``setCustomData`` and from the CRM's chat_accepted answer
(docs/webhooks.md, "Safe URL").

The widget half (devhooks/widget/) and the webhooks half (devhooks/webhooks/)
share only this module and devhooks/models.py (tests/test_layout.py).
"""

from __future__ import annotations

import re
from typing import Any

from config.text import CLIENT_TEXT_LIMIT
from devhooks.models import IntegrationSettings

GEOIP_FIELDS = (
    "region_code",
    "country",
    "country_code",
    "region",
    "city",
    "latitude",
    "longitude",
    "organization",
)
UTM_FIELDS = ("source", "campaign", "content", "medium", "term")

# Anything that reads as a link in a text: a scheme, or www.
# No word boundary before it: "_https://…" and "1www.…" are links to an eye too.
LINK_IN_TEXT = re.compile(r"(?i)(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"']+")

# What custom data may hold, at most.
MAX_FIELDS = 50
MAX_TEXT = CLIENT_TEXT_LIMIT


def limited(value: Any, limit: int = MAX_TEXT) -> str:
    """A string cut at ``limit``; ``""`` for anything else."""
    return value[:limit] if isinstance(value, str) else ""


def drop_foreign_links(text: str, config: IntegrationSettings) -> str:
    """``text`` without the links Safe URL does not allow."""
    if not config.safe_url:
        return text
    return LINK_IN_TEXT.sub(
        lambda found: found.group(0) if config.link_allowed(_as_url(found.group(0))) else "",
        text,
    )


def _as_url(link: str) -> str:
    return link if "://" in link else f"http://{link}"


def safe_link(url: Any, config: IntegrationSettings) -> str:
    """``url`` when it may be shown as a link, else ``""``."""
    url = limited(url)
    return url if url and config.link_allowed(url) else ""


def clean_custom_data(items: Any, config: IntegrationSettings) -> list[dict[str, str]]:
    """Custom data fields as the agent's panel shows them: strings only (the
    page escapes them), links kept only where Safe URL allows."""
    if not isinstance(items, list):
        return []
    fields = []
    for item in items[:MAX_FIELDS]:
        if not isinstance(item, dict):
            continue
        field = {
            name: drop_foreign_links(limited(item.get(name)), config)
            for name in ("title", "content", "key")
        }
        field["link"] = safe_link(item.get("link"), config)
        if any(field.values()):
            fields.append(field)
    return fields
