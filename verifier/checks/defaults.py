"""Generation defaults: the model's own sampling values applied when the client omits them.

A model's ``generation_config.json`` states the sampling values its lab tuned it for (Qwen3:
temperature 0.6, top_p 0.95, top_k 20); a server must use them where a request leaves them
out (vLLM does by default; ``--generation-config vllm`` does not). From outside, with a seed:
a request that omits the values must sample exactly as the same request that states them.
Two answers to the stated values come first, to show the seed reproduces a sample at all;
where the answers differ, one request per value, each leaving that value alone out, names
the values whose omission changes the sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..outcome import Finding
from ..protocol.answers import ChatResult
from .tool_matching import calls_of, signature


def sample_of(result: ChatResult) -> tuple[Any, ...]:
    """What a sampled answer said: its content, its reasoning and its calls (parsed)."""
    choice = result.choice
    if choice is None:
        return (None, None, None)
    return (choice.content, choice.reasoning, signature(calls_of(choice)))


def defaults_findings(
    defaults: Mapping[str, float],
    stated: ChatResult,
    omitted: ChatResult,
    without: Mapping[str, ChatResult],
) -> list[Finding]:
    """The omitted-values answer samples as the stated-values one, with the same seed (pure).

    Args:
        defaults: the model's generation defaults, stated in `stated` and left out of
            `omitted`.
        stated: the answer to the request stating every default.
        omitted: the answer to the same request leaving every default out.
        without: for each default, the answer to `stated`'s request leaving that one out
            (asked only when `omitted` differs).
    """
    if sample_of(omitted) == sample_of(stated):
        return []
    changed = sorted(
        name for name, result in without.items() if sample_of(result) != sample_of(stated)
    )
    stated_text = ", ".join(f"{k}={v}" for k, v in sorted(defaults.items()))
    if changed:
        named = ", ".join(f"{name}={defaults[name]}" for name in changed)
        why = f"leaving out {' or '.join(changed)} alone changes it too: {named} is not applied"
    else:
        why = "no one value left out alone changes it; together they do"
    return [
        Finding(
            "defaults_not_applied",
            f"with the same seed, the request that leaves the model's generation defaults "
            f"out ({stated_text}) samples differently from the one that states them; {why}",
            "$.choices[0].message",
            expected=_shown(stated),
            actual=_shown(omitted),
            attempt="omitted",
        )
    ]


def _shown(result: ChatResult) -> Any:
    content, reasoning, _ = sample_of(result)
    return content if not reasoning else {"reasoning": reasoning, "content": content}
