"""Scorecard statistics, verdicts and schema."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import with_userinfo
from verifier.outcome import CaseRecord
from verifier.scorecard.build import TranscriptSummary, build_scorecard, summarize_family, verdict
from verifier.scorecard.validate import scorecard_json
from verifier.stats import wilson_interval


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_rate_and_stays_in_unit_range(pair: tuple[int, int]) -> None:
    successes, trials = pair
    interval = wilson_interval(successes, trials)
    assert interval is not None
    low, high = interval
    assert 0.0 <= low <= successes / trials <= high <= 1.0


def test_wilson_known_values() -> None:
    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(12, 12) or (0, 0)
    assert round(low, 3) == 0.758 and high == 1.0
    low, high = wilson_interval(50, 100) or (0, 0)
    assert (round(low, 3), round(high, 3)) == (0.404, 0.596)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"pass": 10, "fail": 0, "error": 0, "unsupported": 2}, "pass"),
        ({"pass": 9, "fail": 1, "error": 0, "unsupported": 0}, "fail"),
        ({"pass": 9, "fail": 0, "error": 2, "unsupported": 0}, "inconclusive"),
        ({"pass": 0, "fail": 0, "error": 1, "unsupported": 0}, "inconclusive"),
        ({"pass": 0, "fail": 0, "error": 0, "unsupported": 3}, "unsupported"),
    ],
)
def test_verdicts(counts: dict[str, int], expected: str) -> None:
    assert verdict(counts) == expected


def record(case: str, status: str, code: str | None = None) -> dict[str, object]:
    return {
        "case": case,
        "family": "structured_output",
        "outcome": {
            "status": status,
            "code": code,
            "message": f"{code}: x",
            "findings": [],
            "metrics": {"requests": 2},
            "evidence": {},
        },
    }


HEADER = {
    "run_id": "abc",
    "started": "2026-01-01T00:00:00.000+00:00",
    "settings": {
        "endpoint": "http://127.0.0.1:1/v1",
        "model": None,
        "families": ["structured_output"],
        "repeats": None,
        "seed": 1,
    },
    "corpus": {"digest": "0" * 64, "families": {"structured_output": "1" * 64}},
    "capabilities": {
        "model": "m",
        "models": ["m"],
        "served_model": "m",
        "system_fingerprint": None,
        "server": {},
    },
}


def test_built_scorecard_validates_and_counts() -> None:
    records = {
        r["case"]: r
        for r in [
            record("s/a", "pass"),
            record("s/b", "fail", "not_json"),
            record("s/c", "fail", "not_json"),
            record("s/d", "unsupported", "rejected"),
        ]
    }
    card = build_scorecard(
        HEADER,
        records,
        finished="2026-01-01T00:01:00.000+00:00",
        transcript=TranscriptSummary("2" * 64, 9),
    )
    family = card["families"]["structured_output"]
    assert family["counts"] == {"pass": 1, "fail": 2, "error": 0, "unsupported": 1}
    assert family["codes"] == {"not_json": 2}
    assert family["verdict"] == "fail" and card["verdict"] == "fail"
    assert family["metrics"]["requests"] == 8
    data = json.loads(scorecard_json(card))
    assert data == card


@pytest.mark.parametrize(
    ("ruled", "verdict_", "codes"),
    [
        ("pass", "pass", {}),
        ("inconclusive", "inconclusive", {}),
        ("fail", "fail", {"distribution_shift": 1}),
    ],
)
def test_a_ruling_over_all_cases_can_only_make_the_verdict_worse(
    ruled: str, verdict_: str, codes: dict[str, int]
) -> None:
    ruling = {"name": "distribution", "outcome": "x", "verdict": ruled}
    ruling["code"] = "distribution_shift" if ruled == "fail" else None
    entry = summarize_family(
        [CaseRecord.from_dict(record("s/a", "pass"))],
        None,
        lambda records, _: {"rulings": [ruling]},
    )
    assert (entry["verdict"], entry["codes"], entry["rulings"]) == (verdict_, codes, [ruling])
    assert "rulings" not in entry["metrics"]
    # A family none of whose cases ran stays unsupported whatever a ruling says.
    none = [CaseRecord.from_dict(record("s/a", "unsupported", "rejected"))]
    assert summarize_family(none, None, lambda records, _: {"rulings": [ruling]})["verdict"] == (
        "unsupported"
    )


def test_a_scorecard_off_its_schema_is_refused() -> None:
    card = build_scorecard(
        HEADER,
        {},
        finished="2026-01-01T00:01:00.000+00:00",
        transcript=TranscriptSummary("2" * 64, 0),
    )
    card["endpoint"]["url"] = with_userinfo("http://host/v1", "user", "not-a-password")
    with pytest.raises(ValueError, match="does not match its schema"):
        scorecard_json(card)
