"""The comparison as Markdown: banners, the side-by-side table, drill-downs, the inputs."""

from __future__ import annotations

from ..compare.origins import PROVENANCE_COLUMNS, provenance_cells
from ..compare.tables import Cell, Comparison, FamilyView, SignatureState, Table, Vendor
from . import text
from .markdown import code, escape, table

# Characters of a failure message shown before it is cut.
MESSAGE_LIMIT = 240


def cell_markdown(cell: Cell) -> str:
    """A cell: bold with its marker when it must stand out."""
    shown = escape(cell.text)
    if not text.stands_out(cell):
        return shown
    mark = text.marker(cell)
    return f"**{shown}**" + (f" {mark}" if mark else "")


def vendor_markdown(vendor: Vendor) -> str:
    """A vendor's name, marked when its signature is invalid."""
    name = escape(vendor.name)
    if vendor.signature.state is SignatureState.INVALID:
        return f"**{text.INVALID}** {name}"
    return name


def _family_header(family: FamilyView, label: str | None = None) -> str:
    shown = escape(label or family.name)
    return shown if family.comparable else f"{shown} {text.NOT_COMPARABLE}"


def _top(comparison: Comparison) -> list[str]:
    lines = [f"# Comparison of {len(comparison.vendors)} scorecards", ""]
    names = tuple(v.name for v in comparison.vendors)
    line = text.banner(comparison)
    if line:
        lines += [f"> **{escape(line)}**", ">"]
        lines += [f"> - {escape(text.difference_text(d, names))}" for d in comparison.differences]
        lines.append("")
    for vendor in comparison.invalid:
        invalid = text.invalid_text(vendor.name, vendor.path, vendor.signature.reason)
        lines += [f"> **{escape(invalid)}**", ""]
    if comparison.notes:
        lines += ["Notes:", *(f"- {escape(n)}" for n in comparison.notes), ""]
    return lines


def _overview(comparison: Comparison) -> list[str]:
    header = ["Vendor", "Overall", *(_family_header(f) for f in comparison.families)]
    rows = [
        [
            vendor_markdown(vendor),
            cell_markdown(comparison.overall.cells[i]),
            *(cell_markdown(f.headline.cells[i]) for f in comparison.families),
        ]
        for i, vendor in enumerate(comparison.vendors)
    ]
    lines = ["## Families", "", table(header, rows), ""]
    keyed = [(f, row) for f in comparison.families for row in f.key_metrics]
    if keyed:
        header = ["Vendor", *(_family_header(f, f"{f.name}: {row.label}") for f, row in keyed)]
        rows = [
            [vendor_markdown(vendor), *(cell_markdown(row.cells[i]) for _, row in keyed)]
            for i, vendor in enumerate(comparison.vendors)
        ]
        lines += ["## Key sub-metrics", "", table(header, rows), ""]
    lines += ["Legend:", "", *(f"- {escape(item)}" for item in text.LEGEND), ""]
    return lines


def table_markdown(drill: Table, vendors: tuple[Vendor, ...]) -> list[str]:
    """A drill-down table: its rows, vendors as columns."""
    lines = [f"### {escape(drill.title)}", "", f"_{escape(drill.note)}_", ""]
    if not drill.rows:
        return [*lines, escape(drill.empty), ""]
    header = ["", *(escape(v.name) for v in vendors)]
    rows = [[escape(r.label), *(cell_markdown(c) for c in r.cells)] for r in drill.rows]
    lines.append(table(header, rows))
    if drill.omitted:
        lines.append(f"\n… and {drill.omitted} more")
    return [*lines, ""]


def _family(family: FamilyView, vendors: tuple[Vendor, ...]) -> list[str]:
    lines = [f"## {_family_header(family)}", ""]
    if not family.comparable:
        aspects = ", ".join(d.aspect for d in family.differences)
        lines += [f"**{text.NOT_COMPARABLE} Not comparable: the inputs differ in {aspects}.**", ""]
    for drill in family.tables:
        lines += table_markdown(drill, vendors)
    examples = [
        (vendor, failures)
        for vendor, failures in zip(vendors, family.examples, strict=True)
        if failures
    ]
    if examples:
        lines += ["### Worst failures", ""]
        for vendor, failures in examples:
            lines.append(f"{escape(vendor.name)}:")
            lines.append("")
            for failure in failures:
                message = failure.message
                if len(message) > MESSAGE_LIMIT:
                    message = message[:MESSAGE_LIMIT] + "…"
                lines.append(f"- {code(failure.case)} {code(failure.code)}: {escape(message)}")
            lines.append("")
    return lines


def _inputs(comparison: Comparison) -> list[str]:
    header = ["Vendor", "File", "Signature", *PROVENANCE_COLUMNS]
    rows = [
        [
            vendor_markdown(vendor),
            code(vendor.path),
            f"**{escape(vendor.signature.text)}**"
            if vendor.signature.state is SignatureState.INVALID
            else escape(vendor.signature.text),
            *(escape(value) for value in provenance_cells(vendor.scorecard)),
        ]
        for vendor in comparison.vendors
    ]
    return ["## Inputs", "", table(header, rows), ""]


def render_comparison_markdown(comparison: Comparison) -> str:
    """The whole comparison as one Markdown document."""
    lines = _top(comparison) + _overview(comparison)
    for family in comparison.views:
        lines += _family(family, comparison.vendors)
    lines += _inputs(comparison)
    return "\n".join(lines).rstrip("\n") + "\n"
