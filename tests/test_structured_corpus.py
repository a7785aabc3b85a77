"""The structured-output corpus obeys the rules that make its per-keyword matrix meaningful.

Each constrained case isolates one keyword: the natural answer its prompt spells out breaks
that keyword and nothing else, so an engine that ignores the keyword is likely to send a
violating answer, and an engine that enforces it must repair exactly that. The simulated
vendor's grammar engine (`conform`) is checked against the same rules: it repairs every case,
and ignoring any other keyword leaves the case valid, except a structural keyword on the way
to the tested one (ignoring `properties` leaves everything below it unconstrained).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verifier.cases.corpus import Case, load_corpus
from verifier.simulator.conform import MISSING, conform
from verifier.simulator.rules import natural_json

CASES = load_corpus(["structured_output"]).cases
CONSTRAINED = [c for c in CASES if c.data.get("kind", "constrained") == "constrained"]
JSON_SCHEMA = [c for c in CONSTRAINED if c.data["response_format"]["type"] == "json_schema"]
TAGS = sorted({c.data["keyword"] for c in JSON_SCHEMA})
# Keywords whose subschemas hold other keywords: ignoring one leaves what is below it unchecked.
STRUCTURAL = {
    "properties",
    "items",
    "prefixItems",
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "patternProperties",
    "additionalProperties",
    "dependentSchemas",
    "contains",
    "propertyNames",
}
REQUIRED_TAGS = {
    "type",
    "enum",
    "const",
    "required",
    "additionalProperties",
    "properties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "if",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "minProperties",
    "maxProperties",
}


def schema_of(case: Case) -> Any:
    return case.data["response_format"]["json_schema"]["schema"]


def without(schema: Any, keyword: str) -> Any:
    """`schema` with `keyword` removed everywhere (`if` takes then/else with it)."""
    dropped = {"if", "then", "else"} if keyword == "if" else {keyword}
    if isinstance(schema, dict):
        return {
            k: (
                v
                if k in ("const", "enum", "required", "dependentRequired")
                else without(v, keyword)
            )
            for k, v in schema.items()
            if k not in dropped
        }
    if isinstance(schema, list):
        return [without(item, keyword) for item in schema]
    return schema


def uses(schema: Any, keyword: str) -> bool:
    if isinstance(schema, dict):
        return keyword in schema or any(
            uses(v, keyword) for k, v in schema.items() if k not in ("const", "enum")
        )
    if isinstance(schema, list):
        return any(uses(item, keyword) for item in schema)
    return False


def formats_in(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = {schema["format"]} if isinstance(schema.get("format"), str) else set()
        return found.union(*(formats_in(v) for v in schema.values()))
    if isinstance(schema, list):
        return set().union(*(formats_in(v) for v in schema))
    return set()


def valid(value: Any, schema: Any) -> bool:
    if value is MISSING:
        return False
    return Draft202012Validator(
        schema, format_checker=Draft202012Validator.FORMAT_CHECKER
    ).is_valid(value)


def test_every_keyword_family_is_covered_twice() -> None:
    counts = {tag: sum(c.data["keyword"] == tag for c in JSON_SCHEMA) for tag in TAGS}
    missing = REQUIRED_TAGS - set(counts)
    assert not missing, f"no case for {sorted(missing)}"
    thin = {tag: n for tag, n in counts.items() if n < 2}
    assert not thin, f"fewer than two cases: {thin}"
    formats: set[str] = set()
    for case in JSON_SCHEMA:
        if case.data["keyword"] == "format":
            formats |= formats_in(schema_of(case))
    assert {"date-time", "date", "email", "uuid", "ipv4"} <= formats


def test_kinds_and_modes_are_all_present() -> None:
    kinds = {c.data.get("kind", "constrained") for c in CASES}
    assert kinds == {"constrained", "malformed", "truncation"}
    strict = {c.data["response_format"]["json_schema"].get("strict", False) for c in JSON_SCHEMA}
    assert strict == {True, False}
    assert sum(c.data["response_format"]["type"] == "json_object" for c in CONSTRAINED) >= 6
    assert sum(c.data.get("kind") == "malformed" for c in CASES) >= 6
    assert sum(c.data.get("kind") == "truncation" for c in CASES) >= 4
    assert sum(bool(c.data.get("stream")) for c in CONSTRAINED) >= len(CONSTRAINED) // 5


@pytest.mark.parametrize("case", JSON_SCHEMA, ids=lambda c: c.id)
def test_the_natural_answer_breaks_the_tagged_keyword_and_nothing_else(case: Case) -> None:
    schema, tag = schema_of(case), case.data["keyword"]
    Draft202012Validator.check_schema(schema)
    assert uses(schema, tag), f"the schema does not use its tag {tag!r}"
    natural = natural_json({"messages": case.data["messages"]})
    assert natural is not MISSING, "the prompt spells out a natural answer"
    assert not valid(natural, schema), "the natural answer must tempt a violation"
    assert valid(natural, without(schema, tag)), f"the natural answer breaks more than {tag!r}"


@pytest.mark.parametrize("case", JSON_SCHEMA, ids=lambda c: c.id)
def test_the_simulated_engine_repairs_exactly_what_it_enforces(case: Case) -> None:
    schema, tag = schema_of(case), case.data["keyword"]
    natural = natural_json({"messages": case.data["messages"]})
    assert valid(conform(natural, schema), schema)
    assert valid(conform(MISSING, schema), schema)
    assert not valid(conform(natural, schema, ignore=frozenset({tag})), schema), (
        f"ignoring {tag!r} must leave the violation"
    )
    for other in TAGS:
        if other == tag or (other in STRUCTURAL and uses(schema, other)):
            continue
        assert valid(conform(natural, schema, ignore=frozenset({other})), schema), (
            f"ignoring {other!r} must not affect a case about {tag!r}"
        )


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.data.get("kind") == "truncation"], ids=lambda c: c.id
)
def test_truncation_cases_cannot_fit_their_budget(case: Case) -> None:
    import json

    from verifier.simulator.rules import tokenize

    schema = case.data["response_format"]["json_schema"]["schema"]
    answer = json.dumps(conform(natural_json({"messages": case.data["messages"]}), schema))
    assert len(tokenize(answer)) > case.data["max_tokens"] * 2


def test_malformed_cases_are_really_malformed() -> None:
    from verifier.simulator.validation import response_format_problem

    for case in CASES:
        if case.data.get("kind") == "malformed":
            assert response_format_problem(copy.deepcopy(case.data["response_format"])), case.id
