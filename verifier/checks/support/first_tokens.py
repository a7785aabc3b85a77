"""Parity without logprobs: sampled first tokens on both sides, a two-sample test (pure).

An endpoint that gives no logprobs still shows its distribution through samples. Each prompt is
answered :data:`SAMPLES` times with ``max_tokens: 1`` at temperature 1 by the candidate and by
the reference, each answer with its own seed (the two sides' seeds differ, so that their
samples are independent), and the first tokens' two empirical distributions are compared:

- **statistic**: the sum over prompts of the total variation (TV) distance between the two
  empirical distributions of the prompt's first token;
- **test**: a permutation test stratified by prompt: the candidate/reference labels shuffled
  within each prompt, :data:`ROUNDS` times, by a generator seeded from the pooled samples
  (each prompt's samples sorted, the sides forgotten: :func:`seed_of`). Under "same
  distribution" the two sides' samples of a prompt are independent draws of one distribution,
  so, given the pooled samples, every split of them into the two sides is equally likely, and
  the seed, a function of the pool alone, says nothing of which split was observed. The
  p-value ``(1 + #{shuffled >= observed}) / (1 + ROUNDS)`` is then valid at any sample size:
  it is at most :data:`ALPHA` with probability at most :data:`ALPHA` (the shuffles taken as
  the uniform draws a seeded generator stands for). It is conservative, not exact: ties count
  against "different", and the p-value takes only the values ``k / (1 + ROUNDS)``;
- **power**: how often the test would find a shift of TV ``s`` in every prompt's first token
  (mass ``s`` moved from the likeliest pooled token to the second likeliest, as a converted
  model's neighbouring ranks trade places; to a token neither side sampled only where one
  token was sampled alone: :func:`moved`), estimated by drawing both sides from the pooled
  samples, :data:`SIMULATIONS` times per shift (the null's critical value from as many
  draws). The smallest shift found with probability :data:`POWER` is the test's
  *resolution*.

"different" when the p-value is at most :data:`ALPHA`; "same" only when it is not and the
resolution is at most :data:`RESOLUTION` (the test could have seen a shift of that size); else
"undecided". It is weaker than the logprobs comparison: it sees only the first token, only
what sampling shows (a shift in a token of probability 1% needs thousands of samples), and
its resolution is tenths of TV where logprobs resolve thousandths.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

# Samples of the first token per prompt and side.
SAMPLES = 20
ROUNDS = 999
ALPHA = 0.01
# The probability of finding a shift at which the test's resolution is stated.
POWER = 0.95
SHIFTS = (0.1, 0.2, 0.3, 0.5)
# The largest resolution at which a run that finds nothing may say "same".
RESOLUTION = 0.2
SIMULATIONS = 200

# One prompt's samples: the candidate's first tokens, the reference's.
Stratum = tuple[Sequence[str], Sequence[str]]


def _encoded(strata: Sequence[Stratum]) -> list[tuple[list[int], list[int], int]]:
    """Each prompt's samples as small integers, with the number of distinct tokens."""
    found = []
    for candidate, reference in strata:
        index = {token: i for i, token in enumerate(sorted({*candidate, *reference}))}
        found.append(([index[t] for t in candidate], [index[t] for t in reference], len(index)))
    return found


def _tv(a: Sequence[int], b: Sequence[int], kinds: int) -> float:
    """The TV distance between the empirical distributions of `a` and `b` over `kinds` tokens."""
    counts_a, counts_b = [0] * kinds, [0] * kinds
    for x in a:
        counts_a[x] += 1
    for x in b:
        counts_b[x] += 1
    return 0.5 * sum(abs(p / len(a) - q / len(b)) for p, q in zip(counts_a, counts_b, strict=True))


def statistic(strata: Sequence[Stratum]) -> float:
    """The sum over prompts of the TV distance between the two sides' first tokens."""
    return sum(_tv(a, b, kinds) for a, b, kinds in _encoded(strata))


def seed_of(strata: Sequence[Stratum]) -> int:
    """The shuffles' seed: a digest of each prompt's pooled samples, sorted.

    The same samples give the same test; and the seed is the same however a prompt's samples
    are split between the two sides, so that it carries nothing of the split the test judges
    (see the module).
    """
    pooled = [sorted([*candidate, *reference]) for candidate, reference in strata]
    digest = hashlib.sha256(json.dumps(pooled).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def permutation_p(strata: Sequence[Stratum], rounds: int = ROUNDS) -> float:
    """The stratified permutation test's p-value of :func:`statistic` (1.0 with no prompt)."""
    encoded = _encoded(strata)
    observed = sum(_tv(a, b, kinds) for a, b, kinds in encoded)
    draw = random.Random(seed_of(strata))
    pooled = [(a + b, len(a), kinds) for a, b, kinds in encoded]
    beyond = 0
    for _ in range(rounds):
        total = 0.0
        for values, split, kinds in pooled:
            draw.shuffle(values)
            total += _tv(values[:split], values[split:], kinds)
        # A shuffle that ties the observed statistic counts against "different".
        beyond += total >= observed - 1e-12
    return (1 + beyond) / (1 + rounds)


def moved(counts: Sequence[int], shift: float) -> list[float]:
    """`counts` as weights, one more token's 0 after them, with `shift` of the mass moved.

    The mass goes from the likeliest token to the second likeliest, as a converted model's
    neighbouring ranks trade places; to the extra token when only one was sampled.
    """
    total = sum(counts)
    weights = [c / total for c in counts] + [0.0]
    ranked = sorted(range(len(weights)), key=lambda i: -weights[i])
    top, second = ranked[0], ranked[1] if weights[ranked[1]] > 0 else len(counts)
    moving = min(shift, weights[top])
    weights[top] -= moving
    weights[second] += moving
    return weights


def power(strata: Sequence[Stratum], shifts: Sequence[float] = SHIFTS) -> dict[float, float]:
    """Each shift's estimated probability of a p-value at most :data:`ALPHA` (see the module)."""
    draw = random.Random(seed_of(strata) + 1)
    pooled = []
    for a, b, kinds in _encoded(strata):
        counts = [0] * kinds
        for x in a + b:
            counts[x] += 1
        pooled.append((counts, len(a), len(b), kinds))

    def simulated(shift: float) -> float:
        total = 0.0
        for counts, n_a, n_b, kinds in pooled:
            a = draw.choices(range(kinds + 1), weights=moved(counts, shift), k=n_a)
            b = draw.choices(range(kinds), weights=counts, k=n_b)
            total += _tv(a, b, kinds + 1)
        return total

    null = sorted(simulated(0.0) for _ in range(SIMULATIONS))
    critical = null[min(len(null) - 1, int((1 - ALPHA) * len(null)))]
    return {
        shift: sum(simulated(shift) > critical for _ in range(SIMULATIONS)) / SIMULATIONS
        for shift in shifts
    }


def decide(strata: Sequence[Stratum]) -> dict[str, Any]:
    """The outcome (same, different, undecided) with the figures it rests on (see the module)."""
    if not strata:
        return {"outcome": "undecided", "p_value": None, "statistic": None, "power": {}}
    p_value = permutation_p(strata)
    powers = power(strata)
    resolution = min((s for s, found in powers.items() if found >= POWER), default=None)
    if p_value <= ALPHA:
        outcome = "different"
    elif resolution is not None and resolution <= RESOLUTION:
        outcome = "same"
    else:
        outcome = "undecided"
    return {
        "outcome": outcome,
        "p_value": round(p_value, 4),
        "statistic": round(statistic(strata), 4),
        "resolution": resolution,
        "power": {str(shift): found for shift, found in powers.items()},
    }
