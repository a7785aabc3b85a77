"""Other words around a prompt: the same request, worded otherwise."""

from __future__ import annotations

import random
from typing import Any

# The words around a prompt that change nothing it asks.
_OPENINGS = ("", "Hi! ", "Hello. ", "Quick question: ", "Please help: ", "Good morning! ")
_CLOSINGS = ("", " Thanks!", " Thank you.", " Cheers.", " Much appreciated.")


def last_user(messages: list[dict[str, Any]]) -> int | None:
    """The index of the last user message, when its content is a text."""
    found = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    return found[-1] if found and isinstance(messages[found[-1]].get("content"), str) else None


def wording(rng: random.Random) -> tuple[str, str]:
    """Other words to put around a prompt: an opening, a closing, not both empty."""
    opening, closing = rng.choice(_OPENINGS), rng.choice(_CLOSINGS)
    return opening, closing if opening or closing else _CLOSINGS[1]


def reworded(text: str, rng: random.Random) -> str:
    """The text with other words around it (never the same text)."""
    opening, closing = wording(rng)
    return f"{opening}{text}{closing}"


def around(content: Any, opening: str, closing: str) -> Any:
    """A message's content with words around it: a text, or its first and last text parts."""
    if isinstance(content, str):
        return f"{opening}{content}{closing}"
    if not isinstance(content, list):
        return content
    texts = [i for i, part in enumerate(content) if isinstance(part, dict) and "text" in part]
    if texts:
        first, last = texts[0], texts[-1]
        content[first] = {**content[first], "text": opening + content[first]["text"]}
        content[last] = {**content[last], "text": content[last]["text"] + closing}
    return content
