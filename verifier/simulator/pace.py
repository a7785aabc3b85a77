"""The simulated vendor's speed: a time to first token and a decode rate, with seeded jitter.

With ``--ttft-ms T`` and ``--tokens-per-second R`` the vendor makes an answer's first token
T ms after the request and each next one 1/R s later, so that a client's measured time to
first token and decode rate can be checked against what the vendor was told. A streamed
answer's chunk goes out once its last token is made (content, reasoning and tool calls'
pieces, counted in toy tokens); a non-stream answer waits for all its completion tokens.
``--timing-jitter J`` multiplies each wait by a factor drawn uniformly from [1 - J, 1 + J],
seeded by ``--fault-seed`` and the request's number.
"""

from __future__ import annotations

import dataclasses
import json
import random

from .rules import tokenize


@dataclasses.dataclass(frozen=True, slots=True)
class Pace:
    """How long the vendor takes to produce tokens (the default: no time at all).

    Args:
        ttft: seconds before an answer's first token.
        per_token: seconds between one token and the next (1 / tokens per second).
        jitter: each wait is multiplied by a factor drawn from [1 - jitter, 1 + jitter].
        seed: the vendor's seed, with the request's number the jitter's seed.
    """

    ttft: float = 0.0
    per_token: float = 0.0
    jitter: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.ttft >= 0 and self.per_token >= 0 and 0 <= self.jitter < 1):
            raise ValueError(
                "--ttft-ms and --tokens-per-second must be positive, --timing-jitter within "
                f"[0, 1); given {self.ttft * 1000} ms, {self.per_token} s a token, "
                f"jitter {self.jitter}"
            )

    @property
    def paced(self) -> bool:
        """Whether there is anything to wait for."""
        return bool(self.ttft or self.per_token)

    def waits(self, number: int, tokens: int) -> list[float]:
        """The seconds to wait before each of `tokens` tokens of answer `number`."""
        draw = random.Random(f"pace:{self.seed}:{number}")
        base = [self.ttft] + [self.per_token] * max(0, tokens - 1)
        if not self.jitter:
            return base[:tokens] if tokens else []
        return [wait * draw.uniform(1 - self.jitter, 1 + self.jitter) for wait in base[:tokens]]


def tokens_in(event: bytes) -> int:
    """How many toy tokens a stream event's chunk carries (0 for one that carries none).

    Its content, reasoning, and its tool calls' names and arguments count.
    """
    data = event.removeprefix(b"data: ").strip()
    if not data.startswith(b"{"):
        return 0
    try:
        chunk = json.loads(data)
    except ValueError:
        return 0
    texts: list[str] = []
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        texts += [delta.get(k) or "" for k in ("content", "reasoning_content", "reasoning")]
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            texts += [function.get("name") or "", function.get("arguments") or ""]
    return sum(len(tokenize(text)) for text in texts if isinstance(text, str))
