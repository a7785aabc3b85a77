"""Reasoning: the thinking channel, its switch and effort, and multi-turn agent loops.

Every expectation comes from the model's dialect (the profile's ``thinking`` and
``reasoning``, :class:`~verifier.reference.dialect.Dialect`): how thinking is turned on and
off, where reasoning comes back, its raw tags, the effort levels and the history rule. A case
whose check the dialect does not state is unsupported. Checks, by the case's ``check``:

- ``thinking_on`` (a non-stream and a stream answer): reasoning present and an answer after
  it; ``thinking_off``: no reasoning, the answer in content;
- ``structured``: ``response_format`` with thinking on: the content is the valid JSON and the
  reasoning stays (unless the contract says JSON ends thinking);
- ``effort``: reasoning length ordered by effort level over a set of prompts, decided by a
  sign test with its interval (never from one sample);
- ``agent_loop``: a tool-call loop of 2 to 6 turns replayed with the model's own reasoning by
  the history rule: every follow-up accepted, counted as the reference renders it, and a
  non-empty answer or a valid next call;
- ``invalid_history``: a tool-call turn sent back without its reasoning, which the contract
  says the lab's API refuses, must get a 4xx;
- ``thinking_roundtrip`` (a case written for Anthropic Messages or OpenAI Responses, sent
  through it alone, for a model whose contract states a thinking dialect): each answer's
  reasoning taken back as it came in the next turn (:mod:`.support.thinking_back`).

A switch case written for Messages (``api``) switches thinking in the Messages reference's
terms (``thinking`` enabled with its smallest budget, or disabled), where the contract says the
model can be switched so; an effort case written for Responses sets ``reasoning.effort`` at the
contract's levels, where its effort field is OpenAI's ``reasoning_effort`` (one setting in
OpenAI's two references). Their answers are graded as chat's, the API's own block or item
standing for the contract's reasoning field. An ``agent_loop`` case written for one of them
runs as ``thinking_roundtrip`` does, turn after turn while the answers call tools, each
follow-up graded as chat's loops' are.

Codes:

- ``thinking_not_honoured`` (thinking on gave no reasoning, or off gave reasoning beside the
  answer), ``reasoning_only_response`` (reasoning and no answer, finish_reason stop),
  ``content_in_reasoning`` (thinking off, the answer came as reasoning);
- ``reasoning_markers_in_content`` (the raw tags left in content: the reasoning was not
  separated), ``markers_in_reasoning`` (tool-call markup or raw tags inside the reasoning),
  ``reasoning_field_mismatch`` (reasoning under another field than the contract's);
- ``structured_output_in_reasoning`` (the JSON came as reasoning), ``thinking_mode_overridden``
  (asking for JSON switched thinking off), ``structured_output_invalid`` (neither);
- ``reasoning_after_content`` (a stream's reasoning delta after its content began),
  ``stream_split_differs`` (stream and non-stream at temperature 0 disagree on what is
  reasoning, what is answer and which tools are called);
- ``effort_not_honoured``; ``reasoning_tokens_mismatch``
  (``completion_tokens_details.reasoning_tokens`` against the reasoning's tokens under the
  model's tokenizer);
- ``empty_followup`` (after a tool result, neither text nor a call), ``followup_call_invalid``
  (the next call names an unknown tool or its arguments break the tool's schema),
  ``history_rejected`` (a follow-up with the model's own reasoning in its history refused),
  the prompt-count codes of :mod:`.support.prompt_counts` (``reasoning_history_dropped``...);
- ``invalid_history_accepted``, ``invalid_history_5xx``, ``invalid_history_hang``;
- ``thinking_signature_missing``, ``redacted_thinking_data_missing``, ``encrypted_content_missing``,
  ``thinking_history_rejected``.

An effort test without enough evidence either way is an error (``effort_undecided``), and an
answer that ran out of ``max_tokens`` inside its reasoning is one too (``reasoning_truncated``):
the verifier could not judge, the endpoint is not wrong.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..cases.rotation import reasoning_case
from ..errors import EndpointTimeout
from ..outcome import CaseRecord, Finding, Outcome
from ..protocol.answers import ChatResult, Choice
from ..protocol.apis import API_NAMES
from ..protocol.requests import Chat, Exchange, Request
from ..reference.dialect import FIELDS, OPENAI_EFFORT, merged
from ..stats import rate, wilson_interval
from .registry import QUICK, family
from .support.common import (
    ParsedJSON,
    compiled_validator,
    excerpt,
    hang_finding,
    parse_json_output,
    rejected,
    rejection_findings,
    schema_findings,
)
from .support.evidence import NO_PROMPT_TOKENS, cached_tokens, evidence_findings, prompt_tokens
from .support.prompt_counts import grade, observe
from .support.renderings import Conversation, Observed, reference
from .support.subchecks import Graded, Rejected, Undecided, Unsupported, run_checks, status_counts
from .support.thinking_back import (
    THINKING,
    UNSAMPLED,
    Counting,
    chat_turns,
    run_thinking_roundtrip,
    scripted_result,
)
from .support.tool_matching import parse_arguments

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..reference.dialect import Dialect, Effort
    from ..reference.profiles import Profile
    from ..reference.tokenizer_backends import Tokenizer
    from .registry import RunContext

MODES = (("non-stream", False), ("stream", True))
# reasoning_tokens may exceed the reasoning text by its two tags, and differ by one where the
# model's own tokens split the text differently (as completion_tokens in the wire family).
REASONING_SLACK = (1, 2)
# The effort test: the share of prompts whose reasoning is longer at the highest level than
# at the lowest must be above this, with its 95% interval, to pass (below it, to fail).
EFFORT_ORDERED = 0.5
# Findings that leave an effort test nothing to measure: the answer had no reasoning to
# read, or it was not separated from the content.
UNMEASURED = frozenset({"malformed_response", "non_json_body", "reasoning_markers_in_content"})
# The codes of a refused request field the model's contract states.
SWITCH_REJECTED = "thinking_switch_rejected"
EFFORT_REJECTED = "effort_rejected"


def _text(value: str | None) -> str:
    return (value or "").strip()


def answer_findings(
    result: ChatResult,
    dialect: Dialect,
    *,
    thinking: bool,
    tokenizer: Tokenizer | None = None,
    attempt: str | None = None,
    followup: bool = False,
) -> list[Finding]:
    """What one answer got wrong about its reasoning, thinking on or off (pure).

    A cause is named once: content holding the raw tags is ``reasoning_markers_in_content``,
    not also a missing reasoning; a call left as markup in the reasoning is
    ``markers_in_reasoning``, not also an answer that is all reasoning; a `followup` (after a
    tool result) that is entirely empty is :func:`followup_findings`' ``empty_followup``.
    """
    broken = evidence_findings(result, attempt or result.label)
    choice = result.choice
    if broken or choice is None:
        return broken
    leaked = [tag for tag in dialect.markers if tag in (choice.content or "")]
    findings = _markup_findings(choice, dialect, leaked, attempt)
    findings += _switch_findings(choice, dialect, thinking, followup, bool(leaked), attempt)
    reasoning = _text(choice.reasoning)
    if reasoning and dialect.field and choice.reasoning_field not in (None, dialect.field):
        findings.append(
            Finding(
                "reasoning_field_mismatch",
                f"the reasoning came as {choice.reasoning_field!r}; the model's contract "
                f"returns it as {dialect.field!r}",
                expected=dialect.field,
                actual=choice.reasoning_field,
                attempt=attempt,
            )
        )
    findings += [
        Finding(p.code, p.message, p.where, attempt=attempt)
        for p in result.problems
        if p.code == "reasoning_after_content"
    ]
    if tokenizer is not None:
        findings += reasoning_token_findings(result, tokenizer, attempt, dialect.tokens_tolerance)
    return findings


def _markup_findings(
    choice: Choice, dialect: Dialect, leaked: list[str], attempt: str | None
) -> list[Finding]:
    """Raw reasoning tags in the content (`leaked`), raw markup in the reasoning (pure)."""
    findings = []
    if leaked:
        findings.append(
            Finding(
                "reasoning_markers_in_content",
                f"the content holds the raw reasoning tag(s) {leaked}: the server did not "
                f"separate the reasoning from the answer",
                "$.choices[0].message.content",
                actual=excerpt(choice.content, 200),
                attempt=attempt,
            )
        )
    markup = [m for m in (*dialect.tool_markers, *dialect.markers) if m in (choice.reasoning or "")]
    if markup:
        findings.append(
            Finding(
                "markers_in_reasoning",
                f"the reasoning holds raw markup {markup}: a tool call or a reasoning block "
                f"the server's parser left unparsed",
                f"$.choices[0].message.{choice.reasoning_field or dialect.history_field}",
                actual=excerpt(choice.reasoning, 200),
                attempt=attempt,
            )
        )
    return findings


def _switch_findings(
    choice: Choice,
    dialect: Dialect,
    thinking: bool,
    followup: bool,
    leaked: bool,
    attempt: str | None,
) -> list[Finding]:
    """Reasoning where the switch says none, or none where it says some (pure)."""
    content = _text(choice.content)
    # A redacted block is reasoning, though none of it can be read.
    reasoning = bool(_text(choice.reasoning)) or choice.redacted
    findings = []
    empty = not reasoning and not content and not choice.tool_calls
    if thinking and not reasoning and not leaked and not (followup and empty):
        findings.append(
            Finding(
                "thinking_not_honoured",
                "thinking is on, but the answer has no reasoning",
                attempt=attempt,
            )
        )
    elif (
        thinking
        and reasoning
        and not content
        and not choice.tool_calls
        and choice.finish_reason == "stop"
        and not any(m in (choice.reasoning or "") for m in dialect.tool_markers)
    ):
        findings.append(
            Finding(
                "reasoning_only_response",
                "the answer is all reasoning: content is empty, no tool call, finish_reason stop",
                "$.choices[0].message.content",
                actual=choice.content,
                attempt=attempt,
            )
        )
    elif not thinking and reasoning:
        answered = content or choice.tool_calls
        findings.append(
            Finding(
                "thinking_not_honoured" if answered else "content_in_reasoning",
                "thinking is off, but the answer reasons before its content"
                if answered
                else "thinking is off, and the answer came as reasoning with no content",
                actual=excerpt(choice.reasoning, 200),
                attempt=attempt,
            )
        )
    return findings


def truncated(result: ChatResult) -> bool:
    """The answer ran out of max_tokens before any answer or call (inside its reasoning)."""
    choice = result.choice
    return (
        choice is not None
        and choice.finish_reason == "length"
        and not _text(choice.content)
        and not choice.tool_calls
    )


def reasoning_token_findings(
    result: ChatResult, tokenizer: Tokenizer, attempt: str | None = None, tolerance: int = 0
) -> list[Finding]:
    """``completion_tokens_details.reasoning_tokens``, where reported, against the text (pure).

    The count may exceed the text by its two tags and fall one short (the model's tokens
    split it differently), and by `tolerance` (the profile's ``reasoning.tokens_tolerance``)
    more either way.
    """
    details = (result.usage or {}).get("completion_tokens_details")
    reported = details.get("reasoning_tokens") if isinstance(details, dict) else None
    choice = result.choice
    if not isinstance(reported, int) or isinstance(reported, bool) or choice is None:
        return []
    if choice.redacted:
        return []  # What the redacted reasoning holds cannot be counted.
    counted = len(tokenizer.encode_ordinary(choice.reasoning)) if choice.reasoning else 0
    low, high = counted - REASONING_SLACK[0] - tolerance, counted + REASONING_SLACK[1] + tolerance
    if low <= reported <= high:
        return []
    return [
        Finding(
            "reasoning_tokens_mismatch",
            f"usage says {reported} reasoning tokens; the reasoning returned is {counted} "
            f"tokens under the model's tokenizer",
            "$.usage.completion_tokens_details.reasoning_tokens",
            expected=counted,
            actual=reported,
            attempt=attempt,
        )
    ]


def _split(choice: Choice | None) -> tuple[str, str, tuple[str, ...]]:
    if choice is None:
        return "", "", ()
    return (
        _text(choice.reasoning),
        _text(choice.content),
        tuple(c.name or "" for c in choice.tool_calls),
    )


def _squeezed(text: str) -> str:
    """The text without its whitespace (where a split point falls changes spacing only)."""
    return "".join(text.split())


def split_findings(plain: ChatResult, streamed: ChatResult) -> list[Finding]:
    """Stream and non-stream at temperature 0 agree on reasoning, answer and calls (pure).

    The same text split at another place, reasoning on one side only, or other tools called
    is a difference of the two paths; two different generations are the wire family's
    (``stream_content_differs``), not this.
    """
    (r1, c1, t1), (r2, c2, t2) = _split(plain.choice), _split(streamed.choice)
    differ = []
    if bool(r1) != bool(r2):
        differ.append("reasoning" + (" (the stream has none)" if r1 else " (only the stream's)"))
    elif r1 != r2 and _squeezed(r1 + c1) == _squeezed(r2 + c2):
        differ.append("reasoning and content (the same text, split elsewhere)")
    if t1 != t2:
        differ.append(f"tool calls ({list(t1)} against the stream's {list(t2)})")
    if not differ:
        return []
    return [
        Finding(
            "stream_split_differs",
            f"at temperature 0 the stream and the non-stream answer differ in {'; '.join(differ)}",
            expected={"reasoning": excerpt(r1, 120), "content": excerpt(c1, 120), "calls": t1},
            actual={"reasoning": excerpt(r2, 120), "content": excerpt(c2, 120), "calls": t2},
            compare=True,
        )
    ]


def paired(
    plain: tuple[ChatResult, list[Finding]],
    streamed: tuple[ChatResult, list[Finding]],
    *,
    compare: bool,
) -> list[Finding]:
    """Both answers' findings, or only the stream's difference when that is the cause (pure).

    When the non-stream answer is right and the stream's differs from it, the stream path is
    what is wrong: its own findings are consequences, named in the difference's message.
    """
    (a, found_a), (b, found_b) = plain, streamed
    if compare and not found_a and a.ok and b.ok:
        difference = split_findings(a, b)
        if difference:
            if found_b:
                also = ", ".join(sorted({f.code for f in found_b}))
                head = difference[0]
                message = f"{head.message}; on the stream alone that is: {also}"
                difference = [dataclasses.replace(head, message=message)]
            return difference
    return found_a + found_b


def structured_findings(
    result: ChatResult, response_format: Mapping[str, Any], dialect: Dialect, attempt: str
) -> list[Finding]:
    """response_format with thinking on: the JSON in content, the reasoning kept (pure)."""
    findings = [
        f
        for f in answer_findings(result, dialect, thinking=True, attempt=attempt)
        if f.code not in ("thinking_not_honoured", "reasoning_only_response")
    ]
    choice = result.choice
    if choice is None or evidence_findings(result, attempt):
        return findings
    schema = _format_schema(response_format)
    parsed = parse_json_output(choice.content)
    invalid = (
        list(
            schema_findings(schema, parsed.value, code="structured_output_invalid", attempt=attempt)
        )
        if parsed.found
        else []
    )
    if parsed.found and parsed.code is None and not invalid:
        if not _text(choice.reasoning) and not dialect.json_ends_thinking:
            findings.append(
                Finding(
                    "thinking_mode_overridden",
                    "thinking is on, but asking for JSON gave an answer without reasoning",
                    attempt=attempt,
                )
            )
        return findings
    if any(f.code == "reasoning_markers_in_content" for f in findings):
        return findings
    findings.append(_json_misplaced(choice, schema, parsed, invalid, attempt))
    return findings


def _format_schema(response_format: Mapping[str, Any]) -> Any:
    """The JSON Schema `response_format` asks for (any object, for ``json_object``)."""
    spec = response_format.get("json_schema") or {}
    if response_format.get("type") == "json_schema":
        return spec.get("schema", {"type": "object"})
    return {"type": "object"}


def _json_misplaced(
    choice: Choice, schema: Any, parsed: ParsedJSON, invalid: Sequence[Finding], attempt: str
) -> Finding:
    """The JSON asked for is not the content: it came as reasoning, or is not valid (pure)."""
    in_reasoning = parse_json_output(choice.reasoning)
    if (
        not _text(choice.content)
        and in_reasoning.found
        and compiled_validator(schema).is_valid(in_reasoning.value)
    ):
        return Finding(
            "structured_output_in_reasoning",
            "the JSON answer came as reasoning; content is empty",
            actual=excerpt(choice.reasoning, 200),
            attempt=attempt,
        )
    detail = invalid[0].message if invalid and parsed.code is None else parsed.detail
    return Finding(
        "structured_output_invalid",
        f"with thinking on, the content is not the JSON asked for: {detail}",
        "$.choices[0].message.content",
        actual=excerpt(choice.content, 200),
        attempt=attempt,
    )


# What the structured check says when asking for JSON is what changed the reasoning; the
# control (the same request without response_format) decides whether JSON is the cause.
JSON_CAUSED = frozenset({"thinking_mode_overridden", "structured_output_in_reasoning"})


def attributed(findings: Sequence[Finding], control: ChatResult) -> list[Finding]:
    """The structured findings, with JSON named as the cause only where the control says so.

    `control` answered the same request without response_format. If it has no reasoning
    either, thinking is not honoured at all (not "JSON switched it off"); if it is all
    reasoning too, every answer comes as reasoning (not "the JSON went there") (pure).
    """
    broken = evidence_findings(control, "without-format") if control.ok else []
    if broken:
        # The control cannot say what JSON changed: its own answer is at fault.
        return [*findings, *broken]
    choice = control.choice
    reasoning = _text(choice.reasoning) if choice else ""
    answered = bool(choice and (_text(choice.content) or choice.tool_calls))
    out = []
    for finding in findings:
        if finding.code == "thinking_mode_overridden" and control.ok and not reasoning:
            finding = dataclasses.replace(
                finding,
                code="thinking_not_honoured",
                message="thinking is on, but neither the JSON answer nor the same request "
                "without response_format has reasoning",
            )
        elif finding.code == "structured_output_in_reasoning" and control.ok and not answered:
            finding = dataclasses.replace(
                finding,
                code="reasoning_only_response",
                message="the JSON answer came as reasoning, and so does the answer to the same "
                "request without response_format: every answer is all reasoning",
            )
        out.append(finding)
    return out


def effort_findings(
    lengths: Mapping[str, Sequence[int]], levels: Sequence[str]
) -> tuple[list[Finding], dict[str, Any]]:
    """Reasoning longer at the highest effort level than at the lowest, prompt by prompt (pure).

    A sign test over the prompts: the share whose highest-level reasoning is strictly longer
    than its lowest-level one, with its 95% Wilson interval. Above :data:`EFFORT_ORDERED`
    passes, below fails (``effort_not_honoured``); an interval across it decides nothing.

    Raises:
        Undecided: the interval straddles the threshold.
    """
    low, high = lengths[levels[0]], lengths[levels[-1]]
    longer = sum(h > lo for lo, h in zip(low, high, strict=True))
    interval = wilson_interval(longer, len(low))
    adjacent = [
        (a, b)
        for first, second in itertools.pairwise(levels)
        for a, b in zip(lengths[first], lengths[second], strict=True)
    ]
    metrics = {
        "levels": list(levels),
        "mean_tokens": {level: sum(v) / len(v) for level, v in lengths.items() if v},
        "ordered": rate(longer, len(low)),
        "adjacent_ordered": rate(sum(b > a for a, b in adjacent), len(adjacent)),
    }
    assert interval is not None  # the case has prompts (its schema says at least 4)
    if not any(any(v) for v in lengths.values()):
        return [
            Finding(
                "thinking_not_honoured",
                f"no effort level ({', '.join(levels)}) gave any reasoning",
            )
        ], metrics
    if interval[0] > EFFORT_ORDERED:
        return [], metrics
    if interval[1] < EFFORT_ORDERED:
        return [
            Finding(
                "effort_not_honoured",
                f"reasoning at {levels[-1]!r} was longer than at {levels[0]!r} for {longer} of "
                f"{len(low)} prompts (95% interval {interval[0]:.2f}-{interval[1]:.2f}, below "
                f"{EFFORT_ORDERED}): the effort level does not change the reasoning",
                expected=f"longer at {levels[-1]!r}",
                actual=metrics["mean_tokens"],
            )
        ], metrics
    raise Undecided(
        "effort_undecided",
        f"reasoning at {levels[-1]!r} was longer than at {levels[0]!r} for {longer} of "
        f"{len(low)} prompts (95% interval {interval[0]:.2f}-{interval[1]:.2f}, across "
        f"{EFFORT_ORDERED}): not enough evidence either way; add prompts to the case",
    )


def call_problem(
    call_name: str | None, arguments: str | None, tools: Sequence[Mapping[str, Any]]
) -> str | None:
    """Why a next call in an agent loop is not a valid one, or None when it is (pure)."""
    declared = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
    if call_name not in declared:
        return f"it calls {call_name!r}, which is not among the tools offered"
    value = parse_arguments(arguments)
    if value is None:
        return f"its arguments are not JSON: {excerpt(arguments, 80)!r}"
    errors = list(compiled_validator(declared[call_name]).iter_errors(value))
    if errors:
        return f"its arguments break the tool's schema: {errors[0].message}"
    return None


def followup_findings(
    result: ChatResult, tools: Sequence[Mapping[str, Any]], attempt: str
) -> list[Finding]:
    """After a tool result: a non-empty answer or a valid next call (pure).

    An answer that is all reasoning is ``reasoning_only_response`` (:func:`answer_findings`),
    not also an empty follow-up; one with nothing at all is ``empty_followup``.
    """
    choice = result.choice
    if choice is None:
        return []
    problems = [call_problem(c.name, c.arguments, tools) for c in choice.tool_calls]
    wrong = [p for p in problems if p]
    if wrong:
        return [
            Finding(
                "followup_call_invalid",
                f"after a tool result the next call is not valid: {wrong[0]}",
                attempt=attempt,
            )
        ]
    if not choice.tool_calls and not _text(choice.content) and not _text(choice.reasoning):
        return [
            Finding(
                "empty_followup",
                f"after a tool result the answer is empty: no content, no reasoning, no call "
                f"(finish_reason {choice.finish_reason!r})",
                "$.choices[0].message",
                actual={"content": choice.content, "reasoning": excerpt(choice.reasoning, 120)},
                attempt=attempt,
            )
        ]
    return []


def _dialect(ctx: RunContext) -> tuple[Profile, Dialect]:
    profile = ctx.profile
    if profile is None:
        raise Unsupported("needs a reference profile (--profile) with a reasoning dialect")
    dialect = profile.dialect
    if dialect is None:
        raise Unsupported("the profile declares no thinking dialect")
    return profile, dialect


def _on(dialect: Dialect) -> Mapping[str, Any]:
    if dialect.on is None:
        raise Unsupported("the profile declares no way to turn thinking on")
    return dialect.on


def _base(case: Case, ctx: RunContext, *extra: Mapping[str, Any]) -> dict[str, Any]:
    data = case.data
    fields: dict[str, Any] = {"messages": list(data["messages"])}
    for key in ("tools", "tool_choice", "max_tokens", "response_format"):
        if key in data:
            fields[key] = data[key]
    return merged(ctx.request(**fields), *extra)


def _both(
    request: Mapping[str, Any], label: str, switch: Mapping[str, Any]
) -> Generator[Request, ChatResult, list[ChatResult]]:
    """The request's non-stream and stream answers (`switch`: the contract's fields in it)."""
    results = []
    for name, stream in MODES:
        result = yield Chat(request, f"{label}-{name}", stream=stream)
        if not result.ok:
            raise Rejected(result, request, ((SWITCH_REJECTED, switch),))
        results.append(result)
    return results


def _api_dialect(case: Case, dialect: Dialect) -> Dialect:
    """The dialect a case's answers are read by.

    Over another API than chat, that API says where reasoning comes (a thinking block, a
    reasoning item), not the contract's chat field.
    """
    return dataclasses.replace(dialect, field=None) if "api" in case.data else dialect


def _switch(case: Case, dialect: Dialect, thinking: bool) -> Mapping[str, Any]:
    """The fields that switch thinking on or off, in the terms of the case's API.

    Over Messages they are the Messages reference's ``thinking`` (enabled with its smallest
    budget, or disabled) for a model whose contract can switch it so.
    """
    messages = case.data.get("api") == "messages"
    if thinking:
        on = _on(dialect)
        return {"thinking": THINKING} if messages else on
    if dialect.off is None:
        raise Unsupported(
            "the model always reasons: its contract has no way to turn thinking off"
            if dialect.always_on
            else "the profile declares no way to turn thinking off"
        )
    return {"thinking": {"type": "disabled"}} if messages else dialect.off


def _run_switch(case: Case, ctx: RunContext) -> Graded:
    profile, model_dialect = _dialect(ctx)
    dialect = _api_dialect(case, model_dialect)
    thinking = case.data["check"] == "thinking_on"
    fields = _switch(case, dialect, thinking)
    request = _base(case, ctx, fields)
    # Thinking over Messages takes no sampling settings (its reference): the answers are
    # then samples, and a stream is not held to its twin.
    greedy = not ctx.sampled
    if thinking and case.data.get("api") == "messages":
        request = {key: value for key, value in request.items() if key not in UNSAMPLED}
        greedy = False
    plain, streamed = yield from _both(request, case.data["check"], fields)
    if any(truncated(r) for r in (plain, streamed)):
        raise Undecided(
            "reasoning_truncated",
            "an answer ran out of max_tokens inside its reasoning; raise the case's max_tokens",
        )
    graded = [
        (
            r,
            answer_findings(
                r, dialect, thinking=thinking, tokenizer=profile.tokenizer, attempt=r.label
            ),
        )
        for r in (plain, streamed)
    ]
    findings = paired(graded[0], graded[1], compare=greedy)
    only = sum(1 for r, _ in graded if thinking and _reasoning_only(r))
    return findings, {"requests": 2, "answers": 2 if thinking else 0, "reasoning_only": only}


def _reasoning_only(result: ChatResult) -> bool:
    choice = result.choice
    return bool(
        choice is not None
        and _text(choice.reasoning)
        and not _text(choice.content)
        and not choice.tool_calls
    )


def _run_structured(case: Case, ctx: RunContext) -> Graded:
    _, dialect = _dialect(ctx)
    request = _base(case, ctx, _on(dialect))
    plain, streamed = yield from _both(request, "structured", _on(dialect))
    if any(truncated(r) for r in (plain, streamed)):
        raise Undecided(
            "reasoning_truncated",
            "an answer ran out of max_tokens inside its reasoning; raise the case's max_tokens",
        )
    response_format = case.data["response_format"]
    graded = [
        (r, structured_findings(r, response_format, dialect, r.label)) for r in (plain, streamed)
    ]
    requests = 2
    if any(f.code in JSON_CAUSED for _, found in graded for f in found):
        control = yield Chat(
            {k: v for k, v in request.items() if k != "response_format"}, "without-format"
        )
        requests += 1
        graded = [(r, attributed(found, control)) for r, found in graded]
    return paired(graded[0], graded[1], compare=not ctx.sampled), {"requests": requests}


def _effort_switch(case: Case, dialect: Dialect, effort: Effort) -> Mapping[str, Any]:
    """The switch sent with every effort level: the contract's, where the case's API has it.

    Responses' reasoning.effort is OpenAI's chat reasoning_effort (its protocol module renders
    one as the other); a contract that sets effort otherwise has no counterpart there, nor has
    its thinking switch.

    Raises:
        Unsupported: the case is written for Responses and the contract's effort is not
            OpenAI's.
    """
    if case.data.get("api") != "responses":
        return dialect.on or {}
    if effort.field != OPENAI_EFFORT:
        raise Unsupported(
            f"the model's contract sets effort by {effort.field}, which the Responses API has "
            f"no counterpart for"
        )
    return {}


def _run_effort(case: Case, ctx: RunContext) -> Graded:
    profile, model_dialect = _dialect(ctx)
    dialect = _api_dialect(case, model_dialect)
    effort = dialect.effort
    if effort is None:
        raise Unsupported("the profile declares no reasoning effort levels")
    switch = _effort_switch(case, dialect, effort)
    lengths: dict[str, list[int]] = {level: [] for level in effort.levels}
    findings: list[Finding] = []
    requests = 0
    for number, prompt in enumerate(case.data["prompts"], start=1):
        for level in effort.levels:
            fields = {"messages": [{"role": "user", "content": prompt}]}
            if "max_tokens" in case.data:
                fields["max_tokens"] = case.data["max_tokens"]
            request = merged(ctx.request(**fields), switch, effort.fields(level))
            result = yield Chat(request, f"prompt-{number}-{level}")
            requests += 1
            if not result.ok:
                contract: list[tuple[str, Mapping[str, Any]]] = [
                    (EFFORT_REJECTED, effort.fields(level))
                ]
                if switch:
                    contract.append((SWITCH_REJECTED, switch))
                raise Rejected(result, request, contract)
            if truncated(result):
                # A reasoning cut at max_tokens has no length to compare.
                raise Undecided(
                    "reasoning_truncated",
                    f"prompt {number} at {level!r} ran out of max_tokens inside its reasoning; "
                    f"raise the case's max_tokens",
                )
            findings += [
                f
                for f in answer_findings(
                    result,
                    dialect,
                    thinking=True,
                    tokenizer=profile.tokenizer,
                    attempt=f"prompt-{number}-{level}",
                )
                if f.code != "thinking_not_honoured"
            ]
            reasoning = result.choice.reasoning if result.choice else None
            lengths[level].append(
                len(profile.tokenizer.encode_ordinary(reasoning)) if reasoning else 0
            )
    if any(f.code in UNMEASURED for f in findings):
        # The reasoning was not separated, or not there to read: its length is unknown.
        return findings, {"requests": requests}
    ordered, metrics = effort_findings(lengths, effort.levels)
    return findings + ordered, {"requests": requests, "effort": metrics}


def _prompt_findings(
    ctx: RunContext, profile: Profile, request: Mapping[str, Any], result: ChatResult, name: str
) -> Generator[Request, ChatResult, list[Finding] | None]:
    """A follow-up's usage.prompt_tokens against the reference rendering of what was sent.

    None when the answer reports no prompt_tokens: the replayed history cannot be counted.
    """
    count = prompt_tokens(result)
    if count is None:
        return None
    rendering = profile.with_template_variables(request.get("chat_template_kwargs") or {})
    conversation = Conversation(request["messages"], request.get("tools"))
    if count == len(reference(rendering, conversation).ids):
        return []
    seen = yield from observe(ctx, conversation, count, name, full=True)
    found = grade(rendering, "reasoning_history", [(conversation, seen)])
    return [dataclasses.replace(f, attempt=name) for f in found]


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One request of an agent loop, graded.

    Args:
        name: the request's name (``stream-turn-2``).
        result: its answer.
        findings: what it got wrong.
        followup: whether it was a good follow-up to a tool result; None for the first turn.
        counted: its prompt_tokens could be compared with the reference (False: a follow-up
            whose answer reports none).
    """

    name: str
    result: ChatResult
    findings: list[Finding]
    followup: bool | None = None
    counted: bool = True


def _sent_reasoning(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Every tool-call turn of a history carries its reasoning."""
    return all(
        any(m.get(field) for field in FIELDS)
        for m in messages
        if m.get("role") == "assistant" and m.get("tool_calls")
    )


def _run_loop(
    case: Case, ctx: RunContext, profile: Profile, dialect: Dialect, label: str, stream: bool
) -> Generator[Request, ChatResult, list[Turn]]:
    """One agent loop in one mode, turn by turn, until an answer without calls."""
    data = case.data
    tools = data["tools"]
    messages: list[dict[str, Any]] = [dict(m) for m in data["messages"]]
    used: Counter[str] = Counter()
    turns: list[Turn] = []
    for turn in range(1, data.get("max_turns", 4) + 1):
        after_tool = messages[-1].get("role") == "tool"
        choice_field = data.get("first_tool_choice", "auto") if turn == 1 else "auto"
        sent = dialect.replayed(messages)
        request = merged(
            ctx.request(messages=sent, tools=tools, tool_choice=choice_field), _on(dialect)
        )
        name = f"{label}-turn-{turn}"
        result = yield Chat(request, name, stream=stream)
        if not result.ok:
            return _after_refusal(turns, (turn, name), result, request, sent, dialect)
        if truncated(result):
            raise Undecided(
                "reasoning_truncated",
                f"{name} ran out of max_tokens inside its reasoning; raise the case's max_tokens",
            )
        found = answer_findings(
            result,
            dialect,
            thinking=True,
            tokenizer=profile.tokenizer,
            attempt=name,
            followup=after_tool,
        )
        good: bool | None = None
        counted = True
        if after_tool:
            history = yield from _prompt_findings(ctx, profile, request, result, name)
            counted = history is not None
            found += history or []
            followed = followup_findings(result, tools, name)
            found += followed
            good = not followed and not any(f.code == "reasoning_only_response" for f in found)
        turns.append(Turn(name, result, found, good, counted))
        choice = result.choice
        if (
            choice is None
            or not choice.tool_calls
            or "followup_call_invalid" in {f.code for f in found}
        ):
            return turns
        outputs = [
            scripted_result(data.get("results", {}), c.name, used) for c in choice.tool_calls
        ]
        # Back in the field the contract names (a client of the lab's API sends that), else in
        # the one it came in.
        field = dialect.field or choice.reasoning_field or dialect.history_field
        messages += chat_turns(choice, outputs, field)
    return turns


def _after_refusal(
    turns: list[Turn],
    at: tuple[int, str],
    result: ChatResult,
    request: Mapping[str, Any],
    sent: Sequence[Mapping[str, Any]],
    dialect: Dialect,
) -> list[Turn]:
    """The loop's turns once the turn `at` (number, name) was refused: graded, if wrong.

    Raises:
        Rejected: the first turn was refused (the thinking switch, or the request itself).
    """
    turn, name = at
    if turn == 1:
        raise Rejected(result, request, ((SWITCH_REJECTED, _on(dialect)),))
    if not _sent_reasoning(sent) and dialect.tool_turns_need_reasoning:
        # The model gave a call without reasoning, and the contract's API refuses such a
        # history: the refusal is right (the missing reasoning is already reported).
        return turns
    error = (result.error_object or {}).get("message", "")
    refused = Finding(
        "history_rejected",
        f"turn {turn}, with the model's own reasoning in its history, was refused "
        f"with HTTP {result.status}: {error!s:.160}",
        expected="2xx",
        actual=result.status,
        attempt=name,
    )
    return [*turns, Turn(name, result, [refused])]


def loop_findings(
    plain: Sequence[Turn], streamed: Sequence[Turn], *, compare: bool
) -> list[Finding]:
    """Both loops' findings, turn against turn, until the stream's path departs (pure).

    At temperature 0 the two loops must take the same path: where a stream turn differs from
    a right non-stream turn, that difference is reported (:func:`paired`) and the stream
    loop's later turns, which answer another conversation, are not graded.
    """
    findings: list[Finding] = []
    departed = False
    for a, b in itertools.zip_longest(plain, streamed):
        if a is None or b is None or departed:
            findings += a.findings if a is not None else ([] if departed else b.findings)
            continue
        pair = paired((a.result, a.findings), (b.result, b.findings), compare=compare)
        if any(f.code == "stream_split_differs" for f in pair):
            departed = True
            pair = [
                dataclasses.replace(f, attempt=b.name) if f.code == "stream_split_differs" else f
                for f in pair
            ]
        findings += pair
    return findings


def _run_agent_loop(case: Case, ctx: RunContext) -> Graded:
    if "api" in case.data:
        return (yield from _run_api_loop(case, ctx))
    profile, dialect = _dialect(ctx)
    _on(dialect)
    loops = []
    for label, stream in MODES:
        loops.append((yield from _run_loop(case, ctx, profile, dialect, label, stream)))
    plain, streamed = loops
    findings = loop_findings(plain, streamed, compare=not ctx.sampled)
    if not findings and not any(t.followup is not None for t in (*plain, *streamed)):
        findings = _no_loop(case)
    uncounted = next((t.name for t in (*plain, *streamed) if not t.counted), None)
    if uncounted is not None and not findings:
        raise Unsupported(
            f"{NO_PROMPT_TOKENS} ({uncounted}): whether the replayed reasoning reaches the "
            "prompt cannot be seen"
        )
    followups = [
        {"turn": int(t.name.rsplit("-", 1)[1]), "ok": t.followup}
        for t in (*plain, *streamed)
        if t.followup is not None
    ]
    return findings, {"requests": len(plain) + len(streamed), "followups": followups}


def _no_loop(case: Case) -> list[Finding]:
    """Neither loop made a call, so no follow-up was graded (pure).

    Where the case's first turn requires a call, the server let the model answer without
    one; otherwise there was no loop to grade.

    Raises:
        Unsupported: the first turn did not require a call.
    """
    if case.data.get("first_tool_choice", "auto") != "required":
        raise Unsupported("the model made no call: there was no follow-up to grade")
    return [
        Finding(
            "tool_choice_required_ignored",
            "the first turn's tool_choice is required, but the answer made no call (in both "
            "modes): there was no follow-up to grade",
            expected="a tool call",
            attempt="non-stream-turn-1",
        )
    ]


def _run_invalid_history(case: Case, ctx: RunContext) -> Graded:
    _, dialect = _dialect(ctx)
    if not dialect.tool_turns_need_reasoning:
        raise Unsupported(
            "the model's contract does not say its API refuses a tool-call turn without its "
            "reasoning"
        )
    messages = [{k: v for k, v in m.items() if k not in FIELDS} for m in case.data["messages"]]
    request = merged(ctx.request(messages=messages, tools=case.data["tools"]), _on(dialect))
    what = "a tool-call turn sent back without its reasoning (the lab's API refuses it)"
    try:
        result = yield Chat(request, "without-reasoning", keep_persistent_5xx=True)
    except EndpointTimeout as exc:
        return [hang_finding(exc, what, "invalid_history")], {"requests": 1}
    return rejection_findings(result, what, "invalid_history", "without-reasoning"), {"requests": 1}


def _asked(dialect: Dialect) -> Mapping[str, Any]:
    """What asks a Responses answer for reasoning.

    Its effort at the contract's least level, as agent harnesses ask; nothing for a model that
    always reasons or states no OpenAI effort.
    """
    effort = dialect.effort
    if effort is None or effort.field != OPENAI_EFFORT or dialect.always_on:
        return {}
    return effort.fields(effort.levels[0])


def _run_thinking_roundtrip(case: Case, ctx: RunContext) -> Graded:
    # Only a model whose contract states that it thinks has reasoning to send back.
    _, dialect = _dialect(ctx)
    return (yield from run_thinking_roundtrip(case, ctx, _asked(dialect)))


def api_loop_counts(
    profile: Profile, dialect: Dialect, turns: Sequence[tuple[dict[str, Any], ChatResult, str]]
) -> list[Finding] | None:
    """A loop's follow-ups over another API, counted against the model's template (pure).

    Each conversation is rendered in the model's own terms, every earlier answer's reasoning
    in it. The counts alone are the evidence: the chat routes' ids and text say what chat
    completions would be given, not what the API's translation gives the model. Where one is
    off, the last follow-up is graded with the first as its baseline, so that a cause growing
    with the turns (reasoning left out) is told from a constant offset. None when an answer
    reports no prompt tokens.
    """
    observed = []
    for request, result, name in turns:
        count = prompt_tokens(result)
        if count is None:
            return None
        in_terms = dialect.in_model_terms(request)
        rendering = profile.with_template_variables(in_terms.get("chat_template_kwargs") or {})
        conversation = Conversation(in_terms["messages"], in_terms.get("tools"))
        seen = Observed(count, cached=cached_tokens(result))
        observed.append((rendering, conversation, seen, name))
    if all(
        abs(seen.count - len(reference(r, c).ids)) <= r.prompt_tokens_tolerance
        for r, c, seen, _ in observed
    ):
        return []
    (rendering, last, seen, name), *earlier = observed[::-1]
    case = [(last, seen)] + [(c, s) for _, c, s, _ in earlier[-1:]]
    return [
        dataclasses.replace(f, attempt=name) for f in grade(rendering, "reasoning_history", case)
    ]


def _run_api_loop(case: Case, ctx: RunContext) -> Graded:
    """An agent loop over Messages or Responses.

    Each answer, its reasoning with it, goes back as it came (:mod:`.support.thinking_back`),
    and each follow-up is graded as chat's loops are, its prompt counted as the reference
    renders the conversation with that reasoning (``reasoning_history_dropped``...).
    """
    profile, dialect = _dialect(ctx)
    _on(dialect)
    tools = case.data["tools"]
    count = Counting(dialect.history_field, lambda turns: api_loop_counts(profile, dialect, turns))
    return (
        yield from run_thinking_roundtrip(
            case,
            ctx,
            _asked(dialect),
            followup=lambda result, attempt: followup_findings(result, tools, attempt),
            count=count,
        )
    )


RUNS = {
    "thinking_on": _run_switch,
    "thinking_off": _run_switch,
    "structured": _run_structured,
    "effort": _run_effort,
    "agent_loop": _run_agent_loop,
    "invalid_history": _run_invalid_history,
    "thinking_roundtrip": _run_thinking_roundtrip,
}


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per check, the statuses; the reasoning-only rate, follow-ups by turn, effort (pure)."""
    records = list(records)
    answers = only = 0
    turns: dict[int, list[int]] = {}
    longer = prompts = 0
    for record in records:
        metrics = record.outcome.metrics
        answers += metrics.get("answers", 0)
        only += metrics.get("reasoning_only", 0)
        for followup in metrics.get("followups", ()):
            counts = turns.setdefault(int(followup["turn"]), [0, 0])
            counts[0] += bool(followup["ok"])
            counts[1] += 1
        ordered = (metrics.get("effort") or {}).get("ordered")
        if ordered:
            longer += ordered["successes"]
            prompts += ordered["trials"]
    succeeded = sum(ok for ok, _ in turns.values())
    total = sum(n for _, n in turns.values())
    return {
        "checks": status_counts(records),
        "reasoning_only": rate(only, answers),
        "followups": {
            "all": rate(succeeded, total),
            "by_turn": {str(t): rate(*turns[t]) for t in sorted(turns)},
        },
        "effort_ordered": rate(longer, prompts),
    }


def cost(case: Case) -> float:
    """Two answers (or loops of turns) per case; effort asks each prompt at each level."""
    data = case.data
    check = data["check"]
    if check == "effort":
        return 3.0 * len(data["prompts"])
    if check == "agent_loop":
        return 2.0 * int(data.get("max_turns", 4))
    if check == "thinking_roundtrip":
        return 4.0
    return QUICK if check == "invalid_history" else 2.0


def case_apis(case: Case) -> tuple[str, ...]:
    """A case written for one API (``api``), that API; any other, chat completions."""
    return (case.data["api"],) if "api" in case.data else ("chat",)


def without(request: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """`request` with the fields `fields` sets taken out, objects field by field (pure).

    The inverse of merging `fields` in: an object left empty goes too.
    """
    out = dict(request)
    for key, value in fields.items():
        inner = out.get(key)
        if isinstance(value, Mapping) and isinstance(inner, Mapping):
            rest = without(inner, value)
            if rest:
                out[key] = rest
                continue
        out.pop(key, None)
    return out


def _refusal(check: str, refused: Rejected, ctx: RunContext) -> Exchange:
    """A refused request: a failure when the contract's own fields are what is refused.

    The same request is sent again without the contract's fields, innermost first; the first
    that is answered shows that the fields left out were refused, which the lab's API accepts.
    A refusal that outlasts them is about something the contract does not state: unsupported.
    """
    result, request = refused.result, refused.request
    said = (result.error_object or {}).get("message") or result.body
    for code, fields in refused.contract:
        if request is None or not fields:
            break
        request = without(request, fields)
        control = yield Chat(request, f"without-{'-'.join(sorted(fields))}")
        if control.ok:
            finding = Finding(
                code,
                f"{_json(fields)} was refused with HTTP {result.status}: {said!s:.160}; the "
                f"same request without it was answered, and the model's contract states it",
                expected="2xx",
                actual=result.status,
            )
            metrics = {"check": check, "requests": len(ctx.observed)}
            return Outcome.from_findings([finding], metrics=metrics)
    return rejected(check, result, {"check": check, "requests": len(ctx.observed)})


def _json(fields: Mapping[str, Any]) -> str:
    return json.dumps(fields, separators=(", ", ": "))


@family(
    "reasoning",
    summarize=summarize,
    cost=cost,
    needs=lambda run: ("tokenizer_endpoints",),
    apis=API_NAMES,
    case_apis=case_apis,
    rotate=reasoning_case,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """The thinking channel, its switch and effort, and multi-turn agent loops."""
    return (yield from run_checks(case, ctx, RUNS, refusal=_refusal))
