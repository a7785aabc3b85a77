"""Pure grading helpers shared by several families (no I/O, no pytest)."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from ...errors import EndpointTimeout
from ...jsontext import first_json
from ...outcome import Finding, Outcome, Status
from ...protocol.answers import ChatResult
from ...stats import rate

# How many disagreeing cases a baseline comparison lists.
SHOWN_DISAGREEMENTS = 10

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\s*$", re.DOTALL)
# A fence opened and never closed: an answer cut at max_tokens inside its fence.
_OPEN_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*)$", re.DOTALL)


@dataclasses.dataclass(frozen=True, slots=True)
class ParsedJSON:
    """The result of reading model output as one JSON document.

    ``value`` is set when a JSON document was found; ``code`` is None when the
    output was exactly that document (whitespace aside), else it names how the
    output deviated: ``fenced_json``, ``extra_text``, ``not_json``, ``empty_output``.
    """

    value: Any = None
    found: bool = False
    code: str | None = None
    detail: str = ""


def parse_json_output(text: str | None) -> ParsedJSON:
    """Read `text` as exactly one JSON document, saying how it deviates when it does not."""
    if text is None or not text.strip():
        return ParsedJSON(code="empty_output", detail="the output is empty")
    try:
        return ParsedJSON(value=json.loads(text), found=True)
    except json.JSONDecodeError as exc:
        error = exc
    fenced = _FENCE.match(text)
    if fenced:
        try:
            value = json.loads(fenced.group("body"))
            return ParsedJSON(value, True, "fenced_json", "the JSON is wrapped in a markdown fence")
        except json.JSONDecodeError:
            pass
    if _is_truncated(text):
        return ParsedJSON(code="truncated_json", detail=f"the JSON stops early: {error.msg}")
    opened = _OPEN_FENCE.match(text)
    if opened and "```" not in opened.group("body") and _is_truncated(opened.group("body")):
        return ParsedJSON(
            code="fenced_json",
            detail="the JSON is wrapped in a markdown fence (and stops early, fence unclosed)",
        )
    found = first_json(text)
    if found is not None:
        start, end, value = found
        before, after = text[:start].strip(), text[end:].strip()
        where = "before" if before else "after"
        extra = before or after
        return ParsedJSON(value, True, "extra_text", f"text {where} the JSON: {extra[:60]!r}")
    return ParsedJSON(code="not_json", detail=f"not JSON: {error.msg} at column {error.colno}")


def _is_truncated(text: str) -> bool:
    """The text opens a JSON object or array and ends before closing it."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return False
    stack: list[str] = []
    in_string = escaped = False
    for char in stripped:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]":
            if not stack or (stack[-1] == "{") != (char == "}"):
                return False
            stack.pop()
            if not stack:
                return False
    return True


@functools.lru_cache(maxsize=4096)
def _compiled(schema_text: str) -> Validator:
    schema = json.loads(schema_text)
    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def compiled_validator(schema: Any) -> Validator:
    """A validator for `schema` (2020-12 unless it says otherwise, formats checked), cached."""
    return _compiled(json.dumps(schema, sort_keys=True))


def schema_findings(
    schema: Any, instance: Any, *, code: str, attempt: str | None = None, prefix: str = "$"
) -> Iterator[Finding]:
    """One finding per JSON Schema error of `instance`, deepest first, naming the keyword."""
    errors = sorted(
        compiled_validator(schema).iter_errors(instance),
        key=lambda e: (-len(e.path), list(map(str, e.path))),
    )
    for error in errors:
        path = prefix + error.json_path[1:]
        yield Finding(
            code=code,
            message=f"{path}: {error.message} (keyword {error.validator!r})",
            json_path=path,
            expected={str(error.validator): error.validator_value},
            actual=error.instance,
            attempt=attempt,
        )


def excerpt(text: str | None, limit: int = 400) -> str | None:
    """`text` cut to `limit` characters, marked when cut."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters]"


def agreement(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """How often this run's per-case values equal a baseline run's, on the cases both have.

    The first disagreements are listed with both values, so a reader sees what differs.
    """
    shared = sorted(set(ours) & set(theirs))
    differ = [c for c in shared if ours[c] != theirs[c]]
    return {
        "cases": len(shared),
        "agreement": rate(len(shared) - len(differ), len(shared)),
        "differ": [
            {"case": c, "here": ours[c], "baseline": theirs[c]}
            for c in differ[:SHOWN_DISAGREEMENTS]
        ],
        "only_here": len(set(ours) - set(theirs)),
        "only_in_baseline": len(set(theirs) - set(ours)),
    }


def hang_finding(exc: EndpointTimeout, what: str, prefix: str) -> Finding:
    """A request that must be refused got no answer at all, after every retry (pure).

    A vendor that holds a request it cannot parse costs every client its whole timeout: the
    finding is the vendor's (``<prefix>_hang``), not a transport error.
    """
    return Finding(f"{prefix}_hang", f"{what} got no answer: {exc.message}")


def rejection_findings(
    result: ChatResult, what: str, prefix: str, attempt: str | None = None
) -> list[Finding]:
    """What a request that must be refused with a 4xx got wrong, if anything (pure).

    `what` names the bad input ("an invalid request"); the codes are ``<prefix>_accepted``
    (a 2xx answer) and ``<prefix>_5xx`` (a server error; the server's message is quoted).
    """
    if result.ok:
        return [
            Finding(
                f"{prefix}_accepted",
                f"{what} was answered HTTP {result.status}",
                expected="4xx",
                actual=result.status,
                attempt=attempt,
            )
        ]
    if result.status >= 500:
        said = (result.error_object or {}).get("message", "")
        return [
            Finding(
                f"{prefix}_5xx",
                f"{what} gave HTTP {result.status}, a server error, not a 4xx"
                + (f": {said!s:.160}" if said else ""),
                expected="4xx",
                actual=result.status,
                attempt=attempt,
            )
        ]
    return []


def unsupported(message: str, metrics: Mapping[str, Any]) -> Outcome:
    """The case does not apply to this endpoint or profile; `message` says why."""
    return Outcome(
        Status.UNSUPPORTED,
        code="unsupported",
        message=f"unsupported: {message}",
        metrics=dict(metrics),
    )


def rejected(what: str, result: ChatResult, metrics: Mapping[str, Any]) -> Outcome:
    """A valid request for `what` was declined: unsupported here, in the server's words."""
    error = result.error_object or {}
    return Outcome(
        Status.UNSUPPORTED,
        code="rejected",
        message=f"unsupported: {what} rejected with HTTP {result.status}: "
        f"{error.get('message') or result.body!s:.200}",
        metrics=dict(metrics),
    )
