"""The Markdown of bot messages (spec B: link, bold, italic), rendered safely.

Everything is escaped first; only the three constructs become tags, and a
link only when its target is an http(s) URL. Links are set aside before
emphasis is applied, so a ``_`` or ``*`` inside a URL stays as it is. Every
pattern stops at the next marker character or line end, so the time taken
grows linearly with the text.
"""

from __future__ import annotations

import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

LINK = re.compile(r"\[([^\[\]\n]{1,500})\]\((https?://[^\s()\"'<>]{1,2000})\)")
# Emphasis neither starts nor ends with a space, and holds no marker of its kind.
BOLD = re.compile(
    r"\*\*([^\s*](?:[^*\n]{0,2000}[^\s*])?)\*\*|__([^\s_](?:[^_\n]{0,2000}[^\s_])?)__"
)
ITALIC = re.compile(
    r"(?<![\w*])\*([^\s*](?:[^*\n]{0,2000}[^\s*])?)\*(?![\w*])"
    r"|(?<![\w_])_([^\s_](?:[^_\n]{0,2000}[^\s_])?)_(?![\w_])"
)
SLOT = "\ue000{}\ue001"  # private-use characters: never in escaped text (removed below)


def render(source: str) -> SafeString:
    html = str(escape(source.replace("\ue000", "").replace("\ue001", "")))
    links: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        links.append(
            f'<a href="{match.group(2)}" rel="noopener noreferrer nofollow" '
            f'target="_blank">{match.group(1)}</a>'
        )
        return SLOT.format(len(links) - 1)

    html = LINK.sub(set_aside, html)
    html = BOLD.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", html)
    html = ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", html)
    html = re.sub("\ue000(\\d+)\ue001", lambda m: links[int(m.group(1))], html)
    return mark_safe(html.replace("\n", "<br>"))  # noqa: S308 (escaped above)
