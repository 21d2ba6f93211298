"""Bot Markdown: bold, italic and http(s) links, everything else escaped."""

from __future__ import annotations

import pytest

from agents.markdown import render


@pytest.mark.parametrize(
    ("source", "html"),
    [
        ("**bold** and __bold__", "<strong>bold</strong> and <strong>bold</strong>"),
        ("*it* and _it_", "<em>it</em> and <em>it</em>"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        (
            "[docs](https://example.com/a_b_c?x=1&y=2)",
            '<a href="https://example.com/a_b_c?x=1&amp;y=2" rel="noopener noreferrer nofollow" '
            'target="_blank">docs</a>',
        ),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
        ('<img src=x onerror="alert(1)">', "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"),
        ('[x](https://a.b/"onmouseover=alert(1))', "[x](https://a.b/&quot;onmouseover=alert(1))"),
        ("line one\nline two", "line one<br>line two"),
        ("\ue0000\ue001 slot", "0 slot"),
    ],
)
def test_render(source: str, html: str) -> None:
    assert render(source) == html


def test_long_unbalanced_markers_render_as_text() -> None:
    source = "**a " * 4000 + "_b " * 4000
    assert render(source) == source.rstrip("\n")
