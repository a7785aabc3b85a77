"""Tokenizer parity: the endpoint's token ids against the reference tokenizer, token for token.

Each ``ids`` case is a one-message conversation whose prompt ids the server is
asked for by the best rung of the ladder it offers (see endpoint/tokenize.py);
closed endpoints are compared by differences of ``usage.prompt_tokens``. Codes:

- ``token_ids_mismatch`` (the first differing position, with the text around it),
  ``special_token_injection`` (user text that spells a special token became one),
  ``input_normalised`` (the ids are those of the NFKC-normalised text),
  ``token_count_mismatch`` (closed endpoints: the count differs);
- ``tokenize_endpoint_disagrees``: the tokenize endpoint's count is not the
  generation path's ``usage.prompt_tokens`` for the same conversation;
- ``detokenize_mismatch``: ids turned back into text give other text;
- ``max_tokens_not_honoured``: a ``length`` stop with completion_tokens != max_tokens.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..endpoint.tokenize import detokenize, prompt_token_ids
from ..outcome import Finding, Outcome, Status
from ..reference.tokenizer import encode_all_special
from .common import excerpt
from .registry import QUICK, family

if TYPE_CHECKING:
    from ..cases import Case
    from ..reference.profiles import Profile
    from ..runner import RunContext

# The fixed conversation closed endpoints are compared against.
ANCHOR = "x"


def first_difference(expected: Sequence[int], actual: Sequence[int]) -> int:
    """The first position where two id sequences differ (the shorter length if one is a prefix)."""
    for position, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return position
    return min(len(expected), len(actual))


def id_findings(
    profile: Profile, text: str, expected: Sequence[int], actual: Sequence[int]
) -> list[Finding]:
    """Token-exact comparison of a one-message prompt, naming the cause where it can (pure)."""
    if list(expected) == list(actual):
        return []
    bos = profile.tokenizer.special_tokens.get(str(profile.template.variables.get("bos_token")))
    if bos is not None and list(actual) == [bos, *expected]:
        return [
            Finding(
                "double_bos",
                "the ids are the reference's with a BOS token before them (a doubled or extra BOS)",
                "$.tokens[0]",
                expected=expected[:3],
                actual=actual[:3],
            )
        ]
    messages = [{"role": "user", "content": text}]
    if list(actual) == encode_all_special(profile.tokenizer, profile.render(messages).text):
        return [
            Finding(
                "special_token_injection",
                "the user text spells a special token and the endpoint tokenized it as that token",
                expected=len(expected),
                actual=len(actual),
            )
        ]
    normalised = unicodedata.normalize("NFKC", text)
    if normalised != text and list(actual) == profile.prompt_ids(
        [{"role": "user", "content": normalised}]
    ):
        return [
            Finding(
                "input_normalised",
                "the ids are those of the NFKC-normalised text",
                expected=len(expected),
                actual=len(actual),
            )
        ]
    at = first_difference(expected, actual)
    window = slice(max(0, at - 3), at + 4)
    decode = profile.tokenizer.decode
    return [
        Finding(
            "token_ids_mismatch",
            f"ids differ from position {at} of {len(expected)} (endpoint has {len(actual)}): "
            f"reference {list(expected[window])} = {decode(expected[window])!r}, "
            f"endpoint {list(actual[window])} = {decode(actual[window])!r}",
            f"$.tokens[{at}]",
            expected=list(expected[window]),
            actual=list(actual[window]),
        )
    ]


def count_findings(profile: Profile, text: str, expected: int, actual: int) -> list[Finding]:
    """A prompt-token count against the reference, naming the cause where it can (pure)."""
    if actual == expected:
        return []
    messages = [{"role": "user", "content": text}]
    if actual == len(encode_all_special(profile.tokenizer, profile.render(messages).text)):
        return [
            Finding(
                "special_token_injection",
                "the user text spells a special token and the endpoint counted it as that token",
                expected=expected,
                actual=actual,
            )
        ]
    normalised = unicodedata.normalize("NFKC", text)
    if normalised != text and actual == len(
        profile.prompt_ids([{"role": "user", "content": normalised}])
    ):
        return [
            Finding(
                "input_normalised",
                "the count is that of the NFKC-normalised text",
                expected=expected,
                actual=actual,
            )
        ]
    return [
        Finding(
            "token_count_mismatch",
            f"usage.prompt_tokens {actual}, the reference counts {expected}",
            expected=expected,
            actual=actual,
        )
    ]


def _prompt_tokens(ctx: RunContext, case: Case, text: str, name: str) -> int | None:
    body = ctx.request(case, messages=[{"role": "user", "content": text}], max_tokens=1)
    result = ctx.send(case, body, stream=False, name=name)
    value = (result.usage or {}).get("prompt_tokens") if result.ok else None
    return value if isinstance(value, int) else None


def _unsupported(message: str, **metrics: Any) -> Outcome:
    return Outcome(
        Status.UNSUPPORTED, code="unsupported", message=f"unsupported: {message}", metrics=metrics
    )


def _run_ids(case: Case, ctx: RunContext, profile: Profile) -> Outcome:
    text = case.data["text"]
    messages = [{"role": "user", "content": text}]
    expected = profile.prompt_ids(messages)
    endpoints = ctx.endpoints
    if endpoints.method == "prompt_tokens":
        actual = _prompt_tokens(ctx, case, text, "count")
        anchor = _prompt_tokens(ctx, case, ANCHOR, "anchor")
        if actual is None or anchor is None:
            return _unsupported("no tokenizer endpoint and no usage.prompt_tokens")
        want = len(expected) - len(profile.prompt_ids([{"role": "user", "content": ANCHOR}]))
        findings = (
            []
            if actual - anchor == want
            else [
                Finding(
                    "token_count_mismatch",
                    f"the text costs {actual - anchor} prompt tokens more than {ANCHOR!r}, "
                    f"the reference says {want}",
                    expected=want,
                    actual=actual - anchor,
                )
            ]
        )
        return Outcome.from_findings(
            findings,
            metrics={"requests": 2, "method": "prompt_tokens", "category": case.data["category"]},
        )
    ids, method = prompt_token_ids(
        ctx.client, ctx.model, endpoints, messages, label=f"{case.key}#ids"
    )
    if ids is None:
        return _unsupported(f"the {method} endpoint gave no ids for this text")
    counted = None if method == "return_token_ids" else _prompt_tokens(ctx, case, text, "usage")
    findings: list[Finding] = []
    if counted is None or counted == len(ids):
        findings += id_findings(profile, text, expected, ids)
    else:
        if method == "tokenize_messages":
            # The endpoint claims to tokenize the chat prompt as generation does.
            findings.append(
                Finding(
                    "tokenize_endpoint_disagrees",
                    f"/tokenize gives {len(ids)} ids, "
                    f"generation counts usage.prompt_tokens {counted}",
                    expected=counted,
                    actual=len(ids),
                )
            )
        # Rendering + /tokenize is our imitation of the generation path: where it disagrees
        # with usage, generation is judged by its count alone.
        findings += count_findings(profile, text, len(expected), counted)
    metrics = {
        "requests": 1 + (counted is not None),
        "method": method,
        "category": case.data["category"],
        "ladder_matches_usage": counted is None or counted == len(ids),
    }
    return Outcome.from_findings(findings, metrics=metrics)


def _run_detokenize(case: Case, ctx: RunContext, profile: Profile) -> Outcome:
    if not ctx.endpoints.detokenize:
        return _unsupported("the endpoint has no /detokenize")
    text = case.data["text"]
    back = detokenize(
        ctx.client, profile.tokenizer.encode_ordinary(text), label=f"{case.key}#detokenize"
    )
    if back is None:
        return _unsupported("/detokenize gave no text")
    findings = (
        []
        if back == text
        else [
            Finding(
                "detokenize_mismatch",
                f"the reference ids of the text come back as {excerpt(back, 80)!r}",
                expected=excerpt(text, 200),
                actual=excerpt(back, 200),
            )
        ]
    )
    return Outcome.from_findings(
        findings, metrics={"requests": 1, "category": case.data["category"]}
    )


def _run_max_tokens(case: Case, ctx: RunContext) -> Outcome:
    limit = case.data["max_tokens"]
    body = ctx.request(
        case, messages=[{"role": "user", "content": case.data["text"]}], max_tokens=limit
    )
    result = ctx.send(case, body, stream=False, name="max-tokens")
    if not result.ok:
        return _unsupported(f"rejected with HTTP {result.status}")
    used = (result.usage or {}).get("completion_tokens")
    choice = result.choice
    findings = []
    if (
        isinstance(used, int)
        and choice is not None
        and (used > limit or (choice.finish_reason == "length" and used != limit))
    ):
        findings.append(
            Finding(
                "max_tokens_not_honoured",
                f"max_tokens {limit}, completion_tokens {used}, "
                f"finish_reason {choice.finish_reason!r}",
                expected=limit,
                actual=used,
            )
        )
    return Outcome.from_findings(
        findings, metrics={"requests": 1, "category": case.data["category"]}
    )


def summarize(
    records: Iterable[Mapping[str, Any]], baseline: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The rungs of the ladder used, and exact agreement per category (pure)."""
    methods: Counter[str] = Counter()
    categories: dict[str, Counter[str]] = {}
    for record in records:
        outcome = record["outcome"]
        metrics = outcome.get("metrics", {})
        if "method" in metrics:
            methods[metrics["method"]] += 1
        categories.setdefault(metrics.get("category", "?"), Counter())[outcome["status"]] += 1
    return {
        "methods": dict(methods),
        "categories": {k: dict(sorted(v.items())) for k, v in sorted(categories.items())},
    }


def cost(case: Case) -> float:
    """A generated answer and a /tokenize request, one of the two for max_tokens and detokenize."""
    check = case.data.get("check", "ids")
    return {"max_tokens": 1.0, "detokenize": QUICK}.get(check, 1.0 + QUICK)


@family("tokenizer", summarize=summarize, cost=cost)
def run(case: Case, ctx: RunContext) -> Outcome:
    """Token ids, detokenize round trips and max_tokens, against the reference tokenizer."""
    profile = ctx.profile
    check = case.data.get("check", "ids")
    if check == "max_tokens":
        return _run_max_tokens(case, ctx)
    if profile is None:
        return _unsupported("needs a reference profile (--profile)")
    if check == "detokenize":
        return _run_detokenize(case, ctx, profile)
    return _run_ids(case, ctx, profile)
