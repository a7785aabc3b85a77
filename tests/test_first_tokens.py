"""Parity's sampling fallback as pure functions: the permutation test, its power, the choice of
method, and what a run records and rules."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.checks.parity import first_token, recording_bytes, settled, summarize
from verifier.checks.registry import Probed
from verifier.checks.support import first_tokens
from verifier.checks.support.distributions import END
from verifier.checks.support.parity_reference import parity_context
from verifier.compare.families import ruling_text
from verifier.outcome import CaseRecord, Outcome, Status
from verifier.protocol.answers import ChatResult, Choice, ToolCall
from verifier.protocol.logprobs import LogprobsSupport, ReferenceEndpoint

TOKENS = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=12)


def draws(seed: int, weights: list[float], n: int = first_tokens.SAMPLES) -> list[str]:
    return random.Random(seed).choices(["a", "b", "c", "d", "e"], weights=weights, k=n)


def strata(shift: float, seed: int = 0, prompts: int = 24) -> list[first_tokens.Stratum]:
    """Prompts whose candidate moves `shift` of the likeliest token's mass to the next."""
    rng = random.Random(seed)
    found = []
    for i in range(prompts):
        p = sorted((rng.random() ** 3 for _ in range(5)), reverse=True)
        total = sum(p)
        p = [x / total for x in p]
        q = [p[0] - min(shift, p[0]), p[1] + min(shift, p[0]), *p[2:]]
        found.append((draws(2 * i + seed * 1000, q), draws(2 * i + 1 + seed * 1000, p)))
    return found


@given(st.lists(st.tuples(TOKENS, TOKENS), min_size=1, max_size=4))
@settings(max_examples=25, deadline=None)
def test_the_p_value_is_a_reproducible_probability(data: list[first_tokens.Stratum]) -> None:
    p = first_tokens.permutation_p(data, rounds=49)
    assert 1 / 50 <= p <= 1
    assert first_tokens.permutation_p(data, rounds=49) == p


@given(st.lists(TOKENS, min_size=1, max_size=4))
@settings(max_examples=25, deadline=None)
def test_two_sides_that_sampled_alike_are_never_called_different(sides: list[list[str]]) -> None:
    data = [(side, list(reversed(side))) for side in sides]
    assert first_tokens.statistic(data) == 0
    assert first_tokens.permutation_p(data, rounds=49) == 1


@given(st.lists(st.tuples(TOKENS, TOKENS), min_size=1, max_size=4), st.randoms())
@settings(max_examples=25, deadline=None)
def test_the_shuffles_do_not_depend_on_which_side_drew_which_sample(
    data: list[first_tokens.Stratum], rng: random.Random
) -> None:
    """The seed comes from each prompt's pooled samples alone: any other split of the same
    samples between the sides (same sizes) is shuffled alike, so the seed says nothing of the
    split the test judges, and the p-value is valid (see the module)."""
    resplit = []
    for candidate, reference in data:
        pooled = [*candidate, *reference]
        rng.shuffle(pooled)
        resplit.append((pooled[: len(candidate)], pooled[len(candidate) :]))
    assert first_tokens.seed_of(resplit) == first_tokens.seed_of(data)
    # One such split by hand (main digested the sides as given, and seeded them apart).
    by_hand = [(["a", "b"], ["c"])], [(["c", "b"], ["a"])]
    assert first_tokens.seed_of(by_hand[0]) == first_tokens.seed_of(by_hand[1])


def test_the_moved_mass_goes_from_the_likeliest_token_to_the_next() -> None:
    assert first_tokens.moved([6, 3, 1], 0.2) == pytest.approx([0.4, 0.5, 0.1, 0.0])
    # One token sampled: the mass goes to one neither side sampled.
    assert first_tokens.moved([20], 0.3) == pytest.approx([0.7, 0.3])
    # No more than the token has.
    assert first_tokens.moved([1, 1], 0.9) == pytest.approx([0.0, 1.0, 0.0])


def test_a_large_shift_is_different_and_none_is_same_within_the_stated_resolution() -> None:
    shifted = first_tokens.decide(strata(0.4))
    assert (shifted["outcome"], shifted["p_value"]) == ("different", 0.001)
    same = first_tokens.decide(strata(0.0))
    assert same["outcome"] == "same" and same["p_value"] > first_tokens.ALPHA
    assert same["resolution"] is not None and same["resolution"] <= first_tokens.RESOLUTION
    powers = [same["power"][str(s)] for s in first_tokens.SHIFTS]
    assert powers == sorted(powers) and powers[-1] == 1.0


def test_too_few_prompts_resolve_nothing_and_say_undecided() -> None:
    few = first_tokens.decide(strata(0.0, prompts=1))
    assert few["outcome"] == "undecided" and few["resolution"] is None
    assert first_tokens.decide([])["outcome"] == "undecided"


def answer(**choice: Any) -> ChatResult:
    return ChatResult(stream=False, status=200, choices={0: Choice(index=0, **choice)})


def test_a_sample_is_named_by_what_the_answer_began() -> None:
    assert first_token(answer(content=" Paris", finish_reason="length")) == " Paris"
    assert first_token(answer(content="", finish_reason="stop")) == END
    assert first_token(answer(reasoning="Let", finish_reason="length")) == "\x00reasoning:Let"
    call = ToolCall(index=0, id="c", type="function", name="f", arguments="")
    assert first_token(answer(tool_calls=[call], finish_reason="length")) == "\x00tool_call"


def sampled(case: str, candidate: list[str], reference: list[str]) -> CaseRecord:
    metrics = {"requests": 40, "sampled": {"candidate": candidate, "reference": reference}}
    return CaseRecord(f"parity/{case}", "parity", Outcome(Status.PASS, metrics=metrics))


def test_summarize_rules_on_the_distribution_by_sampling_and_says_it_is_weaker() -> None:
    records = [sampled(f"p{i:02d}-x", c, r) for i, (c, r) in enumerate(strata(0.4), start=1)]
    summary = summarize(records, None)
    (ruling,) = summary["rulings"]
    assert (ruling["name"], ruling["method"], ruling["outcome"]) == (
        "distribution",
        "sampling",
        "different",
    )
    assert (ruling["code"], ruling["verdict"], ruling["requests"]) == (
        "distribution_shift",
        "fail",
        960,
    )
    assert "weaker" in ruling["test"]["kind"]
    assert summary["method"] == "sampling"
    assert summary["first_token"]["samples_per_prompt"] == first_tokens.SAMPLES
    # The fixed-sample test takes every prompt: it never stops the family early.
    assert settled(records) is None


def test_a_recording_run_records_samples_beside_or_instead_of_logprobs() -> None:
    metrics = {"requests": 20, "recording": {"samples": ["a"] * 20}}
    only = CaseRecord("parity/p01-x", "parity", Outcome(Status.PASS, metrics=metrics))
    assert summarize([only], None)["rulings"] == []
    assert b'"samples":["a"' in recording_bytes([only])


OWN = {"top": 20}
NONE = {"top": None, "why": "top_logprobs=1 refused with HTTP 400: no"}
TRACED = {"p01": {"first": {"t": [], "c": [], "k": [["x"]]}, "again": {}, "samples": ["a"]}}
SAMPLED = {"p01": {"samples": ["a"]}}


@pytest.mark.parametrize(
    ("own", "reference", "recordings", "method", "expected"),
    [
        # A recording run: logprobs where given, samples always (unless logprobs only).
        (OWN, None, None, "auto", (20, True, None)),
        (NONE, None, None, "auto", (None, True, NONE["why"])),
        (OWN, None, None, "logprobs", (20, False, None)),
        (OWN, None, None, "sampling", (None, True, "--parity-method sampling")),
        # Live: logprobs where both give them, else samples.
        (OWN, {"model": "m", "logprobs": {"top": 5}}, None, "auto", (5, False, None)),
        (OWN, {"model": "m", "logprobs": NONE}, None, "auto", (None, True, "the reference: ")),
        (NONE, {"model": "m", "logprobs": OWN}, None, "logprobs", (None, False, NONE["why"])),
        # A recording: its logprobs, else its samples.
        (OWN, None, TRACED, "auto", (1, False, None)),
        (NONE, None, TRACED, "auto", (None, True, NONE["why"])),
        (OWN, None, SAMPLED, "auto", (None, True, "the --baseline recording has no logprobs")),
        (NONE, None, {"p01": {"first": {"k": []}}}, "auto", (None, False, "no samples")),
    ],
)
def test_the_method_is_logprobs_where_both_sides_give_them_else_sampling(
    own: dict[str, Any],
    reference: dict[str, Any] | None,
    recordings: dict[str, Any] | None,
    method: str,
    expected: tuple[int | None, bool, str | None],
) -> None:
    probed = Probed(
        logprobs=LogprobsSupport.from_dict(own),
        reference=None if reference is None else ReferenceEndpoint.from_dict(reference),
    )
    baseline = None if recordings is None else {"families": {}}
    context = parity_context(probed, baseline, recordings, method)
    top, sampling, why = expected
    assert (context.top_logprobs, context.sampling) == (top, sampling)
    if why is not None:
        assert why in context.why_unavailable


def test_a_sampling_ruling_reads_as_the_weaker_test_it_is() -> None:
    ruling = {"outcome": "same", "prompts": 24, "requests": 480, "method": "sampling"}
    text = ruling_text({**ruling, "p_value": 0.87, "resolution": 0.2})
    assert text == (
        "same after 24 prompts (480 requests) by sampled first tokens, a weaker test "
        "(p 0.87; 95% power at a shift of TV 0.2)"
    )
    unresolved = ruling_text({**ruling, "outcome": "undecided", "resolution": None})
    assert unresolved.startswith("not enough evidence after 24 prompts")
    assert "under 95% power at every shift up to TV 0.5" in unresolved
