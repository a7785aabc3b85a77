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
  ``seed_not_reproducible``, ``logprobs_missing``, ``logprobs_inconsistent``;
- errors: ``invalid_request_accepted`` (2xx), ``invalid_request_5xx``,
  ``invalid_request_hang``, ``error_shape``; for the bad requests ``--negative`` generates
  from the request schema (:mod:`verifier.cases.negative`) also ``error_param_wrong`` (the
  refusal's ``error.param`` names another field), ``server_degraded`` (a valid request sent
  right after the bad one failed), and for its valid edge requests ``valid_request_rejected``;
  its pathological JSON Schemas may be refused or answered, but not with a 5xx or a hang. A
  bad request accepted or answered 5xx is shrunk: smaller requests are sent until the smallest
  that fails alike is found, and the finding shows it;
- usage: ``usage_missing``, ``usage_total_wrong``, ``completion_tokens_mismatch`` (with a
  profile: completion_tokens far from the answer's length under the model's tokenizer);
- profile policies: ``sampling_limit_not_enforced`` (a value outside the model's limits
  accepted; the thinking switch is the reasoning family's);
- the model's contract: ``sampling_pin_violated`` (a value other than a pinned one accepted
  where the lab's API rejects it, or refused where the lab's API uses the pin instead),
  ``served_model_mismatch`` (the answer names a model other than the one asked for and the
  ids the contract lists for it), ``defaults_not_applied`` (a request that leaves out the
  sampling values of the model's generation config samples otherwise than one that states
  them, with the same seed).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..cases.negative import BASES, MODEL, narrowed, schema_fields, smaller, with_model
from ..errors import EndpointError, EndpointStatusError, EndpointTimeout
from ..outcome import CaseRecord, Finding, Outcome
from ..protocol.answers import ChatResult, Choice
from ..protocol.requests import Chat, Exchange, Raw, Request
from ..reference.profiles import model_key, pinned_values
from .common import (
    excerpt,
    hang_finding,
    rejected,
    rejection_findings,
    unreadable_findings,
    unsupported,
)
from .defaults import defaults_findings, sample_of
from .registry import QUICK, family
from .shapes import shape_findings

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..reference.tokenizer import Tokenizer
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
    """The streaming protocol of one streamed answer (pure)."""
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
    """Usage present and consistent: total = prompt + completion (pure)."""
    usage = result.usage
    if usage is None:
        return [Finding("usage_missing", "the answer has no usage object", attempt=attempt)]
    values = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return []  # a shape problem: response_shape / chunk_shape name it
    prompt, completion, total = cast(list[int], values)  # all three are ints, checked above
    if total != prompt + completion:
        return [
            Finding(
                "usage_total_wrong",
                f"total_tokens {total} is not prompt_tokens {prompt} + "
                f"completion_tokens {completion}",
                "$.usage.total_tokens",
                expected=prompt + completion,
                actual=total,
                attempt=attempt,
            )
        ]
    return []


# completion_tokens may exceed the re-encoded text by end markers (a stop token, the end of a
# thinking block) and differ by one where the model's own tokens split text differently.
COMPLETION_SLACK = (1, 2)


def _text_tokens(choice: Choice, tokenizer: Tokenizer) -> int:
    """The answer's reasoning and content, counted with the profile's tokenizer."""
    text = (choice.reasoning or "") + (choice.content or "")
    return len(tokenizer.encode_ordinary(text)) if text else 0


def completion_findings(
    result: ChatResult, tokenizer: Tokenizer, attempt: str | None = None
) -> list[Finding]:
    """completion_tokens against the answer's text under the profile's tokenizer (pure)."""
    choice = result.choice
    used = (result.usage or {}).get("completion_tokens")
    if choice is None or choice.tool_calls or not isinstance(used, int) or len(result.choices) != 1:
        return []
    counted = _text_tokens(choice, tokenizer)
    low, high = counted - COMPLETION_SLACK[0], counted + COMPLETION_SLACK[1]
    if low <= used <= high:
        return []
    return [
        Finding(
            "completion_tokens_mismatch",
            f"completion_tokens {used}, but the answer's text is "
            f"{counted} tokens under the model's tokenizer",
            "$.usage.completion_tokens",
            expected=counted,
            actual=used,
            attempt=attempt,
        )
    ]


def invalid_request_findings(
    result: ChatResult, attempt: str | None = None, what: str = "an invalid request"
) -> list[Finding]:
    """An invalid request must get a 4xx with an OpenAI-shaped error object (pure)."""
    wrong = rejection_findings(result, what, "invalid_request", attempt)
    if wrong:
        return wrong
    return shape_findings(result, attempt)


def logprob_findings(
    result: ChatResult, top: int | None, attempt: str | None = None
) -> list[Finding]:
    """Token logprobs join to the content, are <= 0, with at most `top` alternatives (pure)."""
    choice = result.choice
    if choice is None:
        return []
    if choice.logprobs is None:
        return [Finding("logprobs_missing", "logprobs were asked for, none came", attempt=attempt)]
    tokens, problems = [], []
    for position, entry in enumerate(choice.logprobs):
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            problems.append(f"entry {position} has no token")
            continue
        tokens.append(entry["token"])
        logprob = entry.get("logprob")
        if not isinstance(logprob, int | float) or logprob > 0:
            problems.append(f"entry {position} has logprob {logprob!r}")
        alternatives = entry.get("top_logprobs") or []
        if top is not None and len(alternatives) > top:
            problems.append(
                f"entry {position} has {len(alternatives)} top_logprobs, more than {top}"
            )
    joined = "".join(tokens)
    if joined != (choice.content or ""):
        problems.insert(
            0,
            f"tokens join to {excerpt(joined, 60)!r}, "
            f"the content is {excerpt(choice.content, 60)!r}",
        )
    if problems:
        return [
            Finding(
                "logprobs_inconsistent",
                "; ".join(problems[:3]),
                "$.choices[0].logprobs",
                attempt=attempt,
            )
        ]
    return []


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


def max_tokens_findings(
    result: ChatResult, limit: int, tokenizer: Tokenizer | None = None, attempt: str | None = None
) -> list[Finding]:
    """completion_tokens within the limit, and equal to it when finish_reason is length (pure).

    With the model's tokenizer, a count that breaks the limit is weighed against the answer's
    text: when the text itself fits the limit, the usage figure is what is wrong
    (completion_tokens_mismatch), not the generation.
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
        counted = _text_tokens(choice, tokenizer)
        if counted <= limit and used > limit:
            return [
                Finding(
                    "completion_tokens_mismatch",
                    f"completion_tokens {used} with a limit of {limit}, but the answer's text "
                    f"is {counted} tokens under the model's tokenizer",
                    "$.usage.completion_tokens",
                    expected=counted,
                    actual=used,
                    attempt=attempt,
                )
            ]
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


class _Unsupported(Exception):
    """The check does not apply to this endpoint or profile (the message says why)."""


class _Rejected(Exception):
    """A valid request of this family was declined with a 4xx: the feature is unsupported."""

    def __init__(self, result: ChatResult) -> None:
        self.result = result


Graded = Generator[Request, ChatResult, tuple[list[Finding], dict[str, Any]]]


def _run_invalid(case: Case, ctx: RunContext) -> Graded:
    data = case.data
    request: Request
    if "raw_body" in data:
        content_type = data.get("content_type", "application/json")
        request = Raw(data["raw_body"].encode(), content_type, "invalid")
    elif "content_type" in data:
        body = json.dumps({"model": ctx.model, **data.get("request", {})}).encode()
        request = Raw(body, data["content_type"], "invalid")
    else:
        chat_body = {"model": ctx.model, **data.get("request", {})}
        request = Chat(chat_body, "invalid", keep_persistent_5xx=True)
    try:
        result = yield request
    except EndpointTimeout as exc:
        return [hang_finding(exc, "an invalid request", "invalid_request")], {"requests": 1}
    return invalid_request_findings(result, "invalid"), {"requests": 1}


def _generated_body(data: Mapping[str, Any], ctx: RunContext) -> str:
    """A generated case's body as sent (:func:`_as_sent`; a body made on bytes, as it is).

    Sent as bytes, exactly (in the case's ``encoding``, else UTF-8): the client would
    otherwise set ``stream`` and ``stream_options`` itself, and those are fields the generator
    mutates.
    """
    if "raw_body" in data:
        return str(data["raw_body"]).replace(json.dumps(MODEL), json.dumps(ctx.model))
    return _as_sent(data["request"], data, ctx)


def _as_sent(body: Mapping[str, Any], data: Mapping[str, Any], ctx: RunContext) -> str:
    """`body` as JSON, with the run's model, within the profile's sampling policy.

    The model goes where the placeholder is; every sampling value but the changed field's is
    moved within the profile's limits and pins (:func:`narrowed`).
    """
    sampling = (ctx.profile.policies.sampling if ctx.profile else None) or {}
    keep = data["path"][0] if "path" in data else None
    return json.dumps(narrowed(with_model(body, ctx.model), sampling, keep), ensure_ascii=False)


def _run_generated(case: Case, ctx: RunContext) -> Graded:
    """A generated request: a bad one refused, and the server still answering the next one.

    A valid edge request must be answered.
    """
    data = case.data
    metrics: dict[str, Any] = {"field": data["field"], "mutation": data["mutation"]}
    if data.get("needs") == "vision" and not ctx.vision:
        # A bad image request to an endpoint without images says nothing of the field.
        raise _Unsupported("the endpoint takes no images (probe)")
    expect = data["expect"]
    accept = expect == "accept"
    what = WHAT[expect]
    sent = _generated_body(data, ctx)
    shown = f"{data['field']} {data['mutation'].replace('_', ' ')}: {excerpt(sent, 240)}"
    # An accepted streamed request is read as the stream it asked for (not retried as garbage).
    stream = (data.get("request") or {}).get("stream") is True
    content = sent.encode(data.get("encoding", "utf-8"))
    # The next user's request, right after the bad one, is a plain one any endpoint answers;
    # the same request just before is its control.
    plain = Chat({**BASES["plain"], "model": ctx.model}, "before")
    control = None if accept else (yield from _answer_or_error(plain))
    try:
        result = yield Raw(content, "application/json", "bad", stream=stream)
    except EndpointTimeout as exc:
        code = "valid_request_rejected" if accept else "invalid_request_hang"
        findings = [Finding(code, f"{what} got no answer: {exc.message}; the request, {shown}")]
    else:
        metrics["status"] = result.status
        metrics["param"] = (result.error_object or {}).get("param")
        if accept and result.status >= 500:
            # A server error that outlived the retries, as any valid request can get.
            raise EndpointStatusError(
                f"{ctx.model} answered a valid request HTTP {result.status} through "
                f"{result.attempts} attempts",
                status=result.status,
                attempts=result.attempts,
            )
        if accept:
            findings = [] if result.ok else [_rejected_edge(result, shown)]
        else:
            graded = invalid_request_findings(result, "bad", what=what)
            if expect == "bounded":
                # Refused or answered, either will do; only a server error is a finding.
                graded = [f for f in graded if f.code != "invalid_request_accepted"]
            if not graded and "path" in data:
                graded = param_findings(metrics["param"], data["field"])
            findings = [
                dataclasses.replace(f, message=f"{f.message}; the request, {shown}") for f in graded
            ]
    if accept:
        return findings, {**metrics, "requests": 1}
    assert control is not None
    again = Raw(content, "application/json", "bad-2", stream=stream)
    hurt, requests = yield from _next_user(plain, control, again, findings, metrics)
    findings += hurt
    failed = {f.code for f in findings} & SHRUNK_CODES
    if not failed or "path" not in data:
        return findings, {**metrics, "requests": requests}
    shrunk, sends = yield from _shrink(data, ctx, failed)
    metrics.update(shrink_requests=sends, shrunk=shrunk)
    if shrunk is not None:
        smallest = _as_sent(shrunk, data, ctx)
        findings = [
            dataclasses.replace(
                f,
                message=f"{f.message}; the smallest that fails so, {excerpt(smallest, 240)}",
            )
            if f.code in failed
            else f
            for f in findings
        ]
    return findings, {**metrics, "requests": requests + sends}


def _answer_or_error(request: Chat) -> Generator[Request, ChatResult, ChatResult | EndpointError]:
    """The answer to `request`, or the error it gave up with."""
    try:
        return (yield request)
    except EndpointError as exc:
        return exc


def _next_user(
    plain: Chat,
    control: ChatResult | EndpointError,
    bad: Raw,
    findings: list[Finding],
    metrics: dict[str, Any],
) -> Generator[Request, ChatResult, tuple[list[Finding], int]]:
    """The plain request right after a bad one, against the same request just before it.

    What it shows (:func:`degradation`) is checked once more (control, bad request, plain
    request again) before it is a finding: a server a bad request hurts is hurt again, a
    coincidence is not repeated. A failure nothing can be said of is the case's error, unless
    the bad request already failed the case. Returns the findings and the requests the case
    sent in all.
    """
    after = yield from _answer_or_error(dataclasses.replace(plain, name="after"))
    if isinstance(control, ChatResult):
        metrics["baseline_s"] = round(control.latency, 3)
    if isinstance(after, ChatResult):
        metrics["after_s"] = round(after.latency, 3)
    seen = degradation(control, after)
    if seen is None:
        if isinstance(after, EndpointError) and not findings:
            raise after
        return [], 3
    again_control = yield from _answer_or_error(dataclasses.replace(plain, name="before-2"))
    try:
        yield bad
    except EndpointError:
        pass
    again = yield from _answer_or_error(dataclasses.replace(plain, name="after-2"))
    confirmed = degradation(again_control, again)
    if confirmed is None:
        return [], 6
    return [_degraded(f"{seen}; sent again, it {confirmed}")], 6


def degradation(
    control: ChatResult | EndpointError, after: ChatResult | EndpointError
) -> str | None:
    """What a plain request after a bad one shows against the same request before it (pure).

    None when it shows nothing wrong, or nothing can be said: the control must have been
    answered at its first attempt (one that needed retries shows an endpoint failing without
    any bad request), a transport failure or server error must have outlived a retry (one
    failed attempt is a flaky network as often as a hurt server), and a slower answer must
    have come at its first attempt (retries wait).
    """
    if not isinstance(control, ChatResult) or not control.ok or control.attempts > 1:
        return None
    if isinstance(after, EndpointError):
        if after.attempts < 2:
            return None
        return f"got no answer through {after.attempts} attempts: {after.message}"
    if not after.ok:
        if after.status >= 500 and after.attempts < 2:
            return None
        return f"got HTTP {after.status} (attempts: {after.attempts})"
    if after.attempts == 1 and slowed(control.latency, after.latency):
        return (
            f"took {after.latency:.2f} s, where the same request just before the bad one took "
            f"{control.latency:.2f} s"
        )
    return None


# The failures a smaller request is looked for, and the most requests spent looking.
SHRUNK_CODES = frozenset({"invalid_request_accepted", "invalid_request_5xx"})
SHRINK_SENDS = 8


def _shrink(
    data: Mapping[str, Any], ctx: RunContext, failed: set[str]
) -> Generator[Request, ChatResult, tuple[dict[str, Any] | None, int]]:
    """The smallest request found that fails as the case's did, and the requests it took.

    Each smaller request (:func:`verifier.cases.negative.smaller`) is sent once, unretried:
    one answer with the failure's code is enough to take it and look for a smaller one still.
    """
    body, path = dict(data["request"]), list(data["path"])
    found: dict[str, Any] | None = None
    sends, tried = 0, set()
    while sends < SHRINK_SENDS:
        for candidate, moved in smaller(dict(data), body, path):
            key = json.dumps(candidate, sort_keys=True)
            if key in tried:
                continue
            tried.add(key)
            sends += 1
            sent = _as_sent(candidate, data, ctx).encode()
            stream = candidate.get("stream") is True
            label = f"shrink-{sends}"
            try:
                result = yield Raw(sent, "application/json", label, stream=stream, retried=False)
            except EndpointError:
                alike = False
            else:
                alike = bool({f.code for f in invalid_request_findings(result)} & failed)
            if alike:
                body, path, found = candidate, moved, candidate
                break
            if sends >= SHRINK_SENDS:
                break
        else:
            break
    return found, sends


def param_findings(param: Any, field: str) -> list[Finding]:
    """A refusal's ``error.param``, where the vendor gives one, must name the field (pure).

    It names it when one of its parts (``messages.0.content``, ``body/temperature``) is a
    part of the field (``messages[].content``): a vendor may point at the field or at what
    holds it.
    """
    if not isinstance(param, str) or not param:
        return []
    if set(re.split(r"[.\[\]/]+", param)) & set(re.split(r"[.\[\]]+", field)) - {""}:
        return []
    return [
        Finding(
            "error_param_wrong",
            f"the refusal's error.param is {param!r}, which names no part of the field at "
            f"fault, {field}",
            "$.error.param",
            expected=field,
            actual=param,
            attempt="bad",
        )
    ]


# A valid request after a bad one is slowed when it takes this many times its baseline and
# this many seconds more: queueing behind the other requests in flight moves it neither so far.
SLOWED_FACTOR = 5.0
SLOWED_MARGIN_S = 2.0


def slowed(baseline: float, after: float) -> bool:
    """Whether a request that took `baseline` seconds before a bad one was slowed by it (pure)."""
    return after > max(SLOWED_FACTOR * baseline, baseline + SLOWED_MARGIN_S)


# What each expectation calls the request, in findings.
WHAT = {
    "accept": "a valid request at the schema's boundary",
    "reject": "an invalid request",
    "bounded": "a pathological request",
}


def _rejected_edge(result: ChatResult, shown: str) -> Finding:
    said = (result.error_object or {}).get("message", "")
    return Finding(
        "valid_request_rejected",
        f"a valid request was refused with HTTP {result.status}"
        + (f" ({said!s:.160})" if said else "")
        + f"; the request, {shown}",
        expected="2xx",
        actual=result.status,
        attempt="bad",
    )


def _degraded(what: str) -> Finding:
    return Finding(
        "server_degraded",
        f"a valid request sent right after the bad one {what}",
        expected="2xx",
        attempt="after",
    )


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
    broken = unreadable_findings(result, attempt)
    if broken:
        return broken
    findings = shape_findings(result, attempt)
    if result.stream:
        include = (request.get("stream_options") or {}).get("include_usage", True)
        findings += protocol_findings(result, include_usage=include, attempt=attempt)
    tokenizer = ctx.profile.tokenizer if ctx.profile is not None else None
    if check == "usage":
        findings += usage_findings(result, attempt)
        if tokenizer is not None:
            findings += completion_findings(result, tokenizer, attempt)
    elif check == "stop":
        stop = request["stop"]
        findings += stop_findings(result, [stop] if isinstance(stop, str) else stop, attempt)
    elif check == "max_tokens":
        limit = request.get("max_completion_tokens", request.get("max_tokens"))
        findings += max_tokens_findings(result, int(limit), tokenizer, attempt)
    elif check == "n":
        findings += n_findings(result, request["n"], attempt)
    elif check == "logprobs":
        findings += logprob_findings(result, request.get("top_logprobs"), attempt)
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


def _pair_findings(check: str, results: Sequence[ChatResult], ctx: RunContext) -> list[Finding]:
    """Two answers that must agree: stream and non-stream (parity), two with one seed."""
    a, b = (r.choice for r in results)
    if not a or not b:
        return []
    if check == "parity" and (a.content, a.finish_reason) != (b.content, b.finish_reason):
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
    if check == "seed" and a.content != b.content:
        if ctx.profile is not None and ctx.profile.policies.seed_supported is False:
            raise _Unsupported(
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
        raise _Unsupported(
            "the model's contract pins temperature above 0: stream and non-stream answers "
            "are samples and need not agree"
        )
    request = _request(case, ctx)
    results = yield from _answers(case, request)
    refused = next((r for r in results if not r.ok), None)
    if refused is not None:
        raise _Rejected(refused)
    findings = [f for r in results for f in _answer_findings(check, request, r, ctx)]
    if check in ("parity", "seed") and not findings:
        findings = _pair_findings(check, results, ctx)
    return findings, {"requests": len(results)}


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
        raise _Unsupported("the profile declares no sampling limits")
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
        raise _Unsupported("the profile pins no sampling value")
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
        raise _Unsupported("the profile lists no served model ids to compare the answer's with")
    stream = bool(case.data.get("stream", False))
    label = "stream" if stream else "non-stream"
    result = yield Chat(_request(case, ctx), label, stream=stream)
    if not result.ok:
        raise _Rejected(result)
    findings = unreadable_findings(result, label) or served_model_findings(
        result, ctx.model, served, label
    )
    return findings, {"requests": 1}


def _run_generation_defaults(case: Case, ctx: RunContext) -> Graded:
    defaults = (ctx.profile.policies.generation_defaults if ctx.profile else None) or {}
    if not defaults:
        raise _Unsupported("the model's contract states no generation defaults")
    if ctx.profile is not None and ctx.profile.policies.seed_supported is False:
        raise _Unsupported("the profile says the server documents no seed support")
    omitted = {k: v for k, v in _request(case, ctx).items() if k not in {*defaults, "temperature"}}
    stated = {**omitted, **defaults}
    answers = {}
    for name, request in (("stated-1", stated), ("stated-2", stated), ("omitted", omitted)):
        answers[name] = yield Chat(request, name)
        if not answers[name].ok:
            raise _Rejected(answers[name])
    broken = [f for name, r in answers.items() for f in unreadable_findings(r, name)]
    if broken:
        return broken, {"requests": 3}
    first, second, left_out = answers.values()
    if sample_of(first) != sample_of(second):
        raise _Unsupported(
            "the same seed and sampling values gave two different samples, so a sample "
            "cannot show which values the server applied"
        )
    without: dict[str, ChatResult] = {}
    asked = 3
    if sample_of(left_out) != sample_of(first):
        for name in sorted(defaults):
            request = {k: v for k, v in stated.items() if k != name}
            result = yield Chat(request, f"without-{name}")
            asked += 1
            # A refused or unreadable answer says nothing of which value is not applied.
            if result.ok and not unreadable_findings(result, f"without-{name}"):
                without[name] = result
    return defaults_findings(defaults, first, left_out, without), {"requests": asked}


# The checks that are not "send the request, grade the answer" (see _run_answered).
RUNS: dict[str, Callable[[Case, RunContext], Graded]] = {
    "invalid": _run_invalid,
    "generated": _run_generated,
    "sampling_limits": _run_sampling_limits,
    "sampling_pins": _run_sampling_pins,
    "served_model": _run_served_model,
    "generation_defaults": _run_generation_defaults,
}


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per check: how many cases passed; with ``--negative``, its coverage per field (pure)."""
    checks: dict[str, Counter[str]] = {}
    generated = []
    for record in records:
        check = record.outcome.metrics.get("check", "?")
        checks.setdefault(check, Counter())[record.status] += 1
        if check == "generated":
            generated.append(record)
    summary: dict[str, Any] = {
        "checks": {k: dict(sorted(v.items())) for k, v in sorted(checks.items())}
    }
    if generated:
        summary["negative"] = negative_coverage(generated)
    return summary


def negative_coverage(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """The generated requests per field of the request schema: mutations sent, cases failed.

    Every field the schema declares is listed, those no generated case touched with none; a
    field of ``(body)`` stands for the mutations of the body's bytes. A case the endpoint
    could not be asked (an image request where images are not taken) covers nothing; it is
    counted as ``unsupported``.
    """
    fields: dict[str, dict[str, Any]] = {name: _no_cases() for name in schema_fields()}
    for record in records:
        metrics = record.outcome.metrics
        entry = fields.setdefault(metrics["field"], _no_cases())
        if record.status == "unsupported":
            entry["unsupported"] += 1
            continue
        entry["cases"] += 1
        entry["failed"] += record.status == "fail"
        entry["mutations"] = sorted({*entry["mutations"], metrics["mutation"]})
    declared = schema_fields()
    return {
        "schema_fields": len(declared),
        "covered": sum(fields[name]["cases"] > 0 for name in declared),
        "fields": fields,
    }


def _no_cases() -> dict[str, Any]:
    return {"cases": 0, "failed": 0, "unsupported": 0, "mutations": []}


def cost(case: Case) -> float:
    """Two requests to compare (parity, seed), one refused (invalid), else one."""
    check = case.data["check"]
    if check == "generation_defaults":
        return 3.0
    if check == "generated":
        # A plain request, a refused one, a plain one; an edge request is answered; a
        # pathological one may be.
        return {"accept": 1.0, "reject": QUICK + 2.0}.get(case.data["expect"], 3.0)
    return 2.0 if check in ("parity", "seed") else QUICK if check == "invalid" else 1.0


@family("wire", summarize=summarize, cost=cost)
def run(case: Case, ctx: RunContext) -> Exchange:
    """Shapes, streaming protocol, parameters, error responses and usage."""
    check = case.data["check"]
    try:
        findings, metrics = yield from RUNS.get(check, _run_answered)(case, ctx)
    except _Unsupported as exc:
        generated = {k: case.data[k] for k in ("field", "mutation") if check == "generated"}
        return unsupported(str(exc), {"check": check, "requests": 0, **generated})
    except _Rejected as refused:
        return rejected(check, refused.result, {"check": check, "requests": 1})
    return Outcome.from_findings(findings, metrics={**metrics, "check": check})
