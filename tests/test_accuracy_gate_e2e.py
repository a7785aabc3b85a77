"""Accuracy gated against a reference, end to end on the simulated vendor over loopback.

A reference run (the clean vendor) writes a scorecard. A vendor whose tool parser drops the
last of several calls (``tool-calls-dropped``) is run with that scorecard as ``--baseline``:
without the gate the drop shows (in the scorecard's metrics, the terminal, scorecard.md and
the comparison page) and the run passes; with ``max_accuracy_drop`` the gate fails it. The
clean vendor against the same baseline passes the same gate.

Accuracy is graded on a case's first answer, so one repeat is enough: more repeats add no
pair. The corpus has 21 parallel cases; the simulated model answers each with two or more
calls, so the defective vendor loses all 21 (McNemar p = 2 / 2^21).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, VerifierRun
from verifier import resources
from verifier.compare.inputs import Input
from verifier.compare.tables import Signature, SignatureState
from verifier.compare.views import build_comparison
from verifier.render.comparison_html import render_comparison_html
from verifier.render.comparison_markdown import render_comparison_markdown

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]

ARGS = ("--families", "tool_calling,structured_output", "--repeats", "1")
THRESHOLDS = (
    "[tool_calling]\n"
    "max_accuracy_drop = { all = 0.05, parallel = 0.2 }\n"
    "\n"
    "[structured_output]\n"
    "max_accuracy_drop = 0.05\n"
)


def test_the_readme_shows_these_thresholds_and_figures() -> None:
    readme = (REPO / "README.md").read_text()
    assert f"```toml\n{THRESHOLDS}```" in readme
    figures = ("-1.000 [-1.000, -0.781], McNemar p 9.5e-07", "-0.142 [-0.206, -0.090] over 155")
    for figure in figures:
        assert figure in " ".join(readme.split()), figure


def checked(run: VerifierRun) -> dict[str, Any]:
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run.scorecard


def paired(card: dict[str, Any], family: str = "tool_calling") -> dict[str, Any]:
    result: dict[str, Any] = card["families"][family]["metrics"]["accuracy"]["paired"]
    return result


def verdicts(card: dict[str, Any], family: str) -> dict[str, Any]:
    rulings = card["gate"]["families"][family]["accuracy"]
    return {r["category"]: r["verdict"] for r in rulings}


@pytest.fixture
def reference(simulator: Start, run_verifier: Run) -> Path:
    """The clean vendor's scorecard: every case right, recorded case by case."""
    run = run_verifier(simulator(), *ARGS)
    assert run.returncode == 0, run.stdout[-3000:]
    card = checked(run)
    cases = card["families"]["tool_calling"]["metrics"]["accuracy"]["cases"]
    parallel = [c for c, o in cases.items() if o["category"] == "parallel"]
    assert len(parallel) == 21 and all(cases[c]["accurate"] for c in parallel)
    assert card["families"]["structured_output"]["metrics"]["accuracy"]["cases"]
    return run.out / "scorecard.json"


def test_a_vendor_that_drops_parallel_calls_shows_the_drop_and_fails_the_gate(
    simulator: Start, run_verifier: Run, reference: Path, tmp_path: Path
) -> None:
    url = simulator("--defect", "tool-calls-dropped")
    shown = run_verifier(url, *ARGS, "--baseline", str(reference))
    # Without the gate: every case is valid, so the run passes, and the drop shows.
    assert shown.returncode == 0, shown.stdout[-3000:]
    card = checked(shown)
    parallel = paired(card)["by_category"]["parallel"]
    assert (parallel["pairs"], parallel["lost"], parallel["gained"]) == (21, 21, 0)
    assert parallel["difference"] == -1.0 and parallel["p_value"] == 2 / 2**21
    # The README's figures: the 21 parallel cases and one tool_choice case with parallel calls.
    overall = paired(card)["all"]
    assert (overall["pairs"], overall["lost"], overall["gained"]) == (155, 22, 0)
    assert paired(card)["by_category"]["tool_choice"]["lost"] == 1
    assert "accuracy vs baseline (paired): -0.142 [-0.206, -0.090], 22 lost" in shown.stdout
    assert paired(card, "structured_output")["all"]["lost"] == 0
    assert "  parallel: -1.000 [-1.000, -0.781], 21 lost and 0 gained of 21 cases" in shown.stdout
    markdown = (shown.out / "scorecard.md").read_text()
    assert "- accuracy vs baseline (paired): -0.1" in markdown
    assert "  - parallel: -1.000 [-1.000, -0.781]" in markdown

    gate = tmp_path / "accuracy.toml"
    gate.write_text(THRESHOLDS)
    gated = run_verifier(url, *ARGS, "--baseline", str(reference), "--gate-thresholds", str(gate))
    assert gated.returncode == 1, gated.stdout[-3000:]
    card = checked(gated)
    assert card["gate"]["passed"] is False
    assert verdicts(card, "tool_calling") == {"all": "fail", "parallel": "fail"}
    assert verdicts(card, "structured_output") == {"all": "pass"}
    assert f"gate (file {gate}): FAIL" in gated.stdout
    assert (
        "tool_calling: max_accuracy_drop parallel 0.2 missed (actual FAIL: -1.000 "
        "[-1.000, -0.781], 21 lost and 0 gained of 21 cases, McNemar p 9.5e-07, a significant "
        "drop)"
    ) in gated.stdout

    # The comparison page shows each vendor's paired difference with its interval.
    unsigned = Signature(SignatureState.UNSIGNED)
    comparison = build_comparison(
        [
            Input(str(reference), json.loads(reference.read_text()), unsigned),
            Input(str(gated.out / "scorecard.json"), card, unsigned),
        ]
    )
    html, text = render_comparison_html(comparison), render_comparison_markdown(comparison)
    for page in (html, text):
        assert "accuracy vs baseline (paired)" in page
        assert "Accuracy against the baseline, paired" in page
        assert "-1.000 [-1.000, -0.781], 21 lost and 0 gained of 21 cases" in page


def test_a_clean_vendor_passes_the_same_gate(
    simulator: Start, run_verifier: Run, reference: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "accuracy.toml"
    gate.write_text(THRESHOLDS)
    run = run_verifier(
        simulator(), *ARGS, "--baseline", str(reference), "--gate-thresholds", str(gate)
    )
    assert run.returncode == 0, run.stdout[-3000:]
    card = checked(run)
    assert card["gate"]["passed"] is True
    assert verdicts(card, "tool_calling") == {"all": "pass", "parallel": "pass"}
    assert verdicts(card, "structured_output") == {"all": "pass"}
    overall = paired(card)["all"]
    assert overall["lost"] == overall["gained"] == 0 and overall["interval"][0] >= -0.05
    assert f"gate (file {gate}): PASS" in run.stdout
    assert "tool_calling: max_accuracy_drop parallel 0.2 met (PASS: +0.000 [-0.155, +0.155]" in (
        run.stdout
    )


def test_without_a_baseline_the_accuracy_gate_gives_no_verdict_and_no_pass(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    gate = tmp_path / "accuracy.toml"
    gate.write_text(THRESHOLDS)
    run = run_verifier(simulator(), *ARGS, "--gate-thresholds", str(gate))
    assert run.returncode == 1, run.stdout[-3000:]
    card = checked(run)
    assert verdicts(card, "tool_calling") == {"all": None, "parallel": None}
    assert "tool_calling: max_accuracy_drop all 0.05 missed (actual NO VERDICT: no baseline" in (
        run.stdout
    )
