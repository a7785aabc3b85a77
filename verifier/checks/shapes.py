"""Answers against the OpenAI answer schemas: the shape check every family's answers get (pure).

The executor runs it on every answer a case got (the outcome's ``shapes`` metric); the wire
family grades by it.
"""

from __future__ import annotations

import json
from typing import Any

from .. import resources
from ..outcome import Finding
from ..protocol.answers import ChatResult
from .common import excerpt

MAX_SHAPE_FINDINGS = 5
# Free text in answers: the answer schemas ask of these only a string (``id``: a non-empty
# one), so an answer's shape does not depend on what they say.
FREE_TEXT = frozenset(
    {"id", "model", "system_fingerprint", "content", "reasoning_content", "refusal", "arguments"}
)
# Skeletons (free text reduced to "x" or "") of answers whose shape passed, per schema: a
# stream's chunks differ only in their text, so a stream is validated about once.
_SHAPES_PASSED: dict[str, set[str]] = {}


def skeleton(value: Any) -> Any:
    """`value` with the free text of :data:`FREE_TEXT` keys reduced to "x" (or "" if empty)."""
    if isinstance(value, dict):
        return {
            key: ("x" if item else "")
            if key in FREE_TEXT and isinstance(item, str)
            else skeleton(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    return value


def _shape(
    schema: str, instance: Any, code: str, attempt: str | None, where: str = "$"
) -> list[Finding]:
    passed = _SHAPES_PASSED.setdefault(schema, set())
    key = json.dumps(skeleton(instance), sort_keys=True, default=str)
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
    """Every answer's body (or chunks) against the OpenAI schemas; error bodies too (pure)."""
    if not result.ok:
        if isinstance(result.body, dict):
            return _shape("error", result.body, "error_shape", attempt)
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
                findings += _shape(
                    "chat_completion_chunk", chunk, "chunk_shape", attempt, f"$[chunk {number}]"
                )
            if len(findings) >= MAX_SHAPE_FINDINGS:
                break
        return findings[:MAX_SHAPE_FINDINGS]
    if isinstance(result.body, dict):
        return _shape("chat_completion", result.body, "response_shape", attempt)
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
