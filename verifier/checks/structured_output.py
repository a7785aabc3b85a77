"""Structured output: ``response_format`` json_schema answers must be exactly one valid document.

Codes:
    ``empty_output``        no content
    ``not_json``            content is not JSON
    ``fenced_json``         JSON wrapped in a markdown fence
    ``extra_text``          JSON with text before or after it
    ``truncated_json``      JSON that stops before it is closed
    ``schema_mismatch``     parsed, but invalid against the schema (the keyword is named)
    ``malformed_response``  the answer itself is not a readable chat completion
    ``rejected`` (unsupported) the endpoint declined the response_format with a 4xx
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema import exceptions as jsonschema_exceptions

from ..endpoint.response import ChatResult
from ..errors import CaseDataError
from ..outcome import Finding, Outcome, Status
from .common import excerpt, parse_json_output, schema_findings, unreadable_findings
from .registry import family

if TYPE_CHECKING:
    from ..cases import Case
    from ..runner import RunContext


def case_schema(case: Case) -> Any:
    """The JSON Schema the case's output must satisfy."""
    return case.data["response_format"]["json_schema"]["schema"]


def check_case(case: Case) -> None:
    """The case's schema must be valid JSON Schema: a broken case is not the endpoint's fault."""
    try:
        Draft202012Validator.check_schema(case_schema(case))
    except jsonschema_exceptions.SchemaError as exc:
        path = "$.response_format.json_schema.schema" + exc.json_path[1:]
        raise CaseDataError(
            case.source, None, f"{path}: not a valid JSON Schema: {exc.message}"
        ) from None


def grade(case: Case, result: ChatResult, attempt: str) -> Iterator[Finding]:
    """Findings for one answer to a json_schema case (pure)."""
    broken = unreadable_findings(result, attempt)
    if broken:
        yield from broken
        return
    choice = result.choice
    if choice is None:
        yield Finding("malformed_response", "the answer has no choice", attempt=attempt)
        return
    parsed = parse_json_output(choice.content)
    if parsed.code is not None:
        code = parsed.code
        message = parsed.detail
        if code == "truncated_json" and choice.finish_reason == "length":
            message += " (finish_reason is length: max_tokens was too small for the answer)"
        yield Finding(code, message, attempt=attempt)
    if parsed.found:
        yield from schema_findings(
            case_schema(case), parsed.value, code="schema_mismatch", attempt=attempt
        )


@family("structured_output", check_case=check_case)
def run(case: Case, ctx: RunContext) -> Outcome:
    """JSON Schema-constrained output: parsed strictly and validated with jsonschema."""
    data = case.data
    stream = bool(data.get("stream", False))
    request = ctx.request(
        case,
        messages=data["messages"],
        response_format=data["response_format"],
        max_tokens=data.get("max_tokens", 512),
    )
    repeats = ctx.repeats_for(case.family)
    findings: list[Finding] = []
    valid = 0
    evidence: dict[str, Any] = {}
    for number in range(1, repeats + 1):
        name = f"{'stream' if stream else 'non-stream'}-{number}"
        result = ctx.send(case, request, stream=stream, name=name)
        if not result.ok:
            error = result.error_object or {}
            reason = error.get("message") if isinstance(error, dict) else None
            return Outcome(
                Status.UNSUPPORTED,
                code="rejected",
                message=f"unsupported: response_format rejected with HTTP {result.status}: "
                f"{reason or result.body!s:.200}",
                metrics={"requests": number},
            )
        found = list(grade(case, result, name))
        if found:
            findings.extend(found)
            if not evidence:
                choice = result.choice
                evidence = {
                    "attempt": name,
                    "content": excerpt(choice.content if choice else None),
                    "finish_reason": choice.finish_reason if choice else None,
                }
        else:
            valid += 1
    return Outcome.from_findings(
        findings,
        metrics={"requests": repeats, "valid": valid, "keyword": data.get("keyword")},
        evidence=evidence,
    )
