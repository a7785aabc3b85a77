"""Small statistics: Wilson and paired intervals, exact McNemar, a sequential test, a bootstrap."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
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


@dataclasses.dataclass(frozen=True, slots=True)
class SequentialTest:
    """Wald's sequential probability ratio test on a sign: P(exceed) is p0, or p1.

    Each observation says whether a candidate's statistic exceeded a threshold (True) or not.
    The log-likelihood ratio moves up by ln(p1/p0) on an exceedance and down by
    ln((1-p1)/(1-p0)) otherwise. The test says "different" at the first observation where it
    reaches A = ln((1 - beta) / alpha), and "same" where it is at or below
    B = ln(beta / (1 - alpha)) after at least `minimum` observations (a handful of ties is
    too little to call two deployments the same). Where each observation is True with
    probability at most p0, given those before it, the ratio is a supermartingale, so by
    Ville's inequality it ever reaches A with probability at most alpha / (1 - beta), whatever
    the stopping: that is the false-alarm rate.

    That premise is the caller's to make true. Parity's threshold is the reference's own
    repeat (its noise floor): a candidate that computes the same distributions exceeds it at
    most half the time only where the candidate's answer and the reference's repeat are
    exchangeable draws of one noisy computation. A deterministic reference repeats itself
    exactly (floor 0), and any numerical difference would then exceed it every time; parity's
    threshold has a least value for that reason (:data:`verifier.checks.parity.TOLERANCE`).
    """

    p0: float = 0.5
    p1: float = 0.75
    alpha: float = 0.01
    beta: float = 0.05
    minimum: int = 8

    @property
    def bounds(self) -> tuple[float, float]:
        """(B, A): at or below B the test says same, at or above A different."""
        return math.log(self.beta / (1 - self.alpha)), math.log((1 - self.beta) / self.alpha)

    @property
    def false_alarm_rate(self) -> float:
        """The most often it says "different" of a same-distribution candidate."""
        return self.alpha / (1 - self.beta)

    def decide(self, exceeded: Sequence[bool]) -> tuple[str, int]:
        """("same" | "different" | "undecided", observations used) over `exceeded` in order."""
        low, high = self.bounds
        up = math.log(self.p1 / self.p0)
        down = math.log((1 - self.p1) / (1 - self.p0))
        llr = 0.0
        for used, exceed in enumerate(exceeded, start=1):
            llr += up if exceed else down
            if llr >= high:
                return "different", used
            if llr <= low and used >= self.minimum:
                return "same", used
        return "undecided", len(exceeded)


def bootstrap_mean_interval(
    values: Sequence[float], seed: int = 0, draws: int = 2000
) -> tuple[float, float] | None:
    """A 95% percentile-bootstrap interval of the mean of `values` (seeded: reproducible)."""
    if not values:
        return None
    draw = random.Random(seed)
    n = len(values)
    means = sorted(sum(draw.choices(values, k=n)) / n for _ in range(draws))
    return means[int(0.025 * draws)], means[min(draws - 1, int(0.975 * draws))]


def quantile_interval(
    values: Sequence[float], q: float, z: float = Z95
) -> tuple[float, float | None, float | None] | None:
    """The q-quantile of `values` (nearest rank) with its distribution-free 95% interval.

    The interval is between order statistics whose ranks the binomial distribution of the
    number of values below the true quantile gives (normal approximation, Conover's
    method): it needs no assumption about the values' distribution and costs one sort. A
    bound that would fall beyond the smallest or largest value is None: too few values to
    bound the quantile on that side (the p99 of 50 values has no upper bound). None for no
    values.
    """
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    point = ordered[max(0, math.ceil(q * n) - 1)]
    half = z * math.sqrt(n * q * (1 - q))
    low_rank, high_rank = math.floor(n * q - half), math.ceil(n * q + half) + 1
    low = ordered[low_rank - 1] if low_rank >= 1 else None
    high = ordered[high_rank - 1] if high_rank <= n else None
    return point, low, high


def binomial_upper_tail(successes: int, trials: int) -> float:
    """P(X >= `successes`) for X ~ Binomial(`trials`, 1/2): a one-sided exact sign test.

    Over paired outcomes, the chance that at least `successes` of `trials` discordant pairs
    fall one way when either way is equally likely. No trial is no evidence: 1.
    """
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, given {successes} of {trials}")
    tail = sum(math.comb(trials, k) for k in range(successes, trials + 1))
    return tail / (1 << trials)


def mcnemar_exact(lost: int, gained: int) -> float:
    """The exact (binomial) McNemar test's two-sided p-value over the discordant pairs.

    Over cases graded on both sides, `lost` are right on one side only and `gained` right on
    the other only (McNemar's b and c). If neither side is more often right, each discordant
    pair falls either way with probability 1/2: the p-value is twice the binomial tail of the
    smaller count, at most 1. No discordant pair is no evidence: 1.
    """
    if lost < 0 or gained < 0:
        raise ValueError(f"counts must be >= 0, given {lost} and {gained}")
    discordant = lost + gained
    tail = sum(math.comb(discordant, k) for k in range(min(lost, gained) + 1))
    return min(1.0, 2 * tail / (1 << discordant))


def paired_difference_interval(
    both: int, gained: int, lost: int, neither: int, z: float = Z95
) -> tuple[float, float] | None:
    """Newcombe's 95% score interval for a paired difference of rates (his method 10, 1998).

    The pairs are cases graded on two sides, A (the candidate) and B (the reference): `both`
    right on both, `gained` right on A only, `lost` right on B only, `neither` right on none.
    The difference is A's rate minus B's, (gained - lost) / n. The interval combines the
    Wilson intervals of the two rates with their correlation (the 2x2 table's phi
    coefficient, continuity-corrected as Newcombe does; 0 where a margin is empty): it stays
    within [-1, 1], contains the estimate, and does not collapse to a point when the sides
    agree on every case (20 of 20 right on both gives about [-0.16, 0.16]). None for no
    pairs. It is the square-and-add interval Fagerland, Lydersen and Laake (2014) recommend
    beside the exact McNemar test.

    Newcombe, R. G. (1998) Improved confidence intervals for the difference between
    binomial proportions based on paired data. Statistics in Medicine 17, 2635-2650.
    """
    n = both + gained + lost + neither
    if n == 0:
        return None
    a_right, b_right = both + gained, both + lost
    pa, pb = a_right / n, b_right / n
    la, ua = wilson_interval(a_right, n, z) or (0.0, 1.0)
    lb, ub = wilson_interval(b_right, n, z) or (0.0, 1.0)
    margins = (both + gained) * (lost + neither) * (both + lost) * (gained + neither)
    cross = both * neither - gained * lost
    # Newcombe's continuity correction of a positive phi: lowered by n/2, and 0 below that.
    corrected = cross - n / 2 if cross > n / 2 else float(min(cross, 0))
    phi = corrected / math.sqrt(margins) if margins else 0.0
    difference = pa - pb
    below = math.sqrt(max(0.0, (pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2))
    above = math.sqrt(max(0.0, (ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2))
    return max(-1.0, difference - below), min(1.0, difference + above)
