"""A long agent loop, replayed: tool calls and long tool results, each turn counted (pure).

An agent harness sends the whole history every turn: the task, each tool call the model made
and each tool's result, which in coding and research agents runs to thousands of tokens. A
vendor, or a layer in front of it, that compacts or truncates that history to save memory
answers a prompt other than the one sent, without a word. The loop here is the verifier's own
(the calls are written, not asked of the model), so every turn's prompt is known, and counted
with the profile's template and tokenizer, before it is sent.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...outcome import Finding
from . import haystack
from .renderings import Conversation, reference

if TYPE_CHECKING:
    from ...reference.profiles import Profile

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read one file of the archive and return its text.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file's path."}},
            "required": ["path"],
        },
    },
}
_TASK = (
    "{lead} Read the archive's files in order with read_file, one call at a time, then "
    "summarise them in one sentence."
)
# What a template that writes tool calls and results writes of these (to tell one that does).
_MARK = "zq-archive-mark"


def _call(turn: int, path: str, reasoning: str | None = None) -> dict[str, Any]:
    # Kimi's ids (functions.NAME:INDEX); other templates print an id as it is, or not at all.
    thought = {reasoning: f"The next file to read is {path}."} if reasoning else {}
    return {
        "role": "assistant",
        "content": "",
        **thought,
        "tool_calls": [
            {
                "id": f"functions.read_file:{turn}",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
            }
        ],
    }


def _result(turn: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"functions.read_file:{turn}", "content": text}


def _turns(lead: str, results: Sequence[str], reasoning: str | None) -> list[list[dict[str, Any]]]:
    """Each turn's messages: the task, then the first k calls with their results."""
    history: list[dict[str, Any]] = [{"role": "user", "content": _TASK.format(lead=lead)}]
    turns = [list(history)]
    for turn, text in enumerate(results):
        call = _call(turn, f"archive/part-{turn + 1}.txt", reasoning)
        history += [call, _result(turn, text)]
        turns.append(list(history))
    return turns


def _count(profile: Profile, messages: list[dict[str, Any]]) -> int:
    return len(reference(profile, Conversation(messages, (TOOL,))).ids)


def writes_tool_turns(profile: Profile) -> bool:
    """The release's template writes a tool call's arguments and its result into the prompt.

    A template that leaves them out (SmolLM2's writes no tool calls) gives a history whose
    turns cost nothing: there is nothing to count them by.
    """
    messages = [
        {"role": "user", "content": "Read it."},
        _call(0, _MARK),
        _result(0, f"{_MARK}-result"),
    ]
    text = profile.render(messages, (TOOL,)).text
    return _MARK in text.replace(f"{_MARK}-result", "") and f"{_MARK}-result" in text


@dataclasses.dataclass(frozen=True, slots=True)
class Loop:
    """The loop's turns, each turn's messages, and each one's local count."""

    turns: tuple[tuple[dict[str, Any], ...], ...]
    counts: tuple[int, ...]


def build(profile: Profile, tokens: int, turns: int, seed: int, lead: str) -> Loop:
    """A loop of `turns` tool results whose last turn's prompt is at most `tokens` long.

    A model whose tool-call turns must come back with their reasoning (Kimi K2 Thinking's
    contract) gets each call's reasoning too, in the field its dialect names.
    """
    dialect = profile.dialect
    reasoning = (
        dialect.history_field if dialect is not None and dialect.tool_turns_need_reasoning else None
    )
    bare = _count(profile, _turns(lead, [""] * turns, reasoning)[-1])
    per = max((tokens - bare) // turns, 0)
    results = [haystack.prose(profile, seed, per, f"part-{n}") for n in range(turns)]
    while True:
        every = _turns(lead, results, reasoning)
        last = _count(profile, every[-1])
        if last <= tokens or not results[-1]:
            break
        # Counted apart, the parts fell short of the whole by a token here and there.
        kept = results[-1].split(" ")
        results[-1] = " ".join(kept[: len(kept) - max(1, (last - tokens) // 2)])
    counts = tuple(_count(profile, messages) for messages in every[:-1]) + (last,)
    return Loop(tuple(tuple(m) for m in every), counts)


def history_findings(local: Sequence[int], prompts: Sequence[int]) -> list[Finding]:
    """Each turn's prompt_tokens against the history's local count, by difference (pure).

    Counted from the first turn (the task alone), so a hidden system prompt or a constant skew
    cancel. The first turn that disagrees is reported. It names the history compacted only
    where the evidence singles that out: every earlier turn counted exactly, then at least
    half a turn's tokens missing at once (a tokenizer that counts the results otherwise is off
    from the first result on, a little at a time). Otherwise the counts disagree and no more
    is known.
    """
    for turn in range(1, len(local)):
        want, got = local[turn] - local[0], prompts[turn] - prompts[0]
        if got == want:
            continue
        smallest = min(local[n] - local[n - 1] for n in range(1, turn + 1))
        what = (
            f"turn {turn + 1} of the agent loop ({turn} tool result{'s' * (turn > 1)}, "
            f"{local[turn]:,} tokens) "
            f"costs {got:,} prompt tokens more than the task alone; the local count of the "
            f"history says {want:,}"
        )
        if turn > 1 and want - got >= smallest // 2:
            return [
                Finding(
                    "history_compacted",
                    f"{what}: {want - got:,} tokens of the history were dropped or compacted "
                    f"without a word, after {turn - 1} turns counted exactly",
                    "$.usage.prompt_tokens",
                    expected=want,
                    actual=got,
                )
            ]
        return [
            Finding(
                "prompt_tokens_mismatch", what, "$.usage.prompt_tokens", expected=want, actual=got
            )
        ]
    return []
