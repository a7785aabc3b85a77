"""Cross-API consistency: the same case through each API of one endpoint must answer alike.

A family that runs its cases over more than one API records, on each case it graded, what
its first answer said when the case's answers are deterministic (``metrics.answer``: the tool
calls with their arguments parsed, or the structured answer's JSON value, and the prompt
tokens it billed). Over all the family's records, each case's twins are compared with the
first of them in API order (chat's when chat ran): any difference in what the same request
made the same model say is a translation defect, one code per kind (:data:`CODES`). A twin
that failed on its own is compared too: its own codes say what broke, these say how its
answer differs from its twins'. A twin not graded (an error, unsupported) or without a
deterministic answer (sampled, or repeats that differ) is not compared.

The decision per kind is a ruling of the family (see ``scorecard.build.summarize_family``):
it fails the family when any pair differs. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...outcome import CaseRecord
from ...protocol.apis import API_NAMES, TITLES
from ...stats import rate

# Each kind of disagreement and its code, in the order a pair is examined: a pair whose calls
# differ in whether a tool is called is not also said to differ in which, nor in arguments.
CODES = {
    "call": "cross_api_call_differs",
    "tool": "cross_api_tool_differs",
    "arguments": "cross_api_arguments_differ",
    "json": "cross_api_json_differs",
    "prompt_tokens": "cross_api_prompt_tokens_differ",
}
# What each kind compares, in the disagreement's message.
_SAYS = {
    "call": "whether a tool is called",
    "tool": "which tools are called",
    "arguments": "the call arguments (as JSON values)",
    "json": "the structured answer (as a JSON value)",
    "prompt_tokens": "usage's prompt tokens",
}
# The kinds each family's answers carry.
TOOL_KINDS = ("call", "tool", "arguments", "prompt_tokens")
JSON_KINDS = ("json",)
EXAMPLES = 5
# Why a twin that was not graded is not compared.
_NOT_GRADED = {
    "error": "the twin could not be judged",
    "unsupported": "the twin is unsupported",
}
NO_ANSWER = "the twin has no answer to compare (sampled, repeats that differ, or unreadable)"


def case_id(record: CaseRecord) -> str:
    """The id of the case a record is a twin of (``multiple-3[messages]`` -> ``multiple-3``)."""
    suffix = f"[{record.api}]"
    return record.id.removesuffix(suffix) if record.api != "chat" else record.id


def calls_answer(calls: Iterable[tuple[str, Any]], prompt_tokens: int | None) -> dict[str, Any]:
    """A tool-calling answer as ``metrics.answer`` records it: calls sorted, arguments parsed."""
    ordered = sorted(calls, key=lambda c: (c[0], json.dumps(c[1], sort_keys=True)))
    return {
        "calls": [{"name": name, "arguments": arguments} for name, arguments in ordered],
        "prompt_tokens": prompt_tokens,
    }


def json_answer(value: Any) -> dict[str, Any]:
    """A structured answer as ``metrics.answer`` records it: its JSON value."""
    return {"json": value}


def differences(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], kinds: Sequence[str]
) -> dict[str, bool]:
    """Each kind the two twins' answers can be compared in, and whether they differ (pure).

    Calls are compared as a whole first: which tools only where both called one, their
    arguments only where both called the same tools, so a difference in whether a tool is
    called is not also one in which, nor in arguments. Prompt tokens only where both billed:
    a kind without its evidence on both sides is left out, neither agreeing nor differing.
    """
    found: dict[str, bool] = {}
    if "call" in kinds:
        a, b = ours.get("calls", []), theirs.get("calls", [])
        found["call"] = bool(a) != bool(b)
        if a and b:
            found["tool"] = sorted(c["name"] for c in a) != sorted(c["name"] for c in b)
            if not found["tool"]:
                found["arguments"] = _canonical(a) != _canonical(b)
    if "json" in kinds:
        found["json"] = _canonical(ours.get("json")) != _canonical(theirs.get("json"))
    if "prompt_tokens" in kinds:
        a, b = ours.get("prompt_tokens"), theirs.get("prompt_tokens")
        if a is not None and b is not None:
            found["prompt_tokens"] = a != b
    return {kind: differ for kind, differ in found.items() if kind in kinds}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _why_not(record: CaseRecord) -> str | None:
    """Why a twin is not compared, or None when it is."""
    if record.status in _NOT_GRADED:
        return _NOT_GRADED[record.status]
    if "answer" not in record.outcome.metrics:
        return NO_ANSWER
    return None


def agreement(records: Iterable[CaseRecord], kinds: Sequence[str]) -> dict[str, Any]:
    """The family's cross-API comparison and its rulings, or {} when one API ran (pure).

    Returns ``{"cross_api": metrics, "rulings": [...]}``: agreement over the twin pairs
    compared (a pair agrees when it differs in no kind it could be compared in), by kind over
    the pairs compared in that kind, with Wilson intervals; why twins were not compared; the
    first disagreements with both answers; and one ruling per kind that any pair could be
    compared in (none without evidence).
    """
    twins: dict[str, dict[str, CaseRecord]] = {}
    for record in records:
        twins.setdefault(case_id(record), {})[record.api] = record
    apis = sorted({api for by_api in twins.values() for api in by_api}, key=API_NAMES.index)
    if len(apis) < 2:
        return {}
    pairs = 0
    agreed = 0
    # Per kind: the pairs compared in it, and those that differ.
    trials = dict.fromkeys(kinds, 0)
    differ = dict.fromkeys(kinds, 0)
    skipped: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    for case in sorted(twins):
        by_api = twins[case]
        ordered = [by_api[api] for api in apis if api in by_api]
        if len(ordered) < 2:
            continue
        reasons = {api: why for api, r in by_api.items() if (why := _why_not(r)) is not None}
        for why in reasons.values():
            skipped[why] = skipped.get(why, 0) + 1
        compared = [r for r in ordered if r.api not in reasons]
        if len(compared) < 2:
            continue
        first = compared[0]
        for other in compared[1:]:
            pairs += 1
            found = differences(
                first.outcome.metrics["answer"], other.outcome.metrics["answer"], kinds
            )
            agreed += not any(found.values())
            for kind, differs in found.items():
                trials[kind] += 1
                differ[kind] += differs
                if differs and len(examples) < EXAMPLES:
                    examples.append(_example(case, kind, first, other))
    metrics = {
        "apis": apis,
        "pairs": pairs,
        "agreement": rate(agreed, pairs),
        "by_kind": {kind: rate(trials[kind] - differ[kind], trials[kind]) for kind in kinds},
        "not_compared": dict(sorted(skipped.items())),
        "disagreements": examples,
    }
    result: dict[str, Any] = {"cross_api": metrics}
    rulings = [_ruling(kind, differ[kind], trials[kind], apis) for kind in kinds if trials[kind]]
    if rulings:
        result["rulings"] = rulings
    return result


def _example(case: str, kind: str, first: CaseRecord, other: CaseRecord) -> dict[str, Any]:
    ours, theirs = first.outcome.metrics["answer"], other.outcome.metrics["answer"]
    field = {"call": "calls", "tool": "calls", "arguments": "calls"}.get(kind, kind)
    return {
        "case": case,
        "code": CODES[kind],
        "message": f"{TITLES[other.api]} and {TITLES[first.api]} differ in {_SAYS[kind]} "
        "for the same request",
        "apis": [first.api, other.api],
        "expected": ours.get(field),
        "actual": theirs.get(field),
    }


def _ruling(kind: str, differing: int, pairs: int, apis: Sequence[str]) -> dict[str, Any]:
    """One kind's decision over the `pairs` compared in it: any that differs fails it."""
    return {
        "name": f"cross_api {kind}",
        "outcome": "different" if differing else "same",
        "verdict": "fail" if differing else "pass",
        "code": CODES[kind] if differing else None,
        "pairs": pairs,
        "differing": differing,
        "across": list(apis),
    }
