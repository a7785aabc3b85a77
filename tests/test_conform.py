"""The simulated grammar engine: a valid instance close to the natural answer, or a chosen gap."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from verifier.cases import load_corpus
from verifier.checks.structured_output import case_schema
from verifier.simulator.conform import MISSING, conform, example_for_pattern
from verifier.simulator.model import natural_json

CASES = load_corpus(["structured_output"]).cases


def valid(value: object, schema: object) -> bool:
    return Draft202012Validator(
        schema, format_checker=Draft202012Validator.FORMAT_CHECKER
    ).is_valid(value)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_corpus_case_conforms_from_its_natural_answer_and_from_nothing(case: object) -> None:
    schema = case_schema(case)  # type: ignore[arg-type]
    natural = natural_json({"messages": case.data["messages"]})  # type: ignore[attr-defined]
    assert natural is not MISSING, "each case spells out its natural answer"
    assert not valid(natural, schema) or case.id == "basic-object", (
        "the natural answer tempts a violation"
    )  # type: ignore[attr-defined]
    assert valid(conform(natural, schema), schema)
    assert valid(conform(MISSING, schema), schema)


def test_conform_keeps_what_fits() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "maxItems": 2}}}
    assert conform({"xs": [1, 2, 3], "keep": "me"}, schema) == {"xs": [1, 2], "keep": "me"}


def test_an_ignored_keyword_is_not_enforced() -> None:
    schema = {"type": "array", "items": {"type": "string"}, "maxItems": 2}
    natural = ["a", "b", "c"]
    assert conform(natural, schema, ignore=frozenset({"maxItems"})) == natural


@pytest.mark.parametrize(
    "pattern",
    [r"^[A-Z]{3}$", r"^\d{4}-\d{2}$", r"^(ab|cd)+x?$", r"^[^0-9]+\.txt$", r"\w+@\w+\.com"],
)
def test_pattern_examples_match(pattern: str) -> None:
    import re

    assert re.search(pattern, example_for_pattern(pattern))
