"""Speed and spend across the vendors, beside their correctness.

Speed is ranked among the vendors whose overall verdict is ``pass`` only: a vendor that is
faster but wrong is shown, never ranked above a correct one. Figures measured at different
concurrencies are marked not comparable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .measures import MISSING, rate_measure
from .tables import Difference, FamilyView, Measure, Row, State, Table, info_row, ranked_row

NAME = "performance"
SPEED = (
    ("TTFT p50 ms", "ttft_ms", "p50", False),
    ("TTFT p90 ms", "ttft_ms", "p90", False),
    ("inter-token p50 ms", "inter_token_ms", "p50", False),
    ("output tokens/s p50", "output_tokens_per_second", "p50", True),
    ("end-to-end p50 ms", "e2e_ms", "p50", False),
)


def _quantile(figures: Mapping[str, Any] | None, figure: str, name: str, verdict: str) -> Measure:
    """A percentile with its interval; not ranked (INFO) for a vendor that is not correct."""
    found = (figures or {}).get(figure)
    if not found:
        return MISSING
    value = float(found[name]["value"])
    low, high = found[name]["interval"]
    interval = (float(low), float(high)) if low is not None and high is not None else None
    bounds = f" [{low if low is not None else '…'}, {high if high is not None else '…'}]"
    text = f"{value:g}{bounds}"
    if verdict != "pass":
        return Measure(f"{text} (verdict {verdict}: not ranked)", State.INFO)
    return Measure(text, State.GRADED, value, interval)


def _speed_rows(
    sections: Sequence[Mapping[str, Any] | None], verdicts: Sequence[str], family: str | None
) -> list[Row]:
    rows = []
    for label, figure, name, higher in SPEED:
        measures = [
            _quantile(_figures(s, family), figure, name, v)
            for s, v in zip(sections, verdicts, strict=True)
        ]
        rows.append(ranked_row(label, measures, higher_is_better=higher))
    return rows


def _figures(section: Mapping[str, Any] | None, family: str | None) -> Mapping[str, Any] | None:
    if section is None:
        return None
    if family is None:
        return section.get("overall")
    return (section.get("families") or {}).get(family)


def _spend(figures: Mapping[str, Any] | None) -> str | None:
    if figures is None:
        return None
    tokens = figures["tokens"]
    text = f"{tokens['prompt']:,} prompt + {tokens['completion']:,} completion"
    if tokens.get("reasoning"):
        text += f" ({tokens['reasoning']:,} reasoning)"
    if "delivered" in tokens:
        text += f"; {tokens['delivered']:,} delivered"
    if "cost_usd" in figures:
        text += f", ${figures['cost_usd']:.4f}"
    return text


def _load_rows(sections: Sequence[Mapping[str, Any] | None]) -> list[Row]:
    levels = sorted(
        {
            r["concurrency"]
            for s in sections
            for r in ((s or {}).get("load") or {}).get("levels", [])
        }
    )
    rows = []
    for level in levels:
        found = [
            next(
                (
                    r
                    for r in ((s or {}).get("load") or {}).get("levels", [])
                    if r["concurrency"] == level
                ),
                None,
            )
            for s in sections
        ]
        rows.append(
            info_row(
                f"c{level}: TTFT p50 ms, throughput tok/s",
                [
                    None
                    if r is None
                    else f"{(r['ttft_ms'] or {}).get('p50', {}).get('value', '–')}, "
                    f"{r['throughput_tokens_per_second']}"
                    for r in found
                ],
            )
        )
    if rows:
        knees = [((s or {}).get("load") or {}).get("knee", "–") for s in sections]
        rows.append(
            info_row("knee (TTFT p50 over twice the lowest level's)", [str(k) for k in knees])
        )
    return rows


def performance_view(cards: Sequence[Mapping[str, Any]]) -> FamilyView | None:
    """Speed and spend per vendor, or None when no scorecard measured them."""
    sections = [c.get(NAME) for c in cards]
    if not any(sections):
        return None
    verdicts = [str(c.get("verdict")) for c in cards]
    overall = _speed_rows(sections, verdicts, None)
    families = sorted({f for s in sections for f in ((s or {}).get("families") or {})})
    spend = [info_row("whole run", [_spend(_figures(s, None)) for s in sections])]
    spend += [info_row(f, [_spend(_figures(s, f)) for s in sections]) for f in families]
    errors = ranked_row(
        "request error rate",
        [rate_measure((_figures(s, None) or {}).get("error_rate")) for s in sections],
        higher_is_better=False,
    )
    tables = [
        Table(
            "Speed, whole run",
            "nearest-rank percentiles with distribution-free 95% intervals (… where too few "
            "values bound one); ranked among the vendors whose verdict is pass only",
            (*overall, errors),
        ),
        *(
            Table(
                f"Speed, {f}",
                "as above, this family's requests",
                tuple(_speed_rows(sections, verdicts, f)),
            )
            for f in families
        ),
        Table("Spend", "tokens from every answer's usage; cost at the run's --price", tuple(spend)),
    ]
    load = _load_rows(sections)
    if load:
        tables.append(
            Table("Load probe", "--load: the same streamed request per level", tuple(load))
        )
    concurrency = [str((s or {}).get("concurrency", "–")) for s in sections]
    differences = (
        (Difference("concurrency", tuple(concurrency), (NAME,)),)
        if len(set(concurrency)) > 1
        else ()
    )
    return FamilyView(
        NAME,
        overall[0],
        (overall[0], overall[3]),
        tuple(tables),
        tuple(() for _ in cards),
        differences,
    )
