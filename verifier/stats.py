"""Small statistics for rates: the Wilson score interval."""

from __future__ import annotations

import math
from typing import Any

Z95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial rate (95% by default); None for no trials.

    Unlike the normal approximation it stays inside [0, 1] and is honest for
    small samples and rates near 0 or 1 (12/12 passes gives [0.76, 1.0]).
    """
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be within 0..{trials}, given {successes}")
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # At 0 or n successes the bound is exactly 0 or 1; rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def rate(successes: int, trials: int) -> dict[str, Any]:
    """A rate as the scorecard shows it: the point estimate, its Wilson interval, the counts."""
    interval = wilson_interval(successes, trials)
    return {
        "rate": successes / trials if trials else None,
        "interval": list(interval) if interval else None,
        "successes": successes,
        "trials": trials,
    }
