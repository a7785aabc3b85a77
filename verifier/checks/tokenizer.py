"""Tokenizer parity: the endpoint's token ids against the reference tokenizer, token for token.

Each ``ids`` case is a one-message conversation whose prompt ids the server is
asked for by the best rung of the ladder it offers (see protocol/tokenize.py),
cross-checked with ``usage.prompt_tokens``; closed endpoints are compared by
differences of ``usage.prompt_tokens`` against a fixed conversation, which cancel
a hidden system prompt or an accounting skew (those are chat_template's to
report). A cause is named only when the evidence singles it out (see
:mod:`.support.renderings`): ``special_token_injection``, ``input_normalised``,
``double_bos``, ...; otherwise:

- ``token_ids_mismatch`` (the first differing position, with the text around it),
  ``token_count_mismatch`` (by differences of counts: generation tokenizes the text
  differently);
- ``tokenize_endpoint_disagrees``: ``/tokenize`` with messages, which claims the
  generation path's ids, gives other ids than the reference while generation's
  ``usage.prompt_tokens`` agrees with it;
- ``detokenize_mismatch``: ids turned back into text give other text.

Over Anthropic Messages and OpenAI Responses a text's case is judged by differences of that
API's own counts (``input_tokens``): the tokenizer routes say what chat completions is given,
not what the API's translation gives the model. ``/detokenize`` is chat's alone.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..cases.rotation import tokenizer_case
from ..outcome import CaseRecord, Finding, Outcome
from ..protocol.answers import ChatResult
from ..protocol.apis import API_NAMES
from ..protocol.requests import Chat, Exchange
from ..protocol.tokenize import detokenize_answer, prompt_token_ids
from .registry import QUICK, family
from .support.common import excerpt, unsupported
from .support.evidence import NO_PROMPT_TOKENS, Malformed, cached_tokens, counted
from .support.prompt_counts import double_count_finding
from .support.renderings import (
    Conversation,
    Observed,
    described,
    explaining,
    first_difference,
    reference,
)
from .support.subchecks import status_counts

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..reference.profiles import Profile
    from .registry import RunContext

# The fixed conversation counts are compared against.
ANCHOR = "x"
# The cause that a count can fit by chance, and which one more request puts to the test.
NORMALISED = "input_normalised"


def _conversation(text: str) -> Conversation:
    return Conversation([{"role": "user", "content": text}])


def _named(code: str, how: str, expected: Any, actual: Any) -> Finding:
    return Finding(
        code,
        f"{how} are what the reference gives if {described([code])}, and nothing else",
        expected=expected,
        actual=actual,
    )


def id_findings(profile: Profile, text: str, ids: Sequence[int]) -> list[Finding]:
    """The endpoint's ids of a one-message prompt against the reference's (pure)."""
    conversation = _conversation(text)
    expected = reference(profile, conversation).ids
    if tuple(ids) == expected:
        return []
    causes = explaining(profile, [(conversation, Observed(len(ids), tuple(ids)))])
    if len(causes) == 1:
        return [_named(causes[0], "the endpoint's ids", len(expected), len(ids))]
    at = first_difference(expected, ids)
    window = slice(max(0, at - 3), at + 4)
    decode = profile.tokenizer.decode
    also = f"; consistent with: {described(causes)}" if causes else ""
    return [
        Finding(
            "token_ids_mismatch",
            f"ids differ from position {at} of {len(expected)} (endpoint has {len(ids)}): "
            f"reference {list(expected[window])} = {decode(expected[window])!r}, "
            f"endpoint {list(ids[window])} = {decode(ids[window])!r}{also}",
            f"$.tokens[{at}]",
            expected=list(expected[window]),
            actual=list(ids[window]),
        )
    ]


def count_findings(profile: Profile, text: str, count: int, anchor: int) -> list[Finding]:
    """Generation's count of a text against the reference, by the difference from the anchor.

    The difference cancels what every prompt has in common (a hidden system prompt, a
    constant accounting skew), so what is left is how the text itself is tokenized (pure).
    """
    case = [
        (_conversation(text), Observed(count)),
        (_conversation(ANCHOR), Observed(anchor)),
    ]
    want = len(reference(profile, case[0][0]).ids) - len(reference(profile, case[1][0]).ids)
    if count - anchor == want:
        return []
    causes = explaining(profile, case)
    if len(causes) == 1:
        return [_named(causes[0], "the counts of the text and of the anchor", want, count - anchor)]
    also = f"; consistent with: {described(causes)}" if causes else ""
    return [
        Finding(
            "token_count_mismatch",
            f"the text costs {count - anchor} prompt tokens more than {ANCHOR!r}, "
            f"the reference says {want}{also}",
            expected=want,
            actual=count - anchor,
        )
    ]


def _prompt_tokens(
    ctx: RunContext, text: str, name: str
) -> Generator[Chat, ChatResult, Observed | None]:
    """A one-message prompt's count, with the part its answer says was cached; None without."""
    body = ctx.request(messages=[{"role": "user", "content": text}], max_tokens=1)
    result = yield Chat(body, name)
    count = counted(result, name) if result.ok else None
    if count is None:
        return None
    return Observed(count, cached=cached_tokens(result))


def _by_counts(
    ctx: RunContext, profile: Profile, text: str
) -> Generator[Chat, ChatResult, list[Finding] | None]:
    """Generation judged by differences of usage.prompt_tokens; None without usage.

    Counts alone can fit a cause by chance (a tokenizer that splits a text otherwise, to the
    same count), so normalisation named by them is put to the test: the text normalised
    must cost what the text did, or the count stays unexplained.
    """
    seen = yield from _prompt_tokens(ctx, text, "count")
    anchored = yield from _prompt_tokens(ctx, ANCHOR, "anchor")
    if seen is None or anchored is None:
        return None
    # A count that holds the cached input twice is off by what each answer cached, which no
    # difference cancels: that cause first.
    doubled = double_count_finding(
        profile, [(_conversation(text), seen), (_conversation(ANCHOR), anchored)]
    )
    if doubled is not None:
        return [doubled]
    count, anchor = seen.count, anchored.count
    found = count_findings(profile, text, count, anchor)
    if [f.code for f in found] == [NORMALISED]:
        normalised = yield from _prompt_tokens(ctx, unicodedata.normalize("NFKC", text), "nfkc")
        if normalised is not None and normalised.count != count:
            return [_not_normalised(profile, text, count - anchor, normalised.count - anchor)]
    return found


def _not_normalised(profile: Profile, text: str, cost: int, normalised: int) -> Finding:
    """A count that NFKC would explain, but which the normalised text does not share (pure)."""
    want = len(reference(profile, _conversation(text)).ids) - len(
        reference(profile, _conversation(ANCHOR)).ids
    )
    return Finding(
        "token_count_mismatch",
        f"the text costs {cost} prompt tokens more than {ANCHOR!r}, the reference says {want}; "
        f"NFKC normalisation would explain that count, but the text normalised costs "
        f"{normalised}: the text is tokenized otherwise",
        expected=want,
        actual=cost,
    )


def _run_ids(case: Case, ctx: RunContext, profile: Profile) -> Exchange:
    text = case.data["text"]
    endpoints = ctx.endpoints
    metrics: dict[str, Any] = {"category": case.data["category"]}
    # Over another API the tokenizer routes say what chat completions is given, not what the
    # API's translation gives the model: its own counts are the evidence.
    if endpoints.method == "prompt_tokens" or case.api != "chat":
        found = yield from _by_counts(ctx, profile, text)
        if found is None:
            why = "no tokenizer endpoint" if case.api == "chat" else "its counts are the evidence"
            return unsupported(f"{why}, and {NO_PROMPT_TOKENS}", {})
        metrics.update(requests=len(ctx.observed), method="prompt_tokens")
        return Outcome.from_findings(found, metrics=metrics)
    messages = [{"role": "user", "content": text}]
    ids, method = yield from prompt_token_ids(ctx.model, endpoints, messages, name="ids")
    if ids is None:
        return unsupported(f"the {method} endpoint gave no ids for this text", {})
    counted = None
    if method != "return_token_ids":
        seen = yield from _prompt_tokens(ctx, text, "usage")
        counted = None if seen is None else seen.count
    findings: list[Finding] = []
    if counted is None or counted == len(ids):
        findings = id_findings(profile, text, ids)
    else:
        # The ids are not generation's: generation is judged by differences of its counts,
        # in which an offset every prompt shares (a hidden system prompt) cancels.
        findings = (yield from _by_counts(ctx, profile, text)) or []
        findings += _tokenize_route_findings(profile, text, ids, method, counted)
    metrics.update(
        requests=len(ctx.observed),
        method=method,
        ladder_matches_usage=counted is None or counted == len(ids),
    )
    return Outcome.from_findings(findings, metrics=metrics)


def _tokenize_route_findings(
    profile: Profile, text: str, ids: Sequence[int], method: str, counted: int
) -> list[Finding]:
    """/tokenize with messages claims the generation path's ids: it must give the reference's."""
    expected = reference(profile, _conversation(text)).ids
    if method != "tokenize_messages" or tuple(ids) == expected:
        return []
    return [
        Finding(
            "tokenize_endpoint_disagrees",
            f"/tokenize gives {len(ids)} ids, not the reference's {len(expected)}, "
            f"and generation counts usage.prompt_tokens {counted}",
            expected=len(expected),
            actual=len(ids),
        )
    ]


def _run_detokenize(case: Case, ctx: RunContext, profile: Profile) -> Exchange:
    if not ctx.endpoints.detokenize:
        return unsupported("the endpoint has no /detokenize", {})
    text = case.data["text"]
    back, answer = yield from detokenize_answer(
        profile.tokenizer.encode_ordinary(text), name="detokenize"
    )
    # The route answered the probe, so a 4xx refusing the model's own ids is the finding
    # (a vocabulary that lacks them), not a missing feature.
    refused = back is None and 400 <= answer.status < 500 and answer.status != 404
    if back is None and not refused:
        return unsupported("/detokenize gave no text", {})
    findings: list[Finding] = []
    if refused:
        findings.append(
            Finding(
                "detokenize_mismatch",
                f"/detokenize refuses the reference ids of the text with HTTP {answer.status}",
                expected=excerpt(text, 200),
                actual=excerpt(json.dumps(answer.body), 200),
            )
        )
    elif back != text:
        findings.append(
            Finding(
                "detokenize_mismatch",
                f"the reference ids of the text come back as {excerpt(back, 80)!r}",
                expected=excerpt(text, 200),
                actual=excerpt(back, 200),
            )
        )
    return Outcome.from_findings(
        findings, metrics={"requests": 1, "category": case.data["category"]}
    )


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """The rungs of the ladder used, and exact agreement per category (pure)."""
    records = list(records)
    methods = Counter(r.outcome.metrics["method"] for r in records if "method" in r.outcome.metrics)
    return {"methods": dict(methods), "categories": status_counts(records, "category")}


def cost(case: Case) -> float:
    """A generated answer and a /tokenize request; a /detokenize request alone."""
    return QUICK if case.data.get("check") == "detokenize" else 1.0 + QUICK


def case_apis(case: Case) -> tuple[str, ...]:
    """Every API for a text's ids (its counts through each); chat alone for /detokenize."""
    return ("chat",) if case.data.get("check") == "detokenize" else API_NAMES


@family(
    "tokenizer",
    summarize=summarize,
    cost=cost,
    needs=lambda run: ("tokenizer_endpoints",),
    apis=API_NAMES,
    case_apis=case_apis,
    rotate=tokenizer_case,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """Token ids and detokenize round trips against the reference tokenizer."""
    profile = ctx.profile
    if profile is None:
        return unsupported("needs a reference profile (--profile)", {})
    if case.data.get("check") == "detokenize":
        return (yield from _run_detokenize(case, ctx, profile))
    try:
        return (yield from _run_ids(case, ctx, profile))
    except Malformed as broken:
        return Outcome.from_findings(broken.findings, metrics={"requests": len(ctx.observed)})
