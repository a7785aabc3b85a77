"""The simulated grammar engine: a valid instance close to the natural answer, or a chosen gap."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from verifier.simulator.conform import MISSING, conform, example_for_pattern


def valid(value: object, schema: object) -> bool:
    return Draft202012Validator(
        schema, format_checker=Draft202012Validator.FORMAT_CHECKER
    ).is_valid(value)


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


def test_one_of_drops_what_makes_two_branches_match() -> None:
    schema = {"type": "object", "oneOf": [{"required": ["email"]}, {"required": ["phone"]}]}
    value = conform({"email": "a@x.io", "phone": "+44"}, schema, ignore=frozenset({"type"}))
    assert value == {"email": "a@x.io"}


def test_all_of_parts_constrain_properties_the_rest_adds() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {}},
        "required": ["n"],
        "allOf": [{"properties": {"n": {"type": "integer"}}}],
    }
    assert valid(conform(MISSING, schema), schema)


def test_max_properties_keeps_declared_requirements() -> None:
    schema = {"type": "object", "required": ["event"], "maxProperties": 2}
    value = conform({"event": "click", "a": "1", "b": "2"}, schema, ignore=frozenset({"required"}))
    assert value == {"event": "click", "a": "1"}


def test_enum_membership_tells_true_from_one() -> None:
    assert conform(True, {"enum": [1, 2]}) == 1
