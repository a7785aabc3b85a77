"""Wording shared by the Markdown and the HTML renderings: markers, legend, banners."""

from __future__ import annotations

from ..compare.tables import Cell, Comparison, Difference, Standing, State

MARKERS = {Standing.WORSE: "▼", Standing.CLEARLY_WORSE: "▼▼"}
MARKER_TITLES = {
    Standing.WORSE: "worse than the best vendor (intervals overlap or there are none)",
    Standing.CLEARLY_WORSE: "worse than the best vendor; the 95% intervals do not overlap",
}
NOT_COMPARABLE = "⚠"
INVALID = "⚠ INVALID SIGNATURE"

LEGEND = (
    "score: passed / graded (pass + fail) cases, with its 95% Wilson interval in brackets; "
    "unsupported cases are not graded and are counted apart",
    "▼ worse than the best vendor in its row: the 95% intervals overlap (or there are "
    "none), so the gap may be noise",
    "▼▼ worse than the best vendor, and the 95% intervals do not overlap",
    "UNSUPPORTED: the endpoint declined, nothing was graded (marked ▼ where another vendor "
    "was graded); INCONCLUSIVE: too many transport errors or nothing graded, never ranked; "
    "RECORDED: answers recorded with nothing to compare them with (parity without a "
    "reference), not graded, never ranked; – or not run: no data",
    f"{NOT_COMPARABLE} a column that a difference between the inputs affects (see the top)",
)


def marker(cell: Cell) -> str:
    """The text marker of a cell's standing ('' when it is not worse than the best)."""
    return MARKERS.get(cell.standing, "")


def stands_out(cell: Cell) -> bool:
    """Whether a cell must stand out: worse than the best, unsupported or inconclusive."""
    return cell.standing is not Standing.NONE or cell.state in (
        State.UNSUPPORTED,
        State.INCONCLUSIVE,
        State.RECORDED,
    )


def banner(comparison: Comparison) -> str | None:
    """The loud line about incomparable inputs, or None when they are comparable."""
    if not comparison.differences:
        return None
    aspects = ", ".join(d.aspect for d in comparison.differences)
    return (
        f"{NOT_COMPARABLE} These scorecards are not comparable on {aspects}: differences in "
        f"the columns marked {NOT_COMPARABLE} may come from the runs, not from the vendors."
    )


def difference_text(difference: Difference, names: tuple[str, ...]) -> str:
    """One difference: its aspect, the families it affects, each vendor's value."""
    values = "; ".join(f"{n}: {v}" for n, v in zip(names, difference.values, strict=True))
    return f"{difference.aspect} (affects {', '.join(difference.families)}): {values}"


def invalid_text(name: str, path: str, reason: str | None) -> str:
    """The loud line about an input whose signature does not verify."""
    return (
        f"{NOT_COMPARABLE} INVALID signature on {path} ({name}): {reason}. Its results are "
        "shown, but they are not what its signer produced."
    )
