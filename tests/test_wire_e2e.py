"""The wire family end to end on the simulated vendor, and shapes checked on every family."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import VerifierRun
from verifier import resources
from verifier.cases import load_corpus

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
WIRE = load_corpus(["wire"]).cases

DEFECT_CODES = {
    "stream-no-usage": "usage_missing",
    "stream-role-repeated": "role_repeated",
    "stream-no-done": "done_missing",
    "finish-reason-raw-token": "finish_reason_invalid",
    "stop-not-honoured": "stop_not_honoured",
    "n-ignored": "n_ignored",
    "invalid-request-500": "invalid_request_5xx",
    "invalid-request-200": "invalid_request_accepted",
    "usage-total-wrong": "usage_total_wrong",
    "logprobs-inconsistent": "logprobs_inconsistent",
}


def wire_run(run_verifier: Run, url: str, *args: str) -> VerifierRun:
    run = run_verifier(url, "--families", "wire", *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


def test_clean_vendor_passes(simulator: Start, run_verifier: Run) -> None:
    run = wire_run(run_verifier, simulator())
    family = run.family("wire")
    assert run.returncode == 0, run.stdout[-3000:]
    assert family["counts"] == {"pass": len(WIRE), "fail": 0, "error": 0, "unsupported": 0}
    checks = family["metrics"]["checks"]
    assert set(checks) == {c.data["check"] for c in WIRE}


@pytest.mark.parametrize(("defect", "code"), sorted(DEFECT_CODES.items()))
def test_each_defect_is_caught_with_its_code(
    simulator: Start, run_verifier: Run, defect: str, code: str
) -> None:
    run = wire_run(run_verifier, simulator("--defect", defect), "--max-retries", "0")
    family = run.family("wire")
    assert family["verdict"] == "fail"
    assert set(family["codes"]) == {code}, family["codes"]
    assert family["counts"]["error"] == 0


def test_shapes_are_checked_on_every_family(simulator: Start, run_verifier: Run) -> None:
    """A raw finish_reason shows in every family's shape metrics, failing only the wire family."""
    clean = run_verifier(simulator(), "--repeats", "1")
    for name, family in clean.scorecard["families"].items():
        assert family["metrics"]["shapes"]["violations"] == 0, name
        assert family["metrics"]["shapes"]["answers"] >= family["cases"], name
    raw = run_verifier(simulator("--defect", "finish-reason-raw-token"), "--repeats", "1")
    families = raw.scorecard["families"]
    for name in ("structured_output", "tool_calling"):
        shapes = families[name]["metrics"]["shapes"]
        assert shapes["codes"].get("finish_reason_invalid", 0) > 0, name
        assert families[name]["verdict"] == "pass", name
    assert families["wire"]["verdict"] == "fail"
