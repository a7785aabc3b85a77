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
Otherwise the code says what was observed: ``prompt_tokens_skew`` (every count off
by the same amount while the difference, or the ids, agree),
``tools_rendered_differently`` (the baseline agrees and adding the tools does
not), ``rendered_prompt_differs`` (the server's text differs), else
``prompt_tokens_mismatch``; the hypotheses consistent with the observations are
listed with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..outcome import CaseRecord, Outcome
from ..protocol.answers import ChatResult
from ..protocol.requests import Chat, Exchange
from ..reference.template import TemplateError
from .registry import family
from .support.common import agreement, excerpt, unsupported
from .support.evidence import NO_PROMPT_TOKENS, Malformed, counted
from .support.prompt_counts import grade, observe
from .support.renderings import Conversation, reference
from .support.subchecks import Rejected, Unsupported

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..reference.profiles import Profile
    from .registry import RunContext


def _prompt_tokens(
    ctx: RunContext, conversation: Conversation, name: str
) -> Generator[Chat, ChatResult, int]:
    body = ctx.request(messages=list(conversation.messages), max_tokens=1)
    if conversation.tools:
        body["tools"] = list(conversation.tools)
    result = yield Chat(body, name)
    if not result.ok:
        raise Rejected(result)
    value = counted(result, name)
    if value is None:
        raise Unsupported(NO_PROMPT_TOKENS)
    return value


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
    """One request, two when the case compares with a baseline conversation.

    The endpoint's ids and text are fetched only when a count is off (or where a template
    route renders every conversation): a correct vendor's run sends no more.
    """
    return 2.0 if "baseline" in case.data else 1.0


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
) -> Generator[Chat, ChatResult, tuple[list[int], list[int]] | Outcome]:
    """The reference's and the endpoint's prompt_tokens of each conversation, or why not."""
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


@family("chat_template", summarize=summarize, cost=cost, needs=lambda run: ("tokenizer_endpoints",))
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
    expected, counts = counted
    deltas = {counts[0] - c for c in counts[1:]} != {expected[0] - e for e in expected[1:]}
    off = counts[0] != expected[0] or deltas
    observed = []
    for conversation, count, name in zip(conversations, counts, "ba", strict=False):
        if name == "b" or off:
            seen = yield from observe(ctx, conversation, count, name, full=off)
            observed.append((conversation, seen))
    findings = grade(profile, case.data["probe"], observed)
    metrics = {
        "requests": len(ctx.observed),
        "probe": case.data["probe"],
        "expected": expected[0],
        "actual": counts[0],
        "offset": counts[0] - expected[0],
    }
    first = conversations[0]
    evidence = {"reference_prompt": excerpt(profile.render(first.messages, first.tools).text, 400)}
    return Outcome.from_findings(findings, metrics=metrics, evidence=evidence)
