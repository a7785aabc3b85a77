"""Inline SVG charts: each vendor's value as a point with its 95% interval as an error bar.

Rates are drawn on an axis from 0 to 1; other figures (milliseconds, tokens per second) on one
from 0 to a round number above the largest value or bound shown (:func:`axis_top`).

The SVG is written into the HTML page itself (no namespace URL is needed there), with
``<title>`` and ``<desc>`` elements for screen readers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 1040
LABEL_RIGHT = 300  # vendor names end here
PLOT_LEFT, PLOT_RIGHT = 316, 620
VALUE_LEFT = 632
TOP = 36
ROW = 26
BOTTOM = 40
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
LABEL_CHARACTERS = 46


@dataclass(frozen=True)
class Point:
    """One vendor in a chart.

    Args:
        label: the vendor's name.
        value: the rate, or None when there is none (unsupported, not run).
        interval: its 95% interval, if known.
        text: what is written right of the plot (the value with its marker, or the state).
        kind: ``worse``, ``clearly-worse`` or ``""``: the point's shape and colour.
    """

    label: str
    value: float | None
    interval: tuple[float, float] | None
    text: str
    kind: str = ""


def axis_top(points: Sequence[Point]) -> float:
    """1 when every value and bound is a rate (at most 1), else a round number above them all."""
    found = [p.value for p in points if p.value is not None]
    found += [bound for p in points if p.interval for bound in p.interval]
    largest = max(found, default=1.0)
    if largest <= 1:
        return 1.0
    step = 10 ** math.floor(math.log10(largest))
    return float(math.ceil(largest / step) * step)


def _x(value: float, top: float = 1.0) -> float:
    return PLOT_LEFT + max(0.0, min(1.0, value / top)) * (PLOT_RIGHT - PLOT_LEFT)


def _shorten(label: str) -> str:
    if len(label) <= LABEL_CHARACTERS:
        return label
    half = (LABEL_CHARACTERS - 1) // 2
    return label[:half] + "…" + label[-half:]


def _marker(kind: str, x: float, y: float) -> str:
    if kind:
        # A downward triangle: the chart shows "worse" by shape as well as colour.
        return (
            f'<path class="point {kind}" d="M{x - 6:.1f},{y - 5:.1f} L{x + 6:.1f},{y - 5:.1f} '
            f'L{x:.1f},{y + 6:.1f} Z"/>'
        )
    return f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="5"/>'


def _row(index: int, point: Point, top: float) -> str:
    y = TOP + index * ROW + ROW / 2
    parts = [
        f'<g class="vendor"><title>{escape(point.label)}: {escape(point.text)}</title>',
        f'<text class="label" x="{LABEL_RIGHT}" y="{y + 4:.1f}" text-anchor="end">'
        f"{escape(_shorten(point.label))}</text>",
    ]
    if point.value is None:
        parts.append(
            f'<text class="state" x="{PLOT_LEFT}" y="{y + 4:.1f}">{escape(point.text)}</text>'
        )
        return "".join(parts) + "</g>"
    if point.interval is not None:
        low, high = _x(point.interval[0], top), _x(point.interval[1], top)
        parts.append(
            f'<g class="error-bar"><line x1="{low:.1f}" y1="{y:.1f}" x2="{high:.1f}" '
            f'y2="{y:.1f}"/><line x1="{low:.1f}" y1="{y - 6:.1f}" x2="{low:.1f}" '
            f'y2="{y + 6:.1f}"/><line x1="{high:.1f}" y1="{y - 6:.1f}" x2="{high:.1f}" '
            f'y2="{y + 6:.1f}"/></g>'
        )
    parts.append(_marker(point.kind, _x(point.value, top), y))
    parts.append(
        f'<text class="value" x="{VALUE_LEFT}" y="{y + 4:.1f}">{escape(point.text)}</text>'
    )
    return "".join(parts) + "</g>"


def _axis(bottom: float, top: float) -> str:
    parts = [f'<line class="axis" x1="{PLOT_LEFT}" y1="{bottom}" x2="{PLOT_RIGHT}" y2="{bottom}"/>']
    for tick in (t * top for t in TICKS):
        x = _x(tick, top)
        parts.append(
            f'<line class="grid" x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{bottom}"/>'
            f'<line class="axis" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}"/>'
            f'<text class="tick" x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">'
            f"{tick:g}</text>"
        )
    return "".join(parts)


def interval_chart(chart_id: str, title: str, description: str, points: Sequence[Point]) -> str:
    """An SVG chart of the vendors' values on an axis from 0 (see :func:`axis_top`), a row each.

    Args:
        chart_id: unique within the page (ids of the title and description).
        title: the chart's title, drawn and given as its accessible name.
        description: what the chart shows (axis, what is better), for screen readers.
        points: one per vendor.
    """
    bottom = TOP + len(points) * ROW + 4
    height = bottom + BOTTOM - 10
    top = axis_top(points)
    rows = "".join(_row(i, p, top) for i, p in enumerate(points))
    return (
        f'<svg class="chart" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" aria-labelledby="{chart_id}-title {chart_id}-desc">'
        f'<title id="{chart_id}-title">{escape(title)}</title>'
        f'<desc id="{chart_id}-desc">{escape(description)}</desc>'
        f'<text class="chart-title" x="8" y="20">'
        f"{escape(title)}</text>"
        f"{_axis(bottom, top)}{rows}</svg>"
    )
