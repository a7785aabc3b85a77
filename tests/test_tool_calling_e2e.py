"""The tool-calling family end to end on the simulated vendor: the clean one, baselines.

Each defect's exact codes are asserted by tests/test_defect_codes_*.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from verifier import resources

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]


def tool_run(run_verifier: Run, url: str, *args: str) -> VerifierRun:
    run = run_verifier(url, "--families", "tool_calling", *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


def test_clean_vendor_passes_with_full_metrics(simulator: Start, run_verifier: Run) -> None:
    run = tool_run(run_verifier, simulator())
    assert run.returncode == 0, run.stdout[-3000:]
    family = run.family("tool_calling")
    assert family["verdict"] == "pass"
    assert family["counts"]["fail"] == family["counts"]["error"] == 0
    # Without a profile, no contract documents tools declared in messages (Kimi K3's).
    dynamic = [c for c, o in run.outcomes().items() if o["status"] == "unsupported"]
    assert dynamic and all(c.startswith("tool_calling/dynamic-") for c in dynamic)
    graded = family["cases"] - len(dynamic)
    metrics = family["metrics"]
    assert metrics["requests"] == 5 * graded, "--repeats defaults to 5 for tool calling"
    for name in ("request_validity", "pass_k", "identical_calls", "stream_parity"):
        assert metrics[name]["rate"] == 1.0, name
        assert 0.9 < metrics[name]["interval"][0] < 1.0, name
    categories = metrics["accuracy"]["by_category"]
    assert set(categories) >= {
        "single",
        "multiple",
        "parallel",
        "irrelevance",
        "multi_turn",
        "forced",
    }
    for name, rate in categories.items():
        assert rate["rate"] == 1.0, name
        assert rate["trials"] >= 20 or name == "tool_choice", name
    assert "key order and whitespace ignored" in metrics["compared"]
    assert len(metrics["decisions"]) == graded


def test_baseline_agreement(simulator: Start, run_verifier: Run, tmp_path: Path) -> None:
    reference = tool_run(run_verifier, simulator(), "--repeats", "1")
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(reference.scorecard))
    same = tool_run(run_verifier, simulator(), "--repeats", "1", "--baseline", str(baseline))
    agreement = same.family("tool_calling")["metrics"]["baseline"]
    assert agreement["trigger_f1"] == 1.0 and agreement["tool_agreement"]["rate"] == 1.0
    assert same.scorecard["baseline"]["run"] == reference.scorecard["run"]["id"]
    other = tool_run(
        run_verifier,
        simulator("--defect", "tool-choice-none-ignored"),
        "--repeats",
        "1",
        "--baseline",
        str(baseline),
    )
    agreement = other.family("tool_calling")["metrics"]["baseline"]
    assert agreement["trigger_precision"] < 1.0 and agreement["trigger_recall"] == 1.0


def test_bad_baseline_is_one_line(simulator: Start, run_verifier: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1}')
    run = run_verifier(simulator(), "--baseline", str(bad))
    assert run.returncode == 4
    assert "ERROR: --baseline: " in run.stderr and "is not a scorecard" in run.stderr


@pytest.mark.parametrize("budget", ["full", "auto"])
def test_pass_k_counts_only_cases_right_on_every_repeat(
    simulator: Start, run_verifier: Run, budget: str
) -> None:
    """Arguments that change between repeats fail pass^k whatever the budget."""
    url = simulator("--defect", "tool-nondeterministic-args")
    run = tool_run(run_verifier, url, "--budget", budget)
    family = run.family("tool_calling")
    assert set(family["codes"]) == {"nondeterministic_calls"}
    assert family["metrics"]["pass_k"]["rate"] < 0.3
    assert family["metrics"]["request_validity"]["rate"] == 1.0, "every repeat is valid"
