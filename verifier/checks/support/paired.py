"""Accuracy paired case by case with a reference's: the per-case outcomes, their comparison.

A family that grades accuracy per case (tool_calling: the expected calls; structured_output:
output valid against the schema) records each graded case's category and whether it was
right in its scorecard (``metrics.accuracy.cases``). A later run given that scorecard as
``--baseline`` pairs its cases with the baseline's by case id and compares the rates over
the cases both graded: the paired difference (candidate minus reference) with Newcombe's
interval, and the exact McNemar test over the discordant pairs. Nothing here decides a
verdict: the gate's ``max_accuracy_drop`` does (:mod:`verifier.scorecard.gate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...cases.rotation import is_twin
from ...stats import mcnemar_exact, paired_difference_interval

METHOD = (
    "cases graded in both runs, paired by case id (rotated twins left out: a secret's own); "
    "difference = candidate minus reference "
    "accuracy; 95% interval: Newcombe's square-and-add interval for paired rates (method 10); "
    "p: exact McNemar test (two-sided binomial over the discordant pairs)"
)
ALL = "all"
NO_OUTCOMES = (
    "the baseline records no per-case accuracy outcomes (its scorecard was written by an "
    "older verifier, or it did not run this family)"
)


def case_outcome(category: str, accurate: bool) -> dict[str, Any]:
    """One case's accuracy outcome as the scorecard records it."""
    return {"category": category, "accurate": accurate}


def comparison(both: int, gained: int, lost: int, neither: int) -> dict[str, Any]:
    """The paired comparison of one group of cases (pure).

    Args:
        both: cases right in both runs.
        gained: right here only (McNemar's c).
        lost: right in the reference only (McNemar's b).
        neither: right in neither.
    """
    pairs = both + gained + lost + neither
    interval = paired_difference_interval(both, gained, lost, neither)
    return {
        "pairs": pairs,
        "both": both,
        "gained": gained,
        "lost": lost,
        "neither": neither,
        "candidate": (both + gained) / pairs if pairs else None,
        "reference": (both + lost) / pairs if pairs else None,
        "difference": (gained - lost) / pairs if pairs else None,
        "interval": list(interval) if interval else None,
        "p_value": mcnemar_exact(lost, gained),
    }


def paired_accuracy(
    ours: Mapping[str, Mapping[str, Any]], baseline_family: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The run's per-case accuracy against the baseline's, overall and per category (pure).

    Args:
        ours: this run's outcomes by case id (``case_outcome``).
        baseline_family: the same family's entry in the baseline scorecard.

    Returns:
        ``{"method", "all", "by_category", "only_here", "only_in_baseline"}``, or
        ``{"unavailable": why}`` when the baseline records no per-case outcomes.
    """
    accuracy = ((baseline_family or {}).get("metrics") or {}).get("accuracy") or {}
    theirs = accuracy.get("cases")
    if not isinstance(theirs, Mapping):
        return {"unavailable": NO_OUTCOMES}
    overall = [0, 0, 0, 0]
    tables: dict[str, list[int]] = {}
    for case, outcome in ours.items():
        if is_twin(case.split("[", 1)[0]):
            # A rotated twin is the secret's: a baseline's twin of that id may be another's.
            continue
        reference = theirs.get(case)
        if not isinstance(reference, Mapping) or not isinstance(reference.get("accurate"), bool):
            continue
        here, there = bool(outcome["accurate"]), reference["accurate"]
        # both, gained, lost, neither
        cell = 0 if here and there else 1 if here else 2 if there else 3
        overall[cell] += 1
        tables.setdefault(str(outcome["category"]), [0, 0, 0, 0])[cell] += 1
    return {
        "method": METHOD,
        ALL: comparison(*overall),
        "by_category": {name: comparison(*cells) for name, cells in sorted(tables.items())},
        "only_here": len(set(ours) - set(theirs)),
        "only_in_baseline": len(set(theirs) - set(ours)),
    }
