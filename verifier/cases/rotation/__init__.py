"""Secret rotations: a fresh twin of every case that can vary, derived from a secret.

``--rotate SECRET_ENV`` names an environment variable holding a secret. For each case of a
family that can vary (its family's ``rotate``), the secret derives a twin, its id the case's
with :data:`SUFFIX`: other tool names, parameter names and argument numbers, other words
around the prompt, another order of tools. The twin's expectation is derived with it, so it
is graded as exactly as the case. The same secret gives the same twins, so an auditor who
holds it can re-derive a run; the scorecard holds a commitment to the secret (an HMAC of a
fixed text under it), never the secret. Nothing here does I/O.
"""

from __future__ import annotations

from .conversations import chat_case, reasoning_case, wire_case
from .media import tokenizer_case, vision_case
from .names import NAMES_ELSEWHERE
from .secret import MIN_SECRET, SUFFIX, Rotation, Rotator, from_environment, is_twin
from .structured import structured_case
from .tools import tool_case

__all__ = [
    "MIN_SECRET",
    "NAMES_ELSEWHERE",
    "SUFFIX",
    "Rotation",
    "Rotator",
    "chat_case",
    "reasoning_case",
    "from_environment",
    "is_twin",
    "structured_case",
    "tokenizer_case",
    "tool_case",
    "vision_case",
    "wire_case",
]
