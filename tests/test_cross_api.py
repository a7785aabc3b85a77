"""Cross-API consistency (verifier/checks/support/cross_api.py): pure, on crafted records.

The simulated vendor's proofs are rows of the defect table (``translated-arguments-escaped``,
the named-tool-choice translation rows); the clean vendor's is the README's main command,
every API at once.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.test_gate import entry, missed
from verifier.checks.support.cross_api import (
    CODES,
    JSON_KINDS,
    NO_ANSWER,
    TOOL_KINDS,
    agreement,
    calls_answer,
    case_id,
    differences,
    json_answer,
)
from verifier.compare.families import ruling_text
from verifier.outcome import CaseRecord, Outcome, Status
from verifier.scorecard.build import summarize_family
from verifier.scorecard.gate import DEFAULTS

WEATHER = [("get_weather", {"city": "Oslo", "unit": "celsius"})]
API = ("chat", "messages")


def record(
    case: str,
    api: str,
    answer: dict[str, Any] | None,
    status: Status = Status.PASS,
    family: str = "tool_calling",
) -> CaseRecord:
    key = f"{family}/{case}" if api == "chat" else f"{family}/{case}[{api}]"
    metrics = {"requests": 1} | ({"answer": answer} if answer is not None else {})
    code = "schema_mismatch" if status is Status.FAIL else None
    return CaseRecord(key, family, Outcome(status, code=code, metrics=metrics), api)


def calls(*made: tuple[str, Any], tokens: int | None = 40) -> dict[str, Any]:
    return calls_answer(made, tokens)


def test_a_twin_is_known_by_its_case_id() -> None:
    assert case_id(record("multiple-3", "messages", None)) == "multiple-3"
    assert case_id(record("multiple-3", "chat", None)) == "multiple-3"


def differing(ours: dict[str, Any], theirs: dict[str, Any], kinds: Any = TOOL_KINDS) -> list[str]:
    return [kind for kind, differs in differences(ours, theirs, kinds).items() if differs]


def test_each_kind_of_difference_is_found_and_the_first_hides_what_follows() -> None:
    one = calls(*WEATHER)
    assert differing(one, calls()) == ["call"]
    assert differing(one, calls(("get_forecast", {"city": "Oslo"}))) == ["tool"]
    assert differing(one, calls(("get_weather", {"city": "Lima"}))) == ["arguments"]
    assert differing(one, calls(*WEATHER, tokens=41)) == ["prompt_tokens"]
    both = differing(one, calls(("get_weather", {"city": "Lima"}), tokens=39))
    assert both == ["arguments", "prompt_tokens"]
    assert differing(json_answer({"a": [1, 2]}), json_answer({"a": [2, 1]}), JSON_KINDS) == ["json"]


def test_a_kind_without_its_evidence_on_both_sides_is_not_compared() -> None:
    """Neither agreeing nor differing: no count, or no call to compare tools or arguments of."""
    one = calls(*WEATHER)
    assert differences(one, calls(*WEATHER, tokens=None), TOOL_KINDS) == {
        "call": False,
        "tool": False,
        "arguments": False,
    }
    # Whether a tool is called differs: which, and with what, cannot be compared.
    assert differences(one, calls(), TOOL_KINDS) == {"call": True, "prompt_tokens": False}
    # Other tools: their arguments are not compared.
    assert set(differences(one, calls(("get_time", {})), TOOL_KINDS)) == {
        "call",
        "tool",
        "prompt_tokens",
    }


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["get_weather", "get_time"]),
            st.dictionaries(st.sampled_from("abc"), st.integers() | st.text(max_size=3)),
        ),
        max_size=3,
    ),
    st.randoms(),
)
def test_calls_in_another_order_or_key_order_are_the_same_answer(
    made: list[tuple[str, dict[str, Any]]], rng: Any
) -> None:
    shuffled = [(name, dict(reversed(list(args.items())))) for name, args in made]
    rng.shuffle(shuffled)
    assert differing(calls(*made), calls(*shuffled)) == []


def test_one_api_compares_nothing() -> None:
    assert agreement([record("a", "chat", calls(*WEATHER))], TOOL_KINDS) == {}


def test_twins_are_compared_with_the_first_api_and_each_kind_is_ruled() -> None:
    records = [
        record("a", "chat", calls(*WEATHER)),
        record("a", "messages", calls(*WEATHER)),
        record("a", "responses", calls(("get_weather", {"city": "Lima"}))),
        record("b", "chat", calls()),
        record("b", "messages", calls()),
        # A twin that failed is compared: its own codes say what broke.
        record("b", "responses", calls(*WEATHER), Status.FAIL),
        # Not graded, or no deterministic answer: not compared.
        record("c", "chat", calls(*WEATHER)),
        record("c", "messages", None, Status.ERROR),
        record("c", "responses", None, Status.UNSUPPORTED),
        record("d", "chat", None),
        record("d", "messages", calls(*WEATHER)),
    ]
    found = agreement(records, TOOL_KINDS)
    metrics = found["cross_api"]
    assert metrics["apis"] == ["chat", "messages", "responses"]
    assert metrics["pairs"] == 4
    assert metrics["agreement"]["successes"] == 2
    # Each kind over the pairs it could be compared in: tools and arguments only where both
    # twins called (case a's two pairs), not where neither did, nor where one did (case b's).
    assert {k: (r["successes"], r["trials"]) for k, r in metrics["by_kind"].items()} == {
        "call": (3, 4),
        "tool": (2, 2),
        "arguments": (1, 2),
        "prompt_tokens": (4, 4),
    }
    assert metrics["not_compared"] == {
        NO_ANSWER: 1,
        "the twin could not be judged": 1,
        "the twin is unsupported": 1,
    }
    assert [(d["case"], d["code"], d["apis"]) for d in metrics["disagreements"]] == [
        ("a", "cross_api_arguments_differ", ["chat", "responses"]),
        ("b", "cross_api_call_differs", ["chat", "responses"]),
    ]
    assert metrics["disagreements"][0]["actual"] == [
        {"name": "get_weather", "arguments": {"city": "Lima"}}
    ]
    rulings = {
        r["name"]: (r["verdict"], r["code"], r["differing"], r["pairs"]) for r in found["rulings"]
    }
    assert rulings == {
        "cross_api call": ("fail", "cross_api_call_differs", 1, 4),
        "cross_api tool": ("pass", None, 0, 2),
        "cross_api arguments": ("fail", "cross_api_arguments_differ", 1, 2),
        "cross_api prompt_tokens": ("pass", None, 0, 4),
    }
    # A kind no pair had the evidence for is not ruled.
    uncounted = [record(c, api, calls(*WEATHER, tokens=None)) for c in "ab" for api in API]
    assert [r["name"] for r in agreement(uncounted, TOOL_KINDS)["rulings"]] == [
        "cross_api call",
        "cross_api tool",
        "cross_api arguments",
    ]


def test_twins_without_answers_give_figures_but_no_ruling() -> None:
    records = [record("a", "chat", None), record("a", "messages", None)]
    found = agreement(records, JSON_KINDS)
    assert "rulings" not in found
    assert found["cross_api"]["pairs"] == 0
    assert found["cross_api"]["agreement"]["rate"] is None


def test_a_disagreement_fails_the_family_with_its_code_and_the_gate_still_counts_cases() -> None:
    records = [
        record("a", "chat", json_answer({"ok": True}), family="structured_output"),
        record("a", "responses", json_answer({"ok": False}), family="structured_output"),
    ]
    family = summarize_family(records, None, lambda rs, _: agreement(rs, JSON_KINDS))
    assert family["counts"]["pass"] == 2
    assert family["verdict"] == "fail"
    assert family["codes"] == {CODES["json"]: 1}
    (ruling,) = family["rulings"]
    assert ruling_text(ruling) == "different: 1 of 1 twin pairs differ across chat, responses"
    assert missed(family, **DEFAULTS) == ["min_graded", "ruling cross_api json"]
    # Agreement across APIs is no sequential test: it never stands in for the cases graded.
    agreed = entry(8)
    agreed["rulings"] = [{**ruling, "outcome": "same", "verdict": "pass", "code": None}]
    assert missed(agreed, **DEFAULTS) == ["min_graded"]
