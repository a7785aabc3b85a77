"""Sequential stopping (``--budget auto``): stop sampling a family once its verdict is known.

A family's score is a pass rate. Once the 95% Wilson interval of the cases graded so far
lies wholly above or wholly below the gate's ``min_score`` for that family, more cases
cannot move the verdict the statistics give, so the rest are not sent. Nothing is decided
before ``min_graded`` cases, so that the gate never sees a family stopped too early to judge.
The cases are a sample in corpus order, not a random one: a stopped family reports what it
saw, and the scorecard says how far it got.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ..outcome import Status
from ..stats import wilson_interval

MODES = ("full", "auto")


def decision(passed: int, failed: int, threshold: float, min_graded: int) -> str | None:
    """``"above"`` or ``"below"`` when the interval of the pass rate clears `threshold`, else None.

    >>> decision(0, 10, 1.0, 10), decision(40, 0, 0.9, 10), decision(9, 0, 0.5, 10)
    ('below', 'above', None)
    """
    graded = passed + failed
    if graded < max(min_graded, 1):
        return None
    low, high = wilson_interval(passed, graded)  # type: ignore[misc]
    if low > threshold:
        return "above"
    if high < threshold:
        return "below"
    return None


class Budget:
    """Per-family tallies of this process's graded cases, and which families are decided.

    Safe to use from the scheduler's threads.

    Args:
        thresholds: each family's gate thresholds (``min_score``, ``min_graded``); kept
            as ``limits``, family -> (min_score, min_graded).
    """

    def __init__(self, thresholds: Mapping[str, Mapping[str, Any]]) -> None:
        self.limits = {
            family: (float(limits.get("min_score", 1.0)), int(limits.get("min_graded", 1)))
            for family, limits in thresholds.items()
        }
        self._tally: dict[str, list[int]] = {family: [0, 0] for family in thresholds}
        self._lock = threading.Lock()

    def record(self, family: str, status: Status | str) -> None:
        """Count one graded outcome (errors and unsupported cases are not part of the rate)."""
        if status not in (Status.PASS, Status.FAIL) or family not in self._tally:
            return
        with self._lock:
            self._tally[family][0 if status == Status.PASS else 1] += 1

    def standing(self, family: str) -> tuple[int, int, str | None]:
        """(passed, failed, decision) of the family's cases graded so far."""
        with self._lock:
            passed, failed = self._tally.get(family, (0, 0))
        threshold, min_graded = self.limits.get(family, (1.0, 1))
        return passed, failed, decision(passed, failed, threshold, min_graded)

    def stopped(self, family: str) -> str | None:
        """Why the family's remaining cases are not sent, or None while it is undecided."""
        passed, failed, side = self.standing(family)
        if side is None:
            return None
        low, high = wilson_interval(passed, passed + failed)  # type: ignore[misc]
        return (
            f"budget: {family} decided after {passed + failed} graded cases (pass rate 95% "
            f"interval [{low:.2f}, {high:.2f}] {side} min_score {self.limits[family][0]:g})"
        )


def summary(
    outcomes: Iterable[tuple[str, str]],
    cases: Mapping[str, int],
    thresholds: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """What the scorecard says of sequential stopping, per family (pure).

    Args:
        outcomes: (family, status) of every case of the run that has an outcome.
        cases: how many cases each family has in the corpus.
        thresholds: each family's gate thresholds.
    """
    budget = Budget({family: thresholds.get(family, {}) for family in cases})
    sent = dict.fromkeys(cases, 0)
    for family, status in outcomes:
        if family in sent:
            sent[family] += 1
            budget.record(family, status)
    families: dict[str, Any] = {}
    for family, total in cases.items():
        passed, failed, side = budget.standing(family)
        interval = wilson_interval(passed, passed + failed)
        families[family] = {
            "cases": total,
            "sent": sent[family],
            "graded": passed + failed,
            "min_score": budget.limits[family][0],
            "interval": list(interval) if interval else None,
            "decided": side,
        }
    return {"mode": "auto", "families": families}
