"""The comparison as one self-contained HTML page: inline CSS and SVG, no script, no URL.

The Content-Security-Policy forbids every fetch, so the page stays what it is even when
a scorecard holds hostile text; every value is escaped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from html import escape

from .. import __version__
from ..compare.origins import PROVENANCE_COLUMNS, provenance_cells
from ..compare.tables import (
    Cell,
    Comparison,
    FamilyView,
    Row,
    SignatureState,
    Standing,
    State,
    Table,
    Vendor,
)
from . import text
from .charts import Point, axis_top, interval_chart

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
MESSAGE_LIMIT = 240

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1f2328; margin: 24px; max-width: 1400px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
caption.hidden { position: absolute; left: -10000px; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
thead th { background: #f6f8fa; }
th[scope=row] { font-weight: 600; min-width: 14em; max-width: 24em; overflow-wrap: anywhere; }
td { min-width: 7em; }
.scroll { overflow-x: auto; }
td.worse { background: #ffe4e1; color: #82071e; font-weight: 600; }
td.clearly-worse { background: #ffb8b0; color: #6e0016; font-weight: 700; }
td.unsupported { background: #e6e8eb; color: #3d444d; font-weight: 600; font-style: italic; }
td.inconclusive { background: #fff1c2; color: #6a4a00; font-weight: 600; }
td.recorded { background: #ddf4ff; color: #0a3069; font-weight: 600; font-style: italic; }
td.missing, td.info { color: #59636e; }
.nc { outline: 2px dashed #bf8700; outline-offset: -3px; }
th.nc { background: #fff1c2; }
.mark { font-weight: 700; margin-left: 4px; }
.banner { border: 3px solid #cf222e; background: #ffebe9; padding: 8px 16px; margin: 12px 0; }
.banner.incomparable { border-color: #bf8700; background: #fff8c5; }
.banner strong { font-size: 16px; }
tr.invalid th[scope=row] { border-left: 6px solid #cf222e; }
.badge { display: inline-block; background: #cf222e; color: #fff; padding: 0 6px;
  border-radius: 3px; font-size: 12px; margin-right: 6px; }
.note { color: #59636e; margin: 0 0 4px; }
.legend li { margin: 2px 0; }
code { font: 12px ui-monospace, monospace; background: #f6f8fa; padding: 1px 3px; }
figure { margin: 8px 0 16px; }
svg.chart { max-width: 100%; height: auto; }
svg .chart-title { font-weight: 600; font-size: 13px; }
svg text { font: 12px system-ui, sans-serif; fill: #1f2328; }
svg .tick { fill: #59636e; font-size: 11px; }
svg .state { font-style: italic; fill: #3d444d; }
svg .axis { stroke: #59636e; } svg .grid { stroke: #eaeef2; }
svg .error-bar line { stroke: #1f2328; stroke-width: 1.5; }
svg .point { fill: #0969da; }
svg .point.worse { fill: #cf222e; } svg .point.clearly-worse { fill: #82071e; }
"""

CELL_CLASSES = {
    Standing.WORSE: "worse",
    Standing.CLEARLY_WORSE: "clearly-worse",
}
STATE_CLASSES = {
    State.UNSUPPORTED: "unsupported",
    State.INCONCLUSIVE: "inconclusive",
    State.RECORDED: "recorded",
    State.MISSING: "missing",
    State.INFO: "info",
}


def _cell(cell: Cell, *, not_comparable: bool = False) -> str:
    # The state's class comes last so that its colour wins: unsupported stays grey, marked.
    classes = [CELL_CLASSES.get(cell.standing, ""), STATE_CLASSES.get(cell.state, "")]
    if not_comparable:
        classes.append("nc")
    mark = text.marker(cell)
    marked = (
        f'<span class="mark" title="{escape(text.MARKER_TITLES[cell.standing])}">{mark}</span>'
        if mark
        else ""
    )
    attribute = " ".join(c for c in classes if c)
    return (
        f'<td class="{attribute}">{escape(cell.text)}{marked}</td>'
        if attribute
        else (f"<td>{escape(cell.text)}{marked}</td>")
    )


def _vendor(vendor: Vendor) -> str:
    badge = (
        f'<span class="badge">{escape(text.INVALID)}</span>'
        if vendor.signature.state is SignatureState.INVALID
        else ""
    )
    return f'<th scope="row">{badge}{escape(vendor.name)}</th>'


def _row_class(vendor: Vendor) -> str:
    return ' class="invalid"' if vendor.signature.state is SignatureState.INVALID else ""


def _family_th(family: FamilyView, label: str, span: int = 1, scope: str = "col") -> str:
    classes = "" if family.comparable else ' class="nc"'
    # The marker goes on the family's header; its sub-columns only carry the outline.
    mark = "" if family.comparable or scope != "colgroup" else f" {text.NOT_COMPARABLE}"
    title = (
        ""
        if family.comparable
        else f' title="not comparable: {escape(", ".join(d.aspect for d in family.differences))}"'
    )
    spanned = f' colspan="{span}"' if span > 1 else ""
    return f'<th scope="{scope}"{spanned}{classes}{title}>{escape(label)}{mark}</th>'


def _banners(comparison: Comparison) -> Iterator[str]:
    names = tuple(v.name for v in comparison.vendors)
    line = text.banner(comparison)
    if line:
        yield '<div class="banner incomparable" role="alert">'
        yield f"<p><strong>{escape(line)}</strong></p><ul>"
        for difference in comparison.differences:
            yield f"<li>{escape(text.difference_text(difference, names))}</li>"
        yield "</ul></div>"
    for vendor in comparison.invalid:
        yield '<div class="banner invalid-signature" role="alert"><p><strong>'
        yield escape(text.invalid_text(vendor.name, vendor.path, vendor.signature.reason))
        yield "</strong></p></div>"
    if comparison.notes:
        yield '<ul class="notes">'
        yield from (f"<li>{escape(note)}</li>" for note in comparison.notes)
        yield "</ul>"


def _overview(comparison: Comparison) -> Iterator[str]:
    yield '<section id="overview"><h2>Families side by side</h2>'
    yield '<div class="scroll"><table class="overview">'
    yield "<caption>Verdict and score per family, with the key sub-metrics</caption><thead><tr>"
    yield '<th scope="col" rowspan="2">Vendor</th><th scope="col" rowspan="2">Overall</th>'
    for family in comparison.families:
        yield _family_th(family, family.name, 1 + len(family.key_metrics), "colgroup")
    yield "</tr><tr>"
    for family in comparison.families:
        yield _family_th(family, "verdict and score")
        yield from (_family_th(family, row.label) for row in family.key_metrics)
    yield "</tr></thead><tbody>"
    for i, vendor in enumerate(comparison.vendors):
        yield f"<tr{_row_class(vendor)}>{_vendor(vendor)}{_cell(comparison.overall.cells[i])}"
        for family in comparison.families:
            nc = not family.comparable
            yield _cell(family.headline.cells[i], not_comparable=nc)
            yield from (_cell(r.cells[i], not_comparable=nc) for r in family.key_metrics)
        yield "</tr>"
    yield '</tbody></table></div><ul class="legend">'
    yield from (f"<li>{escape(item)}</li>" for item in text.LEGEND)
    yield "</ul></section>"


def _points(row: Row, vendors: Sequence[Vendor]) -> list[Point]:
    return [
        Point(
            vendor.name,
            cell.measure.value if cell.state is State.GRADED else None,
            cell.measure.interval,
            f"{cell.text} {text.marker(cell)}".strip(),
            CELL_CLASSES.get(cell.standing, ""),
        )
        for vendor, cell in zip(vendors, row.cells, strict=True)
    ]


def _chart(ids: Iterator[int], title: str, row: Row, vendors: Sequence[Vendor]) -> str:
    better = "higher is better" if row.higher_is_better else "lower is better"
    points = _points(row, vendors)
    description = (
        f"{title}: each vendor's value as a point with its 95% interval as an error bar, on "
        f"an axis from 0 to {axis_top(points):g} ({better}); a triangle marks a vendor worse "
        "than the best"
    )
    chart = interval_chart(f"chart-{next(ids)}", f"{title} ({better})", description, points)
    return f"<figure>{chart}</figure>"


def _scores(comparison: Comparison, ids: Iterator[int]) -> Iterator[str]:
    yield '<section id="scores"><h2>Scores with their 95% intervals</h2>'
    for family in comparison.families:
        yield _chart(ids, f"{family.name} score", family.headline, comparison.vendors)
    yield "</section>"


def _table(drill: Table, vendors: Sequence[Vendor], family: FamilyView) -> Iterator[str]:
    yield f'<h3>{escape(drill.title)}</h3><p class="note">{escape(drill.note)}</p>'
    if not drill.rows:
        yield f"<p>{escape(drill.empty)}</p>"
        return
    caption = f"{family.name}: {drill.title}"
    yield f'<div class="scroll"><table><caption class="hidden">{escape(caption)}</caption>'
    yield "<thead><tr>"
    yield '<th scope="col"></th>'
    yield from (f'<th scope="col">{escape(v.name)}</th>' for v in vendors)
    yield "</tr></thead><tbody>"
    for row in drill.rows:
        yield f'<tr><th scope="row">{escape(row.label)}</th>'
        yield from (_cell(c, not_comparable=not family.comparable) for c in row.cells)
        yield "</tr>"
    yield "</tbody></table></div>"
    if drill.omitted:
        yield f"<p>… and {drill.omitted} more</p>"


def _family(family: FamilyView, vendors: Sequence[Vendor], ids: Iterator[int]) -> Iterator[str]:
    yield f'<section id="family-{escape(family.name)}">'
    mark = "" if family.comparable else f" {text.NOT_COMPARABLE}"
    yield f"<h2>{escape(family.name)}{mark}</h2>"
    if not family.comparable:
        aspects = ", ".join(d.aspect for d in family.differences)
        yield (
            f'<p class="banner incomparable"><strong>{text.NOT_COMPARABLE} Not comparable: '
            f"the inputs differ in {escape(aspects)}.</strong></p>"
        )
    for row in family.key_metrics:
        if row.charted:
            yield _chart(ids, f"{family.name}: {row.label}", row, vendors)
    for drill in family.tables:
        yield from _table(drill, vendors, family)
    examples = [(v, f) for v, f in zip(vendors, family.examples, strict=True) if f]
    if examples:
        yield "<h3>Worst failures</h3>"
        for vendor, failures in examples:
            yield f"<p>{escape(vendor.name)}:</p><ul>"
            for failure in failures:
                message = failure.message
                if len(message) > MESSAGE_LIMIT:
                    message = message[:MESSAGE_LIMIT] + "…"
                yield (
                    f"<li><code>{escape(failure.case)}</code> <code>{escape(failure.code)}</code>: "
                    f"{escape(message)}</li>"
                )
            yield "</ul>"
    yield "</section>"


def _inputs(comparison: Comparison) -> Iterator[str]:
    yield '<section id="inputs"><h2>Inputs</h2><div class="scroll"><table>'
    yield "<caption>Where each scorecard came from"
    yield "</caption><thead><tr>"
    for column in ("Vendor", "File", "Signature", *PROVENANCE_COLUMNS):
        yield f'<th scope="col">{escape(column)}</th>'
    yield "</tr></thead><tbody>"
    for vendor in comparison.vendors:
        signature = vendor.signature
        loud = signature.state is SignatureState.INVALID
        yield f"<tr{_row_class(vendor)}>{_vendor(vendor)}"
        yield f"<td><code>{escape(vendor.path)}</code></td>"
        yield (
            f'<td class="clearly-worse">{escape(signature.text)}</td>'
            if loud
            else f"<td>{escape(signature.text)}</td>"
        )
        yield from (f"<td>{escape(value)}</td>" for value in provenance_cells(vendor.scorecard))
        yield "</tr>"
    yield "</tbody></table></div></section>"


def _contents(comparison: Comparison) -> str:
    links = [
        '<a href="#overview">families side by side</a>',
        '<a href="#scores">score charts</a>',
        *(f'<a href="#family-{escape(f.name)}">{escape(f.name)}</a>' for f in comparison.views),
        '<a href="#inputs">inputs</a>',
    ]
    return f'<nav aria-label="contents"><p>{" · ".join(links)}</p></nav>'


def render_comparison_html(comparison: Comparison) -> str:
    """The comparison as one self-contained HTML page (no script, nothing fetched)."""
    ids = itertools.count(1)
    count = len(comparison.vendors)
    title = f"Scorecard comparison: {count} vendor{'s' if count != 1 else ''}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<header><h1>{escape(title)}</h1>",
        f'<p class="note">made by verifier compare {escape(__version__)}</p></header>',
        *_banners(comparison),
        _contents(comparison),
        "<main>",
        *_overview(comparison),
        *_scores(comparison, ids),
        *(part for family in comparison.views for part in _family(family, comparison.vendors, ids)),
        *_inputs(comparison),
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"
