"""The Markdown of bot messages (spec B: link, bold, italic), rendered safely.

Everything is escaped first; only the three constructs become tags, and a
link only when its target is an http(s) URL.
"""

from __future__ import annotations

import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)\"'<>]+)\)")
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
ITALIC = re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?!\w)|(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?!\w)")


def render(source: str) -> SafeString:
    html = str(escape(source))
    html = LINK.sub(
        lambda m: (
            f'<a href="{m.group(2)}" rel="noopener noreferrer nofollow" '
            f'target="_blank">{m.group(1)}</a>'
        ),
        html,
    )
    html = BOLD.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", html)
    html = ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", html)
    return mark_safe(html.replace("\n", "<br>"))  # noqa: S308 (escaped above)
