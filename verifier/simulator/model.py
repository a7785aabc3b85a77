"""The simulated vendor's tiny deterministic "model".

It is not a language model: it answers from rules, so that every answer a
correct endpoint must give is known. A plain prompt gets a fixed greeting that
echoes the start of the last user message. A ``response_format`` request gets
the JSON the prompt spells out (its "natural answer"), bent into the schema by
the simulated grammar engine (:func:`~verifier.simulator.conform.conform`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from .conform import MISSING, conform
from .defects import Defects

MODEL_ID = "simulated-tiny"
GREETING = "Hello! I am a tiny deterministic model."

# Toy tokens: a word or a digit or one other character, each with its leading
# space, or a run of whitespace. Joining the tokens gives the text back.
_TOKEN = re.compile(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\s+")


def tokenize(text: str) -> list[str]:
    """The toy tokens of `text` ("".join of them is `text`)."""
    return _TOKEN.findall(text)


def message_text(message: dict[str, Any]) -> str:
    """The text of a message's content (string, or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def count_prompt_tokens(request: dict[str, Any]) -> int:
    """Prompt tokens under the toy template: 2 markers a message, the text, 1 to start the reply."""
    total = 1
    for message in request.get("messages", []):
        total += 2 + len(tokenize(message_text(message)))
    if request.get("tools"):
        total += len(tokenize(json.dumps(request["tools"])))
    return total


def natural_json(request: dict[str, Any]) -> Any:
    """The JSON value the last user message spells out, or MISSING when it has none."""
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    if not users:
        return MISSING
    text = message_text(users[-1])
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return value
    return MISSING


@dataclasses.dataclass(slots=True)
class Reply:
    """What the model says: content split into tokens, and why it stopped."""

    tokens: list[str]
    finish_reason: str
    tool_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def content(self) -> str:
        """The tokens joined."""
        return "".join(self.tokens)


def _plain_reply(request: dict[str, Any]) -> str:
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    words = message_text(users[-1]).split()[:6] if users else []
    echo = f" You said: {' '.join(words)}" if words else ""
    return GREETING + echo


def _structured_text(request: dict[str, Any], defects: Defects) -> str | None:
    """The JSON text for a response_format request, or None when no format applies."""
    response_format = request.get("response_format")
    if not isinstance(response_format, dict) or "ignore-response-format" in defects:
        return None
    kind = response_format.get("type")
    natural = natural_json(request)
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema", {})
        value = conform(natural, schema)
    elif kind == "json_object":
        value = natural if isinstance(natural, dict) else {"answer": _plain_reply(request)}
    else:
        return None
    text = json.dumps(value, ensure_ascii=False)
    if "json-in-markdown-fence" in defects:
        text = f"```json\n{text}\n```"
    return text


def max_tokens_of(request: dict[str, Any]) -> int | None:
    """The completion budget the request asks for, if any."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def respond(request: dict[str, Any], defects: Defects) -> Reply:
    """The model's reply to a (valid) chat-completions request."""
    text = _structured_text(request, defects)
    if text is None:
        text = _plain_reply(request)
    tokens = tokenize(text)
    limit = max_tokens_of(request)
    if limit is not None and len(tokens) > limit:
        return Reply(tokens[:limit], "length")
    return Reply(tokens, "stop")
