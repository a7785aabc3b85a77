"""The simulated vendor's prefix cache: a long prompt's tokens kept, reported, and quicker.

A vendor with a prefix cache computes only the part of a prompt it has not seen before: a
repeat's first token comes sooner, and its usage says how much came from the cache
(``prompt_tokens_details.cached_tokens``). The test double keeps the last few long prompts
(at least :data:`LONG` tokens; the suite's other prompts are short, and their answers stay as
they were) and finds the longest prefix a new one shares with them, in whole blocks.
"""

from __future__ import annotations

import array
import collections
import threading
from collections.abc import Sequence

# The shortest prompt the cache keeps and reports (only the context family sends such).
LONG = 4096
# Tokens are cached in whole blocks, as paged KV caches keep them.
BLOCK = 16
# Seconds to compute one prompt token not in the cache, before a streamed answer's first token.
PREFILL = 2e-6
# The first tokens a cache keyed by too short a prefix finds a prompt by (prefix-cache-collision).
KEY = 4 * BLOCK
_KEPT = 8


class PrefixCache:
    """The latest long prompts, by their token ids."""

    def __init__(self) -> None:
        self._prompts: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    def visit(self, ids: Sequence[int]) -> int | None:
        """How many of `ids`' first tokens come from the cache; then keep `ids`.

        None for a prompt too short to be cached. The last token is always computed (its
        logits are the answer's first).
        """
        if len(ids) < LONG:
            return None
        key = array.array("I", ids).tobytes()
        with self._lock:
            shared = max((_common(key, seen) for seen in self._prompts), default=0)
            self._prompts[key] = None
            self._prompts.move_to_end(key)
            while len(self._prompts) > _KEPT:
                self._prompts.popitem(last=False)
        tokens = min(shared // 4, len(ids) - 1)
        return tokens - tokens % BLOCK

    def collided(self, ids: Sequence[int]) -> tuple[int, ...] | None:
        """The latest other kept prompt whose first :data:`KEY` tokens are `ids`' own, or None.

        What a cache keyed by its prompts' first blocks alone serves a prompt: the KV of
        another that merely began the same way.
        """
        if len(ids) < LONG:
            return None
        key = array.array("I", ids).tobytes()
        with self._lock:
            for seen in reversed(self._prompts):
                if seen[: 4 * KEY] == key[: 4 * KEY]:
                    return None if seen == key else tuple(array.array("I", seen))
        return None


def _common(one: bytes, other: bytes) -> int:
    """The length in bytes of the longest common prefix of two byte strings (C-speed halving)."""
    low, high = 0, min(len(one), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if one[:middle] == other[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
