"""Bad requests derived from the request schema, and valid edge requests (pure).

Valid requests (:data:`BASES`) hold between them every field of
``schemas/chat_request.schema.json``. Every field of each is mutated in each way
:func:`_mutations` knows (missing, null, another type, empty, out of range, not an integer, a
value no enumeration or pattern allows, oversize, a URL that is neither http nor a well-formed
data URL), and a mutation is kept when the schema rejects the request it makes: the contract,
not a list, decides what is bad. Three more are made on the body's bytes, which JSON Schema
cannot express: a body cut short, a duplicated key, a non-finite number. Each bad request is
the smallest base that holds its field, with one mutation: nothing else in it can be what the
endpoint objects to.

:func:`edge_requests` are requests the schema accepts at its boundaries (non-ASCII property
names in a tool's parameters, an empty description, a tool name of 64 characters, a large
enumeration): an endpoint must answer them.

``--negative N`` takes N of them (default: none), spread over the fields in a seeded order,
so that any N covers as many fields as it can; the same seed gives the same cases.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import random
import re
from collections.abc import Iterator
from typing import Any

from jsonschema.exceptions import best_match

from .. import resources
from .corpus import Case

# Where the run puts the model it tests; a mutation of the field replaces this placeholder.
MODEL = "$MODEL"
USER = {"role": "user", "content": "Say hi."}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    },
}
# A 1x1 PNG: small enough for every vision endpoint, decodable by every one.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
    "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}

# The valid requests whose fields are mutated, by name (what one needs of the endpoint: NEEDS).
BASES: dict[str, dict[str, Any]] = {
    "plain": {"model": MODEL, "messages": [USER], "max_tokens": 8, "user": "verifier"},
    "sampling": {
        "model": MODEL,
        "messages": [USER],
        "max_completion_tokens": 8,
        "temperature": 0.7,
        "top_p": 0.9,
        "n": 1,
        "seed": 7,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "logit_bias": {"15": 1},
        "stop": ["\n\n"],
    },
    "logprobs": {
        "model": MODEL,
        "messages": [USER],
        "max_tokens": 4,
        "logprobs": True,
        "top_logprobs": 2,
    },
    "stream": {
        "model": MODEL,
        "messages": [USER],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "tools": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "max_tokens": 32,
        "tools": [WEATHER],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    },
    "named_tool": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "max_tokens": 32,
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
    "tool_turn": {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are brief.", "name": "setup"},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "12 C, rain"},
        ],
        "max_tokens": 16,
        "tools": [WEATHER],
    },
    "parts": {
        "model": MODEL,
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Say hi."}]},
        ],
        "max_tokens": 8,
    },
    "image": {
        "model": MODEL,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What colour is this?"},
                    {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
                ],
            }
        ],
        "max_tokens": 8,
    },
    "json_schema": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Answer with a JSON object."}],
        "max_tokens": 16,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "description": "One field.",
                "schema": ANSWER_SCHEMA,
                "strict": True,
            },
        },
    },
    "json_object": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Answer with a JSON object."}],
        "max_tokens": 16,
        "response_format": {"type": "json_object"},
    },
}
# What a base needs of the endpoint beyond chat.
NEEDS = {"image": "vision"}
# Subtrees that are JSON Schemas of their own (a tool's parameters, a response schema): their
# insides are the model's contract with the caller, not the request's shape.
OPAQUE = ("parameters", "schema")


# The replacement that deletes a field.
ABSENT = object()


def _mutations(value: Any, in_object: bool) -> Iterator[tuple[str, Any]]:
    """(kind, replacement) for a field's value; ``missing`` is the :data:`ABSENT` marker."""
    if in_object:
        yield "missing", ABSENT
    yield "null", None
    other = {str: 42, bool: "true", int: "1", float: "0.5", list: {"0": 1}, dict: [1]}
    yield "wrong_type", other.get(type(value), "x")
    if isinstance(value, str):
        yield "empty", ""
        yield "unknown_value", "no-such-value"
        yield "bad_pattern", "not a name!"
        yield "oversize", "x" * 65
        if value.startswith(("http", "data:")):
            yield "non_http_url", "ftp://example.invalid/image.png"
            yield "bad_data_url", "data:image/png;base64,@@@not base64"
    elif isinstance(value, list):
        yield "empty", []
        if value:
            yield "oversize", [copy.deepcopy(value[0]) for _ in range(129)]
    elif isinstance(value, dict):
        yield "empty", {}
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield "below_range", -3
        yield "above_range", 10**9
        if isinstance(value, int):
            yield "fraction", 1.5


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) below `value`, parents first; opaque subtrees not entered."""
    if path:
        yield path, value
    if path and path[-1] in OPAQUE:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def field_name(path: tuple[Any, ...]) -> str:
    """A path as a field of the schema: ``messages[].content[].image_url.url``."""
    text = ""
    for step in path:
        text += "[]" if isinstance(step, int) else f".{step}" if text else step
    return text


def _replaced(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    if value is ABSENT:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return changed


def rejected_by_schema(body: Any) -> str | None:
    """The schema's complaint about a request body (its JSON path and message), or None."""
    # The schema sees a model where the run fills one in (any non-empty string does).
    error = best_match(resources.validator("chat_request").iter_errors(with_model(body, "m")))
    return None if error is None else f"{error.json_path}: {error.message}"


def with_model(body: Any, model: str) -> Any:
    """`body` with `model` where the :data:`MODEL` placeholder is (a mutated model stays)."""
    if isinstance(body, dict) and body.get("model") == MODEL:
        return {**body, "model": model}
    return body


@functools.cache
def bad_requests() -> tuple[dict[str, Any], ...]:
    """Every bad request the bases and mutations give, the schema-rejected ones only.

    Each is ``{"id", "field", "mutation", "base", "request" | "raw_body", "why"}``, in a fixed
    order; a field that several bases hold is mutated in the first base that holds it. Made
    once per process (validating every candidate takes a second); not to be changed.
    """
    found: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for base_name, base in BASES.items():
        for path, value in _paths(base):
            field = field_name(path)
            in_object = isinstance(path[-1], str)
            for kind, replacement in _mutations(value, in_object):
                if (field, kind) in seen:
                    continue
                body = _replaced(base, path, replacement)
                why = rejected_by_schema(body)
                if why is None:
                    continue
                seen.add((field, kind))
                found.append(_case(base_name, field, kind, {"request": body}, why))
    for kind, raw, why in _raw_mutations(BASES["plain"]):
        found.append(_case("plain", "(body)", kind, {"raw_body": raw}, why))
    return tuple(found)


def _raw_mutations(base: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    text = json.dumps(base)
    yield "cut_short", text[: len(text) // 2], "the body ends in the middle of the JSON"
    # Two values for one key: JSON's RFC says names should be unique, and parsers disagree on
    # which one wins; the second is invalid, so no reading of the body is a valid request.
    doubled = text[:-1] + ', "messages": 5}'
    yield "duplicate_key", doubled, "messages is given twice, the second time as a number"
    nan = json.dumps({**base, "temperature": math.nan})
    yield "non_finite", nan, "temperature is NaN, which JSON has no syntax for"


def _case(base: str, field: str, kind: str, body: dict[str, Any], why: str) -> dict[str, Any]:
    where = field.replace("[]", ".n")
    slug = re.sub(r"[^a-z0-9]+", "-", f"{base}-{where}-{kind}".lower()).strip("-")
    case_id = f"negative-{slug}"[:100]
    return {"id": case_id, "field": field, "mutation": kind, "base": base, **body, "why": why}


def edge_requests() -> list[dict[str, Any]]:
    """Requests at the schema's boundaries that an endpoint must answer (each schema-valid)."""

    def tool(**function: Any) -> dict[str, Any]:
        return {**BASES["tools"], "tools": [{"type": "function", "function": function}]}

    plain = BASES["plain"]
    edges = [
        (
            "tools[].function.parameters",
            "non_ascii_property",
            tool(
                name="lookup",
                description="Look a word up.",
                parameters={
                    "type": "object",
                    "properties": {"größe": {"type": "string"}, "名前": {"type": "string"}},
                },
            ),
        ),
        ("tools[].function.description", "empty_description", tool(name="lookup", description="")),
        (
            "tools[].function.name",
            "longest_name",
            tool(name="n" * 64, parameters={"type": "object"}),
        ),
        (
            "tools[].function.parameters",
            "large_enum",
            tool(
                name="pick",
                parameters={
                    "type": "object",
                    "properties": {"item": {"enum": [f"item-{i}" for i in range(500)]}},
                },
            ),
        ),
        ("stop", "four_stops", {**plain, "stop": ["a", "b", "c", "d"]}),
        ("temperature", "temperature_bounds", {**plain, "temperature": 2}),
        ("top_logprobs", "top_logprobs_zero", {**plain, "logprobs": True, "top_logprobs": 0}),
        (
            "messages[].content",
            "long_system_prompt",
            {**plain, "messages": [{"role": "system", "content": "Be brief. " * 400}, USER]},
        ),
    ]
    return [
        _case("edge", field, kind, {"request": body}, "valid at the schema's boundary")
        for field, kind, body in edges
    ]


@functools.cache
def schema_fields() -> tuple[str, ...]:
    """Every field the request schema declares, as :func:`field_name` writes them."""
    found: set[str] = set()
    schema = resources.schema("chat_request")

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            walk(_resolve(schema, node["$ref"]), path)
        for key, child in (node.get("properties") or {}).items():
            name = f"{path}.{key}" if path else key
            found.add(name)
            if key not in OPAQUE:
                walk(child, name)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        for keyword in ("anyOf", "oneOf", "allOf"):
            for branch in node.get(keyword) or []:
                walk(branch, path)
        for keyword in ("then", "else"):
            walk(node.get(keyword), path)

    walk(schema, "")
    return tuple(sorted(found))


def _resolve(schema: dict[str, Any], ref: str) -> Any:
    node: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def chosen(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` of the bad and edge requests, spread over the fields.

    Round-robin over the fields, each field's own cases and the fields' order shuffled by
    `seed`: any `count` covers as many fields as it can, and the same seed the same cases.
    """
    rng = random.Random(seed)
    by_field: dict[str, list[dict[str, Any]]] = {}
    for case in [*bad_requests(), *edge_requests()]:
        by_field.setdefault(case["field"], []).append(case)
    queues = []
    for field in sorted(by_field):
        cases = by_field[field]
        rng.shuffle(cases)
        queues.append(cases)
    rng.shuffle(queues)
    picked: list[dict[str, Any]] = []
    while len(picked) < count and any(queues):
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(queue.pop())
    return picked


def negative_cases(count: int, seed: int) -> tuple[list[Case], str]:
    """`count` generated wire cases (``check: generated``) and the sha256 that identifies them."""
    cases = []
    for number, data in enumerate(chosen(count, seed), start=1):
        expect = "accept" if data["base"] == "edge" else "reject"
        entry = {**data, "check": "generated", "expect": expect}
        if data["base"] in NEEDS:
            entry["needs"] = NEEDS[data["base"]]
        cases.append(Case("wire", data["id"], entry, f"negative(seed={seed}):{number}"))
    digest = hashlib.sha256(json.dumps([c.data for c in cases], sort_keys=True).encode())
    return cases, digest.hexdigest()
