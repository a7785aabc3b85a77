"""The simulated model's reasoning: what it thinks, written in its raw form, parsed back.

The model writes its output as the chat template's raw form does (``<think>reasoning</think>``
then the answer, with the tags of the profile's dialect), and the vendor's reasoning parser
splits it into reasoning and content as a real server's does. The reasoning defects of the
catalogue are that parser's (and the model's) known failures: tags left in content, the
answer swallowed by the reasoning, a call written inside the reasoning, and so on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from ..reference.dialect import DEFAULT_FIELD, Dialect
from .defects import (
    EFFORT_IGNORED,
    EMPTY_FOLLOWUP,
    JSON_ENDS_THINKING,
    JSON_IN_REASONING,
    REASONING_FIELD_RENAMED,
    REASONING_PARSER_OFF,
    REASONING_SWALLOWS_ANSWER,
    THINKING_IGNORED,
    THINKING_OFF_ANSWER_IN_REASONING,
    THINKING_OFF_IGNORED,
    TOOL_MARKUP_IN_REASONING,
    Defects,
)

# The raw form's tags when the profile states none (Kimi, DeepSeek, Qwen3 and GLM use these).
DEFAULT_TAGS = ("<think>", "</think>")
# The reasoning: one opening sentence, and one step more per effort level above the lowest.
OPENING = "The user asked a question; a short answer will do."
STEPS = (
    "First, restate what is asked.",
    "Then check each part of it in turn.",
    "Then check the answer once more.",
    "Finally, make sure that nothing was missed.",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Split:
    """The model's output after the vendor's reasoning parser.

    Args:
        reasoning: the reasoning text, or None.
        content: the answer text (None: leave the reply's content as it is).
        calls_kept: the reply's tool calls are sent as calls (False: they are gone, written
            into the reasoning or never made).
        field: the message field the reasoning goes out in.
    """

    reasoning: str | None
    content: str | None
    calls_kept: bool = True
    field: str = DEFAULT_FIELD


def generic_mode(request: Mapping[str, Any]) -> bool:
    """Without a profile: the request turns reasoning on in one of the dialects vendors use."""
    kwargs = request.get("chat_template_kwargs")
    for key in ("thinking", "enable_thinking"):
        if isinstance(kwargs, dict) and isinstance(kwargs.get(key), bool):
            return bool(kwargs[key])
    thinking = request.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if isinstance(kind, str) and kind in ("enabled", "disabled"):
        return kind == "enabled"
    return request.get("reasoning_effort") in ("low", "medium", "high")


def _asks_json(request: Mapping[str, Any]) -> bool:
    response_format = request.get("response_format")
    return isinstance(response_format, dict) and response_format.get("type") in (
        "json_schema",
        "json_object",
    )


def thinks(request: Mapping[str, Any], dialect: Dialect | None, defects: Defects) -> bool:
    """Whether the model reasons before answering `request`."""
    mode = dialect.mode(request) if dialect is not None else generic_mode(request)
    if mode is False and defects.has(THINKING_OFF_IGNORED):
        mode = True
    if defects.has(THINKING_IGNORED):
        return False
    if _asks_json(request) and (
        defects.has(JSON_ENDS_THINKING) or (dialect is not None and dialect.json_ends_thinking)
    ):
        return False
    return bool(mode)


def reasoning_for(request: Mapping[str, Any], dialect: Dialect | None, defects: Defects) -> str:
    """What the model thinks: longer at a higher effort level (unless effort is ignored)."""
    effort = dialect.effort if dialect is not None else None
    steps = 1
    if effort is not None and not defects.has(EFFORT_IGNORED):
        level = effort.level_of(request)
        steps = effort.levels.index(level) if level in effort.levels else 1
    return " ".join((OPENING, *STEPS[:steps]))


def call_markup(calls: list[Any], dialect: Dialect | None) -> str:
    """Calls written as raw tool-call markup, opened by the dialect's first tool marker."""
    markers = dialect.tool_markers if dialect is not None else ()
    marker = markers[0] if markers else "<tool_call>"
    return "".join(
        f"{marker}{json.dumps({'name': c.name, 'arguments': json.loads(c.arguments or '{}')})}"
        for c in calls
    )


def split(
    request: Mapping[str, Any],
    content: str | None,
    calls: list[Any],
    dialect: Dialect | None,
    defects: Defects,
) -> Split:
    """The model's raw output for its reply, parsed as the vendor's reasoning parser does.

    Args:
        request: the chat request.
        content: the reply's answer text (None for a reply that is only calls).
        calls: the reply's tool calls (their markup, where a defect keeps it as text).
        dialect: the profile's dialect, or None for the generic one.
        defects: the vendor's defects.
    """
    start, end = (dialect.tags if dialect is not None and dialect.tags else None) or DEFAULT_TAGS
    field = dialect.history_field if dialect is not None else DEFAULT_FIELD
    if defects.has(REASONING_FIELD_RENAMED):
        field = "reasoning" if field == "reasoning_content" else "reasoning_content"
    thinking = thinks(request, dialect, defects)
    answer = content or ""
    if not thinking:
        off = (dialect.mode(request) if dialect is not None else None) is False
        if off and defects.has(THINKING_OFF_ANSWER_IN_REASONING) and answer and not calls:
            # A parser that takes output without an opening tag for reasoning until its end.
            return Split(answer, "", True, field)
        return Split(None, None, True, field)
    reasoning = reasoning_for(request, dialect, defects)
    messages = request.get("messages") or [{}]
    if defects.has(EMPTY_FOLLOWUP) and messages[-1].get("role") == "tool":
        return Split(None, "", False, field)
    inside, kept = reasoning, True
    if calls and defects.has(TOOL_MARKUP_IN_REASONING):
        inside, kept = f"{reasoning}\n{call_markup(calls, dialect)}", False
    if _asks_json(request) and defects.has(JSON_IN_REASONING) and answer:
        inside, answer = f"{reasoning}\n{answer}", ""
    raw = f"{start}{inside}{end}{answer}"
    if defects.has(REASONING_PARSER_OFF):
        return Split(None, raw, kept, field)
    body = raw[len(start) :]
    if defects.has(REASONING_SWALLOWS_ANSWER) and answer:
        # The end tag is not taken for the end (and, a special token, is skipped in the text).
        return Split(body.replace(end, "\n"), "", kept, field)
    thought, _, after = body.partition(end)
    # A reply that is only calls keeps its content as it is (None, or leaked markup).
    return Split(thought, after if answer or not (calls and kept) else None, kept, field)
