"""The order cases start in: the families' cost estimates, checked against what a run sends."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime

import pytest

from tests.conftest import KIMI_PROFILE, VerifierRun
from verifier.cases.corpus import load_corpus
from verifier.cases.negative import default_count, negative_cases
from verifier.checks import FAMILIES
from verifier.checks.registry import QUICK
from verifier.checks.vision import PER_MEGAPIXEL, megapixels
from verifier.config import DEFAULT_SEED

pytestmark = pytest.mark.slow

CONCURRENCY = 8


def sent(run: VerifierRun) -> dict[str, dict[str, float]]:
    """Per case: its first attempt's time, and its requests answered by generating or not."""
    cases: dict[str, dict[str, float]] = defaultdict(lambda: {"first": 1e99, "gen": 0, "quick": 0})
    for line in (run.out / "transcript.jsonl").read_text().splitlines():
        record = json.loads(line)
        key = record["label"].partition("#")[0]
        if key.startswith("probe/"):
            continue
        generated = record["url"].endswith("/chat/completions") and record["status"] < 400
        entry = cases[key]
        entry["gen" if generated else "quick"] += 1
        entry["first"] = min(entry["first"], datetime.fromisoformat(record["time"]).timestamp())
    return cases


def test_cost_estimates_match_what_a_clean_run_sends_and_order_the_start(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun]
) -> None:
    url = simulator("--profile", KIMI_PROFILE)
    run = run_verifier(
        url, "--profile", KIMI_PROFILE, "--concurrency", str(CONCURRENCY), timeout=600
    )
    assert run.returncode == 0, run.stdout[-2000:]
    generated, _ = negative_cases(default_count(), DEFAULT_SEED)
    corpus = {case.key: case for case in [*load_corpus(FAMILIES.names()).cases, *generated]}
    outcomes = run.outcomes()
    cases = sent(run)
    cost: dict[str, float] = {}
    for key, counts in cases.items():
        case = corpus[key]
        family = FAMILIES[case.family]
        estimate = family.cost(case) if family.cost else 1.0
        cost[key] = estimate * family.default_repeats
        # A pathological request, or top_logprobs above the maximum, may be refused or
        # answered: its estimate is the dearer.
        either = (
            case.data.get("expect") == "bounded" or case.data.get("check") == "top_logprobs_limit"
        )
        if outcomes[key]["status"] != "pass" or either:
            continue
        # What the estimate says beyond the requests themselves: large images.
        images = PER_MEGAPIXEL * megapixels(case) if case.family == "vision" else 0.0
        requests = counts["gen"] + QUICK * counts["quick"]
        assert estimate - images == pytest.approx(requests / family.default_repeats), key
    # The costliest start first: the first cases sent are the costliest kind, the last the
    # cheapest.
    order = sorted(cases, key=lambda key: cases[key]["first"])
    lowest = min(cost.values())
    dearest = sorted(cost.values(), reverse=True)[:CONCURRENCY]
    assert sorted((cost[key] for key in order[:CONCURRENCY]), reverse=True) == dearest
    assert all(cost[key] <= 1.0 + QUICK for key in order[-CONCURRENCY:])
    assert lowest == QUICK
