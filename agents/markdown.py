"""The Markdown of bot messages (spec B: links, bold, italic), rendered once.

markdown-it-py parses with only the inline rules the spec allows (emphasis,
links, backslash escapes, line breaks); raw HTML in the source stays text. A
link becomes a tag only when its target is an http(s) URL. nh3 then keeps
only ``a``, ``strong``, ``em`` and ``br`` and gives every link
``rel="noopener noreferrer nofollow"`` and ``target="_blank"``.

The HTML is made when a message is stored (``agents.content``) and kept in
its payload; pages show that one rendering after passing it through nh3
again (``sanitized``), so even a row written by other means cannot inject
markup.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

TAGS = {"a", "strong", "em", "br"}
ATTRIBUTES = {"a": {"href"}}
SCHEMES = {"http", "https"}
LINK_REL = "noopener noreferrer nofollow"


def _is_http(url: str) -> bool:
    return url.strip().lower().startswith(("http://", "https://"))


_parser = MarkdownIt("zero", {"breaks": True}).enable(["emphasis", "link", "escape", "newline"])
_parser.validateLink = _is_http  # type: ignore[method-assign]


def sanitized(html: str) -> SafeString:
    """``html`` with only the allowed tags and attributes left."""
    cleaned = nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=SCHEMES,
        link_rel=LINK_REL,
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
    return mark_safe(cleaned)  # noqa: S308 (nh3 keeps only the tags above)


def render(source: str) -> SafeString:
    """The sanitized HTML of ``source``, without a wrapping paragraph."""
    return sanitized(_parser.renderInline(source).rstrip("\n"))
