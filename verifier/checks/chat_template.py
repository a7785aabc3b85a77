"""Chat-template fidelity: usage.prompt_tokens against the reference template and tokenizer.

The expected prompt is rendered with the profile's own chat template and
tokenized with its own tokenizer (user-written special-token text kept
ordinary), so every expectation is reproducible. A case passes when
``usage.prompt_tokens`` equals the local count (within the profile's tolerance,
default 0) and, for a case with a baseline conversation A, when the change from
A to B equals the local change: a hidden system prompt or a constant accounting
skew cancels in the difference. Where the server renders prompts
(``/apply-template``), the text must equal the local rendering:
``rendered_prompt_differs``.

When a count is off, the endpoint's own token ids (where it offers them) and its
rendered text are gathered too, and a cause is named only when the evidence
singles it out (see :mod:`.support.renderings`): ``special_token_injection``,
``system_dropped``, ``system_merged``, ``generation_prompt_missing``,
``double_bos``, ``reasoning_history_dropped``, ``reasoning_in_content``,
``input_normalised``, ``tools_rendered_differently``, ``assistant_prefill``,
``partial_prefill_ignored`` (a final assistant message marked ``partial: true`` answered
instead of continued, where the model's contract documents partial mode; without that, the
``partial`` probe is unsupported).
A count that is the reference's plus the cached input the answer reported, in every
conversation, is ``cached_tokens_double_counted`` (checked before the causes above).
Otherwise the code says what was observed: ``prompt_tokens_skew`` (every count off
by the same amount while the difference, or the ids, agree),
``tools_rendered_differently`` (the baseline agrees and adding the tools does
not), ``rendered_prompt_differs`` (the server's text differs), else
``prompt_tokens_mismatch``; the hypotheses consistent with the observations are
listed with it.

Over the other APIs (Anthropic Messages, OpenAI Responses) the same conversations are sent
through the API's own request (a system message as Messages' top-level ``system``, and so
on) and must bill the same count; the API's token-counting route
(``/messages/count_tokens``, ``/responses/input_tokens``) is asked too, and must say what the
answer billed: ``count_tokens_disagrees`` (another count, an error, or no count). A route the
endpoint does not serve (404, 405) is recorded in the case's metrics, not graded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..cases.rotation import chat_case
from ..outcome import CaseRecord, Finding, Outcome
from ..protocol.answers import ChatResult
from ..protocol.apis import API_NAMES, UNSERVED
from ..protocol.requests import Chat, Count, Exchange
from ..reference.template import TemplateError
from .registry import family
from .support.common import agreement, excerpt, unsupported
from .support.evidence import NO_PROMPT_TOKENS, Malformed, cached_tokens, counted
from .support.prompt_counts import grade, observe
from .support.renderings import Conversation, reference
from .support.subchecks import Rejected, Unsupported

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..reference.profiles import Profile
    from .registry import RunContext


def _body(ctx: RunContext, conversation: Conversation) -> dict[str, Any]:
    body = ctx.request(messages=list(conversation.messages), max_tokens=1)
    if conversation.tools:
        body["tools"] = list(conversation.tools)
    return body


def _prompt_tokens(
    ctx: RunContext, conversation: Conversation, name: str
) -> Generator[Chat, ChatResult, tuple[int, int | None]]:
    """The conversation's prompt_tokens, and the part of it the answer says was cached."""
    result = yield Chat(_body(ctx, conversation), name)
    if not result.ok:
        raise Rejected(result)
    value = counted(result, name)
    if value is None:
        raise Unsupported(NO_PROMPT_TOKENS)
    return value, cached_tokens(result)


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """How far prompt_tokens strayed, and how often a baseline's equal ours (pure)."""
    offsets: Counter[int] = Counter()
    exact = 0
    counts: dict[str, int] = {}
    for record in records:
        metrics = record.outcome.metrics
        if "offset" not in metrics:
            continue
        offsets[metrics["offset"]] += 1
        exact += metrics["offset"] == 0
        counts[record.id] = metrics["actual"]
    summary: dict[str, Any] = {
        "exact": exact,
        "offsets": {str(k): v for k, v in sorted(offsets.items())},
        "constant_offset": next(iter(offsets)) if len(offsets) == 1 else None,
        "prompt_tokens": counts,
    }
    if baseline is not None:
        summary["baseline"] = agreement(
            counts, baseline.get("metrics", {}).get("prompt_tokens", {})
        )
    return summary


def cost(case: Case) -> float:
    """One request, two when the case compares with a baseline conversation; one more to count.

    A twin over an API with a counting route asks that route too. The endpoint's ids and text
    are fetched only when a count is off (or where a template route renders every
    conversation): a correct vendor's run sends no more.
    """
    return (2.0 if "baseline" in case.data else 1.0) + (case.api != "chat")


def count_route_findings(result: ChatResult, billed: int) -> list[Finding]:
    """The counting route's answer against the input tokens the API's answer billed (pure).

    Call it with a served route's answer (not :data:`~verifier.protocol.apis.UNSERVED`).
    """
    body = result.body if isinstance(result.body, dict) else {}
    count = body.get("input_tokens")
    if not result.ok:
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        how = f"answered HTTP {result.status}" + (f" ({message!s:.120})" if message else "")
    elif not isinstance(count, int) or isinstance(count, bool):
        how = f"answered with no input_tokens count: {excerpt(str(result.body), 120)}"
    elif count != billed:
        how = f"says {count} input tokens"
    else:
        return []
    return [
        Finding(
            "count_tokens_disagrees",
            f"the API's counting route {how}; the answer to the same request billed {billed}",
            "$.input_tokens",
            expected=billed,
            actual=count if result.ok else result.status,
        )
    ]


def _counting_route(
    ctx: RunContext, conversation: Conversation, billed: int
) -> Generator[Count, ChatResult, tuple[list[Finding], dict[str, Any]]]:
    """What the case's API's counting route says of `conversation`, against what was billed."""
    result = yield Count(_body(ctx, conversation), "count")
    if result.status in UNSERVED:
        return [], {"count_route": f"not served (HTTP {result.status})"}
    findings = count_route_findings(result, billed)
    body = result.body if isinstance(result.body, dict) else {}
    return findings, {"count_route": body.get("input_tokens") if result.ok else result.status}


def _conversations(case: Case) -> list[Conversation]:
    """The case's conversation, and the baseline it is compared with by differences."""
    data = case.data
    conversations = [Conversation(data["messages"], data.get("tools"))]
    if "baseline" in data:
        conversations.append(
            Conversation(data["baseline"]["messages"], data["baseline"].get("tools"))
        )
    return conversations


def _counts(
    ctx: RunContext, profile: Profile, conversations: Sequence[Conversation]
) -> Generator[Chat, ChatResult, tuple[list[int], list[tuple[int, int | None]]] | Outcome]:
    """Each conversation's prompt_tokens, by the reference and by the endpoint, or why not.

    The endpoint's come with the part of each its answer said was cached.
    """
    try:
        expected = [len(reference(profile, c).ids) for c in conversations]
        counts = []
        for conversation, name in zip(conversations, "ba", strict=False):
            counts.append((yield from _prompt_tokens(ctx, conversation, name)))
    except TemplateError as exc:
        return unsupported(f"the profile's template cannot render this conversation: {exc}", {})
    except Rejected as refused:
        error = refused.result.error_object or {}
        return unsupported(
            f"the conversation was rejected with HTTP {refused.result.status}: "
            f"{error.get('message', '')!s:.200}",
            {},
        )
    except Unsupported as exc:
        return unsupported(str(exc), {})
    except Malformed as broken:
        return Outcome.from_findings(broken.findings, metrics={"requests": len(ctx.observed)})
    return expected, counts


@family(
    "chat_template",
    summarize=summarize,
    cost=cost,
    needs=lambda run: ("tokenizer_endpoints",),
    apis=API_NAMES,
    rotate=chat_case,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """usage.prompt_tokens against the reference, absolute and by differences; the rendering."""
    profile = ctx.profile
    if profile is None:
        return unsupported("needs a reference profile (--profile)", {})
    if case.data["probe"] == "partial" and not (profile.policies.features or {}).get(
        "partial_prefill"
    ):
        return unsupported("the model's contract documents no partial mode", {})
    conversations = _conversations(case)
    counted = yield from _counts(ctx, profile, conversations)
    if isinstance(counted, Outcome):
        return counted
    expected, answered = counted
    counts = [count for count, _ in answered]
    deltas = {counts[0] - c for c in counts[1:]} != {expected[0] - e for e in expected[1:]}
    off = counts[0] != expected[0] or deltas
    observed = []
    for conversation, (count, cached), name in zip(conversations, answered, "ba", strict=False):
        if name == "b" or off:
            seen = yield from observe(ctx, conversation, count, name, full=off, cached=cached)
            observed.append((conversation, seen))
    findings = grade(profile, case.data["probe"], observed)
    routed: dict[str, Any] = {}
    if case.api != "chat":
        counted_by_route, routed = yield from _counting_route(ctx, conversations[0], counts[0])
        findings += counted_by_route
    metrics = {
        "requests": len(ctx.observed),
        "probe": case.data["probe"],
        "expected": expected[0],
        "actual": counts[0],
        "offset": counts[0] - expected[0],
        **routed,
    }
    first = conversations[0]
    evidence = {"reference_prompt": excerpt(profile.render(first.messages, first.tools).text, 400)}
    return Outcome.from_findings(findings, metrics=metrics, evidence=evidence)
