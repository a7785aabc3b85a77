"""The context window an endpoint states, read from what it publishes (pure).

Each engine states its serving window in its own place, and none of them is the OpenAI API's:

- ``GET /v1/models``: vLLM and SGLang give each model's ``max_model_len``; llama-server gives
  ``meta.n_ctx`` (and the model's own ``meta.n_ctx_train``); routers such as OpenRouter and
  Together give ``context_length``;
- llama-server's ``GET /props``: ``default_generation_settings.n_ctx``;
- a refusal's message: "maximum context length is N tokens" (OpenAI, vLLM), "context size (N
  tokens)" (llama-server, which also puts ``n_ctx`` in the error object).

The verifier reads the window from them and then holds the endpoint to it; it never assumes
an engine's default.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

# Model-list fields that state a serving window, in the order they are believed.
_LIST_FIELDS = ("max_model_len", "context_length", "max_context_length", "context_window")
_REFUSAL_WINDOW = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"context size \((\d+) tokens?\)", re.IGNORECASE),
    re.compile(r"context (?:window|length) of (\d+)", re.IGNORECASE),
    # Anthropic's Messages API: "prompt is too long: 208656 tokens > 200000 maximum".
    re.compile(r"tokens > (\d+) maximum", re.IGNORECASE),
)
# Words a refusal for length says it with (any one of them).
_LENGTH_WORDS = re.compile(r"context|too long|too many tokens|maximum.*length|exceed", re.I)


@dataclasses.dataclass(frozen=True, slots=True)
class StatedWindow:
    """A serving window and where the endpoint stated it.

    Args:
        tokens: the window, in tokens (prompt and answer together).
        where: what stated it (``GET /v1/models max_model_len``).
    """

    tokens: int
    where: str


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entry(body: Any, model: str) -> Mapping[str, Any] | None:
    """The model list's entry for `model` (the only entry when none is named so)."""
    data = body.get("data") if isinstance(body, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    named = [e for e in entries if model in (e.get("id"), e.get("name"))]
    if named:
        return named[0]
    return entries[0] if len(entries) == 1 else None


def from_models(body: Any, model: str, route: str = "/v1/models") -> StatedWindow | None:
    """The window the model list states for `model`, or None where it states none."""
    entry = _entry(body, model)
    if entry is None:
        return None
    for field in _LIST_FIELDS:
        if (tokens := _count(entry.get(field))) is not None:
            return StatedWindow(tokens, f"GET {route} {field}")
    meta = entry.get("meta")
    if isinstance(meta, Mapping) and (tokens := _count(meta.get("n_ctx"))) is not None:
        return StatedWindow(tokens, f"GET {route} meta.n_ctx")
    return None


def from_props(body: Any) -> StatedWindow | None:
    """The window llama-server's ``/props`` states, or None."""
    settings = body.get("default_generation_settings") if isinstance(body, Mapping) else None
    if isinstance(settings, Mapping) and (tokens := _count(settings.get("n_ctx"))) is not None:
        return StatedWindow(tokens, "GET /props default_generation_settings.n_ctx")
    return None


def from_refusal(error: Mapping[str, Any] | None) -> int | None:
    """The window a refusal's error object states (its ``n_ctx``, or its message), or None."""
    if not error:
        return None
    if (tokens := _count(error.get("n_ctx"))) is not None:
        return tokens
    message = str(error.get("message") or "")
    for pattern in _REFUSAL_WINDOW:
        if found := pattern.search(message):
            return int(found.group(1))
    return None


def says_length(error: Mapping[str, Any] | None) -> bool:
    """A refusal's error object says the request is too long for the context."""
    if not error:
        return False
    return from_refusal(error) is not None or bool(
        _LENGTH_WORDS.search(f"{error.get('message') or ''} {error.get('type') or ''}")
    )
