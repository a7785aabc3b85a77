"""Per-token distributions of two greedy answers, compared along what both saw (pure).

An answer asked with ``logprobs`` and ``top_logprobs: K`` gives, at each generated position,
the chosen token, its logprob and the K most likely tokens with theirs. Two answers to the
same prompt saw the same context up to and including their first differing token, so their
distributions compare at those positions only (the shared prefix); after it, each continues
from its own text.

Between two top-K lists the total variation (TV) distance is not known, only bounded: a token
outside one list has a probability between 0 and the smaller of that list's last probability
and its missing mass. The bounds used here hold whatever that mass is:

- lower: for the tokens A lists, A's probability minus the most B can give each (B's own
  where B lists it, else its cap), where positive, summed; and the same from B's side; the
  larger of the two (TV is at least |P(S) - Q(S)| for any set S);
- upper: 1 minus the mass both lists give the tokens they share (TV = 1 - sum of min(p, q)).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

# Logprobs are compared as recorded: rounded to this many decimals on both sides, so that a
# recording stored in a scorecard and a live answer are compared alike.
DECIMALS = 6
# The chosen token's logprob may sit below the best alternative's by rounding alone.
CHOICE_TOLERANCE = 1e-4

Top = tuple[tuple[str, float], ...]
# The name of an alternative that has neither bytes nor text, followed by its index.
UNNAMED = "\x00unnamed-"
# The name of the token that stopped an answer, whatever the engine calls it.
END = "\x00end"


@dataclasses.dataclass(frozen=True, slots=True)
class Trace:
    """One greedy answer's tokens with their distributions.

    Args:
        tokens: the generated tokens, by their bytes (see :func:`token_key`).
        chosen: each token's logprob.
        top: each position's most likely tokens with their logprobs, most likely first.
    """

    tokens: tuple[str, ...]
    chosen: tuple[float, ...]
    top: tuple[Top, ...]

    def to_json(self) -> dict[str, Any]:
        """The compact form a recording stores."""
        return {
            "t": list(self.tokens),
            "c": list(self.chosen),
            "k": [[[token, lp] for token, lp in top] for top in self.top],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trace:
        """The inverse of :meth:`to_json`."""
        return cls(
            tuple(data["t"]),
            tuple(float(v) for v in data["c"]),
            tuple(tuple((str(t), float(lp)) for t, lp in top) for top in data["k"]),
        )


def _rounded(value: Any) -> float:
    return round(float(value), DECIMALS)


def token_key(entry: Mapping[str, Any]) -> str | None:
    """What a token is compared by: its bytes where given, else its text.

    Two engines may spell one token differently (a partial UTF-8 character, byte fallback),
    and one engine may list several token ids of the same text (llama.cpp lists three ids
    that render as one space); the bytes are what the model wrote. Bytes that are not UTF-8
    are kept as escapes, so that every byte string has one spelling.
    """
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw).decode("utf-8", "backslashreplace")
    token = entry.get("token")
    return token if isinstance(token, str) else None


def _merged(alternatives: Sequence[Any]) -> Top:
    """The listed alternatives by token, most likely first; one text listed twice sums.

    Every token has at least one byte: an alternative with neither bytes nor text (vLLM
    spells a partial UTF-8 token so) cannot be matched, and stays apart under a name no
    other token has, so that the bounds hold.
    """
    mass: dict[str, float] = {}
    for index, alt in enumerate(alternatives):
        key = token_key(alt) if isinstance(alt, Mapping) else None
        logprob = alt.get("logprob") if isinstance(alt, Mapping) else None
        if key is None or not isinstance(logprob, int | float) or isinstance(logprob, bool):
            continue
        key = key or f"{UNNAMED}{index}"
        mass[key] = mass.get(key, 0.0) + math.exp(logprob)
    listed = [(key, _rounded(math.log(p))) for key, p in mass.items() if p > 0]
    return tuple(sorted(listed, key=lambda item: -item[1]))


def _stop_token(entry: Mapping[str, Any], content: str | None) -> bool:
    """The last entry of an answer that stopped names the token that ended it.

    Engines list it differently (llama.cpp with no text and no bytes, vLLM as its text,
    ``<|im_end|>``, which the content does not end with); both mean "stop here".
    """
    text = entry.get("token")
    return token_key(entry) == "" or (
        content is not None and isinstance(text, str) and bool(text) and not content.endswith(text)
    )


def trace_of(
    entries: Sequence[Any] | None, content: str | None = None, finish_reason: str | None = None
) -> Trace | None:
    """The trace of a choice's ``logprobs.content`` entries; None when there are none usable.

    With the choice's `content` and `finish_reason`, the token that stopped the answer is
    named :data:`END` on every engine, where it is the chosen token and where an alternative.
    """
    if not entries:
        return None
    tokens, chosen, tops = [], [], []
    for position, entry in enumerate(entries):
        key = token_key(entry) if isinstance(entry, Mapping) else None
        logprob = entry.get("logprob") if isinstance(entry, Mapping) else None
        if key is None or not isinstance(logprob, int | float) or isinstance(logprob, bool):
            return None
        alternatives = list(entry.get("top_logprobs") or [])
        last = position == len(entries) - 1
        if last and finish_reason == "stop" and _stop_token(entry, content):
            same = [(alt.get("token"), alt.get("bytes")) for alt in alternatives]
            named = (entry.get("token"), entry.get("bytes"))
            alternatives = [
                {**alt, "token": END, "bytes": None} if pair == named else alt
                for alt, pair in zip(alternatives, same, strict=True)
            ]
            key = END
        tokens.append(key)
        chosen.append(_rounded(logprob))
        # A chosen token without bytes or text cannot be matched: its position has no
        # distribution to compare.
        tops.append(_merged(alternatives) if key else ())
    return Trace(tuple(tokens), tuple(chosen), tuple(tops))


def without_alternatives(trace: Trace) -> list[int]:
    """Positions whose distribution is unknown: no alternative listed, or no token named."""
    return [position for position, top in enumerate(trace.top) if not top]


def not_top_choice(trace: Trace) -> list[int]:
    """Positions where a listed alternative is more likely than the token chosen (greedy)."""
    return [
        position
        for position, (token, logprob, top) in enumerate(
            zip(trace.tokens, trace.chosen, trace.top, strict=True)
        )
        if any(alt != token and lp > logprob + CHOICE_TOLERANCE for alt, lp in top)
    ]


def _cap(top: Top) -> float:
    """The most probability a token missing from `top` can have."""
    probabilities = [math.exp(lp) for _, lp in top]
    missing = max(0.0, 1.0 - sum(probabilities))
    return min(min(probabilities), missing) if probabilities else 1.0


def _one_sided(p: Mapping[str, float], q: Mapping[str, float], q_cap: float) -> float:
    return sum(max(0.0, pa - q.get(token, q_cap)) for token, pa in p.items())


def tv_bounds(a: Top, b: Top) -> tuple[float, float]:
    """Lower and upper bounds of the total variation distance between two top-K lists."""
    p = {token: math.exp(lp) for token, lp in a}
    q = {token: math.exp(lp) for token, lp in b}
    if not p or not q:
        return 0.0, 1.0
    lower = max(_one_sided(p, q, _cap(b)), _one_sided(q, p, _cap(a)))
    upper = max(0.0, min(1.0 - sum(min(p[token], q[token]) for token in p.keys() & q.keys()), 1.0))
    # Both bounds hold exactly; in floating point the lower may pass the upper by an ulp.
    return min(lower, upper), upper


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """Two traces of one prompt, compared along their shared prefix.

    Args:
        positions: positions compared: the shared prefix and the first differing token,
            where both list alternatives.
        first_divergence: the first position whose tokens differ, or None when neither
            continuation differs from the other (one may be longer only if the other's ended).
        identical: same tokens throughout, same length.
        top1_agree: compared positions where both rank the same token first.
        chosen_delta: |logprob difference| of the chosen token where both chose it.
        tv_lower: mean lower bound of the TV distance over the compared positions.
        tv_upper: mean upper bound of the TV distance over the compared positions.
    """

    positions: int
    first_divergence: int | None
    identical: bool
    top1_agree: int
    chosen_delta: tuple[float, ...]
    tv_lower: float
    tv_upper: float

    def to_json(self) -> dict[str, Any]:
        """The comparison as scorecard data (means rounded)."""
        deltas = self.chosen_delta
        return {
            "positions": self.positions,
            "first_divergence": self.first_divergence,
            "identical": self.identical,
            "top1_agree": self.top1_agree,
            "chosen_delta_mean": round(sum(deltas) / len(deltas), 8) if deltas else None,
            "chosen_delta_max": round(max(deltas), 8) if deltas else None,
            "tv_lower": round(self.tv_lower, 8),
            "tv_upper": round(self.tv_upper, 8),
        }


def _first_top(top: Top, token: str) -> str:
    return top[0][0] if top else token


def compare(a: Trace, b: Trace) -> Comparison:
    """Compare two greedy answers to one prompt where both saw the same context."""
    length = min(len(a.tokens), len(b.tokens))
    first = next((i for i in range(length) if a.tokens[i] != b.tokens[i]), None)
    shared = length if first is None else first + 1
    lowers, uppers, deltas, agree = [], [], [], 0
    for i in range(shared):
        if not a.top[i] or not b.top[i]:
            continue  # a position without alternatives has no distribution to compare
        low, high = tv_bounds(a.top[i], b.top[i])
        lowers.append(low)
        uppers.append(high)
        agree += _first_top(a.top[i], a.tokens[i]) == _first_top(b.top[i], b.tokens[i])
        if a.tokens[i] == b.tokens[i]:
            deltas.append(abs(a.chosen[i] - b.chosen[i]))
    compared = len(lowers)
    return Comparison(
        positions=compared,
        first_divergence=first,
        identical=first is None and len(a.tokens) == len(b.tokens),
        top1_agree=agree,
        chosen_delta=tuple(deltas),
        tv_lower=sum(lowers) / compared if compared else 0.0,
        tv_upper=sum(uppers) / compared if compared else 0.0,
    )


def divergence(comparison: Comparison) -> float:
    """The statistic the decision uses: the mean TV lower bound, plus the chosen tokens' shift.

    The lower bound alone is blind to a shift that keeps every listed probability within the
    other list's cap; the chosen token's |delta logprob| sees it. Both are 0 exactly when the
    two answers gave the same numbers.
    """
    deltas = comparison.chosen_delta
    return comparison.tv_lower + (sum(deltas) / len(deltas) if deltas else 0.0)
