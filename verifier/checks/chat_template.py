"""Chat-template fidelity: usage.prompt_tokens against the reference template and tokenizer.

The expected prompt is rendered with the profile's own chat template and
tokenized with its own tokenizer (user-written special-token text kept
ordinary), so every expectation is reproducible. A case passes when
``usage.prompt_tokens`` equals the local count (within the profile's tolerance,
default 0) and, for a case with a baseline conversation A, when the change from
A to B equals the local change: a hidden system prompt or a constant accounting
skew cancels in the difference.

When the count is off, the wrong renderings the case's probe names are tried
locally, and a match names the defect: ``special_token_injection`` (user text
that spells a special token parsed as one), ``system_dropped``,
``system_merged``, ``generation_prompt_missing``, ``double_bos``,
``reasoning_history_dropped``, ``reasoning_in_content``. Otherwise:
``prompt_tokens_skew`` (absolute off, difference exact), ``tools_rendered_differently``,
``reasoning_history_mismatch``, ``turn_order_mismatch``, ``assistant_prefill`` (a
conversation that ends with an assistant message was continued, not answered, as
OpenAI answers it), ``prompt_tokens_mismatch``.
Where the server renders prompts (``/apply-template``), the text must equal the
local rendering: ``rendered_prompt_differs``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..endpoint.tokenize import apply_template
from ..outcome import Finding, Outcome, Status
from ..reference.template import TemplateError
from ..reference.tokenizer import encode_all_special
from .common import agreement, excerpt
from .registry import family

if TYPE_CHECKING:
    from ..cases import Case
    from ..reference.profiles import Profile
    from ..runner import RunContext

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None
Hypothesis = Callable[["Profile", Messages, Tools, int], int]


def _without_system(messages: Messages) -> list[Mapping[str, Any]]:
    return [m for m in messages if m.get("role") != "system"]


def _merged_system(messages: Messages) -> list[Mapping[str, Any]]:
    if not any(m.get("role") == "system" for m in messages):
        return list(messages)
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in _without_system(messages)]
    for message in rest:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] = f"{system}\n\n{message['content']}"
            break
    return rest


def _without_reasoning(messages: Messages) -> list[Mapping[str, Any]]:
    return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]


def _reasoning_in_content(messages: Messages) -> list[Mapping[str, Any]]:
    changed = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("reasoning_content"):
            body = f"<think>{message['reasoning_content']}</think>{message.get('content') or ''}"
            message = {**_without_reasoning([message])[0], "content": body}
        changed.append(message)
    return changed


# Wrong renderings tried, most specific first, when a count is off; the first whose count
# matches names the defect. A hypothesis that changes nothing for a conversation cannot match.
HYPOTHESES: list[tuple[str, Hypothesis]] = [
    (
        "special_token_injection",
        lambda p, m, t, n: len(encode_all_special(p.tokenizer, p.render(m, t).text)),
    ),
    ("system_dropped", lambda p, m, t, n: len(p.prompt_ids(_without_system(m), t))),
    ("system_merged", lambda p, m, t, n: len(p.prompt_ids(_merged_system(m), t))),
    (
        "generation_prompt_missing",
        lambda p, m, t, n: len(p.prompt_ids(m, t, add_generation_prompt=False)),
    ),
    ("reasoning_history_dropped", lambda p, m, t, n: len(p.prompt_ids(_without_reasoning(m), t))),
    ("reasoning_in_content", lambda p, m, t, n: len(p.prompt_ids(_reasoning_in_content(m), t))),
    # One token more than the reference, as a doubled (or extra) BOS gives: so generic that it
    # is tried on bos probes only (elsewhere a +1 is reported as it is).
    ("double_bos", lambda p, m, t, n: n + 1),
]
# The hypotheses a probe is about, by code prefix.
PROBE_HYPOTHESES = {
    "special_tokens": "special_token",
    "system": "system",
    "generation_prompt": "generation_prompt",
    "reasoning_history": "reasoning",
    "bos": "double_bos",
}
# When only the difference from the baseline is off, the probe says what differs.
FALLBACK = {
    "prefill": "assistant_prefill",
    "tools": "tools_rendered_differently",
    "reasoning_history": "reasoning_history_mismatch",
    "turn_order": "turn_order_mismatch",
}


def grade(
    profile: Profile,
    probe: str,
    b: tuple[Messages, Tools],
    actual_b: int,
    a: tuple[Messages, Tools] | None = None,
    actual_a: int | None = None,
) -> list[Finding]:
    """Findings for prompt_tokens of conversation B (and A, its baseline) (pure)."""
    expected_b = len(profile.prompt_ids(*b))
    tolerance = profile.prompt_tokens_tolerance
    absolute_ok = abs(actual_b - expected_b) <= tolerance
    difference_ok = True
    expected_delta = actual_delta = None
    if a is not None and actual_a is not None:
        expected_delta = expected_b - len(profile.prompt_ids(*a))
        actual_delta = actual_b - actual_a
        difference_ok = abs(actual_delta - expected_delta) <= tolerance
    if absolute_ok and difference_ok:
        return []
    offset = actual_b - expected_b
    # The probe's own hypotheses first: a count off by a few tokens can match several.
    ordered = sorted(
        HYPOTHESES, key=lambda h: not h[0].startswith(PROBE_HYPOTHESES.get(probe, "-"))
    )
    for code, hypothesis in ordered:
        if code == "double_bos" and probe != "bos":
            continue
        alternative = hypothesis(profile, b[0], b[1], expected_b)
        if alternative != expected_b and alternative == actual_b:
            return [
                Finding(
                    code,
                    f"prompt_tokens {actual_b} is what the reference gives if "
                    f"{code.replace('_', ' ')} ({offset:+d} tokens)",
                    "$.usage.prompt_tokens",
                    expected=expected_b,
                    actual=actual_b,
                )
            ]
    if not absolute_ok and difference_ok and a is not None:
        common = "tool declarations rendered differently, " if b[1] and a[1] else ""
        return [
            Finding(
                "prompt_tokens_skew",
                f"prompt_tokens is off by {offset:+d}, but the change from the baseline is exact "
                f"({actual_delta}): {common}a hidden system prompt or an accounting skew",
                "$.usage.prompt_tokens",
                expected=expected_b,
                actual=actual_b,
            )
        ]
    if not difference_ok:
        return [
            Finding(
                FALLBACK.get(probe, "prompt_tokens_mismatch"),
                f"the change in prompt_tokens from the baseline is {actual_delta}, "
                f"the reference's is {expected_delta} (absolute {actual_b} vs {expected_b})",
                "$.usage.prompt_tokens",
                expected=expected_delta,
                actual=actual_delta,
            )
        ]
    if probe == "prefill":
        return [
            Finding(
                "assistant_prefill",
                f"prompt_tokens {actual_b}, the reference counts {expected_b} ({offset:+d}): a "
                "final assistant message was continued (a prefill), not answered with a new one",
                "$.usage.prompt_tokens",
                expected=expected_b,
                actual=actual_b,
            )
        ]
    return [
        Finding(
            "prompt_tokens_mismatch",
            f"prompt_tokens {actual_b}, the reference counts {expected_b} ({offset:+d})",
            "$.usage.prompt_tokens",
            expected=expected_b,
            actual=actual_b,
        )
    ]


def rendering_findings(local: str, served: str) -> list[Finding]:
    """The server's rendering of the prompt against the local one (pure)."""
    if local == served:
        return []
    at = next(
        (i for i, (x, y) in enumerate(zip(local, served, strict=False)) if x != y),
        min(len(local), len(served)),
    )
    window = slice(max(0, at - 30), at + 30)
    return [
        Finding(
            "rendered_prompt_differs",
            f"the server's prompt text differs from the reference's at "
            f"character {at}: {served[window]!r} vs {local[window]!r}",
            expected=excerpt(local, 300),
            actual=excerpt(served, 300),
        )
    ]


def _prompt_tokens(
    ctx: RunContext, case: Case, messages: Messages, tools: Tools, name: str
) -> int | None:
    body = ctx.request(case, messages=list(messages), max_tokens=1)
    if tools:
        body["tools"] = list(tools)
    result = ctx.send(case, body, stream=False, name=name)
    if not result.ok:
        raise _Rejected(result.status, result.error_object)
    value = (result.usage or {}).get("prompt_tokens")
    return value if isinstance(value, int) else None


class _Rejected(Exception):
    def __init__(self, status: int, error: Mapping[str, Any] | None) -> None:
        self.status = status
        self.error = error or {}


def _unsupported(message: str, **metrics: Any) -> Outcome:
    return Outcome(
        Status.UNSUPPORTED, code="unsupported", message=f"unsupported: {message}", metrics=metrics
    )


def summarize(
    records: Iterable[Mapping[str, Any]], baseline: Mapping[str, Any] | None
) -> dict[str, Any]:
    """How far prompt_tokens strayed, and how often a baseline's equal ours (pure)."""
    offsets: Counter[int] = Counter()
    exact = 0
    counts: dict[str, int] = {}
    for record in records:
        metrics = record["outcome"].get("metrics", {})
        if "offset" not in metrics:
            continue
        offsets[metrics["offset"]] += 1
        exact += metrics["offset"] == 0
        counts[record["case"].split("/", 1)[1]] = metrics["actual"]
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
    """One request, two when the case compares with a baseline conversation."""
    return 2.0 if "baseline" in case.data else 1.0


@family("chat_template", summarize=summarize, cost=cost)
def run(case: Case, ctx: RunContext) -> Outcome:
    """usage.prompt_tokens against the reference, absolute and by differences; the rendering."""
    profile = ctx.profile
    if profile is None:
        return _unsupported("needs a reference profile (--profile)")
    data = case.data
    b = (data["messages"], data.get("tools"))
    a = (
        (data["baseline"]["messages"], data["baseline"].get("tools"))
        if "baseline" in data
        else None
    )
    try:
        expected_b = len(profile.prompt_ids(*b))
        actual_b = _prompt_tokens(ctx, case, *b, name="b")
        actual_a = _prompt_tokens(ctx, case, *a, name="a") if a else None
    except TemplateError as exc:
        return _unsupported(f"the profile's template cannot render this conversation: {exc}")
    except _Rejected as rejected:
        return _unsupported(
            f"the conversation was rejected with HTTP {rejected.status}: "
            f"{rejected.error.get('message', '')!s:.200}"
        )
    if actual_b is None or (a is not None and actual_a is None):
        return _unsupported("the answer has no usage.prompt_tokens")
    findings = grade(profile, data["probe"], b, actual_b, a, actual_a)
    if ctx.endpoints.apply_template:
        served = apply_template(ctx.client, b[0], tools=b[1], label=f"{case.key}#apply-template")
        if served is not None:
            findings += rendering_findings(profile.render(*b).text, served)
    metrics = {
        "requests": 2 if a else 1,
        "probe": data["probe"],
        "expected": expected_b,
        "actual": actual_b,
        "offset": actual_b - expected_b,
    }
    evidence = {"reference_prompt": excerpt(profile.render(*b).text, 400)}
    return Outcome.from_findings(findings, metrics=metrics, evidence=evidence)
