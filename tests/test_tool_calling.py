"""Tool-call grading as pure functions: matching, validity, contracts, determinism, baseline."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.cases.corpus import Case
from verifier.checks.support.tool_matching import (
    Call,
    compare_calls,
    parse_arguments,
    signature,
    value_matches,
)
from verifier.checks.tool_calling import (
    baseline_agreement,
    determinism_findings,
    dynamic_findings,
    settled,
    validity_findings,
)
from verifier.protocol.answers import ChatResult, Choice, Problem, ToolCall

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
STOCK = {
    "type": "function",
    "function": {
        "name": "get_stock",
        "parameters": {
            "type": "object",
            "properties": {"symbol": {"type": "string"}},
            "required": ["symbol"],
        },
    },
}


def case(**data: Any) -> Case:
    base = {
        "id": "c",
        "category": "single",
        "messages": [{"role": "user", "content": "x"}],
        "tools": [WEATHER, STOCK],
    }
    return Case("tool_calling", "c", {**base, **data}, "t.jsonl:1")


def answer(
    *calls: tuple[str | None, str | None, str | None],
    finish: str | None = "tool_calls",
    content: str | None = None,
    stream: bool = False,
    problems: list[Problem] | None = None,
) -> ChatResult:
    tool_calls = [
        ToolCall(i, call_id, "function", name, args)
        for i, (call_id, name, args) in enumerate(calls)
    ]
    return ChatResult(
        stream=stream,
        status=200,
        choices=[Choice(0, "assistant", content, None, tool_calls, finish)],
        problems=problems or [],
    )


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def test_values_compare_loosely_but_not_wrongly() -> None:
    assert value_matches("New York", "new york")
    assert value_matches("san-francisco, CA", "San Francisco CA")
    assert not value_matches("Oslo", "Lima")
    assert value_matches(3, 3.0) and not value_matches(True, 1) and not value_matches("3", 3)
    assert value_matches({"a": [1, "X"]}, {"a": [1.0, "x"]})
    assert not value_matches([1, 2], [2, 1])


def test_parallel_calls_match_in_any_order_and_optional_arguments() -> None:
    expected = [
        {"name": "get_weather", "arguments": {"city": ["Oslo"], "unit": ["celsius", ""]}},
        {"name": "get_weather", "arguments": {"city": ["Lima"], "unit": ["celsius", ""]}},
    ]
    calls = [
        Call("get_weather", {"city": "lima"}, None),
        Call("get_weather", {"city": "Oslo", "unit": "celsius"}, None),
    ]
    assert compare_calls(calls, expected) == []


@pytest.mark.parametrize(
    ("calls", "expected", "code"),
    [
        ([], [{"name": "get_weather", "arguments": {"city": ["Oslo"]}}], "missing_call"),
        (
            [Call("get_stock", {"symbol": "X"}, None)],
            [{"name": "get_weather", "arguments": {"city": ["Oslo"]}}],
            "wrong_tool",
        ),
        (
            [Call("get_weather", {"city": "Lima"}, None)],
            [{"name": "get_weather", "arguments": {"city": ["Oslo"]}}],
            "value_mismatch",
        ),
        (
            [Call("get_weather", {"city": "Oslo", "x": 1}, None)],
            [{"name": "get_weather", "arguments": {"city": ["Oslo"]}}],
            "value_mismatch",
        ),
        ([Call("get_weather", {"city": "Oslo"}, None)], [], "unexpected_call"),
    ],
)
def test_accuracy_codes(calls: list[Call], expected: list[dict[str, Any]], code: str) -> None:
    assert codes(compare_calls(calls, expected)) == [code]


json_objects = st.dictionaries(
    st.text(min_size=1, max_size=5), st.integers() | st.text(max_size=5), max_size=5
)


@given(json_objects, st.randoms())
def test_signature_ignores_key_order_and_whitespace(arguments: dict[str, Any], rnd: Any) -> None:
    items = list(arguments.items())
    rnd.shuffle(items)
    reordered = json.dumps(dict(items), indent=rnd.choice([None, 1, 4]))
    a = Call("f", parse_arguments(json.dumps(arguments)), None)
    b = Call("f", parse_arguments(reordered), None)
    assert signature([a]) == signature([b])


def test_a_valid_call_has_no_defect() -> None:
    assert (
        validity_findings(case(), answer(("call_1", "get_weather", '{"city": "Oslo"}')), "a") == []
    )


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (answer(("c1", "get_weather", '{"city": "Oslo"')), "invalid_json"),
        (answer(("c1", "get_weather", "")), "invalid_json"),
        (answer(("c1", "get_wether", '{"city": "Oslo"}')), "unknown_tool"),
        (answer(("c1", "get_weather", '{"unit": "celsius"}')), "schema_mismatch"),
        (answer(("c1", "get_weather", '{"city": "Oslo", "extra": 1}')), "schema_mismatch"),
        (answer(("", "get_weather", '{"city": "Oslo"}')), "bad_call_id"),
        (
            answer(("d", "get_weather", '{"city": "Oslo"}'), ("d", "get_stock", '{"symbol": "A"}')),
            "bad_call_id",
        ),
        (
            answer(("c1", "get_weather", '{"city": "Oslo"}'), finish="stop"),
            "finish_reason_mismatch",
        ),
        (answer(finish="tool_calls", content="Hi"), "finish_reason_mismatch"),
        (
            answer(finish="stop", content="<|tool_call_begin|>functions.get_weather:0"),
            "markers_in_content",
        ),
        (answer(finish="stop", content="<tool_call>{...}</tool_call>"), "markers_in_content"),
    ],
)
def test_defects(result: ChatResult, code: str) -> None:
    # Exactly the one code (a duplicate id is reported on each call that repeats it).
    assert set(codes(validity_findings(case(), result, "a"))) == {code}


def test_a_malformed_call_is_never_no_call() -> None:
    found = codes(
        validity_findings(case(expected={"calls": []}), answer(("c1", "get_weather", "{oops")), "a")
    )
    assert found[0] == "invalid_json"


@pytest.mark.parametrize(
    ("data", "result", "code"),
    [
        (
            {"tool_choice": "none"},
            answer(("c1", "get_weather", '{"city": "Oslo"}')),
            "tool_choice_none_ignored",
        ),
        (
            {"tool_choice": "required"},
            answer(finish="stop", content="Hi"),
            "tool_choice_required_ignored",
        ),
        (
            {"tool_choice": {"type": "function", "function": {"name": "get_stock"}}},
            answer(("c1", "get_weather", '{"city": "Oslo"}')),
            "tool_choice_named_ignored",
        ),
        (
            {"tool_choice": {"type": "function", "function": {"name": "get_stock"}}},
            answer(finish="stop", content="Hi"),
            "tool_choice_named_ignored",
        ),
        (
            {"parallel_tool_calls": False},
            answer(
                ("a", "get_weather", '{"city": "Oslo"}'), ("b", "get_weather", '{"city": "Lima"}')
            ),
            "parallel_tool_calls_ignored",
        ),
    ],
)
def test_contracts(data: dict[str, Any], result: ChatResult, code: str) -> None:
    assert codes(validity_findings(case(**data), result, "a")) == [code]


def test_a_call_to_an_unknown_tool_is_not_also_a_named_choice_ignored() -> None:
    named = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    result = answer(("c1", "get_weather_v2", '{"city": "Oslo"}'))
    assert codes(validity_findings(case(**named), result, "a")) == ["unknown_tool"]


def test_stream_invariant_problems_become_defects_and_other_wire_problems_do_not() -> None:
    result = answer(
        ("c1", "get_weather", '{"city": "Oslo"}'),
        stream=True,
        problems=[
            Problem("tool_call_name_repeated", "again", "chunk 3"),
            Problem("done_missing", "x"),
        ],
    )
    assert codes(validity_findings(case(), result, "a")) == ["tool_call_name_repeated"]


def test_determinism() -> None:
    a, b = (("get_weather", '{"city":"Oslo"}'),), (("get_weather", '{"city":"Lima"}'),)
    assert determinism_findings([(False, a), (True, a), (False, a)]) == []
    assert codes(determinism_findings([(False, a), (False, b)])) == ["nondeterministic_calls"]
    assert codes(determinism_findings([(False, a), (True, b), (False, a), (True, b)])) == [
        "stream_calls_differ"
    ]
    assert codes(determinism_findings([(False, a), (True, b), (False, a)])) == [
        "stream_calls_differ"
    ]
    # Non-stream varies: the stream answer's difference is not told apart from that.
    assert codes(determinism_findings([(False, a), (True, b), (False, b)])) == [
        "nondeterministic_calls"
    ]
    # One answer of each mode: a stream difference cannot be told from nondeterminism.
    found = determinism_findings([(False, a), (True, b)])
    assert codes(found) == ["nondeterministic_calls"] and "--repeats 3" in found[0].message
    assert not settled([(False, a), (True, b)]) and settled([(False, a), (True, b), (False, b)])


def test_baseline_trigger_f1() -> None:
    ours = {"a": ["f"], "b": [], "c": ["g"], "d": []}
    theirs = {"a": ["f"], "b": ["f"], "c": ["h"], "d": []}
    agreement = baseline_agreement(ours, theirs)
    assert agreement["trigger_precision"] == 1.0
    assert agreement["trigger_recall"] == pytest.approx(2 / 3)
    assert agreement["trigger_f1"] == pytest.approx(0.8)
    assert (
        agreement["tool_agreement"]["successes"] == 1 and agreement["tool_agreement"]["trials"] == 2
    )


def test_a_call_cut_by_max_tokens_is_not_judged() -> None:
    cut = answer(("c1", "get_weather", '{"city": "Os'), finish="length")
    assert codes(validity_findings(case(), cut, "a")) == ["max_tokens_reached"]


KIMI_IDS = {"pattern": r"^functions\.([A-Za-z0-9_.\-]+):[0-9]+$", "names_function": True}


@pytest.mark.parametrize(
    ("call_id", "found"),
    [
        ("functions.get_weather:0", []),
        ("functions.get_weather:12", []),
        ("call_abc123", ["tool_call_id_format"]),
        ("functions.get_stock_price:0", ["tool_call_id_format"]),  # names another function
        ("functions.get_weather", ["tool_call_id_format"]),
        ("", []),  # a missing id is bad_call_id's, not this check's
    ],
)
def test_call_id_format(call_id: str, found: list[str]) -> None:
    result = answer((call_id, "get_weather", '{"city": "Oslo"}'))
    graded = codes(validity_findings(case(), result, "a", KIMI_IDS))
    assert [c for c in graded if c == "tool_call_id_format"] == found


def test_call_id_format_is_not_checked_without_a_contract() -> None:
    result = answer(("call_abc123", "get_weather", '{"city": "Oslo"}'))
    assert validity_findings(case(), result, "a") == []


def test_call_id_format_without_a_group_checks_the_pattern_only() -> None:
    """A pattern with no group cannot name the function: the pattern alone is checked."""
    loose = {"pattern": r"^functions\.", "names_function": True}
    result = answer(("functions.get_weather:0", "get_weather", '{"city": "Oslo"}'))
    assert validity_findings(case(), result, "a", loose) == []
    result = answer(("call_1", "get_weather", '{"city": "Oslo"}'))
    assert codes(validity_findings(case(), result, "a", loose)) == ["tool_call_id_format"]


@pytest.mark.parametrize(
    ("declared", "more", "found"), [(120, 161, []), (120, 120, ["dynamic_tools_ignored"])]
)
def test_dynamic_tools_must_reach_the_prompt(declared: int, more: int, found: list[str]) -> None:
    assert codes(dynamic_findings(declared, more)) == found
