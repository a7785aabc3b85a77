"""Parity grading as pure functions: traces, TV bounds, the comparison, the sequential test."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.checks.parity import (
    TOLERANCE,
    choice_findings,
    compared,
    grade,
    recording_bytes,
    rulings,
    settled,
    summarize,
)
from verifier.checks.support.distributions import (
    END,
    Trace,
    compare,
    divergence,
    not_top_choice,
    trace_of,
    tv_bounds,
)
from verifier.outcome import CaseRecord, Outcome, Status
from verifier.protocol.answers import ChatResult, Choice
from verifier.scorecard.build import overall_verdict, summarize_family
from verifier.stats import SequentialTest


def entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top],
    }


def trace(*positions: tuple[str, list[tuple[str, float]]]) -> Trace:
    found = trace_of([entry(token, dict(top)[token], top) for token, top in positions])
    assert found is not None
    return found


A = trace(("Hi", [("Hi", -0.1), ("Hello", -2.5)]), ("!", [("!", -0.2), (".", -1.8)]))


def test_a_trace_reads_tokens_logprobs_and_alternatives_and_round_trips() -> None:
    assert A.tokens == ("Hi", "!")
    assert A.top[0] == (("Hi", -0.1), ("Hello", -2.5))
    assert Trace.from_json(A.to_json()) == A
    assert trace_of(None) is None
    assert trace_of([{"token": "x"}]) is None


def test_identical_answers_do_not_diverge() -> None:
    same = compare(A, A)
    assert (same.identical, same.first_divergence, same.positions) == (True, None, 2)
    assert same.top1_agree == 2
    assert divergence(same) == 0.0


def test_a_shifted_distribution_diverges_along_the_shared_prefix() -> None:
    b = trace(("Hi", [("Hi", -0.3), ("Hello", -1.5)]), ("?", [("?", -0.5), ("!", -1.0)]))
    found = compare(A, b)
    # The first token agrees; the second differs: both compared, nothing after.
    assert (found.first_divergence, found.positions, found.identical) == (1, 2, False)
    assert found.chosen_delta == pytest.approx((0.2,))
    assert found.top1_agree == 1
    assert divergence(found) > 0


def probabilities(draw: st.DrawFn) -> list[tuple[str, float]]:
    weights = draw(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6))
    rest = draw(st.floats(0.0, 1.0))
    total = sum(weights) + rest
    tokens = draw(st.permutations(["a", "b", "c", "d", "e", "f", "g", "h"]))
    return [(tokens[i], math.log(w / total)) for i, w in enumerate(weights)]


@settings(deadline=None)
@given(st.data())
def test_tv_bounds_hold_for_any_completion_of_the_missing_mass(data: st.DataObject) -> None:
    """The true TV of full distributions that agree with the top lists lies within the bounds."""
    a = data.draw(st.composite(probabilities)())
    b = data.draw(st.composite(probabilities)())
    low, high = tv_bounds(tuple(a), tuple(b))
    assert 0 <= low <= high <= 1
    # Complete each list: a token of the other list it misses gets the least it may (0) and
    # the rest goes to a token neither lists; the TV of that completion is within the bounds.
    p = {t: math.exp(lp) for t, lp in a}
    q = {t: math.exp(lp) for t, lp in b}
    p["rest"] = max(0.0, 1 - sum(p.values()))
    q["rest"] = max(0.0, 1 - sum(q.values()))
    tv = 0.5 * sum(abs(p.get(t, 0.0) - q.get(t, 0.0)) for t in p.keys() | q.keys())
    assert low - 1e-9 <= tv <= high + 1e-9


def test_a_chosen_token_below_a_listed_alternative_is_not_the_greedy_choice() -> None:
    bad = trace(("Hi", [("Hi", -0.9), ("Hello", -0.6)]))
    assert not_top_choice(bad) == [0]
    assert not_top_choice(A) == []


@pytest.mark.parametrize(
    ("signs", "outcome", "used"),
    [
        ([False] * 24, "same", 8),
        ([True] * 24, "different", 12),
        (([True] * 5 + [False] * 3) * 3, "undecided", 24),
    ],
)
def test_the_sequential_sign_test(signs: list[bool], outcome: str, used: int) -> None:
    assert SequentialTest().decide(signs) == (outcome, used)


@settings(deadline=None)
@given(st.lists(st.booleans(), max_size=40))
def test_the_sequential_test_stops_at_its_first_crossing(signs: list[bool]) -> None:
    outcome, used = SequentialTest().decide(signs)
    assert used <= len(signs)
    if outcome != "undecided":
        assert SequentialTest().decide(signs[:used]) == (outcome, used)


def answer(tr: Trace, stream: bool = False) -> ChatResult:
    entries = [
        entry(t, c, list(top)) for t, c, top in zip(tr.tokens, tr.chosen, tr.top, strict=True)
    ]
    return ChatResult(
        stream=stream,
        status=200,
        choices=[Choice(0, "assistant", "".join(tr.tokens), None, [], "stop", entries)],
    )


def test_grade_records_and_compares() -> None:
    answers = {"first": answer(A), "stream": answer(A, True), "again": answer(A)}
    recorded = grade(answers, None, requests=3)
    # Nothing to compare with: recorded, neither graded nor passed.
    assert (recorded.status, recorded.code) == (Status.UNSUPPORTED, "recorded")
    assert recorded.message.startswith("recorded: nothing to compare with")
    assert recorded.metrics["recording"]["first"] == A.to_json()
    assert "compared" not in recorded.metrics
    against = grade(answers, (A, A), requests=5)
    assert against.metrics["compared"]["exceeds"] is False


def test_grade_fails_a_chosen_token_that_is_not_top() -> None:
    bad = trace(("Hi", [("Hi", -0.9), ("Hello", -0.6)]))
    answers = {"first": answer(bad), "stream": answer(bad, True), "again": answer(bad)}
    assert grade(answers, None, requests=3).code == "logprobs_inconsistent_with_choice"


def test_grade_without_logprobs_is_unsupported_not_passed() -> None:
    plain = ChatResult(
        stream=False, status=200, choices=[Choice(0, "assistant", "Hi", None, [], "stop", None)]
    )
    found = grade({"first": plain, "stream": plain, "again": plain}, None, requests=3)
    assert (found.status, found.code) == (Status.UNSUPPORTED, "logprobs_unavailable")


def test_a_candidate_beyond_the_floor_exceeds_it_and_a_warm_repeat_is_compared_to_it() -> None:
    shifted = trace(("Hi", [("Hi", -0.3), ("Hello", -1.5)]), ("!", [("!", -0.2), (".", -1.8)]))
    row = compared((A, A), shifted, A)
    assert row["exceeds"] is True and row["warm_exceeds"] is True
    assert compared((A, A), A, A)["exceeds"] is False


def test_a_numerical_difference_below_the_tolerance_does_not_count_against_the_candidate() -> None:
    """A deterministic reference (floor 0): the same weights computed otherwise differ by
    float noise, which is below the tolerance, not beyond the floor."""
    nudged = trace(("Hi", [("Hi", -0.1002), ("Hello", -2.5003)]), ("!", [("!", -0.2), (".", -1.8)]))
    row = compared((A, A), nudged, A)
    assert 0 < row["divergence"] < TOLERANCE and 0 < row["warm_divergence"] < TOLERANCE
    assert (row["floor"], row["threshold"]) == (0.0, TOLERANCE)
    assert (row["exceeds"], row["warm_exceeds"]) == (False, False)
    # The tolerance is the least threshold: given as 0, every difference counts (main's rule).
    assert compared((A, A), nudged, A, tolerance=0.0)["exceeds"] is True


def test_a_reference_noisier_than_the_tolerance_keeps_its_own_floor() -> None:
    noisy = trace(("Hi", [("Hi", -0.2), ("Hello", -2.0)]), ("!", [("!", -0.2), (".", -1.8)]))
    row = compared((A, noisy), A, A)
    assert row["threshold"] == row["floor"] > TOLERANCE
    assert compared((A, noisy), noisy, A)["exceeds"] is False


def record(case: str, exceeds: bool, warm: bool = False) -> CaseRecord:
    row = compared((A, A), A, A)
    row = {**row, "exceeds": exceeds, "warm_exceeds": warm}
    metrics = {"requests": 5, "recording": {"first": A.to_json(), "again": A.to_json()}}
    return CaseRecord(
        f"parity/{case}", "parity", Outcome(Status.PASS, metrics={**metrics, "compared": row})
    )


def test_summarize_decides_in_the_order_of_the_prompt_ids() -> None:
    records = [record(f"p{i:02d}-x", exceeds=True) for i in range(24, 0, -1)]
    summary = summarize(records, None)
    distribution, kv = summary["rulings"]
    assert (distribution["outcome"], distribution["code"], distribution["prompts"]) == (
        "different",
        "distribution_shift",
        12,
    )
    assert distribution["requests"] == 60
    assert (kv["outcome"], kv["verdict"], kv["code"]) == ("same", "pass", None)
    assert summary["mode"] == "compared"
    recording = json.loads(recording_bytes(records))["prompts"]
    assert set(recording) == {f"p{i:02d}-x" for i in range(1, 25)}
    assert summary["recording"] == {
        "file": "parity.json",
        "sha256": hashlib.sha256(recording_bytes(records)).hexdigest(),
        "prompts": 24,
    }


def test_summarize_without_a_reference_records_and_rules_nothing() -> None:
    answers = {"first": answer(A), "stream": answer(A, True), "again": answer(A)}
    records = [
        CaseRecord(f"parity/p0{i}-x", "parity", grade(answers, None, requests=3)) for i in (1, 2)
    ]
    summary = summarize(records, None)
    assert (summary["mode"], summary["rulings"], summary["recorded"]) == ("recorded", [], 2)
    assert set(json.loads(recording_bytes(records))["prompts"]) == {"p01-x", "p02-x"}
    # The family's verdict says so: a recording is never a pass, and the run is not one.
    family = summarize_family(records, None, summarize)
    assert (family["verdict"], family["score"], family["counts"]["unsupported"]) == (
        "recorded",
        None,
        2,
    )
    assert overall_verdict({"parity": family}) == "recorded"
    assert overall_verdict({"parity": family, "wire": {"verdict": "pass"}}) == "pass"


def test_a_token_without_bytes_or_text_cannot_be_matched() -> None:
    """vLLM spells partial UTF-8 tokens as "" with no bytes: such alternatives never merge,
    and a chosen one leaves its position without a distribution."""
    unnamed = {"token": "", "bytes": [], "logprob": -0.5}
    top = [unnamed, {"token": "", "bytes": [], "logprob": -1.0}, {"token": "a", "logprob": -2.0}]
    found = trace_of([{"token": "a", "bytes": [97], "logprob": -2.0, "top_logprobs": top}])
    assert found is not None
    assert len(found.top[0]) == 3
    assert not_top_choice(found) == [0]  # an unnamed alternative is likelier than the choice
    chosen_unnamed = trace_of([{**unnamed, "top_logprobs": top}])
    assert chosen_unnamed is not None and chosen_unnamed.top == ((),)
    assert grade_codes(chosen_unnamed) == ["logprobs_incomplete"]


def grade_codes(tr: Trace) -> list[str]:
    return [f.code for f in choice_findings(tr, "first")]


def test_the_token_that_stopped_an_answer_has_one_name_on_every_engine() -> None:
    """llama.cpp lists the stop token with no text, vLLM as "<|im_end|>": both are END."""
    end_llama = {"token": "", "bytes": [], "logprob": -0.1}
    end_vllm = {"token": "<|im_end|>", "bytes": list(b"<|im_end|>"), "logprob": -0.1}
    for end in (end_llama, end_vllm):
        dot = {"token": ".", "bytes": [46], "logprob": -0.2, "top_logprobs": []}
        dot["top_logprobs"] = [dict(dot)]
        last = {**end, "top_logprobs": [dict(end), {"token": "!", "bytes": [33], "logprob": -3}]}
        found = trace_of([dot, last], "Hi.", "stop")
        assert found is not None
        assert found.tokens == (".", END)
        assert dict(found.top[1])[END] == -0.1
    # Without the finish reason nothing is renamed: "" stays a token nobody can name.
    plain = trace_of([{**end_llama, "top_logprobs": [dict(end_llama)]}])
    assert plain is not None and plain.top == ((),)


def failed(case: str) -> CaseRecord:
    """A prompt compared whose answers were not sound (no alternatives listed)."""
    good = record(case, exceeds=False)
    return CaseRecord(good.case, "parity", dataclasses.replace(good.outcome, status=Status.FAIL))


def test_the_family_stops_once_both_rulings_are_made_or_eight_prompts_failed() -> None:
    same = [record(f"p{i:02d}-x", exceeds=False) for i in range(1, 8)]
    assert settled(same) is None  # "same" needs eight prompts
    assert settled([*same, record("p08-x", exceeds=False)]) == (
        "parity: decided after 8 prompts (distribution same, kv_cache same)"
    )
    broken = [failed(f"p{i:02d}-x") for i in range(1, 9)]
    assert settled(broken[:7]) is None
    assert settled(broken) is not None and settled(broken).startswith("parity: 8 prompts failed")
    # Compared but never sound: undecided rulings over no prompt, not "nothing compared".
    assert [(r["outcome"], r["prompts"]) for r in rulings(broken)] == [("undecided", 0)] * 2
    assert rulings([]) == []
