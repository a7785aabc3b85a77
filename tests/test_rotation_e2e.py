"""--rotate against the simulated vendor: a clean one passes with any secret, every family.

The vendor is told each secret (``verifier simulate --rotate``): the test double cannot
generalise to the twins' prompts as a model does, so it learns their calls as it knows the
published cases'. The vendor that special-cases the published prompts is the defect table's
``public-prompts-only`` row.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import VerifierRun
from verifier.cases.rotation import SUFFIX, Rotation
from verifier.config import DEFAULT_FAMILIES
from verifier.endpoint.probe_words import PUBLISHED, ProbeWords
from verifier.simulator.process import SimulatorProcess

pytestmark = pytest.mark.slow

ENV = "VERIFIER_E2E_ROTATION"
SECRETS = [f"clean-vendor-rotation-secret-{n:02d}" for n in range(10)]
# The families whose cases vary, and how many of their cases do (parity runs as published:
# its reference's distributions are the published prompts').
TWINS = {
    "tool_calling": 174,
    "structured_output": 119,
    "chat_template": 41,
    "tokenizer": 44,
    "vision": 29,
    "wire": 65,
    "reasoning": 20,
}
ROTATED = tuple(TWINS)
PROFILE = "kimi-k2-thinking"


@pytest.mark.parametrize("secret", SECRETS)
def test_a_clean_vendor_passes_the_rotated_families_with_ten_secrets(
    secret: str, run_verifier: Callable[..., VerifierRun]
) -> None:
    """Over chat completions: the run with every family below goes over every API."""
    env = {ENV: secret}
    vendor = SimulatorProcess(["--profile", PROFILE, "--rotate", ENV], env)
    try:
        options = ("--profile", PROFILE, "--families", ",".join(TWINS), "--api", "chat")
        options += ("--repeats", "tool_calling=1", "--concurrency", "8", "--rotate", ENV)
        # The generated wire cases have no twins (the secret's seed draws them).
        options += ("--negative", "0")
        run = run_verifier(vendor.url, *options, env=env)
    finally:
        vendor.stop()
    card = run.scorecard
    rotation = Rotation(secret.encode())
    assert card["corpus"]["rotation"] == {
        "commitment": rotation.commitment,
        "families": sorted(TWINS),
        "twins": sum(TWINS.values()),
    }
    assert secret not in json.dumps(card)
    assert card["settings"]["seed"] == rotation.seed
    assert run.returncode == 0, run.stdout[-3000:]
    for name in TWINS:
        family = card["families"][name]
        assert (family["verdict"], family["codes"]) == ("pass", {}), name
        compared = family["metrics"]["rotation"]
        # None right on one side only; every twin graded where its case is.
        assert (compared["lost"], compared["gained"], compared["differing"]) == (0, 0, [])
        assert compared["public"]["rate"] == compared["rotated"]["rate"] == 1.0
        graded = {
            key
            for key, outcome in run.outcomes().items()
            if key.startswith(f"{name}/") and outcome["status"] in ("pass", "fail")
        }
        both = {key for key in graded if not key.endswith(SUFFIX) and key + SUFFIX in graded}
        assert compared["pairs"] == len(both) > 0, name
    # The tool-calling twins are graded exactly: each accurate, as its case is.
    accuracy = card["families"]["tool_calling"]["metrics"]["accuracy"]["cases"]
    twins = {case: outcome for case, outcome in accuracy.items() if SUFFIX in case}
    assert len(twins) == len(accuracy) // 2 and all(o["accurate"] for o in twins.values())


def test_every_family_passes_a_clean_vendor_with_rotate(
    run_verifier: Callable[..., VerifierRun],
) -> None:
    env = {ENV: SECRETS[0]}
    vendor = SimulatorProcess(["--profile", PROFILE, "--rotate", ENV], env)
    try:
        run = run_verifier(vendor.url, "--profile", PROFILE, "--rotate", ENV, env=env)
    finally:
        vendor.stop()
    card = run.scorecard
    verdicts = {name: family["verdict"] for name, family in card["families"].items()}
    assert verdicts == dict.fromkeys(set(DEFAULT_FAMILIES) - {"parity"}, "pass"), run.stdout
    assert run.returncode == 0
    assert card["corpus"]["rotation"]["families"] == sorted(ROTATED)
    for name, family in card["families"].items():
        rulings = [r for r in family.get("rulings") or () if r.get("twins") == "rotated"]
        if name in ROTATED:
            (ruling,) = rulings
            compared = family["metrics"]["rotation"]
            assert ruling["outcome"] == "alike" and ruling["pairs"] > 0, name
            assert (compared["lost"], compared["gained"]) == (0, 0), name
        else:
            assert rulings == [] and "rotation" not in family["metrics"], name
    attempts = [
        json.loads(line) for line in (run.out / "transcript.jsonl").read_text().splitlines()
    ]
    requests = [attempt["request"] for attempt in attempts]
    # The run's first requests say the secret's words, none of the published probes'.
    probes = [json.dumps(a["request"]) for a in attempts if a["label"].startswith("probe/")]
    published = (PUBLISHED.greeting, PUBLISHED.question, PUBLISHED.format_question)
    assert len(probes) > 5
    assert not [p for p in probes for said in published if json.dumps(said) in p]
    words = ProbeWords.drawn(Rotation(SECRETS[0].encode()).random("probe", "words"))
    assert sum(json.dumps(words.greeting) in p for p in probes) > 3
    seeds = {r.get("seed") for r in requests if isinstance(r, dict) and "seed" in r}
    # No request carries the fixed default seed (wire's seed checks move from the run's own).
    assert 1234 not in seeds and Rotation(SECRETS[0].encode()).seed in seeds


def test_without_rotate_the_scorecard_says_the_cases_ran_as_published(
    run_verifier: Callable[..., VerifierRun],
) -> None:
    vendor = SimulatorProcess([])
    try:
        run = run_verifier(vendor.url, "--families", "tool_calling", "--repeats", "1")
    finally:
        vendor.stop()
    card = run.scorecard
    assert card["corpus"]["rotation"] is None
    assert "rotation" not in card["families"]["tool_calling"]["metrics"]
    assert "published cases only" in (run.out / "scorecard.md").read_text()
    assert "published cases only" in run.stdout
