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
from verifier.simulator.process import SimulatorProcess

pytestmark = pytest.mark.slow

ENV = "VERIFIER_E2E_ROTATION"
SECRETS = [f"clean-vendor-rotation-secret-{n:02d}" for n in range(10)]
TOOL_CASES = 174


@pytest.mark.parametrize("secret", SECRETS)
def test_a_clean_vendor_passes_tool_calling_with_ten_secrets(
    secret: str, run_verifier: Callable[..., VerifierRun]
) -> None:
    env = {ENV: secret}
    vendor = SimulatorProcess(["--rotate", ENV], env)
    try:
        options = ("--families", "tool_calling", "--repeats", "tool_calling=1")
        run = run_verifier(vendor.url, *options, "--rotate", ENV, "--concurrency", "8", env=env)
    finally:
        vendor.stop()
    card = run.scorecard
    rotation = Rotation(secret.encode())
    assert card["corpus"]["rotation"] == {
        "commitment": rotation.commitment,
        "families": ["tool_calling"],
        "twins": TOOL_CASES,
    }
    assert secret not in json.dumps(card)
    assert card["settings"]["seed"] == rotation.seed
    family = card["families"]["tool_calling"]
    assert (family["verdict"], family["codes"], run.returncode) == ("pass", {}, 0), run.stdout
    compared = family["metrics"]["rotation"]
    # Every pair graded on both sides, over the three APIs; none right on one side only.
    assert (compared["lost"], compared["gained"], compared["differing"]) == (0, 0, [])
    assert compared["pairs"] == family["counts"]["pass"] // 2
    assert compared["public"]["rate"] == compared["rotated"]["rate"] == 1.0
    # The twins are graded exactly: each accurate, as its case is.
    accuracy = family["metrics"]["accuracy"]["cases"]
    twins = {case: outcome for case, outcome in accuracy.items() if SUFFIX in case}
    assert len(twins) == len(accuracy) // 2 and all(o["accurate"] for o in twins.values())


def test_every_family_passes_a_clean_vendor_with_rotate(
    run_verifier: Callable[..., VerifierRun],
) -> None:
    env = {ENV: SECRETS[0]}
    vendor = SimulatorProcess(["--profile", "kimi-k2-thinking", "--rotate", ENV], env)
    try:
        run = run_verifier(vendor.url, "--profile", "kimi-k2-thinking", "--rotate", ENV, env=env)
    finally:
        vendor.stop()
    verdicts = {name: family["verdict"] for name, family in run.scorecard["families"].items()}
    assert verdicts == dict.fromkeys(set(DEFAULT_FAMILIES) - {"parity"}, "pass"), run.stdout
    assert run.returncode == 0
    requests = [
        json.loads(line)["request"]
        for line in (run.out / "transcript.jsonl").read_text().splitlines()
    ]
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
