"""The simulated vendor's answers on the wire: the completion object and the SSE chunks.

Wire defects of the catalogue are applied here (raw finish_reason tokens, a wrong
usage total, inconsistent logprobs, a repeated role, a missing usage chunk or
[DONE], n ignored), and so are the logprobs' distributions (from
:mod:`~verifier.simulator.distribution`) with the defects that misreport them;
behaviour defects live in the model (:mod:`~verifier.simulator.rules`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

from .defects import (
    CHOSEN_ENTRY_DIFFERS,
    FINISH_REASON_RAW_TOKEN,
    LOGPROBS_ALTERNATIVES_CUT,
    LOGPROBS_AS_PROBABILITIES,
    LOGPROBS_INCONSISTENT,
    LOGPROBS_NOT_TOP_CHOICE,
    LOGPROBS_UNAVAILABLE,
    LOGPROBS_ZEROED,
    N_IGNORED,
    REASONING_TOKENS_MISCOUNTED,
    SERVED_MODEL_SUBSTITUTED,
    STREAM_CHUNK_ID_CHANGES,
    STREAM_CONTENT_DIFFERS,
    STREAM_DROPS_TOOL_CALLS_AFTER_THINKING,
    STREAM_EMPTY_DELTA,
    STREAM_FINISH_REASON_MISSING,
    STREAM_LOGPROBS_DIFFER,
    STREAM_NO_DONE,
    STREAM_NO_ROLE,
    STREAM_NO_USAGE,
    STREAM_REASONING_AFTER_CONTENT,
    STREAM_ROLE_REPEATED,
    STREAM_USAGE_UNREQUESTED,
    SUBSTITUTE_MODEL,
    TOOL_CALL_TYPE_WRONG,
    TOOL_NAME_REPEATED_IN_STREAM,
    TOP_LOGPROBS_DUPLICATED,
    USAGE_TOTAL_WRONG,
    Defects,
)
from .distribution import (
    DECIMALS,
    Perturbation,
    best_swapped,
    distribution,
    entry,
    prompt_digest,
    sample,
)
from .prompt import CACHED
from .rules import (
    MODEL_ID,
    Path,
    Reply,
    ToolCall,
    billed,
    calls_as_generated,
    max_tokens_of,
    tokenize,
)

FINGERPRINT = "fp_simulated"
# Streamed tool-call arguments arrive in pieces of this many characters.
ARGUMENT_PIECE = 8
# What a vendor that leaks the model's stop token into finish_reason sends.
RAW_FINISH = "stop_163586"
# How far below its entry's logprob chosen-entry-differs lists the chosen token.
ENTRY_SHIFT = 0.5
# How far below the non-stream answer's stream-logprobs-differ streams every logprob.
STREAM_SHIFT = 0.01


def usage_of(
    request: dict[str, Any], reply: Reply, choices: int, defects: Defects, path: Path
) -> dict[str, Any]:
    """Usage: the prompt's tokens, every choice's answer's, and their reasoning's (if any)."""
    prompt = path.prompt_tokens(request)
    completion = reply.completion_tokens * choices
    total = prompt + completion + (1 if defects.has(USAGE_TOTAL_WRONG) else 0)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
    }
    cached = request.get(CACHED)
    if isinstance(cached, int):
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reply.reasoning_tokens is not None:
        reasoning = reply.reasoning_tokens * choices
        if defects.has(REASONING_TOKENS_MISCOUNTED):
            reasoning = completion
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def choice_count(request: dict[str, Any], defects: Defects) -> int:
    """How many choices to send: n, unless the vendor ignores it."""
    n = request.get("n")
    return 1 if defects.has(N_IGNORED) or not isinstance(n, int) else n


def finish_of(reply: Reply, defects: Defects) -> str:
    """The finish_reason as sent."""
    if reply.finish_reason == "stop" and defects.has(FINISH_REASON_RAW_TOKEN):
        return RAW_FINISH
    return reply.finish_reason


def _entries(
    request: dict[str, Any],
    tokens: list[str],
    defects: Defects,
    perturbation: Perturbation | None,
    start: int = 0,
) -> list[dict[str, Any]]:
    """The logprobs entries of `tokens`, emitted from position `start` on."""
    top = request.get("top_logprobs") or 0
    digest = prompt_digest(request)
    found = []
    for position, token in enumerate(tokens, start):
        logits = distribution(digest, position, token, perturbation)
        if defects.has(LOGPROBS_NOT_TOP_CHOICE):
            logits = best_swapped(logits)
        found.append(_misreported(entry(logits, top), defects))
    return found


def _shifted(item: dict[str, Any], by: float) -> dict[str, Any]:
    """`item` with its logprob and every alternative's moved `by`."""
    alternatives = [
        {**alt, "logprob": round(alt["logprob"] + by, DECIMALS)} for alt in item["top_logprobs"]
    ]
    return {**item, "logprob": round(item["logprob"] + by, DECIMALS), "top_logprobs": alternatives}


def _misreported(item: dict[str, Any], defects: Defects) -> dict[str, Any]:
    """One position's entry as the defects that misreport logprobs give it."""
    alternatives = list(item["top_logprobs"])
    if defects.has(LOGPROBS_ALTERNATIVES_CUT):
        alternatives = alternatives[:1]
    if defects.has(TOP_LOGPROBS_DUPLICATED) and len(alternatives) > 1:
        alternatives[-1] = dict(alternatives[0])
    if defects.has(CHOSEN_ENTRY_DIFFERS):
        alternatives = [
            {**alt, "logprob": round(alt["logprob"] - ENTRY_SHIFT, DECIMALS)}
            if alt["token"] == item["token"]
            else alt
            for alt in alternatives
        ]
    item = {**item, "top_logprobs": alternatives}
    if defects.has(LOGPROBS_AS_PROBABILITIES):
        alternatives = [
            {**alt, "logprob": round(math.exp(alt["logprob"]), DECIMALS)} for alt in alternatives
        ]
        item = {
            **item,
            "logprob": round(math.exp(item["logprob"]), DECIMALS),
            "top_logprobs": alternatives,
        }
    if defects.has(LOGPROBS_ZEROED):
        item = {**item, "logprob": 0.0, "top_logprobs": []}
    return item


def logprobs_of(
    request: dict[str, Any],
    tokens: list[str],
    defects: Defects,
    perturbation: Perturbation | None = None,
) -> dict[str, Any] | None:
    """A choice's logprobs for its content tokens, when asked for (and given)."""
    if not request.get("logprobs") or defects.has(LOGPROBS_UNAVAILABLE):
        return None
    entries = _entries(request, tokens, defects, perturbation)
    if defects.has(LOGPROBS_INCONSISTENT) and entries:
        entries = entries[:-1]
    return {"content": entries}


def one_token_sampled(
    request: dict[str, Any], reply: Reply, number: int, perturbation: Perturbation
) -> Reply:
    """`reply`, or, for a one-token answer at a temperature above 0, a token drawn instead.

    The draw is seeded by the request's seed, or by its number when it has none (a vendor
    that ignores seeds draws anew each time).
    """
    temperature = request.get("temperature")
    if (
        len(reply.tokens) != 1
        or reply.tool_calls
        or reply.reasoning
        or max_tokens_of(request) != 1
        or not isinstance(temperature, int | float)
        or temperature <= 0
    ):
        return reply
    seed = request.get("seed")
    logits = distribution(prompt_digest(request), 0, reply.tokens[0], perturbation)
    token = sample(logits, float(temperature), f"{seed if seed is not None else -number}")
    return dataclasses.replace(reply, tokens=[token])


def answered_model(request: dict[str, Any], defects: Defects) -> str:
    """The model the answer names: the one asked for, unless another answers instead."""
    if defects.has(SERVED_MODEL_SUBSTITUTED):
        return SUBSTITUTE_MODEL
    return str(request.get("model", MODEL_ID))


def call_type(defects: Defects) -> str:
    """The type a tool call is given."""
    return "tool" if defects.has(TOOL_CALL_TYPE_WRONG) else "function"


def completion_body(
    request: dict[str, Any],
    reply: Reply,
    number: int,
    defects: Defects,
    path: Path,
    perturbation: Perturbation | None = None,
) -> dict[str, Any]:
    """The chat.completion object (`perturbation` moves its logprobs)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": call_type(defects),
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in reply.tool_calls
        ]
    count = choice_count(request, defects)
    logprobs = logprobs_of(request, reply.tokens, defects, perturbation)
    return {
        "id": f"chatcmpl-sim-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": answered_model(request, defects),
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": index,
                "message": message,
                "finish_reason": finish_of(reply, defects),
                "logprobs": logprobs,
            }
            for index in range(count)
        ],
        "usage": usage_of(request, reply, count, defects, path),
    }


class _Chunks:
    """The chunks of one stream, in order: each a chat.completion.chunk with one choice."""

    def __init__(self, base: dict[str, Any], defects: Defects) -> None:
        self.base = base
        self.defects = defects
        self.items: list[dict[str, Any]] = []

    def add(
        self, index: int, delta: dict[str, Any], finish: str | None = None, **extra: Any
    ) -> None:
        """Add a chunk for choice `index` (`extra` goes into the choice, logprobs for one)."""
        choice = {"index": index, "delta": delta, "finish_reason": finish, **extra}
        chunk_id = self.base["id"]
        if self.defects.has(STREAM_CHUNK_ID_CHANGES):
            chunk_id = f"{chunk_id}-{len(self.items)}"
        self.items.append({**self.base, "id": chunk_id, "choices": [choice]})


def _chunk_logprobs(
    request: dict[str, Any], reply: Reply, defects: Defects, perturbation: Perturbation | None
) -> list[dict[str, Any]]:
    """What each content chunk's choice carries besides its delta: its piece of the logprobs.

    One item a content token, each with that token's entry of the non-stream answer, and one
    more for the space stream-content-differs adds.
    """
    spaced = bool(reply.tokens) and defects.has(STREAM_CONTENT_DIFFERS)
    count = len(reply.tokens) + spaced
    if not request.get("logprobs"):
        return [{}] * count
    logprobs = logprobs_of(request, reply.tokens, defects, perturbation)
    if logprobs is None:
        # A vendor without logprobs still names the field in every content chunk, as null.
        return [{"logprobs": None}] * count
    content = logprobs["content"]
    if defects.has(STREAM_LOGPROBS_DIFFER):
        content = [_shifted(item, -STREAM_SHIFT) for item in content]
    pieces = [
        {"logprobs": {"content": content[position : position + 1]}}
        for position in range(len(reply.tokens))
    ]
    if spaced:
        # The extra text comes with its logprob: the stream stays consistent with itself.
        space = _entries(request, [" "], defects, perturbation, start=len(reply.tokens))
        pieces.append({"logprobs": {"content": space}})
    return pieces


def _stream_content(
    chunks: _Chunks, index: int, reply: Reply, logprobs: list[dict[str, Any]], more: str = ""
) -> None:
    """A choice's role, reasoning and content chunks, one per token (`more`: more reasoning).

    `logprobs` holds what each content chunk carries besides its delta (``_chunk_logprobs``).
    """
    defects = chunks.defects
    if not defects.has(STREAM_NO_ROLE):
        chunks.add(index, {"role": "assistant", "content": ""})
    pieces = tokenize(reply.reasoning or "") + ([more] if more else [])
    late = pieces[-1:] if reply.tokens and defects.has(STREAM_REASONING_AFTER_CONTENT) else []
    for piece in pieces[: len(pieces) - len(late)]:
        chunks.add(index, {reply.reasoning_field: piece})
    repeat_role = defects.has(STREAM_ROLE_REPEATED)
    for position, token in enumerate(reply.tokens):
        delta = {"role": "assistant", "content": token} if repeat_role else {"content": token}
        chunks.add(index, delta, **logprobs[position])
        if position == 0 and defects.has(STREAM_EMPTY_DELTA):
            chunks.add(index, {})
        if position == 0 and late:
            chunks.add(index, {reply.reasoning_field: late[0]})
    if reply.tokens and defects.has(STREAM_CONTENT_DIFFERS):
        chunks.add(index, {"content": " "}, **logprobs[-1])


def _stream_tool_calls(chunks: _Chunks, index: int, calls: list[ToolCall]) -> None:
    """A choice's tool-call chunks: each call's id, type and name, then its arguments in pieces."""
    defects = chunks.defects
    for call_index, call in enumerate(calls):
        first = {"name": call.name, "arguments": ""}
        head = {"index": call_index, "id": call.id, "type": call_type(defects), "function": first}
        chunks.add(index, {"tool_calls": [head]})
        for start in range(0, len(call.arguments), ARGUMENT_PIECE):
            function = {"arguments": call.arguments[start : start + ARGUMENT_PIECE]}
            if defects.has(TOOL_NAME_REPEATED_IN_STREAM):
                function["name"] = call.name
            chunks.add(index, {"tool_calls": [{"index": call_index, "function": function}]})


def stream_events(
    request: dict[str, Any],
    reply: Reply,
    number: int,
    defects: Defects,
    path: Path,
    perturbation: Perturbation | None = None,
) -> list[bytes]:
    """The SSE events of a streamed answer, [DONE] included (unless a defect drops it).

    Its logprobs are the non-stream answer's (`perturbation` moves them), one entry a chunk.
    """
    base = {
        "id": f"chatcmpl-sim-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": answered_model(request, defects),
        "system_fingerprint": FINGERPRINT,
    }
    count = choice_count(request, defects)
    calls = reply.stream_tool_calls if reply.stream_tool_calls is not None else reply.tool_calls
    finish = finish_of(reply, defects)
    more = ""
    if calls and reply.reasoning and defects.has(STREAM_DROPS_TOOL_CALLS_AFTER_THINKING):
        # The stream parser never sees the reasoning end, so the calls stay reasoning text.
        more, calls, finish = calls_as_generated(reply, request, path), [], "stop"
    logprobs = _chunk_logprobs(request, reply, defects, perturbation)
    chunks = _Chunks(base, defects)
    for index in range(count):
        _stream_content(chunks, index, reply, logprobs, more)
        _stream_tool_calls(chunks, index, calls)
        if not defects.has(STREAM_FINISH_REASON_MISSING):
            chunks.add(index, {}, finish)
    options = request.get("stream_options") or {}
    asked = options.get("include_usage") or defects.has(STREAM_USAGE_UNREQUESTED)
    if asked and not defects.has(STREAM_NO_USAGE):
        streamed = reply
        if reply.stream_tool_calls is not None and reply.finish_reason != "length":
            # The stream's own calls are what the model generated for it: billed as such.
            streamed = billed(
                dataclasses.replace(reply, tool_calls=reply.stream_tool_calls), request, path
            )
        usage = usage_of(request, streamed, count, defects, path)
        if reply.tokens and reply.finish_reason != "length" and defects.has(STREAM_CONTENT_DIFFERS):
            # The stream's extra space was generated too (within max_tokens): billed with the rest.
            usage["completion_tokens"] += count
            usage["total_tokens"] += count
        chunks.items.append({**base, "choices": [], "usage": usage})
    events = [b"data: " + json.dumps(c).encode("utf-8") + b"\n\n" for c in chunks.items]
    if not defects.has(STREAM_NO_DONE):
        events.append(b"data: [DONE]\n\n")
    return events
