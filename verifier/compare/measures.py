"""Measures from scorecard values: rates with their intervals, verdicts, counts.

Numbers are written as the terminal summary writes them (``verifier.render.report``):
three decimals, the 95% Wilson interval in brackets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..stats import wilson_interval
from .tables import Measure, State

MISSING = Measure("–", State.MISSING)
STATUSES = ("pass", "fail", "error", "unsupported")
NOT_RUN = Measure("not run", State.MISSING)


def interval_text(value: float, interval: tuple[float, float] | None) -> str:
    """``0.221 [0.165, 0.289]``, or the bare value when there is no interval."""
    if interval is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        return float(value[0]), float(value[1])
    return None


def rate_measure(rate: Mapping[str, Any] | None, *, fraction: bool = True) -> Measure:
    """A scorecard rate (``{"rate", "interval", "successes", "trials"}``) as a graded measure.

    Args:
        rate: the rate; None or a null rate (no trials) is a missing measure.
        fraction: add ``(successes/trials)`` when the rate records them.
    """
    if not rate or rate.get("rate") is None:
        return MISSING
    value = float(rate["rate"])
    interval = _interval(rate.get("interval"))
    text = interval_text(value, interval)
    if fraction and isinstance(rate.get("trials"), int):
        text += f" ({rate.get('successes')}/{rate['trials']})"
    return Measure(text, State.GRADED, value, interval)


def counted_rate(successes: int, trials: int, *, label: str = "") -> Measure:
    """A rate computed here from counts, with its Wilson interval; missing without trials."""
    interval = wilson_interval(successes, trials)
    if interval is None:
        return MISSING
    value = successes / trials
    suffix = f" {label}" if label else ""
    return Measure(
        f"{interval_text(value, interval)} ({successes}/{trials}{suffix})",
        State.GRADED,
        value,
        interval,
    )


def count_measure(count: int | None, text: str | None = None) -> Measure:
    """A count where fewer is better (failure codes); missing when None."""
    if count is None:
        return MISSING
    return Measure(text if text is not None else str(count), State.GRADED, float(count))


def _suffix(counts: Mapping[str, int]) -> str:
    parts = []
    if counts.get("unsupported"):
        parts.append(f"{counts['unsupported']} unsupported")
    if counts.get("error"):
        parts.append(f"{counts['error']} error{'s' if counts['error'] != 1 else ''}")
    return f" ({', '.join(parts)})" if parts else ""


def family_measure(family: Mapping[str, Any] | None) -> Measure:
    """A family's verdict and score with its interval; unsupported and inconclusive say so."""
    if family is None:
        return NOT_RUN
    counts = family.get("counts", {})
    score = family.get("score")
    interval = _interval(family.get("interval"))
    verdict = str(family.get("verdict", "?"))
    score_text = interval_text(score, interval) if score is not None else "nothing graded"
    text = f"{verdict.upper()} {score_text}{_suffix(counts)}"
    if verdict == "unsupported":
        return Measure(f"UNSUPPORTED (all {family.get('cases', 0)} cases)", State.UNSUPPORTED)
    if verdict == "inconclusive":
        return Measure(text, State.INCONCLUSIVE)
    if verdict == "recorded":
        recorded = (family.get("metrics") or {}).get("recorded", 0)
        return Measure(f"RECORDED ({recorded} recorded, nothing compared)", State.RECORDED)
    if verdict in ("pass", "fail") and score is not None:
        return Measure(text, State.GRADED, float(score), interval)
    return Measure(text, State.INFO)


def verdict_measure(verdict: str) -> Measure:
    """An overall verdict: pass above fail; unsupported and inconclusive never ranked as pass."""
    if verdict == "unsupported":
        return Measure("UNSUPPORTED", State.UNSUPPORTED)
    if verdict == "inconclusive":
        return Measure("INCONCLUSIVE", State.INCONCLUSIVE)
    if verdict == "recorded":
        return Measure("RECORDED", State.RECORDED)
    if verdict in ("pass", "fail"):
        return Measure(verdict.upper(), State.GRADED, 1.0 if verdict == "pass" else 0.0)
    return Measure(verdict.upper(), State.INFO)


def status_counts_measure(counts: Mapping[str, int] | None) -> Measure:
    """Cases of a check or category by status; the pass share of graded ones is compared."""
    if not counts:
        return MISSING
    passed, failed = counts.get("pass", 0), counts.get("fail", 0)
    order = [*STATUSES, *sorted(set(counts) - set(STATUSES))]
    text = ", ".join(f"{counts[status]} {status}" for status in order if counts.get(status))
    if passed + failed == 0:
        if counts.get("unsupported") and not counts.get("error"):
            return Measure(f"UNSUPPORTED ({text})", State.UNSUPPORTED)
        return Measure(f"INCONCLUSIVE ({text})", State.INCONCLUSIVE)
    interval = wilson_interval(passed, passed + failed)
    return Measure(text, State.GRADED, passed / (passed + failed), interval)


def paired_text(compared: Mapping[str, Any]) -> str:
    """A paired difference as people read it: estimate, interval, counts, McNemar's p."""
    if not compared.get("pairs"):
        return "no case graded in both runs"
    low, high = compared["interval"]
    lost, gained = compared["lost"], compared["gained"]
    # Significant at 0.05 by McNemar's test: whether it exceeds a margin is the gate's to say.
    significant = compared["p_value"] < 0.05 and lost != gained
    return (
        f"{compared['difference']:+.3f} [{low:+.3f}, {high:+.3f}], {lost} lost and {gained} "
        f"gained of {compared['pairs']} cases, McNemar p {compared['p_value']:.2g}"
        + (f", a significant {'drop' if lost > gained else 'gain'}" if significant else "")
    )
