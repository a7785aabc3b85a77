"""Answers against the OpenAI answer schemas: the shape check every family's answers get (pure).

The executor runs it on every answer a case got (the outcome's ``shapes`` metric); the wire
family grades by it.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
from collections.abc import Iterator
from typing import Any

from ... import resources
from ...outcome import Finding
from ...protocol.answers import ChatResult
from .common import excerpt

MAX_SHAPE_FINDINGS = 5
# Free text in answers: the answer schemas ask of these only a string (``id``: a non-empty
# one), so an answer's shape does not depend on what they say.
FREE_TEXT = frozenset(
    {"id", "model", "system_fingerprint", "content", "reasoning_content", "refusal", "arguments"}
)
# Each API's schemas: of an error body, of a stream's event (chunk), of a whole answer. A
# Messages error body has the shape of its stream's error event.
API_SCHEMAS = {
    "chat": ("error", "chat_completion_chunk", "chat_completion"),
    "messages": ("messages_event", "messages_event", "messages_answer"),
    "responses": ("error", "responses_event", "responses_answer"),
}
ANSWER_SCHEMAS = tuple(dict.fromkeys(name for names in API_SCHEMAS.values() for name in names))
# The keywords whose value a number is compared with.
COMPARED = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const", "enum"}
)
# Skeletons of answers whose shape passed, per schema: answers differ mostly in their text and
# their counts (a stream's chunks only in their text), so few of them need validating.
_SHAPES_PASSED: dict[str, set[str]] = {}


def skeleton(value: Any, bounds: tuple[float, ...] | None = None) -> Any:
    """`value` reduced to what its validity against the answer schemas depends on.

    The free text of :data:`FREE_TEXT` keys becomes "x" (or "" if empty); with `bounds` (every
    number the schemas compare with), a number becomes its class: integral or not, and where
    it lies among the bounds. Two values with the same skeleton are both valid or both not.
    """
    if isinstance(value, dict):
        return {
            key: ("x" if item else "")
            if key in FREE_TEXT and isinstance(item, str)
            else skeleton(item, bounds)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [skeleton(item, bounds) for item in value]
    if bounds is not None and type(value) in (int, float) and math.isfinite(value):
        kind = "int" if type(value) is int else "integral" if value.is_integer() else "fraction"
        # bisect's two sides tell below, on and above each bound apart.
        return f"{kind}:{bisect.bisect_left(bounds, value)}:{bisect.bisect_right(bounds, value)}"
    return value


@functools.cache
def number_bounds() -> tuple[float, ...] | None:
    """Every number the answer schemas (and those they refer to) compare a number with.

    None when one of them asks for ``multipleOf``: then no class of numbers is safe, and
    numbers stay as they are in a skeleton.
    """
    found: set[float] = set()
    seen: set[str] = set()
    todo = list(ANSWER_SCHEMAS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for key, value in _items(resources.schema(name)):
            if key == "multipleOf":
                return None
            if key == "$ref" and isinstance(value, str) and ".schema.json" in value:
                todo.append(value.partition(".schema.json")[0].rpartition("/")[2])
            if key in COMPARED:
                values = value if key == "enum" and isinstance(value, list) else [value]
                # bool is an int to Python, but no number to JSON Schema.
                found.update(v for v in values if type(v) in (int, float))
    return tuple(sorted(found))


def _items(schema: Any) -> Iterator[tuple[str, Any]]:
    """Every (keyword, value) pair in a schema, at any depth."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key, value
            yield from _items(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _items(item)


def _shape(
    schema: str, instance: Any, code: str, attempt: str | None, where: str = "$"
) -> list[Finding]:
    passed = _SHAPES_PASSED.setdefault(schema, set())
    key = json.dumps(skeleton(instance, number_bounds()), sort_keys=True, default=str)
    if key in passed:
        return []
    errors = sorted(
        resources.validator(schema).iter_errors(instance), key=lambda e: list(map(str, e.path))
    )
    if not errors:
        passed.add(key)
    findings = []
    for error in errors[:MAX_SHAPE_FINDINGS]:
        path = where + error.json_path[1:]
        this = "finish_reason_invalid" if path.endswith(".finish_reason") else code
        findings.append(
            Finding(
                this,
                f"{path}: {error.message}",
                path,
                actual=_small(error.instance),
                attempt=attempt,
            )
        )
    return findings


def _small(value: Any) -> Any:
    text = json.dumps(value, default=str)
    return value if len(text) <= 200 else text[:200] + "..."


def shape_findings(result: ChatResult, attempt: str | None = None) -> list[Finding]:
    """Every answer's body (or chunks) against its API's schemas; error bodies too (pure)."""
    error, event, whole = API_SCHEMAS[result.api]
    if not result.ok:
        if isinstance(result.body, dict):
            return _shape(error, result.body, "error_shape", attempt)
        return [
            Finding(
                "error_shape",
                f"the error body is not a JSON object: {excerpt(str(result.body), 80)!r}",
                attempt=attempt,
            )
        ]
    if result.stream and result.chunks:
        findings = []
        for number, chunk in enumerate(result.chunks):
            if isinstance(chunk, dict):
                findings += _shape(event, chunk, "chunk_shape", attempt, f"$[chunk {number}]")
            if len(findings) >= MAX_SHAPE_FINDINGS:
                break
        return findings[:MAX_SHAPE_FINDINGS]
    if isinstance(result.body, dict):
        return _shape(whole, result.body, "response_shape", attempt)
    return []


def shape_summary(results: list[ChatResult]) -> dict[str, Any]:
    """How many of a case's answers broke the OpenAI schemas, by code, with the first message."""
    codes: dict[str, int] = {}
    first = None
    for result in results:
        for finding in shape_findings(result):
            codes[finding.code] = codes.get(finding.code, 0) + 1
            first = first or finding.message
    return {
        "answers": len(results),
        "violations": sum(codes.values()),
        "codes": codes,
        "first": first,
    }
