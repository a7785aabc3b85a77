"""The simulated vendor's context window: stated in its model list and held to, defects aside.

A correct vendor refuses a prompt past its window with a 400 that says so (OpenAI's
``context_length_exceeded``), and ends an answer that reaches the window with
``finish_reason`` ``length``. The context defects break one of those each.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .defects import (
    CONTEXT_SHIFT,
    HISTORY_COMPACTED,
    OVER_WINDOW_500,
    OVER_WINDOW_HANG,
    PROMPT_TRUNCATED_FRONT,
    WINDOW_SMALLER_THAN_STATED,
    Defects,
)
from .prompt import KEPT
from .rules import max_tokens_of
from .validation import Rejection

# The tool results a vendor that compacts history keeps whole (history-compacted).
KEPT_RESULTS = 4


@dataclasses.dataclass(frozen=True, slots=True)
class Admission:
    """What the vendor does with a request, given its prompt's length.

    Args:
        request: the request to answer (its answer capped at the window, or its prompt's
            front dropped), when it is answered.
        rejection: the refusal, when it is refused.
        error: answer HTTP 500.
        hold: answer nothing until the client hangs up.
    """

    request: dict[str, Any] | None = None
    rejection: Rejection | None = None
    error: bool = False
    hold: bool = False


def _too_long(api: str | None, prompt: int, held: int) -> str:
    """A refusal past the window in each API's own words (its provider's documented ones)."""
    if api == "messages":
        return f"prompt is too long: {prompt} tokens > {held} maximum"
    if api == "responses":
        return (
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again."
        )
    return (
        f"This model's maximum context length is {held} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )


def admit(
    request: dict[str, Any],
    prompt: int,
    window: int | None,
    defects: Defects,
    api: str | None = None,
) -> Admission:
    """How a vendor with `window` (None: none) treats `request`, whose prompt is `prompt` tokens.

    `api` is the route's (None: chat completions): a refusal is said in its words.
    """
    if window is None:
        return Admission(request)
    held = window // 2 if defects.has(WINDOW_SMALLER_THAN_STATED) else window
    limit = max_tokens_of(request)
    if prompt > held:
        if defects.has(OVER_WINDOW_500):
            return Admission(error=True)
        if defects.has(OVER_WINDOW_HANG):
            return Admission(hold=True)
        if defects.has(PROMPT_TRUNCATED_FRONT):
            room = held - min(limit or 0, held // 2)
            return Admission({**request, KEPT: room})
        return Admission(
            rejection=Rejection(
                400,
                _too_long(api, prompt, held),
                "context_length_exceeded",
                "messages",
            )
        )
    # A request without a cap is left as it is: the simulated model's answers are short.
    if defects.has(CONTEXT_SHIFT) or limit is None or prompt + limit <= held:
        return Admission(request)
    capped = {k: v for k, v in request.items() if k != "max_completion_tokens"}
    return Admission({**capped, "max_tokens": held - prompt})


def compacted(request: dict[str, Any], defects: Defects) -> dict[str, Any]:
    """The request as the vendor passes it to its model: a long history's old results cut.

    With history-compacted, every tool result but the last :data:`KEPT_RESULTS` becomes a
    one-line stub; otherwise the request as it came.
    """
    messages = request.get("messages")
    if not defects.has(HISTORY_COMPACTED) or not isinstance(messages, list):
        return request
    results = [n for n, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "tool"]
    old = set(results[:-KEPT_RESULTS])
    if not old:
        return request
    stub = "[earlier tool output compacted]"
    kept = [{**m, "content": stub} if n in old else m for n, m in enumerate(messages)]
    return {**request, "messages": kept}
