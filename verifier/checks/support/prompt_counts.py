"""A conversation's ``usage.prompt_tokens`` against the reference, with its cause if known.

Shared by the chat_template and reasoning families; no I/O.
:func:`grade` compares what the endpoint said of a conversation (and of its baseline, where
there is one) with the reference rendering and names a cause only when the evidence singles
it out (see :mod:`.renderings`); :func:`observe` gathers that evidence from the endpoint's
template and tokenizer routes where it offers them.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from ...outcome import Finding
from ...protocol.answers import ChatResult
from ...protocol.requests import Chat, Post
from ...protocol.tokenize import apply_template, prompt_token_ids, tokenize_text
from .common import excerpt
from .renderings import (
    Conversation,
    Observed,
    agrees,
    confirmed,
    constant_offset,
    described,
    explaining,
    first_difference,
    reference,
    text_difference,
)

if TYPE_CHECKING:
    from ...reference.profiles import Profile
    from ..registry import RunContext

Observations = Sequence[tuple[Conversation, Observed]]
_COUNT = "$.usage.prompt_tokens"


def grade(profile: Profile, probe: str, case: Observations) -> list[Finding]:
    """Findings for a probe's observations: B first, then A, its baseline, if any (pure)."""
    (b, seen_b), *baseline = case
    ref_b = reference(profile, b)
    tolerance = profile.prompt_tokens_tolerance
    offset = seen_b.count - len(ref_b.ids)
    delta_ok = True
    if baseline:
        a, seen_a = baseline[0]
        expected_delta = len(ref_b.ids) - len(reference(profile, a).ids)
        delta_ok = abs(seen_b.count - seen_a.count - expected_delta) <= tolerance
    if abs(offset) <= tolerance and delta_ok:
        if seen_b.text is not None and ref_b.text is not None and seen_b.text != ref_b.text:
            return rendering_findings(ref_b.text, seen_b.text)
        return []
    doubled = double_count_finding(profile, case)
    if doubled is not None:
        return [doubled]
    causes = explaining(profile, case)
    skew = constant_offset(profile, case)
    if len(causes) == 1 and skew is None:
        return [_named(causes[0], case, offset, len(ref_b.ids))]
    consistent = causes + ([f"a constant offset of {skew:+d}"] if skew is not None else [])
    if skew is not None and confirmed(case):
        if len(case) > 1:
            shown = f"the change from the baseline is exact ({seen_b.count - case[1][1].count})"
        else:
            shown = f"the endpoint's {'token ids' if seen_b.ids else 'text'} are the reference's"
        return [
            Finding(
                "prompt_tokens_skew",
                f"prompt_tokens is off by {skew:+d}, but {shown}: an accounting skew or "
                f"a hidden system prompt" + (f" (or {described(causes)})" if causes else ""),
                _COUNT,
                expected=len(ref_b.ids),
                actual=seen_b.count,
            )
        ]
    if probe == "tools" and baseline and agrees(reference(profile, baseline[0][0]), baseline[0][1]):
        return [
            Finding(
                "tools_rendered_differently",
                f"the baseline without the tools agrees; with them prompt_tokens is "
                f"{seen_b.count}, the reference counts {len(ref_b.ids)} ({offset:+d})",
                _COUNT,
                expected=len(ref_b.ids),
                actual=seen_b.count,
            )
        ]
    return [_unexplained(ref_b, seen_b, consistent)]


def double_count_finding(profile: Profile, case: Observations) -> Finding | None:
    """``cached_tokens_double_counted``, or None where it does not explain the counts (pure).

    It explains them when every count is the reference's plus the cached input its answer
    reported. A cache reports part of the prompt apart; a count that adds it once more is off by
    exactly that part, whatever the conversation.
    """
    doubled = all(
        seen.cached and seen.count - seen.cached == len(reference(profile, conversation).ids)
        for conversation, seen in case
    )
    if not doubled:
        return None
    (conversation, seen), *baseline = case
    expected = len(reference(profile, conversation).ids)
    return Finding(
        "cached_tokens_double_counted",
        f"prompt_tokens {seen.count} ({seen.count - expected:+d}) is the reference's count plus "
        f"the {seen.cached} tokens the answer says came from the cache: cached input is counted "
        f"twice" + (", in both conversations" if baseline else ""),
        _COUNT,
        expected=expected,
        actual=seen.count,
    )


def _named(code: str, case: Observations, offset: int, expected: int) -> Finding:
    """The finding for the one cause that explains every observation."""
    seen = case[0][1]
    how = ["the counts of both conversations"] if len(case) > 1 else ["the count"]
    if seen.ids is not None:
        how.append("the endpoint's token ids")
    if seen.text is not None:
        how.append("its rendered text")
    return Finding(
        code,
        f"prompt_tokens {seen.count} ({offset:+d}) is what the reference gives if "
        f"{described([code])}: {' and '.join(how)} agree with that, and with nothing else",
        _COUNT,
        expected=expected,
        actual=seen.count,
    )


def _unexplained(ref: Any, seen: Observed, consistent: list[str]) -> Finding:
    """A count that is off with no single cause: what was observed, and what it fits."""
    also = f"; consistent with: {described(consistent)}" if consistent else ""
    offset = seen.count - len(ref.ids)
    if seen.text is not None and ref.text is not None and seen.text != ref.text:
        at = text_difference(ref.text, seen.text)
        window = slice(max(0, at - 30), at + 30)
        return Finding(
            "rendered_prompt_differs",
            f"prompt_tokens {seen.count} ({offset:+d}); the server's prompt text differs from "
            f"the reference's at character {at}: {seen.text[window]!r} vs "
            f"{ref.text[window]!r}{also}",
            expected=excerpt(ref.text, 300),
            actual=excerpt(seen.text, 300),
        )
    if seen.ids is not None and tuple(seen.ids) != ref.ids:
        at = first_difference(ref.ids, seen.ids)
        window = slice(max(0, at - 3), at + 4)
        return Finding(
            "prompt_tokens_mismatch",
            f"prompt_tokens {seen.count} ({offset:+d}); the endpoint's ids differ from the "
            f"reference's from position {at}{also}",
            f"$.tokens[{at}]",
            expected=list(ref.ids[window]),
            actual=list(seen.ids[window]),
        )
    return Finding(
        "prompt_tokens_mismatch",
        f"prompt_tokens {seen.count}, the reference counts {len(ref.ids)} ({offset:+d}){also}",
        _COUNT,
        expected=len(ref.ids),
        actual=seen.count,
    )


def rendering_findings(local: str, served: str) -> list[Finding]:
    """The server's rendering of the prompt against the local one (pure)."""
    if local == served:
        return []
    at = text_difference(local, served)
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


def observe(
    ctx: RunContext,
    conversation: Conversation,
    count: int,
    name: str,
    *,
    full: bool,
    cached: int | None = None,
) -> Generator[Chat | Post, ChatResult, Observed]:
    """What the endpoint says of a conversation: its count, and with `full`, ids and text too.

    `cached` is the part of the count the answer said came from the cache.
    """
    endpoints = ctx.endpoints
    text = None
    if endpoints.apply_template:
        text = yield from apply_template(
            conversation.messages, tools=conversation.tools, name=f"{name}/template"
        )
    if not full or endpoints.method == "prompt_tokens":
        return Observed(count, None, text, cached)
    if endpoints.method == "apply_template_tokenize":
        ids = (
            None
            if text is None
            else (yield from tokenize_text(text, parse_special=True, name=f"{name}/tokenize"))
        )
    else:
        ids, _ = yield from prompt_token_ids(
            ctx.model,
            endpoints,
            conversation.messages,
            tools=conversation.tools,
            name=f"{name}/ids",
        )
    # /apply-template + /tokenize imitates generation, which it cannot always do (the route
    # parses every special token's text as one): its ids are evidence only when their count
    # is generation's.
    if ids is not None and endpoints.method == "apply_template_tokenize" and len(ids) != count:
        ids = None
    return Observed(count, None if ids is None else tuple(ids), text, cached)
