"""The wire family end to end on the simulated vendor, and shapes checked on every family."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from verifier import resources
from verifier.cases.corpus import load_corpus
from verifier.cases.negative import default_count, negative_cases
from verifier.config import DEFAULT_SEED

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
# The corpus's own cases, and the default generated set (one bad or edge request per field).
# What a chat run sends: the other APIs' own bad requests go only through theirs.
CHAT_CASES = [c for c in load_corpus(["wire"]).cases if "api" not in c.data]
WIRE = [*CHAT_CASES, *negative_cases(default_count(), DEFAULT_SEED)[0]]


def wire_run(run_verifier: Run, url: str, *args: str) -> VerifierRun:
    run = run_verifier(url, "--families", "wire", *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


PROFILED = {"sampling_limits", "sampling_pins", "served_model", "generation_defaults"}
NEEDS_PROFILE = sum(c.data["check"] in PROFILED for c in WIRE)


def test_clean_vendor_passes(simulator: Start, run_verifier: Run) -> None:
    run = wire_run(run_verifier, simulator())
    family = run.family("wire")
    assert run.returncode == 0, run.stdout[-3000:]
    assert family["counts"] == {
        "pass": len(WIRE) - NEEDS_PROFILE,
        "fail": 0,
        "error": 0,
        "unsupported": NEEDS_PROFILE,
    }
    checks = family["metrics"]["checks"]
    assert set(checks) == {c.data["check"] for c in WIRE}


def test_clean_vendor_passes_every_profile_policy(
    simulator: Start, run_verifier: Run, small_profile_dir: Path
) -> None:
    profile = str(small_profile_dir)
    run = wire_run(run_verifier, simulator("--profile", profile), "--profile", profile)
    assert run.family("wire")["counts"] == {
        "pass": len(WIRE),
        "fail": 0,
        "error": 0,
        "unsupported": 0,
    }


def test_seed_differences_are_reported_not_failed_without_seed_support(
    simulator: Start, run_verifier: Run, small_profile_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "no-seed"
    shutil.copytree(small_profile_dir, folder)
    policies = json.loads((folder / "verifier-profile.json").read_text())
    (folder / "verifier-profile.json").write_text(json.dumps({**policies, "seed_supported": False}))
    url = simulator("--profile", str(small_profile_dir), "--defect", "seed-ignored")
    run = wire_run(run_verifier, url, "--profile", str(folder), "-k", "seed")
    family = run.family("wire")
    assert family["counts"]["fail"] == 0 and family["counts"]["unsupported"] == 3


def test_shapes_are_checked_on_every_family(simulator: Start, run_verifier: Run) -> None:
    """A raw finish_reason shows in every family's shape metrics, failing only the wire family."""
    families = ("--families", "structured_output,tool_calling,wire")
    clean = run_verifier(simulator(), "--repeats", "1", *families)
    for name, family in clean.scorecard["families"].items():
        assert family["metrics"]["shapes"]["violations"] == 0, name
        # Every case a vendor without a profile can answer was answered at least once.
        answered = family["cases"] - family["counts"]["unsupported"]
        assert family["metrics"]["shapes"]["answers"] >= answered, name
    raw = run_verifier(
        simulator("--defect", "finish-reason-raw-token"), "--repeats", "1", *families
    )
    families = raw.scorecard["families"]
    for name in ("structured_output", "tool_calling"):
        shapes = families[name]["metrics"]["shapes"]
        assert shapes["codes"].get("finish_reason_invalid", 0) > 0, name
        assert families[name]["verdict"] == "pass", name
    assert families["wire"]["verdict"] == "fail"
