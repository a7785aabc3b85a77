"""Structured output: what a grammar engine really enforces, keyword by keyword.

Each case isolates one JSON-Schema keyword (its ``keyword`` tag) and spells out
a natural answer that breaks it, so an engine that accepts the schema but
ignores the keyword is likely to send a violating answer. Per keyword the
scorecard shows three outcomes: declared coverage (accepted, or honestly
rejected with a 4xx), empirical coverage (the output is valid), and silent
acceptance (accepted, and the output violates the schema): the worst.

Codes of a constrained case (json_schema strict or not, json_object):
    ``empty_output``, ``not_json``, ``fenced_json``, ``extra_text``,
    ``truncated_json``, ``schema_mismatch`` (names the violated keyword),
    ``not_an_object`` (json_object), ``malformed_response``; a 4xx is ``rejected``
    (unsupported, never a pass).
Malformed response_format (must be a 4xx with an error object):
    ``malformed_format_accepted`` (200), ``malformed_format_5xx``,
    ``malformed_format_hang`` (no answer at all), ``rejected_without_error_object``.
Truncation (an answer cut by max_tokens): ``truncated_without_length``.

A constrained answer cut by max_tokens with ``finish_reason: length`` says
nothing about enforcement: the case is an ``error`` (``max_tokens_reached``,
raise ``max_tokens``), never a failure, unless something else is wrong with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema import exceptions as jsonschema_exceptions

from ..cases.rotation import structured_case
from ..errors import CaseDataError, EndpointTimeout
from ..outcome import CaseRecord, Finding, Outcome, Status
from ..protocol.answers import ChatResult
from ..protocol.apis import API_NAMES, TITLES
from ..protocol.requests import Chat, Exchange, together
from ..stats import rate
from .registry import QUICK, family
from .support.common import (
    excerpt,
    hang_finding,
    parse_json_output,
    rejected,
    rejection_findings,
    schema_findings,
    unsupported,
)
from .support.cross_api import JSON_KINDS, agreement, json_answer
from .support.evidence import evidence_findings
from .support.paired import case_outcome, paired_accuracy

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..config import RunConfig
    from .registry import RunContext


def kind_of(case: Case) -> str:
    """constrained, malformed or truncation."""
    return str(case.data.get("kind", "constrained"))


def mode_of(case: Case) -> str:
    """strict, non_strict or json_object (how the format was asked for)."""
    response_format = case.data["response_format"]
    if response_format.get("type") == "json_object":
        return "json_object"
    strict = (response_format.get("json_schema") or {}).get("strict") is True
    return "strict" if strict else "non_strict"


def case_schema(case: Case) -> Any:
    """The JSON Schema the case's output must satisfy (any object, for json_object)."""
    response_format = case.data["response_format"]
    if response_format.get("type") == "json_object":
        return {"type": "object"}
    return response_format["json_schema"]["schema"]


def check_case(case: Case) -> None:
    """A case's schema must be valid JSON Schema: a broken case is not the endpoint's fault."""
    if kind_of(case) == "malformed":
        return
    try:
        Draft202012Validator.check_schema(case_schema(case))
    except jsonschema_exceptions.SchemaError as exc:
        path = "$.response_format.json_schema.schema" + exc.json_path[1:]
        raise CaseDataError(
            case.source, None, f"{path}: not a valid JSON Schema: {exc.message}"
        ) from None


def output_findings(case: Case, result: ChatResult, attempt: str) -> Iterator[Finding]:
    """Findings for one accepted answer to a constrained or truncation case (pure)."""
    broken = evidence_findings(result, attempt)
    choice = result.choice
    if broken or choice is None:
        yield from broken
        return
    parsed = parse_json_output(choice.content)
    if kind_of(case) == "truncation" and parsed.code in ("truncated_json", "empty_output"):
        if choice.finish_reason != "length":
            yield Finding(
                "truncated_without_length",
                f"the JSON stops early but finish_reason is {choice.finish_reason!r}, not 'length'",
                "$.choices[0].finish_reason",
                expected="length",
                actual=choice.finish_reason,
                attempt=attempt,
            )
        return
    if parsed.code is not None:
        yield Finding(parsed.code, parsed.detail, attempt=attempt)
    if not parsed.found:
        return
    if mode_of(case) == "json_object":
        if not isinstance(parsed.value, dict):
            yield Finding(
                "not_an_object",
                f"json_object asks for an object, the output is a {type(parsed.value).__name__}",
                attempt=attempt,
            )
        return
    yield from schema_findings(
        case_schema(case), parsed.value, code="schema_mismatch", attempt=attempt
    )


def cut_by_max_tokens(case: Case, result: ChatResult) -> bool:
    """A constrained answer that stopped at max_tokens before its JSON document closed."""
    choice = result.choice
    if kind_of(case) != "constrained" or choice is None or choice.finish_reason != "length":
        return False
    return parse_json_output(choice.content).code in ("truncated_json", "empty_output")


def malformed_findings(result: ChatResult, attempt: str) -> list[Finding]:
    """A malformed response_format must be rejected with a 4xx and an error object (pure)."""
    wrong = rejection_findings(result, "an invalid response_format", "malformed_format", attempt)
    if wrong:
        return wrong
    if result.error_object is None:
        return [
            Finding(
                "rejected_without_error_object",
                f"rejected with HTTP {result.status} but no OpenAI-shaped error object",
                actual=excerpt(str(result.body), 200),
                attempt=attempt,
            )
        ]
    return []


def _request(case: Case, ctx: RunContext) -> dict[str, Any]:
    data = case.data
    return ctx.request(
        messages=data["messages"],
        response_format=data["response_format"],
        max_tokens=data.get("max_tokens", 512),
    )


def _violated(findings: Iterable[Finding]) -> list[str]:
    return sorted(
        {next(iter(f.expected)) for f in findings if f.code == "schema_mismatch" and f.expected}
    )


def _run_malformed(case: Case, ctx: RunContext) -> Exchange:
    metrics: dict[str, Any] = {"requests": 1, "keyword": case.data["keyword"], "kind": "malformed"}
    try:
        result = yield Chat(_request(case, ctx), "malformed", keep_persistent_5xx=True)
    except EndpointTimeout as exc:
        hang = hang_finding(exc, "a malformed response_format", "malformed_format")
        return Outcome.from_findings([hang], metrics=metrics)
    metrics["status"] = result.status
    evidence = {"status": result.status, "body": excerpt(str(result.body), 300)}
    return Outcome.from_findings(
        malformed_findings(result, "malformed"), metrics=metrics, evidence=evidence
    )


def _row() -> dict[str, Any]:
    return {"cases": 0, "accepted": 0, "rejected": 0, "valid": 0, "silent": 0}


def _count_malformed(malformed: dict[str, int], status: str, codes: set[str]) -> None:
    malformed["cases"] += 1
    malformed["rejected_4xx"] += status == "pass"
    malformed["accepted"] += "malformed_format_accepted" in codes
    malformed["server_error"] += "malformed_format_5xx" in codes
    malformed["no_error_object"] += "rejected_without_error_object" in codes


def _count_constrained(row: dict[str, Any], status: str, metrics: Mapping[str, Any]) -> None:
    row["cases"] += 1
    if not metrics.get("accepted", True):
        row["rejected"] += 1
        return
    row["accepted"] += 1
    if status == "pass":
        row["valid"] += 1
    else:
        row["silent"] += 1


def _with_rates(table: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    for row in table.values():
        row["declared_coverage"] = rate(row["accepted"], row["cases"])
        row["empirical_coverage"] = rate(row["valid"], row["accepted"])
        row["silent_acceptance"] = rate(row["silent"], row["accepted"])
    return dict(sorted(table.items()))


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keywords, modes, malformed and truncation handling, agreement across APIs (pure)."""
    records = list(records)
    keywords: dict[str, dict[str, Any]] = {}
    modes: dict[str, dict[str, Any]] = {}
    violated: Counter[str] = Counter()
    malformed = dict.fromkeys(
        ("cases", "rejected_4xx", "accepted", "server_error", "no_error_object"), 0
    )
    truncation = {"cases": 0, "passed": 0, "without_length": 0}
    cases: dict[str, dict[str, Any]] = {}
    for record in records:
        metrics = record.outcome.metrics
        status = record.status
        # Errors, and cases not sent (an API with no words for the case, or serving no
        # structured output), say nothing of what the endpoint accepts.
        if status == "error" or (status == "unsupported" and "accepted" not in metrics):
            continue
        kind = metrics.get("kind", "constrained")
        codes = {f.code for f in record.outcome.findings}
        if kind == "malformed":
            _count_malformed(malformed, status, codes)
        elif kind == "truncation":
            truncation["cases"] += 1
            truncation["passed"] += status == "pass"
            truncation["without_length"] += "truncated_without_length" in codes
        else:
            if metrics.get("accepted", True) and status in ("pass", "fail"):
                cases[record.id] = case_outcome(metrics.get("keyword", "?"), status == "pass")
            _count_constrained(
                keywords.setdefault(metrics.get("keyword", "?"), _row()), status, metrics
            )
            _count_constrained(modes.setdefault(metrics.get("mode", "?"), _row()), status, metrics)
            violated.update(metrics.get("violated", []))
    silent = sorted(
        ((k, r["silent"]) for k, r in keywords.items() if r["silent"]),
        key=lambda kv: (-kv[1], kv[0]),
    )
    # Accuracy, per case: an accepted schema whose every answer validated, by keyword; so
    # that a later run's --baseline can pair its cases with these.
    accuracy: dict[str, Any] = {"cases": dict(sorted(cases.items()))}
    if baseline is not None:
        accuracy["paired"] = paired_accuracy(cases, baseline)
    return {
        "accuracy": accuracy,
        "keywords": _with_rates(keywords),
        "silent_acceptance": [{"keyword": k, "cases": n} for k, n in silent],
        "violated_keywords": dict(sorted(violated.items(), key=lambda kv: (-kv[1], kv[0]))),
        "modes": _with_rates(modes),
        "malformed": malformed,
        "truncation": truncation,
        # Only constrained cases have one answer to compare: truncation and malformed cases
        # are held to how they end or are refused.
        **agreement(
            (r for r in records if r.outcome.metrics.get("kind", "constrained") == "constrained"),
            JSON_KINDS,
        ),
    }


def cost(case: Case) -> float:
    """One request; refused at once when its response_format is malformed."""
    return QUICK if kind_of(case) == "malformed" else 1.0


def _evidence(result: ChatResult, name: str) -> dict[str, Any]:
    choice = result.choice
    return {
        "attempt": name,
        "content": excerpt(choice.content if choice else None),
        "finish_reason": choice.finish_reason if choice else None,
    }


def _answer(result: ChatResult) -> dict[str, Any]:
    """An answer's JSON value for the cross-API comparison; none when it is not JSON."""
    parsed = parse_json_output(result.choice.content if result.choice else None)
    return {"answer": json_answer(parsed.value)} if parsed.found else {}


def _cut_outcome(cut: int, repeats: int, metrics: Mapping[str, Any]) -> Outcome:
    return Outcome(
        Status.ERROR,
        code="max_tokens_reached",
        message=f"{cut} of {repeats} answers stopped at max_tokens (finish_reason length) "
        "before the JSON closed: enforcement cannot be judged; give the case a larger "
        "max_tokens",
        metrics=metrics,
    )


def extra_cases(run: RunConfig) -> tuple[list[Case], str, str] | None:
    """``--generated N``: N schemas generated from the run's seed, as cases."""
    if not run.generated:
        return None
    from ..cases.generated import generated_cases

    cases, digest = generated_cases(run.generated, run.generation_seed)
    return cases, "structured_output/generated", digest


def needs(run: RunConfig) -> set[str]:
    """Whether the other APIs serve structured output, when the run may go through them."""
    return set() if run.apis == ("chat",) else {"formats"}


@family(
    "structured_output",
    check_case=check_case,
    summarize=summarize,
    cost=cost,
    extra_cases=extra_cases,
    apis=API_NAMES,
    needs=needs,
    rotate=structured_case,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """JSON Schema-constrained output: parsed strictly and validated with jsonschema."""
    if (unserved := ctx.formats.get(case.api)) is not None:
        return unsupported(f"{TITLES[case.api]} serves no structured output: {unserved}", {})
    if kind_of(case) == "malformed":
        return (yield from _run_malformed(case, ctx))
    data = case.data
    stream = bool(data.get("stream", False))
    request = _request(case, ctx)
    repeats = ctx.repeats_for(case.family)
    findings: list[Finding] = []
    valid = cut = 0
    evidence: dict[str, Any] = {}
    # The first whole answer, for the cross-API comparison.
    answer: dict[str, Any] | None = None
    base = {"keyword": data["keyword"], "kind": kind_of(case), "mode": mode_of(case)}
    asked = [
        Chat(request, f"{'stream' if stream else 'non-stream'}-{n}", stream=stream)
        for n in range(1, repeats + 1)
    ]
    for number, chat in enumerate(together(asked), 1):
        name = chat.name
        result = yield chat
        if not result.ok:
            metrics = {**base, "requests": number, "accepted": False}
            return rejected("response_format", result, metrics)
        if cut_by_max_tokens(case, result):
            cut += 1
            continue
        found = list(output_findings(case, result, name))
        findings.extend(found)
        evidence = evidence or (_evidence(result, name) if found else {})
        valid += not found
        if answer is None and not ctx.sampled and base["kind"] == "constrained":
            answer = _answer(result)
    metrics = {
        **base,
        "requests": repeats,
        "accepted": True,
        "valid": valid,
        "violated": _violated(findings),
        **(answer or {}),
    }
    if cut and not findings:
        return _cut_outcome(cut, repeats, metrics)
    return Outcome.from_findings(findings, metrics=metrics, evidence=evidence)
