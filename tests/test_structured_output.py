"""Structured-output grading as pure functions, and the generated-schema strategy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from verifier.cases.corpus import Case
from verifier.cases.generated import generated_cases, keyword_schemas
from verifier.checks.structured_output import malformed_findings, output_findings, summarize
from verifier.outcome import CaseRecord
from verifier.protocol.answers import ChatResult, Choice
from verifier.simulator.conform import MISSING, conform
from verifier.simulator.validation import response_format_problem

SCHEMA = {
    "type": "object",
    "properties": {"xs": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
    "required": ["xs"],
    "additionalProperties": False,
}


def case(
    kind: str = "constrained", response_format: dict[str, Any] | None = None, **extra: Any
) -> Case:
    data = {
        "id": "c",
        "keyword": "maxItems",
        "kind": kind,
        "messages": [{"role": "user", "content": "x"}],
        "response_format": response_format
        or {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": SCHEMA}},
        **extra,
    }
    return Case("structured_output", "c", data, "t.jsonl:1")


def answer(
    content: str | None, finish: str = "stop", status: int = 200, body: Any = None
) -> ChatResult:
    return ChatResult(
        stream=False,
        status=status,
        choices=[Choice(0, "assistant", content, None, [], finish)],
        body=body,
    )


def codes(findings: Any) -> list[str]:
    return [f.code for f in findings]


def test_valid_output_has_no_finding() -> None:
    assert codes(output_findings(case(), answer('{"xs": ["a"]}'), "a")) == []


def test_violation_names_the_keyword() -> None:
    found = list(output_findings(case(), answer('{"xs": ["a", "b", "c"]}'), "a"))
    assert codes(found) == ["schema_mismatch"]
    assert found[0].expected == {"maxItems": 2} and found[0].json_path == "$.xs"


def test_json_object_mode_wants_an_object() -> None:
    json_object = case(response_format={"type": "json_object"})
    assert codes(output_findings(json_object, answer('{"any": 1}'), "a")) == []
    assert codes(output_findings(json_object, answer("[1, 2]"), "a")) == ["not_an_object"]
    assert codes(output_findings(json_object, answer("Sure!"), "a")) == ["not_json"]


def test_truncation_needs_finish_reason_length() -> None:
    truncation = case("truncation", max_tokens=5)
    assert codes(output_findings(truncation, answer('{"xs": ["a", "b', "length"), "a")) == []
    assert codes(output_findings(truncation, answer('{"xs": ["a", "b', "stop"), "a")) == [
        "truncated_without_length"
    ]
    assert codes(output_findings(truncation, answer('{"xs": ["a"]}', "stop"), "a")) == []


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (answer("{}", status=200), "malformed_format_accepted"),
        (answer(None, status=500, body={"error": {"message": "boom"}}), "malformed_format_5xx"),
        (answer(None, status=400, body="bad request"), "rejected_without_error_object"),
    ],
)
def test_malformed_response_format_must_be_a_4xx_with_an_error_object(
    result: ChatResult, code: str
) -> None:
    assert codes(malformed_findings(result, "m")) == [code]
    assert (
        malformed_findings(answer(None, status=400, body={"error": {"message": "no"}}), "m") == []
    )


@pytest.mark.parametrize(
    "response_format",
    [
        {"type": "json_schemaa", "json_schema": {"name": "x", "schema": {}}},
        {"type": "json_schema"},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": "object"}},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objekt"}}},
        {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(["}},
        },
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/nope"}}},
        {"type": "json_schema", "json_schema": {"name": "has spaces", "schema": {}}},
    ],
)
def test_the_simulated_vendor_rejects_malformed_formats(response_format: dict[str, Any]) -> None:
    assert response_format_problem(response_format)


def test_the_simulated_vendor_accepts_valid_formats() -> None:
    assert response_format_problem({"type": "json_object"}) is None
    assert (
        response_format_problem(
            {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
        )
        is None
    )


def record(
    keyword: str,
    status: str,
    *,
    mode: str = "strict",
    accepted: bool = True,
    violated: tuple[str, ...] = (),
    kind: str = "constrained",
    codes: tuple[str, ...] = (),
) -> CaseRecord:
    metrics = {
        "keyword": keyword,
        "mode": mode,
        "accepted": accepted,
        "violated": list(violated),
        "kind": kind,
    }
    return CaseRecord.from_dict(
        {
            "case": f"structured_output/{keyword}",
            "family": "structured_output",
            "outcome": {
                "status": status,
                "metrics": metrics,
                "findings": [{"code": c, "message": ""} for c in codes],
            },
        }
    )


def test_matrix_counts_declared_empirical_and_silent() -> None:
    summary = summarize(
        [
            record("maxItems", "pass"),
            record("maxItems", "fail", violated=("maxItems",)),
            record("pattern", "unsupported", accepted=False),
            record("pattern", "pass", mode="non_strict"),
            record("malformed", "fail", kind="malformed", codes=("malformed_format_accepted",)),
            record("malformed", "pass", kind="malformed"),
            record("truncation", "fail", kind="truncation", codes=("truncated_without_length",)),
        ],
        None,
    )
    rows = summary["keywords"]
    assert (
        rows["maxItems"]["accepted"] == 2
        and rows["maxItems"]["valid"] == 1
        and rows["maxItems"]["silent"] == 1
    )
    assert rows["maxItems"]["silent_acceptance"]["rate"] == 0.5
    assert rows["pattern"]["rejected"] == 1 and rows["pattern"]["declared_coverage"]["rate"] == 0.5
    assert summary["silent_acceptance"] == [{"keyword": "maxItems", "cases": 1}]
    assert summary["violated_keywords"] == {"maxItems": 1}
    assert summary["modes"]["strict"]["cases"] == 3
    assert summary["malformed"] == {
        "cases": 2,
        "rejected_4xx": 1,
        "accepted": 1,
        "server_error": 0,
        "no_error_object": 0,
    }
    assert summary["truncation"] == {"cases": 1, "passed": 0, "without_length": 1}


@settings(max_examples=150, deadline=None)
@given(keyword_schemas())
def test_generated_schemas_are_valid_and_servable(pair: tuple[str, dict[str, Any]]) -> None:
    keyword, schema = pair
    Draft202012Validator.check_schema(schema)
    instance = conform(MISSING, schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    assert validator.is_valid(instance), (keyword, schema, instance)
    rf = {"type": "json_schema", "json_schema": {"name": "g", "schema": schema}}
    generated = case(response_format=rf)
    assert list(output_findings(generated, answer(json.dumps(instance)), "a")) == []


@given(
    keyword_schemas(),
    st.sampled_from(["[]", '"text"', "42", '{"value": {"nested": [1, {}]}, "extra": 1}']),
)
def test_generated_schemas_reject_a_foreign_instance(
    pair: tuple[str, dict[str, Any]], foreign: str
) -> None:
    _, schema = pair
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    rf = {"type": "json_schema", "json_schema": {"name": "g", "schema": schema}}
    found = codes(output_findings(case(response_format=rf), answer(foreign), "a"))
    assert (found == []) == validator.is_valid(json.loads(foreign))


def test_generated_cases_are_reproducible_by_seed() -> None:
    first, digest = generated_cases(12, seed=5)
    again, same = generated_cases(12, seed=5)
    other, different = generated_cases(12, seed=6)
    assert [c.data for c in first] == [c.data for c in again] and digest == same
    assert digest != different
    assert [c.id for c in first] == [f"generated-{n:04d}" for n in range(1, 13)]


def test_an_answer_cut_by_max_tokens_is_not_judged() -> None:
    from verifier.checks.structured_output import cut_by_max_tokens

    assert cut_by_max_tokens(case(), answer('{"xs": ["a", "b', "length"))
    assert not cut_by_max_tokens(case(), answer('{"xs": ["a", "b', "stop"))
    assert not cut_by_max_tokens(case("truncation", max_tokens=5), answer('{"xs": ["a', "length"))
    assert codes(output_findings(case(), answer('{"xs": ["a", "b', "stop"), "a")) == [
        "truncated_json"
    ]
