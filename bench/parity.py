"""The parity decision's power curve and false-alarm rate, on the simulated vendor's distributions.

For each injected divergence EPS (the simulated vendor's ``weights-perturbed:EPS``: every logit
shifted by N(0, EPS), the same for the same prompt) and each seeded repetition, the reference and
the candidate answer the parity corpus's prompts as the simulated vendor does, both with the same
batch-like noise (``--logit-noise SIGMA``, drawn anew for every request). The verifier's own
grading (``verifier.checks.parity.compared``) and sequential test decide, prompt by prompt, in a
seeded order; the script reports, per EPS, how often the decision says "different", "same" or
nothing, the prompts and requests it needed (median and 90th percentile), and the mean
divergence the candidate showed. EPS 0 is the false-alarm rate: the same model, both sides noisy.

No process or socket is involved: the distributions are the simulated vendor's own functions
(``verifier.simulator.distribution``), so a thousand repetitions take seconds.

    python bench/parity.py                         # EPS 0..0.1, sigma 0.05, 200 repetitions
    python bench/parity.py --sigma 0 --repetitions 20
    python bench/parity.py --eps 0,0.01 --repetitions 1000

The last line is one JSON record.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifier.cases.corpus import load_corpus  # noqa: E402
from verifier.checks.parity import compared  # noqa: E402
from verifier.checks.support.distributions import Trace, trace_of  # noqa: E402
from verifier.simulator.distribution import (  # noqa: E402
    Perturbation,
    distribution,
    entry,
    prompt_digest,
)
from verifier.stats import SequentialTest  # noqa: E402

TOKENS = 32
TOP = 20
# Requests per prompt: the candidate's first, streamed and repeated answers, and the
# reference's two (asked live; a recording costs the candidate's three only).
REQUESTS_PER_PROMPT = 5


def answer(digest: str, perturbation: Perturbation) -> Trace:
    """One answer's trace: TOKENS positions of the simulated model's distributions."""
    entries = [entry(distribution(digest, i, f" w{i}", perturbation), TOP) for i in range(TOKENS)]
    found = trace_of(entries)
    assert found is not None
    return found


def repetition(
    digests: list[str], eps: float, sigma: float, seed: int, test: SequentialTest
) -> dict[str, Any]:
    """One seeded decision: prompts in a seeded order, answered and graded until it stops."""
    order = list(digests)
    random.Random(seed).shuffle(order)
    exceeded, divergences = [], []
    number = 0
    for digest in order:
        number += 2

        def noisy(side: int, n: int, weights: float = 0.0) -> Perturbation:
            return Perturbation(weights=weights, noise=sigma, seed=seed * 2 + side, number=n)

        reference = (answer(digest, noisy(0, number)), answer(digest, noisy(0, number + 1)))
        first = answer(digest, noisy(1, number, eps))
        again = answer(digest, noisy(1, number + 1, eps))
        row = compared(reference, first, again)
        exceeded.append(row["exceeds"])
        divergences.append(row["divergence"])
        outcome, used = test.decide(exceeded)
        if outcome != "undecided":
            break
    outcome, used = test.decide(exceeded)
    return {"outcome": outcome, "prompts": used, "divergence": statistics.fmean(divergences)}


def curve(eps: float, sigma: float, repetitions: int, digests: list[str]) -> dict[str, Any]:
    """The decision's outcomes over seeded repetitions at one injected divergence."""
    test = SequentialTest()
    runs = [repetition(digests, eps, sigma, seed, test) for seed in range(repetitions)]
    prompts = sorted(r["prompts"] for r in runs)
    share = {o: sum(r["outcome"] == o for r in runs) / repetitions for o in ("different", "same")}
    return {
        "eps": eps,
        "sigma": sigma,
        "repetitions": repetitions,
        "different": share["different"],
        "same": share["same"],
        "undecided": 1 - share["different"] - share["same"],
        "prompts_median": statistics.median(prompts),
        "prompts_p90": prompts[int(0.9 * (len(prompts) - 1))],
        "requests_median": statistics.median(prompts) * REQUESTS_PER_PROMPT,
        "divergence_mean": statistics.fmean(r["divergence"] for r in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eps", default="0,0.002,0.005,0.01,0.02,0.05,0.1")
    parser.add_argument("--sigma", type=float, default=0.05)
    parser.add_argument("--repetitions", type=int, default=200)
    args = parser.parse_args()
    cases = load_corpus(["parity"]).cases
    digests = [prompt_digest(case.data) for case in cases]
    rows = [curve(float(e), args.sigma, args.repetitions, digests) for e in args.eps.split(",")]
    print(f"{len(digests)} prompts, sigma {args.sigma}, {args.repetitions} repetitions each")
    print("eps     different  same   undecided  prompts (median, p90)  divergence")
    for row in rows:
        print(
            f"{row['eps']:<7g} {row['different']:<10.3f} {row['same']:<6.3f} "
            f"{row['undecided']:<10.3f} {row['prompts_median']:>5g}, {row['prompts_p90']:<14d} "
            f"{row['divergence_mean']:.2e}"
        )
    print(json.dumps({"bench": "parity", "prompts": len(digests), "rows": rows}))


if __name__ == "__main__":
    main()
