"""Reading model output as exactly one JSON document, and schema findings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.checks.support.common import parse_json_output, schema_findings

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values, st.sampled_from(["", " ", "\n", "\t\n"]))
def test_any_json_document_with_whitespace_is_accepted(value: object, pad: str) -> None:
    parsed = parse_json_output(pad + json.dumps(value) + pad)
    assert parsed.code is None and parsed.found and parsed.value == value


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (None, "empty_output"),
        ("   ", "empty_output"),
        ('```json\n{"a": 1}\n```', "fenced_json"),
        ("```\n[1, 2]\n```", "fenced_json"),
        # Cut at max_tokens inside its fence: the fence is the deviation, not the cut.
        ('```json\n{"a": [1, 2', "fenced_json"),
        ('Here is the JSON: {"a": 1}', "extra_text"),
        ('{"a": 1} I hope this helps', "extra_text"),
        ('{"a": 1', "truncated_json"),
        ('{"a": "unterminated', "truncated_json"),
        ('[{"a": [1, 2]}, {"b":', "truncated_json"),
        ("Hello there", "not_json"),
        ("{'a': 1}", "not_json"),
    ],
)
def test_deviations_have_their_own_code(text: str | None, code: str) -> None:
    assert parse_json_output(text).code == code


def test_fenced_and_prefixed_json_still_parsed_for_the_schema_check() -> None:
    parsed = parse_json_output('Sure! {"a": [1, 2]}')
    assert parsed.found and parsed.value == {"a": [1, 2]}


def test_schema_findings_name_keyword_and_path() -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "maxItems": 2}},
        "additionalProperties": False,
    }
    findings = list(schema_findings(schema, {"xs": [1, 2, 3], "extra": 1}, code="schema_mismatch"))
    by_path = {f.json_path: f for f in findings}
    assert by_path["$.xs"].expected == {"maxItems": 2}
    assert "(keyword 'maxItems')" in by_path["$.xs"].message
    assert "additionalProperties" in by_path["$"].message
    assert findings[0].json_path == "$.xs", "deepest finding first"


def test_formats_are_checked() -> None:
    findings = list(
        schema_findings({"type": "string", "format": "date"}, "July 20, 1969", code="c")
    )
    assert [f.expected for f in findings] == [{"format": "date"}]
