"""Accuracy paired with a baseline's: the statistics, the pairing, the gate's max_accuracy_drop.

The end-to-end proof on the simulated vendor is tests/test_accuracy_gate_e2e.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.checks.support.paired import NO_OUTCOMES, case_outcome, comparison, paired_accuracy
from verifier.compare.measures import paired_text
from verifier.config import FAMILY_NAMES
from verifier.errors import ConfigError
from verifier.render.gate_text import summary_lines
from verifier.scorecard.gate import (
    NO_BASELINE,
    accuracy_rulings,
    accuracy_verdict,
    family_gate,
    load_thresholds,
)
from verifier.stats import mcnemar_exact, paired_difference_interval

counts = st.integers(min_value=0, max_value=300)


# The exact McNemar test.


@given(counts, counts)
def test_the_mcnemar_p_value_is_a_probability_and_symmetric(lost: int, gained: int) -> None:
    p = mcnemar_exact(lost, gained)
    assert 0.0 < p <= 1.0
    assert p == mcnemar_exact(gained, lost)


@given(counts, counts)
def test_the_mcnemar_p_value_falls_as_the_pairs_grow_more_one_sided(lost: int, gained: int) -> None:
    if lost >= gained:
        assert mcnemar_exact(lost + 1, gained) <= mcnemar_exact(lost, gained)


@pytest.mark.parametrize(
    ("lost", "gained", "p"),
    [
        (0, 0, 1.0),  # no discordant pair: no evidence
        (3, 3, 1.0),
        (0, 5, 2 / 32),  # 2 * (1/2)^5
        (1, 9, 2 * (1 + 10) / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10
        (21, 0, 2 / 2**21),
        # The worked examples of Fagerland, Lydersen and Laake, "Statistical Analysis of
        # Contingency Tables" (2017), chapter 8: the exact conditional McNemar test.
        (7, 1, 0.0703125),  # Bentur et al. (2009): 2 * 9 / 256
        (16, 6, 0.052478790283203125),  # Cavo et al. (2012)
    ],
)
def test_the_mcnemar_p_value_on_hand_checked_tables(lost: int, gained: int, p: float) -> None:
    assert mcnemar_exact(lost, gained) == pytest.approx(p, rel=1e-12)


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


# Newcombe's paired interval.


@given(counts, counts, counts, counts)
def test_the_paired_interval_contains_the_estimate_within_minus_one_and_one(
    both: int, gained: int, lost: int, neither: int
) -> None:
    n = both + gained + lost + neither
    interval = paired_difference_interval(both, gained, lost, neither)
    if n == 0:
        assert interval is None
        return
    assert interval is not None
    low, high = interval
    estimate = (gained - lost) / n
    assert -1.0 <= low <= estimate <= high <= 1.0
    # Swapping the sides mirrors the interval.
    mirrored = paired_difference_interval(both, lost, gained, neither)
    assert mirrored == pytest.approx((-high, -low))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        # Fagerland, Lydersen and Laake (2017), chapter 8, Newcombe's square-and-add interval:
        # Bentur et al., estimate -0.286; Cavo et al., estimate -0.062.
        ((1, 1, 7, 12), (-0.5069, -0.0256)),
        ((59, 6, 16, 80), (-0.1186, -0.0046)),
        # Every case right on both sides: the Wilson interval of 21/21 on each side, phi 0.
        ((21, 0, 0, 0), (-0.1546, 0.1546)),
        # Every case lost: the candidate's 0/21 against the reference's 21/21.
        ((0, 0, 21, 0), (-1.0, -0.7813)),
    ],
)
def test_the_paired_interval_on_hand_checked_tables(
    table: tuple[int, int, int, int], expected: tuple[float, float]
) -> None:
    assert paired_difference_interval(*table) == pytest.approx(expected, abs=5e-5)


def test_the_interval_narrows_as_the_agreeing_cases_grow() -> None:
    widths = [paired_difference_interval(n, 0, 0, 0) for n in (10, 100, 1000)]
    lows = [w[0] for w in widths if w is not None]
    assert lows == sorted(lows) and lows[-1] > -0.004


# Pairing this run's cases with the baseline's.


def baseline_of(cases: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    accuracy = {} if cases is None else {"cases": cases}
    return {"metrics": {"accuracy": accuracy}}


def test_cases_are_paired_by_id_overall_and_per_category() -> None:
    ours = {
        "p1": case_outcome("parallel", False),
        "p2": case_outcome("parallel", True),
        "s1": case_outcome("single", True),
        "s2": case_outcome("single", True),
        "new": case_outcome("single", False),
        "s1~rotated": case_outcome("single", False),
    }
    theirs = {
        "p1": case_outcome("parallel", True),
        "p2": case_outcome("parallel", True),
        "s1": case_outcome("single", False),
        "s2": case_outcome("single", True),
        "gone": case_outcome("single", True),
        "s1~rotated": case_outcome("single", True),
    }
    paired = paired_accuracy(ours, baseline_of(theirs))
    overall = paired["all"]
    assert (overall["pairs"], overall["both"], overall["gained"], overall["lost"]) == (4, 2, 1, 1)
    assert overall["difference"] == 0.0 and overall["p_value"] == 1.0
    assert set(paired["by_category"]) == {"parallel", "single"}
    parallel = paired["by_category"]["parallel"]
    assert (parallel["lost"], parallel["gained"], parallel["difference"]) == (1, 0, -0.5)
    assert parallel["candidate"] == 0.5 and parallel["reference"] == 1.0
    assert paired["only_here"] == 1 and paired["only_in_baseline"] == 1
    assert "McNemar" in paired["method"] and "Newcombe" in paired["method"]


def test_a_baseline_without_per_case_outcomes_is_said_so() -> None:
    assert paired_accuracy({"a": case_outcome("x", True)}, baseline_of(None)) == {
        "unavailable": NO_OUTCOMES
    }
    assert paired_accuracy({}, None) == {"unavailable": NO_OUTCOMES}


# The verdict on a margin.


def compared(both: int, gained: int, lost: int, neither: int = 0) -> dict[str, Any]:
    return comparison(both, gained, lost, neither)


@pytest.mark.parametrize(
    ("table", "margin", "verdict"),
    [
        ((134, 0, 21), 0.05, "fail"),  # a significant drop of 0.135, beyond 0.05
        ((0, 0, 21), 0.2, "fail"),  # every parallel case lost
        ((155, 0, 0), 0.05, "pass"),  # interval [-0.024, 0.024]: within 0.05
        ((21, 0, 0), 0.05, "inconclusive"),  # 21 cases cannot show a drop below 0.05
        ((21, 0, 0), 0.2, "pass"),  # ... but can show one below 0.2
        ((150, 0, 6), 0.01, "fail"),  # p 0.031, a drop of 0.038 beyond 0.01
        ((150, 0, 5), 0.01, "inconclusive"),  # p 0.0625: not significant, not within 0.01
        ((150, 0, 6), 0.05, "inconclusive"),  # significant, but 0.038 is within the margin
        ((150, 0, 5), 0.05, "inconclusive"),  # drop 0.032 within 0.05, interval too wide
        ((150, 3, 3), 0.05, "pass"),  # as many gained as lost
    ],
)
def test_the_accuracy_verdict(table: tuple[int, int, int], margin: float, verdict: str) -> None:
    assert accuracy_verdict(compared(*table), margin) == verdict


@given(counts, counts, counts, counts, st.floats(min_value=0.001, max_value=0.999))
def test_a_verdict_is_one_of_three_and_a_pass_bounds_the_drop(
    both: int, gained: int, lost: int, neither: int, margin: float
) -> None:
    found = compared(both, gained, lost, neither)
    verdict = accuracy_verdict(found, margin)
    assert verdict in ("pass", "fail", "inconclusive")
    if verdict == "pass":
        assert found["interval"][0] >= -margin
    if verdict == "fail":
        assert found["p_value"] < 0.05 and found["difference"] < -margin


def test_no_pair_is_inconclusive() -> None:
    assert accuracy_verdict(compared(0, 0, 0), 0.5) == "inconclusive"


# The gate's max_accuracy_drop.


def family(paired: dict[str, Any] | None) -> dict[str, Any]:
    accuracy = {} if paired is None else {"paired": paired}
    return {
        "verdict": "pass",
        "counts": {"pass": 30, "fail": 0, "error": 0, "unsupported": 0},
        "score": 1.0,
        "metrics": {"accuracy": accuracy},
    }


def paired_of(**categories: tuple[int, int, int]) -> dict[str, Any]:
    by_category = {name: compared(*table) for name, table in categories.items()}
    total = [sum(t[i] for t in categories.values()) for i in range(3)]
    return {"all": compared(*total), "by_category": by_category}


def test_the_gate_fails_a_dropped_category_and_names_it() -> None:
    card = family(paired_of(parallel=(0, 0, 21), single=(134, 0, 0)))
    result = family_gate(card, {"max_accuracy_drop": {"all": 0.05, "each": 0.2}})
    verdicts = {r["category"]: r["verdict"] for r in result["accuracy"]}
    assert verdicts == {"all": "fail", "parallel": "fail", "single": "pass"}
    assert [m["threshold"] for m in result["missed"]] == [
        "max_accuracy_drop all",
        "max_accuracy_drop parallel",
    ]
    assert result["passed"] is False
    # A category named on its own overrides "each".
    result = family_gate(card, {"max_accuracy_drop": {"each": 0.2, "single": 0.01}})
    assert {r["category"]: r["margin"] for r in result["accuracy"]} == {
        "parallel": 0.2,
        "single": 0.01,
    }


def test_inconclusive_fails_the_gate_and_says_so() -> None:
    card = family(paired_of(parallel=(21, 0, 0)))
    result = family_gate(card, {"max_accuracy_drop": {"parallel": 0.05}})
    assert result["passed"] is False
    assert result["accuracy"][0]["verdict"] == "inconclusive"
    gate = {"source": "file g.toml", "passed": False, "families": {"tool_calling": result}}
    lines = summary_lines(gate)
    assert lines[1].startswith("  tool_calling: max_accuracy_drop parallel 0.05 missed")
    assert "INCONCLUSIVE: +0.000 [-0.155, +0.155], 0 lost and 0 gained of 21 cases" in lines[1]


def test_a_clean_comparison_passes_and_the_terminal_says_on_what() -> None:
    result = family_gate(family(paired_of(single=(155, 0, 0))), {"max_accuracy_drop": 0.05})
    assert result["passed"] is True and result["missed"] == []
    gate = {"source": "defaults", "passed": True, "families": {"tool_calling": result}}
    assert summary_lines(gate)[1] == (
        "  tool_calling: max_accuracy_drop all 0.05 met (PASS: +0.000 [-0.024, +0.024], "
        "0 lost and 0 gained of 155 cases, McNemar p 1)"
    )


def test_without_a_baseline_there_is_no_verdict_and_no_pass() -> None:
    result = family_gate(family(None), {"max_accuracy_drop": 0.05})
    assert result["passed"] is False
    assert result["accuracy"] == [
        {"category": "all", "margin": 0.05, "verdict": None, "why": NO_BASELINE}
    ]
    unavailable = family_gate(family({"unavailable": NO_OUTCOMES}), {"max_accuracy_drop": 0.05})
    assert unavailable["passed"] is False
    assert unavailable["accuracy"][0]["why"] == NO_OUTCOMES


def test_a_category_with_no_pair_is_inconclusive_with_a_hint() -> None:
    card = family(paired_of(parallel=(0, 0, 21)))
    (ruling,) = accuracy_rulings(card["metrics"], {"paralel": 0.1})
    assert ruling["verdict"] == "inconclusive"
    assert "(did you mean parallel?)" in ruling["why"]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_max_accuracy_drop_loads_as_a_number_or_a_table(tmp_path: Path) -> None:
    text = (
        "[tool_calling]\nmax_accuracy_drop = 0.05\n"
        "[structured_output.max_accuracy_drop]\nall = 0.05\neach = 0.3\nenum = 0.2\n"
    )
    thresholds, _ = load_thresholds(write(tmp_path / "g.toml", text), None, FAMILY_NAMES)
    assert thresholds["tool_calling"]["max_accuracy_drop"] == 0.05
    assert thresholds["structured_output"]["max_accuracy_drop"] == {
        "all": 0.05,
        "each": 0.3,
        "enum": 0.2,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[default]\nmax_accuracy_drop = 0.05\n",
            "[default] max_accuracy_drop: only tool_calling and structured_output grade accuracy",
        ),
        ("[wire]\nmax_accuracy_drop = 0.05\n", "set it under [tool_calling] or"),
        ("[tool_calling]\nmax_accuracy_drop = 0\n", "a drop of 0 can never be shown"),
        ("[tool_calling]\nmax_accuracy_drop = 1.5\n", "must be a share above 0 and below 1"),
        ("[tool_calling]\nmax_accuracy_drop = true\n", "'all' is True"),
        ("[tool_calling]\nmax_accuracy_drop = { parallel = 'x' }\n", "'parallel' is 'x'"),
        ("[tool_calling]\nmax_acuracy_drop = 0.1\n", "(did you mean max_accuracy_drop?)"),
    ],
)
def test_a_bad_max_accuracy_drop_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_thresholds(write(tmp_path / "gate.toml", text), None, FAMILY_NAMES)
    assert message in str(error.value)
    assert "gate.toml" in str(error.value) and "\n" not in str(error.value)


def test_runs_that_share_no_case_are_inconclusive_and_say_so() -> None:
    ours = {"a": case_outcome("single", True)}
    found = paired_accuracy(ours, baseline_of({"b": case_outcome("single", True)}))
    assert found["all"]["pairs"] == 0 and found["by_category"] == {}
    (ruling,) = accuracy_rulings({"accuracy": {"paired": found}}, 0.1)
    assert ruling["verdict"] == "inconclusive" and ruling["interval"] is None
    gate = {
        "source": "defaults",
        "passed": False,
        "families": {"tool_calling": family_gate(family(found), {"max_accuracy_drop": 0.1})},
    }
    assert "INCONCLUSIVE: no case graded in both runs" in summary_lines(gate)[1]


def test_the_text_of_a_paired_difference_says_when_it_is_significant() -> None:
    assert paired_text(compared(134, 0, 21)) == (
        "-0.135 [-0.198, -0.084], 21 lost and 0 gained of 155 cases, McNemar p 9.5e-07, "
        "a significant drop"
    )
    assert paired_text(compared(20, 6, 0)).endswith("McNemar p 0.031, a significant gain")
    assert paired_text(compared(20, 5, 0)).endswith("McNemar p 0.062")
    assert paired_text(compared(0, 0, 0)) == "no case graded in both runs"
