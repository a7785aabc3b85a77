"""Wire: answer shapes, the streaming protocol, parameters honoured, error responses, usage.

Shapes are checked on every answer of every family (the executor records them in
each case's metrics); this family's own cases fail on them. Codes:

- shapes: ``response_shape``, ``chunk_shape``, ``error_shape`` (JSON path named),
  ``finish_reason_invalid`` (a value the reference does not document, such as
  ``stop_163586``);
- streaming: ``not_event_stream``, ``done_missing``, ``data_after_done``,
  ``role_missing``, ``role_repeated``, ``role_not_first``, ``chunk_id_changed``,
  ``empty_delta``, ``finish_reason_missing``, ``finish_reason_repeated``,
  ``usage_missing``, ``usage_not_final_chunk``, ``usage_unrequested``,
  ``chunk_not_json``, ``event_unterminated``, ``stream_content_differs``;
- parameters: ``max_tokens_not_honoured``, ``stop_not_honoured``, ``n_ignored``,
  ``seed_not_reproducible``;
- logprobs (:mod:`.support.logprob_rules`, on every answer to a request that asks for them):
  ``logprobs_missing``, ``logprobs_inconsistent``, ``logprob_positive``,
  ``top_logprobs_count_wrong``, ``top_logprobs_duplicated``, ``chosen_not_top``,
  ``chosen_logprob_differs``, ``stream_logprobs_differ``, ``top_logprobs_limit_not_enforced``;
- errors: ``invalid_request_accepted`` (2xx), ``invalid_request_5xx``,
  ``invalid_request_hang``, ``error_shape``; the requests ``--negative`` generates from the
  request schema are graded in :mod:`verifier.checks.support.bad_requests` (``error_param_wrong``,
  ``server_degraded``, ``valid_request_rejected`` besides these);
- the other APIs (Anthropic Messages, OpenAI Responses; shape, stream, usage, max_tokens, stop
  and parity cases): every problem their protocol modules record, by its own code
  (``content_block_not_stopped``, ``sequence_number_missing``, ``done_text_mismatch``...: see
  :mod:`verifier.protocol.messages`, :mod:`verifier.protocol.responses`);
- usage: ``usage_missing``, ``usage_total_wrong``, ``usage_details_inconsistent`` (cached
  input above the prompt count, reasoning above the completion count; over Messages, the
  cache counts its reference requires: ``cache_usage_missing``); completion_tokens against
  what the answer
  delivered is output accounting's, on every family's answers (:mod:`.support.accounting`:
  ``undelivered_tokens``, ``completion_tokens_mismatch``);
- profile policies: ``sampling_limit_not_enforced`` (a value outside the model's limits
  accepted; the thinking switch is the reasoning family's);
- the model's contract: ``sampling_pin_violated`` (a value other than a pinned one accepted
  where the lab's API rejects it, or refused where the lab's API uses the pin instead),
  ``served_model_mismatch`` (the answer names a model other than the one asked for and the
  ids the contract lists for it), ``defaults_not_applied`` (a request that leaves out the
  sampling values of the model's generation config samples otherwise than one that states
  them, with the same seed, on every one of four seeds whose stated sample reproduces:
  :mod:`.support.defaults` gives the rule and its error rates).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..cases.rotation import wire_case
from ..errors import EndpointTimeout
from ..outcome import CaseRecord, Finding
from ..protocol.answers import ChatResult, Choice
from ..protocol.apis import API_NAMES
from ..protocol.requests import Chat, Exchange, Raw, Request
from ..reference.profiles import model_key, pinned_values
from .registry import QUICK, family
from .support.bad_requests import (
    invalid_request_findings,
    negative_coverage,
    run_generated,
)
from .support.common import (
    excerpt,
    hang_finding,
)
from .support.defaults import (
    AGAIN,
    BLAME_SEEDS,
    OMITTED,
    SEEDS,
    STATED,
    Trial,
    decide,
    defaults_findings,
    order,
    said_nothing,
    undecided_reason,
)
from .support.evidence import evidence_findings
from .support.logprob_rules import limit_findings, logprob_findings, stream_logprob_findings
from .support.shapes import shape_findings
from .support.subchecks import Graded, Rejected, SubCheck, Unsupported, run_checks, status_counts

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..config import RunConfig
    from ..reference.tokenizer_backends import Tokenizer
    from .registry import RunContext

# Stream problems (from the accumulator) that are protocol violations, by their own code.
PROTOCOL_CODES = frozenset(
    {
        "done_missing",
        "done_repeated",
        "data_after_done",
        "role_repeated",
        "role_not_first",
        "chunk_id_changed",
        "finish_reason_missing",
        "finish_reason_repeated",
        "usage_repeated",
        "chunk_not_json",
        "chunk_not_object",
        "event_unterminated",
        "chunk_without_choices",
        "delta_missing",
        "stream_error_event",
    }
)


def protocol_findings(
    result: ChatResult, *, include_usage: bool, attempt: str | None = None
) -> list[Finding]:
    """The streaming protocol of one streamed answer (pure).

    Another API's stream is held to its own grammar: every problem its protocol module
    recorded is a finding, and its usage must come (those APIs always send it).
    """
    findings = []
    if "text/event-stream" not in result.headers.get("content-type", ""):
        content_type = result.headers.get("content-type")
        findings.append(
            Finding(
                "not_event_stream",
                f"stream answered with content-type {content_type!r}",
                expected="text/event-stream",
                actual=content_type,
                attempt=attempt,
            )
        )
        return findings
    if result.api != "chat":
        return api_problem_findings(result, attempt) + (
            []
            if result.usage is not None or "usage_malformed" in {p.code for p in result.problems}
            else [Finding("usage_missing", "the stream carried no usage", attempt=attempt)]
        )
    findings += [
        Finding(p.code, p.message, p.where, attempt=attempt)
        for p in result.problems
        if p.code in PROTOCOL_CODES
    ]
    for choice in result.choices:
        if choice.role is None:
            findings.append(
                Finding("role_missing", f"choice {choice.index} never sent a role", attempt=attempt)
            )
    if result.empty_deltas:
        findings.append(
            Finding(
                "empty_delta",
                f"{result.empty_deltas} chunk(s) with an empty delta and no finish_reason",
                attempt=attempt,
            )
        )
    return findings + usage_chunk_findings(result, include_usage=include_usage, attempt=attempt)


def api_problem_findings(result: ChatResult, attempt: str | None = None) -> list[Finding]:
    """Every problem another API's protocol module recorded in an answer, as a finding (pure).

    Those modules record only breaches of their API's reference (its event grammar, its
    answer's fields), so each is one.
    """
    return [Finding(p.code, p.message, p.where, attempt=attempt) for p in result.problems]


# The checks another API can be held to: its answers' shapes and streams, usage, and the
# parameters it has words for (a check it cannot say is left unsupported when it is rendered).
API_CHECKS = frozenset({"shape", "stream", "parity", "usage", "max_tokens", "stop"})


def case_apis(case: Case) -> tuple[str, ...]:
    """The APIs a wire case is sent through.

    A bad request written in one API's terms (``api``), that API; the checks every API has
    words for, each; chat's own checks, chat.
    """
    if "api" in case.data:
        return (case.data["api"],)
    return API_NAMES if case.data.get("check") in API_CHECKS else ("chat",)


def usage_chunk_findings(
    result: ChatResult, *, include_usage: bool, attempt: str | None = None
) -> list[Finding]:
    """A stream's usage: in a final chunk with no choices exactly when it was asked for (pure)."""
    if not include_usage:
        if result.usage is not None and result.usage_source == "final_chunk":
            return [
                Finding(
                    "usage_unrequested",
                    "a usage chunk came although include_usage is false",
                    attempt=attempt,
                )
            ]
        return []
    if result.usage is None:
        return [
            Finding(
                "usage_missing",
                "stream_options.include_usage is set, but no usage chunk came",
                attempt=attempt,
            )
        ]
    if result.usage_source != "final_chunk":
        return [
            Finding(
                "usage_not_final_chunk",
                f"usage came in a chunk with choices "
                f"({result.usage_source}), not in a final chunk with choices []",
                attempt=attempt,
            )
        ]
    return []


def usage_findings(result: ChatResult, attempt: str | None = None) -> list[Finding]:
    """Usage present and consistent: total = prompt + completion, no part larger than its count.

    The parts: cached input of the prompt, reasoning of the completion (pure).
    """
    usage = result.usage
    if usage is None:
        return [Finding("usage_missing", "the answer has no usage object", attempt=attempt)]
    values = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return []  # a shape problem: response_shape / chunk_shape name it
    prompt, completion, total = cast(list[int], values)  # all three are ints, checked above
    findings = []
    if total != prompt + completion:
        findings.append(
            Finding(
                "usage_total_wrong",
                f"total_tokens {total} is not prompt_tokens {prompt} + "
                f"completion_tokens {completion}",
                "$.usage.total_tokens",
                expected=prompt + completion,
                actual=total,
                attempt=attempt,
            )
        )
    for details, part, whole, count in (
        ("prompt_tokens_details", "cached_tokens", "prompt_tokens", prompt),
        ("completion_tokens_details", "reasoning_tokens", "completion_tokens", completion),
    ):
        given = (usage.get(details) or {}).get(part)
        if isinstance(given, int) and not isinstance(given, bool) and given > count:
            findings.append(
                Finding(
                    "usage_details_inconsistent",
                    f"{details}.{part} {given} is more than the {whole} it is part of, {count}",
                    f"$.usage.{details}.{part}",
                    expected=f"at most {count}",
                    actual=given,
                    attempt=attempt,
                )
            )
    return findings


def _text_tokens(choice: Choice, tokenizer: Tokenizer) -> int:
    """The answer's reasoning and content, counted with the profile's tokenizer."""
    text = (choice.reasoning or "") + (choice.content or "")
    return len(tokenizer.encode_ordinary(text)) if text else 0


def stop_findings(
    result: ChatResult, stops: Sequence[str], attempt: str | None = None
) -> list[Finding]:
    """No stop sequence in the content (pure)."""
    choice = result.choice
    content = (choice.content if choice else None) or ""
    hit = [s for s in stops if s and s in content]
    if hit:
        return [
            Finding(
                "stop_not_honoured",
                f"the content contains the stop sequence {hit[0]!r}",
                actual=excerpt(content, 120),
                attempt=attempt,
            )
        ]
    return []


def stop_reason_findings(
    result: ChatResult,
    stops: Sequence[str],
    without: ChatResult | None = None,
    attempt: str | None = None,
) -> list[Finding]:
    """Messages' ``stop_reason`` and ``stop_sequence`` against what ended the answer (pure).

    The request's answer without its stop sequences (`without`, greedy) says what did: where
    it goes on with one of them at the point this answer stopped, that sequence ended it
    (``stop_sequence``, naming it); where it is this answer and ended its turn, the answer
    ended on its own (``end_turn``, naming none). Without that evidence (no such answer, or
    one that went another way) only the answer's own two fields are held to each other: a
    sequence is named exactly when the reason is ``stop_sequence``, and it is one the request
    gave.
    """
    choice = result.choice
    if choice is None or choice.stop_reason is None:
        return []
    reason, sequence = choice.stop_reason, choice.stop_sequence
    ended = _what_ended(choice.content or "", stops, without)
    want: dict[str, Any] | None = None
    if ended is None:
        named = sequence is not None
        if named == (reason == "stop_sequence") and (not named or sequence in stops):
            return []
        why = "its stop_reason and stop_sequence disagree, or name no sequence the request gave"
    else:
        wanted, sequences = ended
        if reason == wanted and (sequence in sequences if sequences else sequence is None):
            return []
        want = {"stop_reason": wanted, "stop_sequence": sequences[0] if sequences else None}
        why = (
            "a stop sequence ended it (the same request without its stop sequences goes on "
            f"with {sequences[0]!r} where this answer stopped)"
            if sequences
            else "it ended its turn (the same request without its stop sequences says the same)"
        )
    return [
        Finding(
            "stop_reason_mismatch",
            f"the answer says stop_reason {reason!r}, stop_sequence {sequence!r}, but {why}",
            "$.stop_reason",
            expected=want,
            actual={"stop_reason": reason, "stop_sequence": sequence},
            attempt=attempt,
        )
    ]


def _what_ended(
    content: str, stops: Sequence[str], without: ChatResult | None
) -> tuple[str, list[str]] | None:
    """What ended an answer with this content: its stop reason and the sequences it may name.

    Read off the same request's answer without stop sequences (any sequence it goes on with
    at that point may be named); None when that answer is not evidence (none, or it went
    another way).
    """
    free = without.choice if without is not None else None
    if free is None or free.content is None or not free.content.startswith(content):
        return None
    rest = free.content[len(content) :]
    hit = [stop for stop in stops if stop and rest.startswith(stop)]
    if hit:
        return "stop_sequence", hit
    if not rest and free.stop_reason == "end_turn":
        return "end_turn", []
    return None


def max_tokens_findings(
    result: ChatResult, limit: int, tokenizer: Tokenizer | None = None, attempt: str | None = None
) -> list[Finding]:
    """completion_tokens within the limit, and equal to it when finish_reason is length (pure).

    With the model's tokenizer, a count that breaks the limit is weighed against the answer's
    text: when the text itself fits the limit, the usage figure is what is wrong, not the
    generation, and output accounting reports the bill (``undelivered_tokens``).
    """
    usage = result.usage or {}
    used = usage.get("completion_tokens")
    choice = result.choice
    if not isinstance(used, int):
        return []
    if not (
        used > limit or (choice is not None and choice.finish_reason == "length" and used != limit)
    ):
        return []
    finish = choice.finish_reason if choice else None
    if tokenizer is not None and choice is not None and not choice.tool_calls:
        if _text_tokens(choice, tokenizer) <= limit and used > limit:
            return []
    unweighed = (
        ""
        if tokenizer is not None
        else "; without a profile's tokenizer the text cannot tell this from a miscount"
    )
    return [
        Finding(
            "max_tokens_not_honoured",
            f"completion_tokens {used} with a limit of {limit} (finish_reason {finish!r})"
            f"{unweighed}",
            expected=limit,
            actual=used,
            attempt=attempt,
        )
    ]


def _request(case: Case, ctx: RunContext) -> dict[str, Any]:
    return ctx.request(**case.data.get("request", {}))


def _run_invalid(case: Case, ctx: RunContext) -> Graded:
    data = case.data
    request: Request
    if "raw_body" in data:
        content_type = data.get("content_type", "application/json")
        request = Raw(data["raw_body"].encode(), content_type, "invalid")
    elif "content_type" in data or "api" in data:
        # Another API's request is its own body, sent exactly: no chat body to render.
        body = json.dumps({"model": ctx.model, **data.get("request", {})}).encode()
        request = Raw(body, data.get("content_type", "application/json"), "invalid")
    else:
        chat_body = {"model": ctx.model, **data.get("request", {})}
        request = Chat(chat_body, "invalid", keep_persistent_5xx=True)
    try:
        result = yield request
    except EndpointTimeout as exc:
        return [hang_finding(exc, "an invalid request", "invalid_request")], {"requests": 1}
    return invalid_request_findings(result, "invalid"), {"requests": 1}


def _answers(
    case: Case, request: Mapping[str, Any]
) -> Generator[Request, ChatResult, list[ChatResult]]:
    """The check's answers to `request`: two to compare (parity, seed), else one."""
    check = case.data["check"]
    stream = bool(case.data.get("stream", False))
    if check == "parity":
        names = [("non-stream", False), ("stream", True)]
    elif check == "seed":
        names = [("seed-1", stream), ("seed-2", stream)]
    else:
        names = [("stream" if stream else "non-stream", stream)]
    results = []
    for name, streamed in names:
        results.append((yield Chat(request, name, stream=streamed)))
    return results


def _answer_findings(
    check: str, request: Mapping[str, Any], result: ChatResult, ctx: RunContext
) -> list[Finding]:
    """What one answer of the check got wrong: shape, stream protocol, the check's own rule."""
    attempt = result.label
    broken = evidence_findings(result, attempt)
    if broken:
        return broken
    findings = shape_findings(result, attempt)
    if result.stream:
        include = (request.get("stream_options") or {}).get("include_usage", True)
        findings += protocol_findings(result, include_usage=include, attempt=attempt)
    elif result.api != "chat":
        findings += api_problem_findings(result, attempt)
    tokenizer = ctx.profile.tokenizer if ctx.profile is not None else None
    if check == "usage":
        # completion_tokens against the delivered answer: output accounting, on every answer.
        findings += usage_findings(result, attempt)
    elif check == "stop":
        stop = request["stop"]
        findings += stop_findings(result, [stop] if isinstance(stop, str) else stop, attempt)
    elif check == "max_tokens":
        limit = request.get("max_completion_tokens", request.get("max_tokens"))
        findings += max_tokens_findings(result, int(limit), tokenizer, attempt)
    elif check == "n":
        findings += n_findings(result, request["n"], attempt)
    if request.get("logprobs"):
        greedy = request.get("temperature") == 0
        findings += logprob_findings(
            result, request.get("top_logprobs"), greedy=greedy, attempt=attempt
        )
    return findings


def n_findings(result: ChatResult, n: int, attempt: str | None = None) -> list[Finding]:
    """``n`` choices, indexed 0 to n-1 (pure)."""
    indexes = sorted(c.index for c in result.choices)
    if indexes == list(range(n)):
        return []
    return [
        Finding(
            "n_ignored",
            f"n={n} gave choices {indexes}",
            expected=list(range(n)),
            actual=indexes,
            attempt=attempt,
        )
    ]


def _pair_findings(
    check: str, request: Mapping[str, Any], results: Sequence[ChatResult], ctx: RunContext
) -> list[Finding]:
    """Two answers that must agree: stream and non-stream (parity), two with one seed."""
    a, b = (r.choice for r in results)
    if not a or not b:
        return []
    # No content is no content, whether sent as "" or as null (a stream with no content chunk).
    if check == "parity" and (a.content or "", a.finish_reason) != (
        b.content or "",
        b.finish_reason,
    ):
        return [
            Finding(
                "stream_content_differs",
                "the streamed content differs from the "
                "non-stream content at temperature 0 with a seed",
                expected=a.content,
                actual=b.content,
                compare=True,
            )
        ]
    if check == "parity" and request.get("logprobs"):
        return stream_logprob_findings(results[0], results[1])
    if check == "seed" and a.content != b.content:
        if ctx.profile is not None and ctx.profile.policies.seed_supported is False:
            raise Unsupported(
                "the same seed gave different content, and the profile says "
                "the server documents no seed support"
            )
        return [
            Finding(
                "seed_not_reproducible",
                "the same request with the same seed gave different content",
                expected=a.content,
                actual=b.content,
                compare=True,
            )
        ]
    return []


def _run_answered(case: Case, ctx: RunContext) -> Graded:
    check = case.data["check"]
    if check == "parity" and ctx.sampled:
        raise Unsupported(
            "the model's contract pins temperature above 0: stream and non-stream answers "
            "are samples and need not agree"
        )
    request = _request(case, ctx)
    results = yield from _answers(case, request)
    refused = next((r for r in results if not r.ok), None)
    if refused is not None:
        raise Rejected(refused)
    if request.get("logprobs"):
        _require_content_tokens(results)
    findings = [f for r in results for f in _answer_findings(check, request, r, ctx)]
    if check in ("parity", "seed") and not findings:
        findings = _pair_findings(check, request, results, ctx)
    if check == "stop" and case.api == "messages":
        # Messages says whether a stop sequence ended the answer, and which: the same request
        # without them, greedy, shows what did (sampled, it shows nothing).
        evidence = None
        if not ctx.sampled:
            plain = {k: v for k, v in request.items() if k != "stop"}
            without = yield Chat(plain, "without-stop")
            evidence = without if without.ok else None
        stop = request["stop"]
        stops = [stop] if isinstance(stop, str) else stop
        findings += [f for r in results for f in stop_reason_findings(r, stops, evidence, r.label)]
        return findings, {"requests": len(results) + (not ctx.sampled)}
    return findings, {"requests": len(results)}


def _require_content_tokens(results: Sequence[ChatResult]) -> None:
    """Logprobs are read off content tokens: none when max_tokens went on reasoning.

    A thinking model can spend a small ``max_tokens`` before its answer starts; its logprobs
    then cover nothing, and passing them would be a verdict without evidence.
    """
    choices = [r.choice for r in results]
    if all(
        c is not None and not c.content and c.reasoning and c.finish_reason == "length"
        for c in choices
    ):
        raise Unsupported(
            "max_tokens ran out in the reasoning: no content token to read logprobs of",
            {"requests": len(results)},
        )


def _run_top_logprobs_limit(case: Case, ctx: RunContext) -> Graded:
    """``top_logprobs`` above the API's maximum: a 4xx, or every alternative asked for."""
    request = _request(case, ctx)
    try:
        result = yield Chat(request, "above-maximum", keep_persistent_5xx=True)
    except EndpointTimeout as exc:
        return [hang_finding(exc, "top_logprobs above the maximum", "invalid_request")], {
            "requests": 1
        }
    if not result.ok:
        metrics = {"requests": 1, "above_maximum": "refused"}
        return invalid_request_findings(
            result, result.label, "top_logprobs above the maximum"
        ), metrics
    broken = evidence_findings(result, result.label)
    if broken:
        return broken, {"requests": 1}
    _require_content_tokens([result])
    asked = int(request["top_logprobs"])
    if result.choice is not None and result.choice.logprobs is None:
        # Accepted without logprobs: nothing shows whether the alternatives were cut.
        return logprob_findings(result, asked, greedy=False, attempt=result.label), {"requests": 1}
    cut = limit_findings(result, asked)
    metrics = {"requests": 1, "above_maximum": "cut" if cut else "honoured"}
    return shape_findings(result, result.label) + cut, metrics


def _outside(limit: Mapping[str, float]) -> list[float]:
    """Values just outside a sampling limit (``max``, ``min``)."""
    wrong = []
    if "max" in limit:
        wrong.append(limit["max"] + 0.5)
    if "min" in limit:
        wrong.append(limit["min"] - 0.5)
    return wrong


def _run_sampling_limits(case: Case, ctx: RunContext) -> Graded:
    sampling = (ctx.profile.policies.sampling if ctx.profile else None) or {}
    limits = {n: lim for n, lim in sampling.items() if "min" in lim or "max" in lim}
    if not limits:
        raise Unsupported("the profile declares no sampling limits")
    findings: list[Finding] = []
    requests = 0
    for name, limit in sorted(limits.items()):
        for value in _outside(limit):
            request = {**_request(case, ctx), name: value}
            result = yield Chat(request, f"{name}={value}", keep_persistent_5xx=True)
            requests += 1
            if not 400 <= result.status < 500:
                findings.append(
                    Finding(
                        "sampling_limit_not_enforced",
                        f"{name}={value} is outside the "
                        f"model's limits {limit} but was answered HTTP {result.status}",
                        expected="4xx",
                        actual=result.status,
                    )
                )
    return findings, {"requests": requests}


def off_pin(name: str, pin: Mapping[str, Any]) -> float:
    """A value none of a sampling pin's values (``fixed`` or ``values``) is, within its range."""
    pinned = [float(v) for v in pinned_values(pin) or ()]
    step = 1.0 if name == "n" else 0.25
    candidates = [max(pinned) + step, min(pinned) - step]
    inside = [v for v in candidates if pin.get("min", v) <= v <= pin.get("max", v) and v >= 0]
    return inside[0] if inside else candidates[0]


def pin_findings(
    name: str, value: float, pin: Mapping[str, Any], result: ChatResult
) -> list[Finding]:
    """An off-pin value is rejected (4xx) or accepted, as the contract's off_policy says (pure)."""
    pinned = list(pinned_values(pin) or ())
    policy = pin.get("off_policy", "reject")
    if policy == "reject" and not 400 <= result.status < 500:
        return [
            Finding(
                "sampling_pin_violated",
                f"{name}={value} was answered HTTP {result.status}; the model's contract pins "
                f"{name} to {pinned} and the lab's API rejects other values",
                expected="4xx",
                actual=result.status,
                attempt=result.label,
            )
        ]
    if policy == "coerce" and not result.ok:
        return [
            Finding(
                "sampling_pin_violated",
                f"{name}={value} was refused with HTTP {result.status}; the model's contract "
                f"pins {name} to {pinned}, and the lab's API accepts other values and uses it",
                expected="2xx",
                actual=result.status,
                attempt=result.label,
            )
        ]
    return []


def _run_sampling_pins(case: Case, ctx: RunContext) -> Graded:
    limits = (ctx.profile.policies.sampling if ctx.profile else None) or {}
    pins = {n: p for n, p in sorted(limits.items()) if pinned_values(p)}
    if not pins:
        raise Unsupported("the profile pins no sampling value")
    findings: list[Finding] = []
    for name, pin in pins.items():
        value = off_pin(name, pin)
        request = {**_request(case, ctx), name: int(value) if name == "n" else value}
        result = yield Chat(request, f"{name}={value}", keep_persistent_5xx=True)
        findings += pin_findings(name, value, pin, result)
    return findings, {"requests": len(pins)}


# Headers that name the model that answered (OpenAI's own API sends openai-model).
MODEL_HEADERS = ("openai-model",)


def served_model_findings(
    result: ChatResult, asked: str, aliases: Sequence[str], attempt: str | None = None
) -> list[Finding]:
    """The answer's ``model`` and model header name the model asked for or an alias (pure).

    Ids compare as profiles select them: case-insensitively, by their last ``/`` part.
    """
    accepted = {model_key(asked)} | {model_key(alias) for alias in aliases}
    named = [("$.model", result.model)]
    named += [(f"header {h}", result.headers.get(h)) for h in MODEL_HEADERS]
    for where, value in named:
        if isinstance(value, str) and model_key(value) not in accepted:
            return [
                Finding(
                    "served_model_mismatch",
                    f"asked for {asked!r}, the answer's {where} is {value!r}, which is "
                    f"neither that nor an id the model's contract lists for it",
                    where if where.startswith("$") else None,
                    expected=asked,
                    actual=value,
                    attempt=attempt,
                )
            ]
    return []


def _run_served_model(case: Case, ctx: RunContext) -> Graded:
    served = ctx.profile.settings.get("served_models") if ctx.profile else None
    if not served:
        raise Unsupported("the profile lists no served model ids to compare the answer's with")
    stream = bool(case.data.get("stream", False))
    label = "stream" if stream else "non-stream"
    result = yield Chat(_request(case, ctx), label, stream=stream)
    if not result.ok:
        raise Rejected(result)
    findings = evidence_findings(result, label) or served_model_findings(
        result, ctx.model, served, label
    )
    return findings, {"requests": 1}


def _run_generation_defaults(case: Case, ctx: RunContext) -> Graded:
    defaults = (ctx.profile.policies.generation_defaults if ctx.profile else None) or {}
    if not defaults:
        raise Unsupported("the model's contract states no generation defaults")
    if ctx.profile is not None and ctx.profile.policies.seed_supported is False:
        raise Unsupported("the profile says the server documents no seed support")
    omitted = {k: v for k, v in _request(case, ctx).items() if k not in {*defaults, "temperature"}}
    stated = {**omitted, **defaults}
    bodies = {STATED: stated, AGAIN: stated, OMITTED: omitted}
    trials: list[Trial] = []
    asked = 0
    ruling = None
    while ruling is None:
        seed = ctx.seed + len(trials)
        answers: dict[str, ChatResult] = {}
        for name in order(seed):
            label = f"seed-{seed}-{name}"
            answers[name] = yield Chat({**bodies[name], "seed": seed}, label)
            asked += 1
            if not answers[name].ok:
                raise Rejected(answers[name])
            broken = evidence_findings(answers[name], label)
            if broken:
                return broken, {"requests": asked}
            if said_nothing(answers[name]):
                raise Unsupported(
                    f"the answer to {label} has no text, reasoning or call: it shows no sample",
                    {"requests": asked},
                )
        trials.append(Trial(seed, answers[STATED], answers[AGAIN], answers[OMITTED]))
        ruling = decide([t.kind for t in trials])
    metrics: dict[str, Any] = {"seeds": [t.kind for t in trials], "ruling": ruling}
    if ruling == "undecided":
        raise Unsupported(undecided_reason(trials), {"requests": asked, **metrics})
    without: dict[str, list[ChatResult]] = {}
    if ruling == "not_applied":
        for name in sorted(defaults):
            request = {k: v for k, v in stated.items() if k != name}
            for trial in trials[:BLAME_SEEDS]:
                label = f"seed-{trial.seed}-without-{name}"
                result = yield Chat({**request, "seed": trial.seed}, label)
                asked += 1
                # A refused or unreadable answer says nothing of which value is not applied.
                if result.ok and not evidence_findings(result, label):
                    without.setdefault(name, []).append(result)
    findings = defaults_findings(defaults, trials, without)
    return findings, {"requests": asked, **metrics}


# The checks that are not "send the request, grade the answer" (see _run_answered).
RUNS: dict[str, SubCheck] = {
    "invalid": _run_invalid,
    "generated": run_generated,
    "sampling_limits": _run_sampling_limits,
    "sampling_pins": _run_sampling_pins,
    "served_model": _run_served_model,
    "generation_defaults": _run_generation_defaults,
    "top_logprobs_limit": _run_top_logprobs_limit,
}


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per check: how many cases passed; with ``--negative``, its coverage per field (pure)."""
    records = list(records)
    summary: dict[str, Any] = {"checks": status_counts(records)}
    generated = [r for r in records if r.outcome.metrics.get("check") == "generated"]
    if generated:
        summary["negative"] = negative_coverage(generated)
    return summary


def cost(case: Case) -> float:
    """Two requests to compare (parity, seed), one refused (invalid), else one."""
    check = case.data["check"]
    if check == "generation_defaults":
        # Three requests a seed; a pass stops after SEEDS - 1 seeds.
        return 3.0 * SEEDS
    if check == "generated":
        # A plain request, a refused one, a plain one; an edge request is answered; a
        # pathological one may be.
        return {"accept": 1.0, "reject": QUICK + 2.0}.get(case.data["expect"], 3.0)
    return 2.0 if check in ("parity", "seed") else QUICK if check == "invalid" else 1.0


def extra_cases(run: RunConfig) -> tuple[list[Case], str, str] | None:
    """``--negative N``: N bad or edge requests per API generated from the run's seed, as cases.

    Each API's are made from its own request schema, for the APIs ``--api`` names (every
    API without it: those the endpoint does not serve are not sent).
    """
    if not run.negative:
        return None
    from ..cases.negative import negative_cases

    cases, digest = negative_cases(run.negative, run.seed, run.apis or API_NAMES)
    return cases, "wire/negative", digest


# The generated set's image requests are sent only where the probe finds images taken.
@family(
    "wire",
    summarize=summarize,
    cost=cost,
    needs=lambda run: ("images",) if run.negative else (),
    extra_cases=extra_cases,
    apis=API_NAMES,
    case_apis=case_apis,
    rotate=wire_case,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """Shapes, streaming protocol, parameters, error responses and usage."""
    return (yield from run_checks(case, ctx, RUNS, default=_run_answered))
