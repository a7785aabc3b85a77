"""The wire family's generated requests (``--negative``): bad ones refused, edge ones answered.

Codes: ``invalid_request_accepted``, ``invalid_request_5xx``, ``invalid_request_hang`` and
``error_shape`` as for the hand-written invalid requests; ``error_param_wrong`` (the
refusal's ``error.param``, where the vendor gives one, names another field);
``server_degraded`` (a plain request right after the bad one fails, or slows past the same
request sent just before it, and does so again when the pair is sent once more);
``valid_request_rejected`` (an edge request refused). A pathological JSON Schema may be
refused or answered, but not with a 5xx or a hang. A bad request accepted or answered 5xx is
shrunk: smaller requests (:func:`verifier.cases.negative.smaller`) are sent, once each, until
the smallest that fails alike is found, and the finding shows it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...cases.negative import (
    BASES,
    MODEL,
    USER,
    narrowed,
    schema_fields,
    smaller,
    with_model,
)
from ...errors import EndpointError, EndpointStatusError, EndpointTimeout
from ...outcome import CaseRecord, Finding
from ...protocol.answers import ChatResult
from ...protocol.requests import Chat, Raw, Request, Retry
from .common import excerpt, rejection_findings
from .evidence import evidence_findings
from .shapes import shape_findings
from .subchecks import Graded, Unsupported

if TYPE_CHECKING:
    from ...cases.corpus import Case
    from ..registry import RunContext


def invalid_request_findings(
    result: ChatResult, attempt: str | None = None, what: str = "an invalid request"
) -> list[Finding]:
    """An invalid request must get a 4xx with an OpenAI-shaped error object (pure)."""
    wrong = rejection_findings(result, what, "invalid_request", attempt)
    if wrong:
        return wrong
    return shape_findings(result, attempt)


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


def run_generated(case: Case, ctx: RunContext) -> Graded:
    """A generated request: a bad one refused, and the server still answering the next one.

    A valid edge request must be answered.
    """
    data = case.data
    metrics: dict[str, Any] = {"field": data["field"], "mutation": data["mutation"]}
    if data.get("needs") == "vision" and not ctx.vision:
        # A bad image request to an endpoint without images says nothing of the field.
        raise Unsupported("the endpoint takes no images (probe)", metrics)
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
    plain = Chat(_plain(ctx.model, case.api), "before")
    control = None if accept else (yield from _answer_or_error(plain))
    dropped: EndpointError | None = None
    # A valid edge request must be answered: its server errors get the whole retry ladder.
    retry: Retry = "ladder" if accept else "quick"
    try:
        result = yield Raw(content, "application/json", "bad", stream=stream, retry=retry)
    except EndpointTimeout as exc:
        code = "valid_request_rejected" if accept else "invalid_request_hang"
        findings = [Finding(code, f"{what} got no answer: {exc.message}; the request, {shown}")]
    except EndpointError as exc:
        if accept:
            raise
        # No answer at all (the connection refused or closed): what the server does next says
        # whether the bad request took it down.
        dropped, findings = exc, []
    else:
        metrics["status"] = result.status
        metrics["param"] = (result.error_object or {}).get("param")
        findings = _graded(result, data, ctx, shown)
    if accept:
        return findings, {**metrics, "requests": 1}
    assert control is not None
    again = Raw(content, "application/json", "bad-2", stream=stream, retry="quick")
    hurt, requests = yield from _next_user(plain, control, again, findings, metrics, dropped)
    findings += hurt
    failed = {f.code for f in findings} & SHRUNK_CODES
    if not failed or "path" not in data:
        return findings, {**metrics, "requests": requests}
    shrunk, sends = yield from _shrink(data, ctx, failed)
    metrics.update(shrink_requests=sends, shrunk=shrunk)
    if shrunk is not None:
        smallest = excerpt(_as_sent(shrunk, data, ctx), 240)
        findings = [
            dataclasses.replace(f, message=f"{f.message}; the smallest that fails so, {smallest}")
            if f.code in failed
            else f
            for f in findings
        ]
    return findings, {**metrics, "requests": requests + sends}


def _plain(model: str, api: str) -> dict[str, Any]:
    """The plain request: chat's plain base; through another API, what every API can say."""
    if api == "chat":
        return {**BASES["plain"], "model": model}
    return {"model": model, "messages": [USER], "max_tokens": BASES["plain"]["max_tokens"]}


def _graded(
    result: ChatResult, data: Mapping[str, Any], ctx: RunContext, shown: str
) -> list[Finding]:
    """The answer to the generated request, graded by what the case expects of it.

    Raises:
        EndpointStatusError: a valid request got a server error that outlived the retries.
    """
    expect = data["expect"]
    accept, what = expect == "accept", WHAT[expect]
    if accept and result.status >= 500:
        # A server error that outlived the retries, as any valid request can get.
        raise EndpointStatusError(
            f"{ctx.model} answered a valid request HTTP {result.status} through "
            f"{result.attempts} attempts",
            status=result.status,
            attempts=result.attempts,
        )
    if accept:
        return evidence_findings(result, "bad") if result.ok else [_rejected_edge(result, shown)]
    graded = invalid_request_findings(result, "bad", what=what)
    if expect == "bounded":
        # Refused or answered, either will do; only a server error is a finding, and
        # an answer must be one.
        graded = [f for f in graded if f.code != "invalid_request_accepted"]
        graded += evidence_findings(result, "bad") if result.ok else []
    if not graded and "path" in data:
        graded = param_findings((result.error_object or {}).get("param"), data["field"])
    return [dataclasses.replace(f, message=f"{f.message}; the request, {shown}") for f in graded]


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
    dropped: EndpointError | None = None,
) -> Generator[Request, ChatResult, tuple[list[Finding], int]]:
    """The plain request right after a bad one, against the same request just before it.

    What it shows (:func:`degradation`) is checked once more (control, bad request, plain
    request again) before it is a finding: a server a bad request hurts is hurt again, a
    coincidence is not repeated; but a server that `dropped` the bad request's connection and
    then fails the next one has gone down with it, and cannot be asked again. A failure
    nothing can be said of is the case's error, unless the bad request already failed the
    case. Returns the findings and the requests the case sent in all.
    """
    after = yield from _answer_or_error(dataclasses.replace(plain, name="after"))
    if isinstance(control, ChatResult):
        metrics["baseline_s"] = round(control.latency, 3)
    if isinstance(after, ChatResult):
        metrics["after_s"] = round(after.latency, 3)
    seen = degradation(control, after)
    if seen is None:
        failure = after if isinstance(after, EndpointError) else dropped
        if failure is not None and not findings:
            raise failure
        return [], 3
    if dropped is not None and isinstance(after, EndpointError):
        said = f"; the bad request itself got no answer: {dropped.message}"
        return [_degraded(f"{seen}{said}")], 3
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
                result = yield Raw(sent, "application/json", label, stream=stream, retry="none")
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


def negative_coverage(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """The generated requests per field of the request schema: mutations sent, cases failed.

    Every field the schema declares is listed, those no generated case touched with none; a
    field of ``(body)`` stands for the mutations of the body's bytes. A case the endpoint
    could not be asked (an image request where images are not taken) covers nothing; it is
    counted as ``unsupported``. Records of several APIs give each API's coverage, of its own
    request schema, under ``apis``.
    """
    by_api: dict[str, list[CaseRecord]] = {}
    for record in records:
        by_api.setdefault(record.api, []).append(record)
    if len(by_api) > 1:
        return {"apis": {api: _coverage(api, chosen) for api, chosen in by_api.items()}}
    api, chosen = next(iter(by_api.items()))
    return _coverage(api, chosen)


def _coverage(api: str, records: list[CaseRecord]) -> dict[str, Any]:
    declared = schema_fields(api)
    fields: dict[str, dict[str, Any]] = {name: _no_cases() for name in declared}
    for record in records:
        metrics = record.outcome.metrics
        entry = fields.setdefault(metrics["field"], _no_cases())
        if record.status == "unsupported":
            entry["unsupported"] += 1
            continue
        entry["cases"] += 1
        entry["failed"] += record.status == "fail"
        entry["mutations"] = sorted({*entry["mutations"], metrics["mutation"]})
    return {
        "schema_fields": len(declared),
        "covered": sum(fields[name]["cases"] > 0 for name in declared),
        "fields": fields,
    }


def _no_cases() -> dict[str, Any]:
    return {"cases": 0, "failed": 0, "unsupported": 0, "mutations": []}
