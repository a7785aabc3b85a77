"""The simulated vendor's answers on the wire: the completion object and the SSE chunks.

Wire defects of the catalogue are applied here (raw finish_reason tokens, a wrong
usage total, inconsistent logprobs, a repeated role, a missing usage chunk or
[DONE], n ignored); behaviour defects live in the model.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .defects import (
    FINISH_REASON_RAW_TOKEN,
    LOGPROBS_INCONSISTENT,
    N_IGNORED,
    STREAM_CHUNK_ID_CHANGES,
    STREAM_CONTENT_DIFFERS,
    STREAM_EMPTY_DELTA,
    STREAM_FINISH_REASON_MISSING,
    STREAM_NO_DONE,
    STREAM_NO_ROLE,
    STREAM_NO_USAGE,
    STREAM_ROLE_REPEATED,
    STREAM_USAGE_UNREQUESTED,
    TOOL_CALL_TYPE_WRONG,
    TOOL_NAME_REPEATED_IN_STREAM,
    USAGE_TOTAL_WRONG,
    Defects,
)
from .model import MODEL_ID, Path, Reply

FINGERPRINT = "fp_simulated"
# Streamed tool-call arguments arrive in pieces of this many characters.
ARGUMENT_PIECE = 8
# What a vendor that leaks the model's stop token into finish_reason sends.
RAW_FINISH = "stop_163586"


def usage_of(
    request: dict[str, Any], reply: Reply, choices: int, defects: Defects, path: Path
) -> dict[str, int]:
    """Usage: the prompt's tokens, and every choice's answer's."""
    prompt = path.prompt_tokens(request)
    completion = reply.completion_tokens * choices
    total = prompt + completion + (1 if defects.has(USAGE_TOTAL_WRONG) else 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def choice_count(request: dict[str, Any], defects: Defects) -> int:
    """How many choices to send: n, unless the vendor ignores it."""
    n = request.get("n")
    return 1 if defects.has(N_IGNORED) or not isinstance(n, int) else n


def finish_of(reply: Reply, defects: Defects) -> str:
    """The finish_reason as sent."""
    if reply.finish_reason == "stop" and defects.has(FINISH_REASON_RAW_TOKEN):
        return RAW_FINISH
    return reply.finish_reason


def logprobs_of(
    request: dict[str, Any], tokens: list[str], defects: Defects
) -> dict[str, Any] | None:
    """Token logprobs for the content, when asked for (the tiny model is sure of every token)."""
    if not request.get("logprobs"):
        return None
    top = request.get("top_logprobs") or 0
    entries = []
    for token in tokens:
        alternatives = [{"token": token, "logprob": -0.01}] + [
            {"token": f"{token}~{i}", "logprob": -5.0 - i} for i in range(1, top)
        ]
        entries.append(
            {
                "token": token,
                "logprob": -0.01,
                "bytes": list(token.encode()),
                "top_logprobs": alternatives[:top],
            }
        )
    if defects.has(LOGPROBS_INCONSISTENT) and entries:
        entries = entries[:-1]
    return {"content": entries}


def call_type(defects: Defects) -> str:
    """The type a tool call is given."""
    return "tool" if defects.has(TOOL_CALL_TYPE_WRONG) else "function"


def completion_body(
    request: dict[str, Any], reply: Reply, number: int, defects: Defects, path: Path
) -> dict[str, Any]:
    """The chat.completion object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
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
    return {
        "id": f"chatcmpl-sim-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", MODEL_ID),
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": index,
                "message": message,
                "finish_reason": finish_of(reply, defects),
                "logprobs": logprobs_of(request, reply.tokens, defects),
            }
            for index in range(count)
        ],
        "usage": usage_of(request, reply, count, defects, path),
    }


def stream_events(
    request: dict[str, Any], reply: Reply, number: int, defects: Defects, path: Path
) -> list[bytes]:
    """The SSE events of a streamed answer, [DONE] included (unless a defect drops it)."""
    base = {
        "id": f"chatcmpl-sim-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", MODEL_ID),
        "system_fingerprint": FINGERPRINT,
    }
    count = choice_count(request, defects)
    repeat_role = defects.has(STREAM_ROLE_REPEATED)
    repeat_name = defects.has(TOOL_NAME_REPEATED_IN_STREAM)
    calls = reply.stream_tool_calls if reply.stream_tool_calls is not None else reply.tool_calls
    logprobs = logprobs_of(request, reply.tokens, defects)
    chunks: list[dict[str, Any]] = []

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
        choice = {"index": index, "delta": delta, "finish_reason": finish, **extra}
        chunk_id = base["id"]
        if defects.has(STREAM_CHUNK_ID_CHANGES):
            chunk_id = f"{chunk_id}-{len(chunks)}"
        chunks.append({**base, "id": chunk_id, "choices": [choice]})

    for index in range(count):
        if not defects.has(STREAM_NO_ROLE):
            chunk(index, {"role": "assistant", "content": ""})
        if reply.reasoning:
            chunk(index, {"reasoning_content": reply.reasoning})
        for position, token in enumerate(reply.tokens):
            delta = {"role": "assistant", "content": token} if repeat_role else {"content": token}
            extra = {}
            if logprobs is not None:
                entries = logprobs["content"][position : position + 1]
                extra["logprobs"] = {"content": entries}
            chunk(index, delta, **extra)
            if position == 0 and defects.has(STREAM_EMPTY_DELTA):
                chunk(index, {})
        if reply.tokens and defects.has(STREAM_CONTENT_DIFFERS):
            # The extra text comes with its logprob: the stream stays consistent with itself.
            space = {"token": " ", "logprob": -0.01, "bytes": [32], "top_logprobs": []}
            extra = {} if logprobs is None else {"logprobs": {"content": [space]}}
            chunk(index, {"content": " "}, **extra)
        for call_index, call in enumerate(calls):
            first = {"name": call.name, "arguments": ""}
            chunk(
                index,
                {
                    "tool_calls": [
                        {
                            "index": call_index,
                            "id": call.id,
                            "type": call_type(defects),
                            "function": first,
                        }
                    ]
                },
            )
            for start in range(0, len(call.arguments), ARGUMENT_PIECE):
                function = {"arguments": call.arguments[start : start + ARGUMENT_PIECE]}
                if repeat_name:
                    function["name"] = call.name
                chunk(index, {"tool_calls": [{"index": call_index, "function": function}]})
        if not defects.has(STREAM_FINISH_REASON_MISSING):
            chunk(index, {}, finish_of(reply, defects))
    options = request.get("stream_options") or {}
    asked = options.get("include_usage") or defects.has(STREAM_USAGE_UNREQUESTED)
    if asked and not defects.has(STREAM_NO_USAGE):
        chunks.append(
            {**base, "choices": [], "usage": usage_of(request, reply, count, defects, path)}
        )
    events = [b"data: " + json.dumps(c).encode("utf-8") + b"\n\n" for c in chunks]
    if not defects.has(STREAM_NO_DONE):
        events.append(b"data: [DONE]\n\n")
    return events
