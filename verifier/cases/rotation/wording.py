"""Other words around a prompt: the same request, worded otherwise."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

# The words around a prompt that change nothing it asks.
_OPENINGS = ("", "Hi! ", "Hello. ", "Quick question: ", "Please help: ", "Good morning! ")
_CLOSINGS = ("", " Thanks!", " Thank you.", " Cheers.", " Much appreciated.")
# Instructions the corpus gives again and again (structured output's 119 cases say the first),
# each with others that ask the same: a twin never carries the published sentence.
_PHRASINGS = (
    (
        "You answer with JSON only.",
        "Reply with JSON and nothing else.",
        "Answer only in JSON.",
        "Your replies are JSON, with no other text.",
        "Respond in JSON only.",
    ),
    ("You are terse.", "You keep answers short.", "Answer in few words.", "Be concise."),
    ("Be brief.", "Keep it short.", "Answer briefly."),
)
# The words around a system prompt that change nothing it asks.
_SYSTEM_OPENINGS = ("", "Instructions: ", "Note: ", "Your role: ")
_SYSTEM_CLOSINGS = ("", " Thank you.", " Keep to this.")


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
    return str(around(text, *wording(rng)))


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


def instructions(rng: random.Random) -> Callable[[str], str]:
    """A rewording of system prompts, the same for every one alike in a twin.

    A common instruction gets another of its phrasings; every one gets other words around it
    (never the same text), so no twin carries a system prompt as published.
    """
    opening, closing = rng.choice(_SYSTEM_OPENINGS), rng.choice(_SYSTEM_CLOSINGS)
    chosen: dict[str, str] = {}

    def reword(text: str) -> str:
        if text not in chosen:
            core = text
            for phrasings in _PHRASINGS:
                if text in phrasings:
                    core = rng.choice([p for p in phrasings if p != text])
            new = f"{opening}{core}{closing}"
            chosen[text] = new if new != text else f"{_SYSTEM_OPENINGS[1]}{text}"
        return chosen[text]

    return reword


def reword_instructions(messages: list[Any], reword: Callable[[str], str]) -> None:
    """Every system (or developer) message's text reworded by `reword`, in place."""
    for message in messages:
        if (
            isinstance(message, dict)
            and message.get("role") in ("system", "developer")
            and isinstance(message.get("content"), str)
        ):
            message["content"] = reword(message["content"])
