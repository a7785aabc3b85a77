"""The comparison's data: measures, cells ranked against the best vendor, tables, differences.

Renderers only lay these out; every judgement (what is worse, what is not comparable)
is made here, once, so that the Markdown and the HTML page never disagree.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Rates are ratios of small integers: a difference below this is rounding, not a gap.
TOLERANCE = 1e-9


class State(enum.Enum):
    """What a measure holds."""

    GRADED = "graded"  # a value that is compared between vendors
    INFO = "info"  # shown for the reader, never ranked (a method, an offset, a decision)
    UNSUPPORTED = "unsupported"  # the endpoint declined: nothing was graded
    INCONCLUSIVE = "inconclusive"  # too many transport errors, or nothing graded
    RECORDED = "recorded"  # answers recorded with nothing to compare them with: not graded
    MISSING = "missing"  # not run, or the scorecard holds no such value


class Standing(enum.Enum):
    """A cell against the best vendor's in its row."""

    NONE = "none"  # nothing to compare, or as good as the best
    WORSE = "worse"  # below the best (95% intervals overlap, or there are none)
    CLEARLY_WORSE = "clearly worse"  # below the best and the 95% intervals do not overlap


@dataclass(frozen=True)
class Measure:
    """One vendor's value in a row: its text, and the number compared (if any)."""

    text: str
    state: State = State.GRADED
    value: float | None = None
    interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class Cell:
    """A measure with its standing against the best vendor."""

    measure: Measure
    standing: Standing = Standing.NONE

    @property
    def text(self) -> str:
        """The measure's text."""
        return self.measure.text

    @property
    def state(self) -> State:
        """The measure's state."""
        return self.measure.state


@dataclass(frozen=True)
class Row:
    """A labelled row with one cell per vendor (in vendor order)."""

    label: str
    cells: tuple[Cell, ...]
    higher_is_better: bool = True

    @property
    def charted(self) -> bool:
        """Whether some cell is a rate with a 95% interval (worth a chart)."""
        return any(cell.measure.interval is not None for cell in self.cells)


@dataclass(frozen=True)
class Table:
    """A drill-down table: rows of one family's sub-metric, vendors as columns."""

    title: str
    note: str
    rows: tuple[Row, ...]
    # Rows left out to keep the table readable (shown as "and N more").
    omitted: int = 0
    # What an empty table means.
    empty: str = "Nothing recorded."


@dataclass(frozen=True)
class Difference:
    """Something the inputs differ in that makes (some of) their results incomparable."""

    aspect: str
    values: tuple[str, ...]  # one per vendor
    families: tuple[str, ...]  # the family columns it affects


@dataclass(frozen=True)
class Failure:
    """One of a scorecard's worst failures, as recorded."""

    case: str
    code: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FamilyView:
    """One family across the vendors: headline, key sub-metrics, drill-down tables."""

    name: str
    headline: Row
    key_metrics: tuple[Row, ...]
    tables: tuple[Table, ...]
    examples: tuple[tuple[Failure, ...], ...]  # the worst failures, per vendor
    differences: tuple[Difference, ...]

    @property
    def comparable(self) -> bool:
        """Whether no difference between the inputs affects this family."""
        return not self.differences


def rank(measures: Sequence[Measure], *, higher_is_better: bool = True) -> tuple[Cell, ...]:
    """The measures as cells, each marked against the best graded value among them.

    Only graded values are compared. An unsupported cell counts as worse when another
    vendor was graded (the feature is missing there); inconclusive and missing cells are
    never ranked: nothing is known about them.
    """
    graded = [m for m in measures if m.state is State.GRADED and m.value is not None]
    if len(measures) < 2 or not graded:
        return tuple(Cell(m) for m in measures)
    sign = 1.0 if higher_is_better else -1.0
    best = max(graded, key=lambda m: sign * (m.value or 0.0))
    best_value = sign * (best.value or 0.0)
    cells = []
    for measure in measures:
        standing = Standing.NONE
        if measure.state is State.UNSUPPORTED:
            standing = Standing.WORSE
        elif (
            measure.state is State.GRADED
            and measure.value is not None
            and sign * measure.value < best_value - TOLERANCE
        ):
            standing = (
                Standing.CLEARLY_WORSE
                if _disjoint(measure.interval, best.interval, higher_is_better)
                else Standing.WORSE
            )
        cells.append(Cell(measure, standing))
    return tuple(cells)


def _disjoint(
    worse: tuple[float, float] | None, best: tuple[float, float] | None, higher_is_better: bool
) -> bool:
    if worse is None or best is None:
        return False
    return worse[1] < best[0] if higher_is_better else worse[0] > best[1]


def info_row(label: str, texts: Sequence[str | None]) -> Row:
    """A row shown for the reader and never ranked; None is a missing value."""
    return Row(
        label,
        tuple(
            Cell(Measure("–", State.MISSING) if text is None else Measure(text, State.INFO))
            for text in texts
        ),
    )


def ranked_row(label: str, measures: Sequence[Measure], *, higher_is_better: bool = True) -> Row:
    """A row whose graded cells are ranked against the best."""
    return Row(label, rank(measures, higher_is_better=higher_is_better), higher_is_better)


class SignatureState(enum.Enum):
    """What is known about an input's signature."""

    UNSIGNED = "unsigned"
    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    INVALID = "invalid"


# Key ids are sha256 hex; this many digits name a key among a handful.
SHORT_KEY_ID = 16


@dataclass(frozen=True)
class Signature:
    """An input's signature status."""

    state: SignatureState
    key_id: str | None = None
    reason: str | None = None

    @property
    def text(self) -> str:
        """The status as shown: unsigned, verified (by which key), NOT verified, INVALID."""
        if self.state is SignatureState.VERIFIED:
            return f"signed, verified ({(self.key_id or '?')[:SHORT_KEY_ID]})"
        if self.state is SignatureState.UNVERIFIED:
            return "signed, NOT verified (no matching --key)"
        if self.state is SignatureState.INVALID:
            return f"INVALID signature: {self.reason}"
        return "unsigned"


@dataclass(frozen=True)
class Vendor:
    """One input: the name it is shown under, where it came from, its scorecard."""

    name: str
    path: str
    signature: Signature
    scorecard: dict[str, Any]


@dataclass(frozen=True)
class Comparison:
    """Everything the comparison shows, in the order it is shown."""

    vendors: tuple[Vendor, ...]
    overall: Row
    families: tuple[FamilyView, ...]
    differences: tuple[Difference, ...]
    notes: tuple[str, ...]
    # Speed and spend (compare.speed), when a scorecard measured them.
    performance: FamilyView | None = None

    @property
    def views(self) -> tuple[FamilyView, ...]:
        """The families' sections, then speed and spend's."""
        return self.families + ((self.performance,) if self.performance else ())

    @property
    def invalid(self) -> tuple[Vendor, ...]:
        """The vendors whose signature does not verify."""
        return tuple(v for v in self.vendors if v.signature.state is SignatureState.INVALID)
