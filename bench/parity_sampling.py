"""The parity sampling fallback's power curve and false-alarm rate, on the simulated distributions.

For each injected divergence EPS (the simulated vendor's ``weights-perturbed:EPS``) and each
seeded repetition, the reference and the candidate each sample the first token of the 24
parity prompts 20 times at temperature 1, as the simulated vendor samples a one-token answer
(``verifier.simulator.distribution.sample``, the candidate's logits perturbed). The
verifier's own test (``verifier.checks.support.first_tokens.decide``) rules; the script
reports, per EPS, the true mean first-token TV the perturbation gives, how often the test
says "different", "same" or nothing, and its median resolution (the smallest shift it
reports finding with 95% power). EPS 0 is the false-alarm rate.

No process or socket is involved; each decision costs about a second of CPU (999 shuffles
and the power's simulations).

    python bench/parity_sampling.py                    # EPS 0..2, 20 repetitions
    python bench/parity_sampling.py --eps 0 --repetitions 100

The last line is one JSON record.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifier.cases.corpus import load_corpus  # noqa: E402
from verifier.checks.support import first_tokens  # noqa: E402
from verifier.simulator.distribution import (  # noqa: E402
    Logits,
    Perturbation,
    distribution,
    prompt_digest,
    sample,
)

FIRST = " w0"


def probabilities(logits: Logits) -> dict[str, float]:
    """The softmax over the emitted token, its alternatives and the lumped rest."""
    named = [(logits.token, logits.chosen), *logits.alternatives, ("\x00rest", logits.rest)]
    total = sum(math.exp(value) for _, value in named)
    return {token: math.exp(value) / total for token, value in named}


def true_tv(digests: list[str], eps: float) -> float:
    """The mean first-token TV between the model and its perturbation, over the prompts."""
    found = []
    for digest in digests:
        p = probabilities(distribution(digest, 0, FIRST))
        q = probabilities(distribution(digest, 0, FIRST, Perturbation(weights=eps)))
        found.append(0.5 * sum(abs(p[t] - q[t]) for t in p))
    return statistics.fmean(found)


def repetition(digests: list[str], eps: float, seed: int) -> dict[str, Any]:
    """One seeded decision over every prompt."""
    strata = []
    n = first_tokens.SAMPLES
    for i, digest in enumerate(digests):
        reference = distribution(digest, 0, FIRST)
        candidate = distribution(digest, 0, FIRST, Perturbation(weights=eps))
        strata.append(
            (
                [sample(candidate, 1.0, f"{seed}:{i}:c{k}") for k in range(n)],
                [sample(reference, 1.0, f"{seed}:{i}:r{k}") for k in range(n)],
            )
        )
    return first_tokens.decide(strata)


def curve(eps: float, repetitions: int, digests: list[str]) -> dict[str, Any]:
    """The test's outcomes over seeded repetitions at one injected divergence."""
    runs = [repetition(digests, eps, seed) for seed in range(repetitions)]
    share = {
        o: sum(r["outcome"] == o for r in runs) / repetitions
        for o in ("different", "same", "undecided")
    }
    resolutions = [r["resolution"] for r in runs if r["resolution"] is not None]
    return {
        "eps": eps,
        "true_tv_mean": true_tv(digests, eps),
        "repetitions": repetitions,
        "different": share["different"],
        "same": share["same"],
        "undecided": share["undecided"],
        "resolution_median": statistics.median(resolutions) if resolutions else None,
        "requests": len(digests) * first_tokens.SAMPLES * 2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eps", default="0,0.25,0.5,1,2")
    parser.add_argument("--repetitions", type=int, default=20)
    args = parser.parse_args()
    digests = [prompt_digest(case.data) for case in load_corpus(["parity"]).cases]
    rows = [curve(float(e), args.repetitions, digests) for e in args.eps.split(",")]
    print(
        f"{len(digests)} prompts, {first_tokens.SAMPLES} samples a side, "
        f"{args.repetitions} repetitions each, {rows[0]['requests']} requests a decision"
    )
    print("eps     true TV  different  same   undecided  resolution (median)")
    for row in rows:
        print(
            f"{row['eps']:<7g} {row['true_tv_mean']:<8.3f} {row['different']:<10.3f} "
            f"{row['same']:<6.3f} {row['undecided']:<10.3f} {row['resolution_median']}"
        )
    print(json.dumps({"bench": "parity_sampling", "prompts": len(digests), "rows": rows}))


if __name__ == "__main__":
    main()
