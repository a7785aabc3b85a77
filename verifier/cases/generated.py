"""Generated structured-output cases: a hypothesis strategy of JSON Schemas, one keyword each.

`keyword_schemas()` draws ``(keyword, schema)`` pairs, each schema a root object
that exercises one keyword family with random parameters. The project's tests
use it as a property-test strategy; ``--generated N`` draws N of them with a
seed (recorded in the scorecard) and adds them to a run as extra cases, so a
run is reproducible and still explores beyond the hand-written corpus.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .corpus import Case

PATTERNS = (
    "^[A-Z]{3}$",
    "^[0-9]{4}-[0-9]{2}$",
    "^[a-z]+-[0-9]+$",
    "^(red|green|blue)$",
    "^#[0-9a-f]{6}$",
)
FORMATS = ("date", "date-time", "time", "email", "uuid", "ipv4", "ipv6", "uri", "hostname")
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)
small = st.integers(min_value=0, max_value=6)
numbers = st.integers(min_value=-1000, max_value=1000)


def _value_schemas() -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """Schemas of one property value, by the keyword they exercise."""
    scalar_types = st.sampled_from(["string", "integer", "number", "boolean", "null"])
    return {
        "type": scalar_types.map(lambda t: {"type": t}),
        "enum": st.lists(words, min_size=1, max_size=8, unique=True).map(lambda v: {"enum": v}),
        "const": (words | numbers | st.booleans()).map(lambda v: {"const": v}),
        "minLength": small.map(lambda n: {"type": "string", "minLength": n + 1}),
        "maxLength": small.map(lambda n: {"type": "string", "maxLength": n + 1}),
        "pattern": st.sampled_from(PATTERNS).map(lambda p: {"type": "string", "pattern": p}),
        "format": st.sampled_from(FORMATS).map(lambda f: {"type": "string", "format": f}),
        "minimum": numbers.map(lambda n: {"type": "integer", "minimum": n}),
        "maximum": numbers.map(lambda n: {"type": "integer", "maximum": n}),
        "exclusiveMinimum": numbers.map(lambda n: {"type": "number", "exclusiveMinimum": n}),
        "exclusiveMaximum": numbers.map(lambda n: {"type": "number", "exclusiveMaximum": n}),
        "multipleOf": st.integers(2, 12).map(lambda n: {"type": "integer", "multipleOf": n}),
        "minItems": small.map(
            lambda n: {"type": "array", "items": {"type": "integer"}, "minItems": n + 1}
        ),
        "maxItems": small.map(
            lambda n: {"type": "array", "items": {"type": "string"}, "maxItems": n}
        ),
        "uniqueItems": small.map(
            lambda n: {
                "type": "array",
                "items": {"type": "integer"},
                "uniqueItems": True,
                "minItems": n,
            }
        ),
        "anyOf": st.lists(scalar_types, min_size=2, max_size=3, unique=True).map(
            lambda ts: {"anyOf": [{"type": t} for t in ts]}
        ),
        "oneOf": st.just({"oneOf": [{"type": "integer"}, {"type": "string"}]}),
        "not": numbers.map(lambda n: {"type": "integer", "not": {"const": n}}),
        "allOf": st.tuples(numbers, small).map(
            lambda t: {
                "allOf": [{"type": "integer", "minimum": t[0]}, {"maximum": t[0] + 10 + t[1]}]
            }
        ),
        "prefixItems": st.lists(scalar_types, min_size=1, max_size=3).map(
            lambda ts: {"type": "array", "prefixItems": [{"type": t} for t in ts], "items": False}
        ),
    }


def _object_schemas() -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """Root object schemas, by the object keyword they exercise."""
    names = st.lists(words, min_size=2, max_size=4, unique=True)

    def props(keys: list[str]) -> dict[str, Any]:
        return {k: {"type": "string"} for k in keys}

    return {
        "required": names.map(
            lambda ks: {"type": "object", "properties": props(ks), "required": ks[:1]}
        ),
        "additionalProperties": names.map(
            lambda ks: {
                "type": "object",
                "properties": props(ks),
                "required": ks,
                "additionalProperties": False,
            }
        ),
        "minProperties": names.map(
            lambda ks: {"type": "object", "properties": props(ks), "minProperties": len(ks)}
        ),
        "maxProperties": names.map(
            lambda ks: {"type": "object", "properties": props(ks), "maxProperties": 1}
        ),
        "propertyNames": st.just(
            {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "minProperties": 1}
        ),
        "dependentRequired": names.map(
            lambda ks: {
                "type": "object",
                "properties": props(ks),
                "required": ks[:1],
                "dependentRequired": {ks[0]: ks[1:]},
            }
        ),
        "$ref": st.sampled_from(PATTERNS).map(
            lambda p: {
                "type": "object",
                "$defs": {"code": {"type": "string", "pattern": p}},
                "properties": {"value": {"$ref": "#/$defs/code"}},
                "required": ["value"],
                "additionalProperties": False,
            }
        ),
        "if": st.just(
            {
                "type": "object",
                "properties": {"kind": {"enum": ["a", "b"]}, "size": {"type": "integer"}},
                "required": ["kind", "size"],
                "if": {"properties": {"kind": {"const": "a"}}},
                "then": {"properties": {"size": {"minimum": 10}}},
                "else": {"properties": {"size": {"maximum": 5}}},
            }
        ),
    }


def keyword_schemas() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """``(keyword, schema)`` pairs: a root object exercising one keyword family."""

    def wrap(schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"value": schema},
            "required": ["value"],
            "additionalProperties": False,
        }

    values = _value_schemas()
    objects = _object_schemas()
    choices = [st.tuples(st.just(k), s.map(wrap)) for k, s in sorted(values.items())]
    choices += [st.tuples(st.just(k), s) for k, s in sorted(objects.items())]
    return st.one_of(choices)


def draw(count: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """`count` examples of :func:`keyword_schemas`, the same for the same seed."""
    found: list[tuple[str, dict[str, Any]]] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count * 3,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(keyword_schemas())
    def collect(example: tuple[str, dict[str, Any]]) -> None:
        if len(found) < count:
            found.append(example)

    collect()
    return found


def generated_cases(count: int, seed: int) -> tuple[list[Case], str]:
    """`count` generated structured-output cases and the sha256 that identifies them."""
    cases = []
    for number, (keyword, schema) in enumerate(draw(count, seed), start=1):
        case_id = f"generated-{number:04d}"
        data = {
            "id": case_id,
            "keyword": keyword,
            "description": f"generated (seed {seed}): exercises {keyword}",
            "messages": [
                {"role": "system", "content": "You answer with JSON only."},
                {
                    "role": "user",
                    "content": "Reply with a JSON object that satisfies the response format.",
                },
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": f"generated_{number}", "strict": False, "schema": schema},
            },
        }
        cases.append(Case("structured_output", case_id, data, f"generated(seed={seed}):{number}"))
    digest = hashlib.sha256(
        json.dumps([c.data for c in cases], sort_keys=True).encode()
    ).hexdigest()
    return cases, digest
