"""Bot Markdown (spec B): bold, italic and http(s) links, everything else text.

Rendered by markdown-it-py, sanitized by nh3 (agents/markdown.py).
"""

from __future__ import annotations

import pytest

from agents.content import clean_content
from agents.markdown import render, sanitized

LINK = '<a href="{}" target="_blank" rel="noopener noreferrer nofollow">{}</a>'


@pytest.mark.parametrize(
    ("source", "html"),
    [
        ("**bold** and __bold__", "<strong>bold</strong> and <strong>bold</strong>"),
        ("*it* and _it_", "<em>it</em> and <em>it</em>"),
        ("snake_case_name", "snake_case_name"),
        (
            "[docs](https://example.com/a_b_c?x=1&y=2)",
            LINK.format("https://example.com/a_b_c?x=1&amp;y=2", "docs"),
        ),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
        ("[relative](/admin/)", "[relative](/admin/)"),
        ("[data](data:text/html,x)", "[data](data:text/html,x)"),
        ('<img src=x onerror="alert(1)">', '&lt;img src=x onerror="alert(1)"&gt;'),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        (
            '[x](https://a.b/"onmouseover=alert(1))',
            LINK.format("https://a.b/%22onmouseover=alert(1)", "x"),
        ),
        ("line one\nline two", "line one<br>\nline two"),
        ("# not a heading\n- not a list", "# not a heading<br>\n- not a list"),
        (r"\*not italic\*", "*not italic*"),
    ],
)
def test_render(source: str, html: str) -> None:
    assert render(source) == html


def test_long_unbalanced_markers_render_as_text() -> None:
    source = "**a " * 4000 + "_b " * 4000
    assert render(source) == source


def test_stored_html_is_sanitized_again_when_shown() -> None:
    stored = '<strong>ok</strong><script>x</script><a href="javascript:y" onclick="z">l</a>'
    assert (
        sanitized(stored)
        == '<strong>ok</strong><a target="_blank" rel="noopener noreferrer nofollow">l</a>'
    )


def test_a_markdown_message_keeps_its_rendering() -> None:
    content = clean_content("markdown", {"content": "**hi**", "text": "hi"})
    assert content.payload == {"content": "**hi**", "html": "<strong>hi</strong>"}
