"""Tool calling: validity, tool_choice contracts, streaming invariants, determinism, accuracy.

A case fails on a **defect**: something no correct serving layer does, whatever
the model. Codes, by kind:

- ``malformed_response``, ``invalid_json``, ``unknown_tool``, ``schema_mismatch``
  (JSON Schema 2020-12 against the declared parameters), ``bad_call_id`` (missing,
  empty or duplicate), ``tool_call_id_format`` (not in the format the model's contract
  documents, e.g. Kimi's ``functions.NAME:IDX``), ``bad_call_type``, ``finish_reason_mismatch``
  (``tool_calls`` exactly when calls are present), ``markers_in_content``;
- ``tool_choice_none_ignored``, ``tool_choice_required_ignored``,
  ``tool_choice_named_ignored``, ``parallel_tool_calls_ignored``;
- stream invariants: ``tool_call_first_delta_incomplete``, ``tool_call_name_repeated``,
  ``tool_call_name_changed``, ``tool_call_id_changed``, ``content_after_tool_calls``,
  ``finish_reason_repeated``, ``finish_reason_missing``, ``malformed_tool_calls``; over the
  other APIs, a call's pieces sent to another block or item (``call_delta_outside_block``,
  ``call_delta_type_mismatch``, ``event_item_type_mismatch``) or announced at its end unlike what
  they built (``done_text_mismatch``, ``output_item_mismatch``, ``final_output_mismatch``);
- tools declared in a content-less system message, where the model's contract documents it
  (Kimi K3): ``dynamic_tools_rejected`` (refused with a 4xx), ``dynamic_tools_ignored`` (one
  more tool declared there costs no prompt token: they never reach the prompt);
- determinism at temperature 0 with a fixed seed: ``nondeterministic_calls`` (repeats
  of one mode differ), ``stream_calls_differ`` (stream and non-stream differ). Calls
  are compared by name and parsed arguments: key order and whitespace are not
  differences, and nothing here claims bit-exact output.

Whether the model called the right tool with the right values is **accuracy**,
measured per category against the case's acceptable calls (``missing_call``,
``unexpected_call``, ``wrong_tool``, ``value_mismatch``): reported as rates and
compared with a baseline, never a case failure by itself. A malformed call is
never counted as "no call".
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..cases.rotation import tool_case
from ..outcome import CaseRecord, Finding, Outcome, Status
from ..protocol.answers import ChatResult, Choice, ToolCall
from ..protocol.apis import API_NAMES
from ..protocol.requests import Chat, Exchange, together
from ..stats import rate
from .registry import family
from .support.common import excerpt, rejected, schema_findings, unsupported
from .support.cross_api import TOOL_KINDS, agreement, calls_answer
from .support.evidence import NO_PROMPT_TOKENS, evidence_findings, prompt_tokens
from .support.paired import case_outcome, paired_accuracy
from .support.tool_matching import calls_of, compare_calls, parse_arguments, signature

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from .registry import RunContext

# Not a defect: the answer ran out of max_tokens; alone, it makes the case an error.
CUT = "max_tokens_reached"
QUALITY_CODES = frozenset({"missing_call", "unexpected_call", "wrong_tool", "value_mismatch"})
STREAM_CODES = frozenset(
    {
        "tool_call_first_delta_incomplete",
        "tool_call_name_repeated",
        "tool_call_name_changed",
        "tool_call_id_changed",
        "tool_call_index_missing",
        "content_after_tool_calls",
        "finish_reason_repeated",
        "finish_reason_missing",
        "malformed_tool_calls",
        # The other APIs' streams: a call's pieces sent to the wrong block or item, or the
        # call announced at its end unlike the pieces that built it (another block's delta
        # out of place, or of the wrong kind, is wire's finding, not a call's).
        "call_delta_outside_block",
        "call_delta_type_mismatch",
        "done_text_mismatch",
        "output_item_mismatch",
        "final_output_mismatch",
        "event_item_type_mismatch",
    }
)
# Tool-call markup of common chat templates; seen in content, a parser failed to extract it.
MARKERS = re.compile(
    r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>|<\|tool_call_argument_begin\|>"
    r"|<\|tool_call_end\|>|</?tool_call>|\[TOOL_CALLS\]|<\|python_tag\|>"
    r"|<｜tool▁calls?▁begin｜>|<｜tool▁call▁begin｜>|<\|call\|>|<function=|<tool_calls>"
)
COMPARED = (
    "tool names and arguments parsed as JSON (key order and whitespace ignored; parallel "
    "calls in any order); content text is not compared; no claim of bit-exact output"
)


def tool_names(case: Case) -> list[str]:
    """Names of the tools the case offers."""
    return [tool["function"]["name"] for tool in case.data["tools"]]


def parameters_of(case: Case, name: str) -> Any:
    """The parameters schema of the tool `name`."""
    for tool in case.data["tools"]:
        if tool["function"]["name"] == name:
            return tool["function"]["parameters"]
    raise KeyError(name)


def named_choice(case: Case) -> str | None:
    """The function name forced by a named tool_choice, if any."""
    choice = case.data.get("tool_choice")
    return choice["function"]["name"] if isinstance(choice, dict) else None


def validity_findings(
    case: Case,
    result: ChatResult,
    attempt: str,
    id_format: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Defects of one answer: the calls, finish_reason, markers, stream invariants (pure).

    `id_format` is the model contract's ``tool_call_id`` (a pattern, and whether its first
    group names the function), when it states one.
    """
    broken = evidence_findings(result, attempt)
    choice = result.choice
    if broken or choice is None:
        return broken
    findings: list[Finding] = []
    ids = [call.id for call in choice.tool_calls]
    for position, call in enumerate(choice.tool_calls):
        findings += call_findings(case, call, position, ids, choice.finish_reason, attempt)
        if id_format is not None:
            findings += call_id_findings(call, position, id_format, attempt)
    findings += finish_findings(choice, stream=result.stream, attempt=attempt)
    findings += marker_findings(choice, attempt)
    findings.extend(
        Finding(problem.code, problem.message, problem.where, attempt=attempt)
        for problem in result.problems
        if problem.code in STREAM_CODES
    )
    findings.extend(contract_findings(case, choice, attempt))
    return findings


def call_findings(
    case: Case,
    call: ToolCall,
    position: int,
    ids: Sequence[str | None],
    finish_reason: str | None,
    attempt: str,
) -> list[Finding]:
    """One tool call: its id and type, a known tool, arguments that are JSON and fit (pure)."""
    where = f"$.choices[0].message.tool_calls[{position}]"
    findings: list[Finding] = []
    if not call.id:
        findings.append(
            Finding("bad_call_id", f"tool call {position} has no id", where, attempt=attempt)
        )
    elif ids.count(call.id) > 1:
        findings.append(
            Finding(
                "bad_call_id",
                f"tool call id {call.id!r} is used more than once",
                where,
                attempt=attempt,
            )
        )
    if call.type != "function":
        findings.append(
            Finding(
                "bad_call_type",
                f"tool call {position} has type {call.type!r}, not 'function'",
                where,
                attempt=attempt,
            )
        )
    return findings + argument_findings(case, call, where, finish_reason, attempt)


def call_id_findings(
    call: ToolCall, position: int, id_format: Mapping[str, Any], attempt: str
) -> list[Finding]:
    """The call's id in the contract's format, naming the called function where it says (pure).

    A missing id is ``bad_call_id``'s, not this check's.
    """
    if not call.id:
        return []
    pattern = id_format["pattern"]
    match = re.search(pattern, call.id)
    if match is None:
        wrong = f"does not match the model's documented format {pattern}"
    elif id_format.get("names_function") and match.re.groups and match.group(1) != call.name:
        wrong = f"names {match.group(1)!r}, but the call is to {call.name!r}"
    else:
        return []
    return [
        Finding(
            "tool_call_id_format",
            f"tool call {position} has id {call.id!r}, which {wrong}",
            f"$.choices[0].message.tool_calls[{position}].id",
            actual=call.id,
            attempt=attempt,
        )
    ]


def argument_findings(
    case: Case, call: ToolCall, where: str, finish_reason: str | None, attempt: str
) -> list[Finding]:
    """A call to a known tool, with JSON arguments that fit its parameters schema (pure)."""
    known = tool_names(case)
    if call.name not in known:
        return [
            Finding(
                "unknown_tool",
                f"call to {call.name!r}, which is not among {known}",
                where,
                expected=known,
                actual=call.name,
                attempt=attempt,
            )
        ]
    arguments = parse_arguments(call.arguments)
    if arguments is None and finish_reason == "length":
        return [
            Finding(
                CUT,
                f"arguments of {call.name!r} stop at max_tokens (finish_reason length): "
                "validity cannot be judged; give the case a larger max_tokens",
                f"{where}.function.arguments",
                attempt=attempt,
            )
        ]
    if arguments is None:
        return [
            Finding(
                "invalid_json",
                f"arguments of {call.name!r} are not JSON: {excerpt(call.arguments or '', 120)!r}",
                f"{where}.function.arguments",
                actual=call.arguments,
                attempt=attempt,
            )
        ]
    return list(
        schema_findings(
            parameters_of(case, call.name),
            arguments,
            code="schema_mismatch",
            attempt=attempt,
            prefix=f"{where}.function.arguments",
        )
    )


def finish_findings(choice: Choice, *, stream: bool, attempt: str) -> list[Finding]:
    """finish_reason is ``tool_calls`` exactly when the answer makes calls (pure)."""
    has_calls = bool(choice.tool_calls)
    # A call cut by max_tokens ends with "length"; a stream's missing reason has its own code.
    exempt = {"length"} | ({None} if stream else set())
    if has_calls == (choice.finish_reason == "tool_calls") or choice.finish_reason in exempt:
        return []
    return [
        Finding(
            "finish_reason_mismatch",
            f"finish_reason is {choice.finish_reason!r} with {len(choice.tool_calls)} tool call(s)",
            "$.choices[0].finish_reason",
            expected="tool_calls" if has_calls else "not tool_calls",
            actual=choice.finish_reason,
            attempt=attempt,
        )
    ]


def marker_findings(choice: Choice, attempt: str) -> list[Finding]:
    """Tool-call markup left in content: the server's parser did not extract a call (pure)."""
    marker = MARKERS.search(choice.content) if choice.content else None
    if marker is None:
        return []
    return [
        Finding(
            "markers_in_content",
            f"tool-call markup {marker.group(0)!r} in content",
            "$.choices[0].message.content",
            actual=excerpt(choice.content, 200),
            attempt=attempt,
        )
    ]


def contract_findings(case: Case, choice: Choice, attempt: str) -> list[Finding]:
    """tool_choice and parallel_tool_calls, which the server must enforce whatever the model."""
    findings = []
    tool_choice = case.data.get("tool_choice")
    names = [call.name for call in choice.tool_calls]
    if tool_choice == "none" and names:
        findings.append(
            Finding(
                "tool_choice_none_ignored", f"tool_choice none, but called {names}", attempt=attempt
            )
        )
    if tool_choice == "required" and not names:
        findings.append(
            Finding(
                "tool_choice_required_ignored", "tool_choice required, but no call", attempt=attempt
            )
        )
    forced = named_choice(case)
    # A call to a tool that was not offered is unknown_tool's; here only the choice counts.
    offered = [name for name in names if name in tool_names(case)]
    if forced is not None and (not names or any(name != forced for name in offered)):
        findings.append(
            Finding(
                "tool_choice_named_ignored",
                f"tool_choice names {forced!r}, but called {names}",
                expected=forced,
                actual=names,
                attempt=attempt,
            )
        )
    if case.data.get("parallel_tool_calls") is False and len(names) > 1:
        findings.append(
            Finding(
                "parallel_tool_calls_ignored",
                f"parallel_tool_calls false, but {len(names)} calls in one answer",
                attempt=attempt,
            )
        )
    return findings


def accuracy_findings(case: Case, result: ChatResult, attempt: str) -> list[Finding] | None:
    """Accuracy against the acceptable calls, or None when the case sets no expectation."""
    expected = case.data.get("expected")
    if expected is None or case.data.get("tool_choice") == "none":
        return None if expected is None else []
    return compare_calls(calls_of(result.choice), expected["calls"], attempt=attempt)


def _varies(signatures: Sequence[Any]) -> bool:
    return len(set(signatures)) > 1


def determinism_findings(signatures: Sequence[tuple[bool, Any]]) -> list[Finding]:
    """Compare the call signatures of the repeats: within each mode, then across modes.

    ``stream_calls_differ`` needs each mode to agree with itself, one of them over two
    repeats or more: with one answer of each, a stream difference cannot be told from
    nondeterminism, and the two answers differing is reported as nondeterminism.
    """
    findings = []
    by_mode: dict[bool, list[Any]] = {False: [], True: []}
    for stream, sig in signatures:
        by_mode[stream].append(sig)
    for stream, sigs in by_mode.items():
        if _varies(sigs):
            mode = "stream" if stream else "non-stream"
            findings.append(
                Finding(
                    "nondeterministic_calls",
                    f"{len(set(sigs))} different call sets across {len(sigs)} {mode} repeats "
                    "at temperature 0 with a fixed seed",
                    expected=_shown(sigs[0]),
                    actual=_shown(next(s for s in sigs if s != sigs[0])),
                    compare=True,
                )
            )
    plain, streamed = by_mode[False], by_mode[True]
    if findings or not plain or not streamed or plain[0] == streamed[0]:
        return findings
    if len(plain) + len(streamed) > 2:
        return [
            Finding(
                "stream_calls_differ",
                f"the streamed calls differ from the non-stream calls, each the same over "
                f"{len(streamed)} stream and {len(plain)} non-stream repeats",
                expected=_shown(plain[0]),
                actual=_shown(streamed[0]),
                compare=True,
            )
        ]
    return [
        Finding(
            "nondeterministic_calls",
            "the non-stream and the stream answer make different calls; with one of each, "
            "a stream difference cannot be told from nondeterminism (give --repeats 3 or more)",
            expected=_shown(plain[0]),
            actual=_shown(streamed[0]),
            compare=True,
        )
    ]


def settled(signatures: Sequence[tuple[bool, Any]]) -> bool:
    """Two answers of the same mode differ: no further repeat can change that finding."""
    return any(
        _varies([sig for stream, sig in signatures if stream == mode]) for mode in (False, True)
    )


def _shown(sig: Any) -> list[dict[str, str]]:
    return [{"name": name, "arguments": arguments} for name, arguments in sig]


def _evidence(result: ChatResult, name: str) -> dict[str, Any]:
    choice = result.choice
    if choice is None:
        return {"attempt": name}
    return {
        "attempt": name,
        "content": excerpt(choice.content),
        "tool_calls": [c.to_dict() for c in choice.tool_calls],
        "finish_reason": choice.finish_reason,
    }


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Sub-metrics with intervals, agreement with a baseline and across APIs (pure)."""
    records = list(records)
    graded = [r for r in records if r.status in ("pass", "fail")]
    metrics = [r.outcome.metrics for r in graded]
    total = sum(m.get("requests", 0) for m in metrics)
    valid = sum(m.get("valid_requests", 0) for m in metrics)
    by_category: dict[str, list[bool]] = {}
    quality_codes: Counter[str] = Counter()
    cases: dict[str, dict[str, Any]] = {}
    for record in graded:
        m = record.outcome.metrics
        if m.get("accurate") is not None:
            by_category.setdefault(m["category"], []).append(m["accurate"])
            cases[record.id] = case_outcome(m["category"], m["accurate"])
        quality_codes.update(m.get("quality", []))
    accurate_all = [a for values in by_category.values() for a in values]
    parity = [m["stream_parity"] for m in metrics if m.get("stream_parity") is not None]
    decisions = {r.id: r.outcome.metrics.get("called", []) for r in graded}
    asked = [m["repeats"] for m in metrics if "repeats" in m]
    summary: dict[str, Any] = {
        "compared": COMPARED,
        # With --budget auto a failing case stops repeating: pass^k is the same, fewer sent.
        "repeats": {
            "asked": max(asked, default=None),
            "sent": total,
            "stopped_early": sum(
                m.get("requests", 0) < m["repeats"] for m in metrics if "repeats" in m
            ),
        },
        "request_validity": rate(valid, total),
        "pass_k": rate(sum(bool(m.get("pass_k")) for m in metrics), len(metrics)),
        "identical_calls": rate(sum(bool(m.get("identical")) for m in metrics), len(metrics)),
        "stream_parity": rate(sum(parity), len(parity)),
        "accuracy": {
            "overall": rate(sum(accurate_all), len(accurate_all)),
            "by_category": {
                category: rate(sum(values), len(values))
                for category, values in sorted(by_category.items())
            },
            "codes": dict(sorted(quality_codes.items(), key=lambda kv: (-kv[1], kv[0]))),
            # Per case, so that a later run's --baseline can pair its cases with these.
            "cases": dict(sorted(cases.items())),
        },
        "decisions": decisions,
    }
    summary.update(agreement(records, TOOL_KINDS))
    if baseline is not None:
        summary["baseline"] = baseline_agreement(
            decisions, baseline.get("metrics", {}).get("decisions", {})
        )
        summary["accuracy"]["paired"] = paired_accuracy(cases, baseline)
    return summary


def baseline_agreement(
    ours: Mapping[str, list[str]], theirs: Mapping[str, list[str]]
) -> dict[str, Any]:
    """Trigger F1 (the baseline's "called a tool" decisions as truth) and tool-choice agreement."""
    shared = sorted(set(ours) & set(theirs))
    tp = sum(bool(ours[c]) and bool(theirs[c]) for c in shared)
    fp = sum(bool(ours[c]) and not theirs[c] for c in shared)
    fn = sum(not ours[c] and bool(theirs[c]) for c in shared)
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall
        else (1.0 if tp + fp + fn == 0 and shared else None)
    )
    both_called = [c for c in shared if ours[c] and theirs[c]]
    same_tools = sum(sorted(ours[c]) == sorted(theirs[c]) for c in both_called)
    return {
        "cases": len(shared),
        "trigger_f1": f1,
        "trigger_precision": precision,
        "trigger_recall": recall,
        "tool_agreement": rate(same_tools, len(both_called)),
        "only_here": len(set(ours) - set(theirs)),
        "only_in_baseline": len(set(theirs) - set(ours)),
    }


def _request(case: Case, ctx: RunContext) -> dict[str, Any]:
    data = case.data
    request = ctx.request(
        messages=data["messages"], tools=data["tools"], max_tokens=data.get("max_tokens", 512)
    )
    for key in ("tool_choice", "parallel_tool_calls"):
        if key in data:
            request[key] = data[key]
    return request


@dataclasses.dataclass(slots=True)
class _Repeats:
    """What the repeats of a case found so far."""

    defects: list[Finding] = dataclasses.field(default_factory=list)
    quality: list[Finding] | None = None
    signatures: list[tuple[bool, Any]] = dataclasses.field(default_factory=list)
    valid: int = 0
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    first: ChatResult | None = None

    def add(
        self,
        case: Case,
        result: ChatResult,
        name: str,
        stream: bool,
        id_format: Mapping[str, Any] | None = None,
    ) -> None:
        """Grade one repeat's answer."""
        self.first = self.first or result
        found = validity_findings(case, result, name, id_format)
        if found:
            self.defects.extend(found)
            self.evidence = self.evidence or _evidence(result, name)
        else:
            self.valid += 1
        if self.quality is None:
            self.quality = accuracy_findings(case, result, name)
        self.signatures.append((stream, signature(calls_of(result.choice))))

    def settled(self) -> bool:
        """pass^k is already 0 and the finding final: more repeats cannot change either."""
        return any(f.code != CUT for f in self.defects) or settled(self.signatures)

    def metrics(self, case: Case, repeats: int, sampled: bool = False) -> dict[str, Any]:
        """The case's metrics once its repeats are done (determinism findings added).

        Stream parity is not known (None) from one repeat, nor from sampled answers, whose
        determinism is not checked.
        """
        first = self.first
        called = [call.name for call in first.choice.tool_calls] if first and first.choice else []
        identical = len({sig for _, sig in self.signatures}) == 1
        return {
            "requests": len(self.signatures),
            "repeats": repeats,
            "category": case.data["category"],
            "valid_requests": self.valid,
            # Right on every repeat: each valid, and each making the first answer's calls.
            "pass_k": self.valid == len(self.signatures) == repeats and identical,
            "identical": identical,
            "stream_parity": None
            if repeats < 2 or sampled
            else not any(f.code == "stream_calls_differ" for f in self.defects),
            "called": called,
            "accurate": None if self.quality is None else not self.quality,
            "quality": sorted({f.code for f in self.quality or []}),
        } | self.answer(sampled, identical)

    def answer(self, sampled: bool, identical: bool) -> dict[str, Any]:
        """The first answer, for the cross-API comparison: greedy repeats that agree only."""
        first = self.first
        if sampled or not identical or first is None or first.choice is None:
            return {}
        calls = ((c.name or "", c.arguments) for c in calls_of(first.choice))
        return {"answer": calls_answer(calls, prompt_tokens(first))}


def verdict(found: _Repeats, metrics: dict[str, Any]) -> Outcome:
    """The case's outcome from its repeats: defects fail it, accuracy only annotates a pass."""
    if found.defects and all(f.code == CUT for f in found.defects):
        return Outcome(Status.ERROR, code=CUT, message=found.defects[0].message, metrics=metrics)
    defects = [f for f in found.defects if f.code != CUT]
    outcome = Outcome.from_findings(defects, metrics=metrics, evidence=found.evidence)
    quality = found.quality
    if outcome.status is Status.PASS and quality:
        return Outcome(
            Status.PASS,
            findings=tuple(quality),
            metrics=metrics,
            message="valid; accuracy: " + quality[0].message,
        )
    return outcome


# Declared beside a dynamic case's own tools: a server that renders the tools it is given in a
# system message counts more prompt tokens for one more tool.
EXTRA_TOOL = {
    "type": "function",
    "function": {
        "name": "convert_units",
        "description": "Convert a quantity from one unit of measurement to another.",
        "parameters": {
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "from_unit": {"type": "string"},
                "to_unit": {"type": "string"},
            },
            "required": ["value", "from_unit", "to_unit"],
        },
    },
}


def dynamic_request(case: Case, ctx: RunContext, *extra: Mapping[str, Any]) -> dict[str, Any]:
    """The case's tools declared in a content-less system message, none at the top level."""
    declared = {"role": "system", "tools": [*case.data["tools"], *extra]}
    return ctx.request(
        messages=[declared, *case.data["messages"]], max_tokens=case.data.get("max_tokens", 512)
    )


def dynamic_findings(declared: int, more: int) -> list[Finding]:
    """Tools declared in a system message reach the prompt: one more costs tokens (pure).

    `declared` is the prompt_tokens of the case's dynamic request, `more` of the same with one
    more tool.
    """
    if declared != more:
        return []
    return [
        Finding(
            "dynamic_tools_ignored",
            f"one more tool declared in the system message left prompt_tokens at {declared}: "
            "the tools declared there never reach the prompt",
            "$.usage.prompt_tokens",
            expected=f"more than {declared}",
            actual=more,
            attempt="one-more-tool",
        )
    ]


def _run_dynamic(case: Case, ctx: RunContext) -> Exchange:
    """Tools declared dynamically, as the model's contract documents: accepted, seen, called."""
    metrics = {"requests": 0, "category": case.data["category"]}
    if not (ctx.profile and (ctx.profile.policies.features or {}).get("dynamic_tools")):
        return unsupported("the model's contract documents no tools declared in messages", metrics)
    id_format = _id_format(case, ctx)
    found = _Repeats()
    counts: tuple[int | None, int | None] = (None, None)
    asked = (
        ("non-stream-1", False, ()),
        ("stream-2", True, ()),
        ("one-more-tool", False, (EXTRA_TOOL,)),
    )
    for number, (name, stream, extra) in enumerate(asked, start=1):
        result = yield Chat(dynamic_request(case, ctx, *extra), name, stream=stream)
        if not result.ok:
            return Outcome.from_findings(
                [
                    Finding(
                        "dynamic_tools_rejected",
                        f"tools declared in a content-less system message were refused with "
                        f"HTTP {result.status}; the lab's API accepts them: "
                        f"{(result.error_object or {}).get('message')!s:.200}",
                        attempt=name,
                    )
                ],
                metrics={**metrics, "requests": number},
            )
        if extra:
            # A count from an answer that cannot be read, or has no choice, is no evidence.
            declared = found.first or result
            counts = (
                None if evidence_findings(declared, name) else prompt_tokens(declared),
                None if evidence_findings(result, name) else prompt_tokens(result),
            )
        else:
            found.add(case, result, name, stream, id_format)
    case_metrics = {**found.metrics(case, 2, ctx.sampled), "requests": 3}
    if counts[0] is None or counts[1] is None:
        if not found.defects:
            return unsupported(
                f"{NO_PROMPT_TOKENS}: whether the tools declared in the system message reach "
                "the prompt cannot be seen",
                case_metrics,
            )
    else:
        found.defects.extend(dynamic_findings(counts[0], counts[1]))
    return verdict(found, case_metrics)


def _id_format(case: Case, ctx: RunContext) -> Mapping[str, Any] | None:
    """The contract's tool-call id format; None over another API than chat.

    There the ids (``toolu_...``, a Responses ``call_id``) are the API's, not the model's.
    """
    if ctx.profile is None or case.api != "chat":
        return None
    return ctx.profile.policies.tool_call_id


@family("tool_calling", default_repeats=5, summarize=summarize, apis=API_NAMES, rotate=tool_case)
def run(case: Case, ctx: RunContext) -> Exchange:
    """Tool calls: valid, contract-honouring, deterministic, and (where known) accurate."""
    if case.data["category"] == "dynamic":
        return (yield from _run_dynamic(case, ctx))
    request = _request(case, ctx)
    repeats = ctx.repeats_for(case.family)
    id_format = _id_format(case, ctx)
    found = _Repeats()
    # Each repeat is asked whatever the others answered, unless a failing case stops early.
    asked = together(
        [
            Chat(request, f"{'stream' if n % 2 == 0 else 'non-stream'}-{n}", stream=n % 2 == 0)
            for n in range(1, repeats + 1)
        ],
        independent=not ctx.stop_early,
    )
    for number, chat in enumerate(asked, 1):
        stream, name = chat.stream, chat.name
        result = yield chat
        if not result.ok:
            return rejected(
                "tools", result, {"requests": number, "category": case.data["category"]}
            )
        found.add(case, result, name, stream, id_format)
        if ctx.stop_early and found.settled():
            break
    # Sampled answers (a contract that pins temperature above 0) need not repeat.
    if not ctx.sampled:
        found.defects.extend(determinism_findings(found.signatures))
    return verdict(found, found.metrics(case, repeats, ctx.sampled))
