"""What an answer's ``logprobs`` must be when a request asks for them (pure).

The wire family's rules, each violation under its own code:

- ``logprobs_missing``: asked for, none came;
- ``logprobs_inconsistent``: the structure is broken: an entry without a token or a numeric
  logprob (then no other rule can read them), or tokens that do not join to the content (the
  other rules still read them);
- ``logprob_positive``: a value above 0, which no log-probability is;
- ``top_logprobs_count_wrong``: a position with fewer or more alternatives than
  ``top_logprobs`` asked for (a vendor that cuts them to one, or lists none);
- ``top_logprobs_duplicated``: one token listed twice among a position's alternatives;
- ``chosen_not_top``: under greedy decoding (temperature 0) a listed alternative is more likely
  than the chosen token, or the chosen token is not among the alternatives listed;
- ``chosen_logprob_differs``: the chosen token's logprob is not the one its own entry among
  the alternatives gives;
- ``stream_logprobs_differ``: the streamed answer's logprobs are not the non-stream answer's;
- ``top_logprobs_limit_not_enforced``: ``top_logprobs`` above the API's maximum answered with
  fewer alternatives than asked: a silent cut where a 4xx is due.

A token is identified by its ``id`` where the engine gives one (llama.cpp does: it spells the
chosen token of a multi-byte character with the bytes of the tokens before it, and lists the
same token among the alternatives with its own byte), else by its bytes, else by its text; a
token with none of them cannot be identified, and no rule reads it. Several token ids may
render as the same text (llama.cpp lists three that render as one space), so text alone never
makes two alternatives one token when ids tell them apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...outcome import Finding
from ...protocol.answers import ChatResult
from .common import excerpt
from .distributions import CHOICE_TOLERANCE, token_key

# The OpenAI API reference: top_logprobs is "an integer between 0 and 20".
MAX_TOP_LOGPROBS = 20
# How far the chosen token's logprob may sit below the best alternative's, or from its own
# entry among them, by float rounding alone (parity's tolerance for the same rule).
NOISE = CHOICE_TOLERANCE
# How far a streamed logprob may be from the non-stream one. Measured on the real servers of
# the tests (8 prompts, 24 tokens, top_logprobs 1 to 20, greedy): llama-server (SmolLM2 Q4_1,
# the Kimi test model) gives bit-identical values; vLLM (SmolLM2 float32) too alone, and
# differs by at most 2.9e-5 with three other requests in flight (the batch changes its
# kernels' sums). 1e-3 is some 35 times that, and far below what another computation gives
# (requantised weights move parity's total variation by a median of 0.066).
STREAM_TOLERANCE = 1e-3
# How many positions a finding's message names.
NAMED = 3


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def same_token(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two entries name the same token; None when either cannot be identified."""
    ids = a.get("id"), b.get("id")
    if all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return ids[0] == ids[1]
    key_a, key_b = token_key(a), token_key(b)
    if not key_a or not key_b:
        return None
    return key_a == key_b


def _positions(positions: Sequence[int]) -> str:
    shown = ", ".join(str(p) for p in positions[:NAMED])
    more = len(positions) - NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def _alternatives(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    alternatives = entry.get("top_logprobs") or []
    if not isinstance(alternatives, list):
        return []
    return [alt for alt in alternatives if isinstance(alt, Mapping)]


def _broken(entries: Sequence[Any]) -> list[str]:
    """Entries no rule can read: without a token or a numeric logprob (empty when none are)."""
    problems = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            problems.append(f"entry {position} has no token")
        elif not _number(entry.get("logprob")):
            problems.append(f"entry {position} has logprob {entry.get('logprob')!r}")
        elif any(
            not isinstance(alt, Mapping) or not _number(alt.get("logprob"))
            for alt in entry.get("top_logprobs") or []
        ):
            problems.append(f"entry {position} has an alternative without a numeric logprob")
    return problems


def _chosen_problem(entry: Mapping[str, Any], greedy: bool) -> tuple[str | None, str | None]:
    """(chosen_not_top reason, chosen_logprob_differs reason) at one position."""
    alternatives = _alternatives(entry)
    if not alternatives:
        return None, None
    own = [alt for alt in alternatives if same_token(entry, alt)]
    unknown = any(same_token(entry, alt) is None for alt in alternatives)
    chosen = float(entry["logprob"])
    not_top = differs = None
    if greedy:
        best = max(float(alt["logprob"]) for alt in alternatives)
        if best > chosen + NOISE:
            not_top = f"an alternative has logprob {best}, the chosen token {chosen}"
        elif not own and not unknown:
            not_top = "the chosen token is not among the alternatives"
    if own and all(abs(float(alt["logprob"]) - chosen) > NOISE for alt in own):
        differs = f"logprob {chosen}, its own entry among the alternatives {own[0]['logprob']}"
    return not_top, differs


def _duplicated(entry: Mapping[str, Any]) -> bool:
    alternatives = _alternatives(entry)
    return any(same_token(a, b) for i, a in enumerate(alternatives) for b in alternatives[i + 1 :])


def logprob_findings(
    result: ChatResult, top: int | None, *, greedy: bool, attempt: str | None = None
) -> list[Finding]:
    """The first choice's logprobs against what was asked (pure).

    Args:
        result: the answer.
        top: ``top_logprobs`` as asked (None: not asked, the count is not checked).
        greedy: the request asked for temperature 0, so the chosen token is the likeliest.
        attempt: the request's label, for the findings.
    """
    choice = result.choice
    if choice is None:
        return []
    if choice.logprobs is None:
        return [Finding("logprobs_missing", "logprobs were asked for, none came", attempt=attempt)]
    where = "$.choices[0].logprobs.content"
    problems = _broken(choice.logprobs)
    if problems:
        return [
            Finding("logprobs_inconsistent", "; ".join(problems[:NAMED]), where, attempt=attempt)
        ]
    entries: list[Mapping[str, Any]] = list(choice.logprobs)
    findings = []
    joined = "".join(str(entry["token"]) for entry in entries)
    if joined != (choice.content or ""):
        findings.append(
            Finding(
                "logprobs_inconsistent",
                f"tokens join to {excerpt(joined, 60)!r}, "
                f"the content is {excerpt(choice.content, 60)!r}",
                where,
                attempt=attempt,
            )
        )
    found: dict[str, list[int]] = {}
    reasons: dict[str, str] = {}
    for position, entry in enumerate(entries):
        for code, reason in _entry_problems(entry, top, greedy).items():
            if reason is not None:
                found.setdefault(code, []).append(position)
                reasons.setdefault(code, f"position {position}: {reason}")
    return findings + [
        Finding(
            code,
            f"{len(positions)} of {len(entries)} positions ({_positions(positions)}); "
            f"{reasons[code]}",
            f"{where}[{positions[0]}]",
            attempt=attempt,
        )
        for code, positions in found.items()
    ]


def _entry_problems(
    entry: Mapping[str, Any], top: int | None, greedy: bool
) -> dict[str, str | None]:
    """Each rule's code, with what one token's entry breaks of it (None: kept) (pure)."""
    alternatives = _alternatives(entry)
    values = [float(entry["logprob"])] + [float(a["logprob"]) for a in alternatives]
    problems = {
        "logprob_positive": f"logprob {max(values)}" if max(values) > 0 else None,
        "top_logprobs_count_wrong": (
            f"{len(alternatives)} alternatives where {top} were asked for"
            if top is not None and len(alternatives) != top
            else None
        ),
        "top_logprobs_duplicated": (
            "a token listed twice among the alternatives" if _duplicated(entry) else None
        ),
    }
    problems["chosen_not_top"], problems["chosen_logprob_differs"] = _chosen_problem(entry, greedy)
    return problems


def content_entries(
    entries: Sequence[Any], content: str | None, finish_reason: str | None
) -> list[Any]:
    """The entries of the content's tokens: the token that stopped the answer left out.

    Engines list that token or not (llama-server in a non-stream answer, not in a stream;
    vLLM in both, as its text ``<|im_end|>``): on an answer that stopped, a last entry with
    no bytes, or whose text the content does not end with, is it.
    """
    if not entries or finish_reason != "stop" or not isinstance(entries[-1], Mapping):
        return list(entries)
    last = entries[-1]
    text = last.get("token")
    ends = token_key(last) == "" or (
        isinstance(text, str) and bool(text) and not (content or "").endswith(text)
    )
    return list(entries[:-1]) if ends else list(entries)


def _largest_gap(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The largest |difference| of the chosen logprob and of the alternatives both list."""
    gap = abs(float(a["logprob"]) - float(b["logprob"]))
    for alt in _alternatives(a):
        for other in _alternatives(b):
            if same_token(alt, other):
                gap = max(gap, abs(float(alt["logprob"]) - float(other["logprob"])))
    return gap


def stream_logprob_findings(non_stream: ChatResult, stream: ChatResult) -> list[Finding]:
    """The stream's logprobs equal the non-stream answer's, within STREAM_TOLERANCE (pure).

    Called when both answers' contents agree and each passed :func:`logprob_findings`; an
    answer without logprobs is graded there.
    """
    a, b = non_stream.choice, stream.choice
    if a is None or b is None or a.logprobs is None or b.logprobs is None:
        return []
    first = content_entries(a.logprobs, a.content, a.finish_reason)
    second = content_entries(b.logprobs, b.content, b.finish_reason)
    message = None
    if len(first) != len(second):
        message = f"{len(second)} streamed content tokens, {len(first)} non-stream"
    else:
        for position, (x, y) in enumerate(zip(first, second, strict=True)):
            if same_token(x, y) is False:
                message = f"position {position}: the tokens differ"
                break
            gap = _largest_gap(x, y)
            if gap > STREAM_TOLERANCE:
                message = (
                    f"position {position}: logprobs differ by {gap:.6g}, "
                    f"more than {STREAM_TOLERANCE}"
                )
                break
    if message is None:
        return []
    return [
        Finding(
            "stream_logprobs_differ",
            f"the streamed logprobs differ from the non-stream ones at temperature 0: {message}",
            "$.choices[0].logprobs.content",
        )
    ]


def limit_findings(result: ChatResult, asked: int) -> list[Finding]:
    """``top_logprobs`` above the maximum: refused (4xx), or every position lists `asked` (pure).

    A 2xx whose positions list fewer alternatives than asked cut them silently. One that lists
    them all is honoured (the generated bad request of ``top_logprobs`` far above the range
    grades the acceptance itself: ``invalid_request_accepted``).
    """
    if not result.ok or result.choice is None or not result.choice.logprobs:
        return []
    counts = [len(_alternatives(e)) for e in result.choice.logprobs if isinstance(e, Mapping)]
    short = [count for count in counts if count < asked]
    if not short:
        return []
    return [
        Finding(
            "top_logprobs_limit_not_enforced",
            f"top_logprobs {asked} is above the API's maximum {MAX_TOP_LOGPROBS}; it was "
            f"answered HTTP {result.status} with {min(short)} alternatives at "
            f"{len(short)} of {len(counts)} positions, a silent cut where a 4xx is due",
            "$.choices[0].logprobs.content",
            expected="4xx",
            actual=min(short),
            attempt=result.label,
        )
    ]
