"""--budget auto: sequential stopping at the gate's thresholds."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import VerifierRun
from verifier import resources
from verifier.outcome import Status
from verifier.render.report import budget_lines
from verifier.run.budget import Budget, decision, summary

Run = Callable[..., VerifierRun]
Start = Callable[..., str]


@given(
    passed=st.integers(0, 300),
    failed=st.integers(0, 300),
    threshold=st.floats(0.0, 1.0),
    min_graded=st.integers(0, 50),
)
def test_a_decision_is_an_interval_that_clears_the_threshold(
    passed: int, failed: int, threshold: float, min_graded: int
) -> None:
    side = decision(passed, failed, threshold, min_graded)
    graded = passed + failed
    if graded < max(min_graded, 1):
        assert side is None
        return
    # More evidence on the same side never undoes a decision.
    if side == "above":
        assert decision(passed + 1, failed, threshold, min_graded) == "above"
    if side == "below":
        assert decision(passed, failed + 1, threshold, min_graded) == "below"
    if side == "below":
        assert passed / graded < threshold, "a stop below never hides a passing point estimate"
    if side == "above":
        assert passed / graded > threshold


@pytest.mark.parametrize(
    ("passed", "failed", "threshold", "expected"),
    [
        (10, 0, 0.70, "above"),  # 10 of 10: 95% Wilson interval [0.722, 1]
        (10, 0, 0.75, None),
        (0, 10, 0.25, None),  # 0 of 10: [0, 0.278]
        (0, 10, 0.30, "below"),
        (45, 5, 0.75, "above"),  # 45 of 50: [0.786, 0.957]
        (45, 5, 0.90, None),
        (45, 5, 0.96, "below"),
    ],
)
def test_decisions_at_hand_computed_interval_bounds(
    passed: int, failed: int, threshold: float, expected: str | None
) -> None:
    assert decision(passed, failed, threshold, 10) == expected


def test_at_the_default_threshold_only_a_failure_decides() -> None:
    assert decision(500, 0, 1.0, 10) is None, "a clean family is sent whole"
    assert decision(9, 1, 1.0, 10) == "below"
    assert decision(0, 9, 1.0, 10) is None, "nothing is decided before min_graded"


def test_the_budget_counts_passes_and_failures_only() -> None:
    budget = Budget({"wire": {"min_score": 1.0, "min_graded": 3}})
    for status in (Status.PASS, Status.ERROR, Status.UNSUPPORTED, Status.PASS):
        budget.record("wire", status)
    assert budget.stopped("wire") is None
    budget.record("wire", "fail")
    reason = budget.stopped("wire")
    assert reason is not None and reason.startswith("budget: wire decided after 3 graded cases")
    assert budget.stopped("vision") is None, "a family without thresholds is never stopped"


def test_summary_says_how_far_each_family_got() -> None:
    outcomes = [("wire", "pass")] * 9 + [("wire", "fail"), ("wire", "error"), ("vision", "pass")]
    thresholds = {"wire": {"min_score": 1.0, "min_graded": 10}, "vision": {}}
    result = summary(outcomes, {"wire": 40, "vision": 3}, thresholds)
    wire = result["families"]["wire"]
    assert (wire["cases"], wire["sent"], wire["graded"], wire["decided"]) == (40, 11, 10, "below")
    assert result["families"]["vision"]["decided"] is None
    assert budget_lines(result) == [
        "budget: wire stopped after 11 of 40 cases (pass rate 95% interval "
        f"[{wire['interval'][0]:.2f}, {wire['interval'][1]:.2f}] below min_score 1)"
    ]


def requests_sent(run: VerifierRun) -> int:
    lines = (run.out / "transcript.jsonl").read_text().splitlines()
    return sum(not json.loads(line)["label"].startswith("probe/") for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("defect", [None, "tool-args-violate-schema", "ignore-keyword:maxItems"])
def test_auto_budget_reaches_the_same_verdicts_with_fewer_requests(
    simulator: Start, run_verifier: Run, defect: str | None
) -> None:
    url = simulator(*(["--defect", defect] if defect else []))
    families = ("--families", "tool_calling,structured_output", "--gate")
    full = run_verifier(url, *families)
    auto = run_verifier(url, *families, "--budget", "auto")
    assert auto.returncode == full.returncode == (0 if defect is None else 1)
    assert list(resources.validator("scorecard").iter_errors(auto.scorecard)) == []
    for name in ("tool_calling", "structured_output"):
        assert auto.family(name)["verdict"] == full.family(name)["verdict"]
    assert auto.scorecard["gate"]["passed"] == full.scorecard["gate"]["passed"]
    assert auto.scorecard["settings"]["budget"] == "auto"
    budget = auto.scorecard["budget"]["families"]
    if defect is None:
        assert requests_sent(auto) == requests_sent(full), "a clean vendor is sent everything"
        assert all(entry["decided"] is None for entry in budget.values())
    else:
        assert requests_sent(auto) < requests_sent(full)
        stopped = [name for name, entry in budget.items() if entry["decided"] == "below"]
        assert stopped == ["tool_calling" if defect.startswith("tool") else "structured_output"]
        assert budget[stopped[0]]["sent"] < budget[stopped[0]]["cases"]
        assert f"budget: {stopped[0]} stopped after" in auto.stdout
