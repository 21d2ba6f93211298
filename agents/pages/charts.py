"""The reports page's charts, drawn on the server as SVG (docs/reports.md,
"The reports page"). No script draws them, so the strict
Content-Security-Policy needs no exception and no library is served; every
text is escaped by ``format_html``. A chart scales with its box (a
``viewBox``, no fixed size); its colours are classes of app.css. Each is an
image to screen readers (``role="img"`` and a title), with the same figures
in the table beside it."""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil

from django.utils.dates import WEEKDAYS_ABBR
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

WIDTH, HEIGHT = 640, 220  # of a bar chart's viewBox
AXIS = 24  # room under the bars for their labels
TOP = 18  # room over the tallest bar for its figure
# Monday first, in the page's language (Django's own names).
WEEKDAYS = [WEEKDAYS_ABBR[n] for n in range(7)]
CELL, LEFT, HEAD = 24, 40, 18  # the heatmap's cell, its weekday column and hour row
SHADES = 5  # the heatmap's shades beside the empty cell


def bar_chart(*, title: str, bars: Sequence[tuple[str, int]], labels_every: int = 1) -> SafeString:
    """Bars of ``(label, count)`` from left to right, the tallest the full
    height; every ``labels_every``-th label is written under its bar, every
    bar's figure over it when there is room, and each bar's title says both."""
    slot = WIDTH / max(len(bars), 1)
    tallest = max((count for _, count in bars), default=0) or 1
    room = HEIGHT - AXIS - TOP
    drawn = []
    for n, (label, count) in enumerate(bars):
        height = round(room * count / tallest, 1)
        x, y = round(n * slot + slot * 0.1, 1), round(HEIGHT - AXIS - height, 1)
        figure = (
            format_html(
                '<text x="{}" y="{}" class="chart-figure">{}</text>', x + slot * 0.4, y - 4, count
            )
            if slot >= 20
            else ""
        )
        under = (
            format_html(
                '<text x="{}" y="{}" class="chart-label">{}</text>',
                x + slot * 0.4,
                HEIGHT - 8,
                label,
            )
            if n % labels_every == 0
            else ""
        )
        drawn.append(
            format_html(
                '<rect x="{}" y="{}" width="{}" height="{}" class="chart-bar">'
                "<title>{}: {}</title></rect>{}{}",
                x,
                y,
                round(slot * 0.8, 1),
                height,
                label,
                count,
                figure,
                under,
            )
        )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<title>{}</title><line x1="0" y1="{}" x2="{}" y2="{}" class="chart-axis"/>{}</svg>',
        WIDTH,
        HEIGHT,
        title,
        title,
        HEIGHT - AXIS,
        WIDTH,
        HEIGHT - AXIS,
        SafeString("".join(drawn)),
    )


def shade(count: int, most: int) -> int:
    """The heatmap's shade of ``count``: 0 for none, else 1 to SHADES in
    proportion to the busiest cell ``most``."""
    return 0 if count <= 0 or most <= 0 else max(1, ceil(SHADES * count / most))


def heatmap(*, title: str, cells: Sequence[dict[str, int]]) -> SafeString:
    """The 168 cells of the hours report (weekday, hour, chats) as a grid,
    a row per weekday (Monday first), a column per hour, shaded by their
    chats; each cell's title says its weekday, hour and chats."""
    most = max((cell["chats"] for cell in cells), default=0)
    hours = format_html_join(
        "",
        '<text x="{}" y="{}" class="chart-label">{}</text>',
        ((LEFT + hour * CELL + CELL / 2, HEAD - 5, hour) for hour in range(0, 24, 3)),
    )
    days = format_html_join(
        "",
        '<text x="2" y="{}" class="chart-label chart-start">{}</text>',
        ((HEAD + n * CELL + CELL * 0.65, name) for n, name in enumerate(WEEKDAYS)),
    )
    grid = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" class="heat heat-{}"><title>{}</title></rect>',
        (
            (
                LEFT + cell["hour"] * CELL,
                HEAD + cell["weekday"] * CELL,
                CELL - 2,
                CELL - 2,
                shade(cell["chats"], most),
                ngettext(
                    "%(weekday)s %(hour)s:00: %(count)s chat",
                    "%(weekday)s %(hour)s:00: %(count)s chats",
                    cell["chats"],
                )
                % {
                    "weekday": WEEKDAYS[cell["weekday"]],
                    "hour": f"{cell['hour']:02d}",
                    "count": cell["chats"],
                },
            )
            for cell in cells
        ),
    )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        "<title>{}</title>{}{}{}</svg>",
        LEFT + 24 * CELL,
        HEAD + 7 * CELL,
        title,
        title,
        hours,
        days,
        grid,
    )
