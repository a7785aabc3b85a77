"""Thinking sent back over Messages: each thinking block signed, and taken back as it came.

The Messages API signs every thinking block it answers with (``signature``), and a client
sends the blocks back unchanged in its next turn: in a tool loop, the turn that answers the
calls carries the assistant's thinking before its ``tool_use`` blocks, and the API checks the
signature. A gateway that translates Messages to another API loses the signature, or cannot
take the blocks back. Codes: ``thinking_signature_missing`` (a thinking block without a
signature, or with an empty one), ``thinking_history_rejected`` (the next turn, with the
blocks as they came, refused).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...outcome import Finding
from ...protocol.apis import protocol_of
from ...protocol.messages import answer_content
from ...protocol.requests import Raw
from .subchecks import Graded, Rejected, Unsupported

if TYPE_CHECKING:
    from ...cases.corpus import Case
    from ..registry import RunContext

# Extended thinking as the reference turns it on, with its smallest budget.
THINKING = {"type": "enabled", "budget_tokens": 1024}
# Thinking takes no sampling changes (the reference: not with temperature or top_k).
UNSAMPLED = ("temperature", "top_p", "top_k")
# What a call's result says when the case gives none for its tool.
NO_RESULT = '{"ok": true}'


def signature_findings(content: Sequence[Mapping[str, Any]], attempt: str) -> list[Finding]:
    """A finding for each thinking block of an answer that carries no signature (pure)."""
    findings = []
    for number, block in enumerate(content):
        signature = block.get("signature")
        if block.get("type") == "thinking" and not (isinstance(signature, str) and signature):
            findings.append(
                Finding(
                    "thinking_signature_missing",
                    f"thinking block {number} has signature {signature!r}: the API signs "
                    f"every thinking block, and a client must send the signature back",
                    f"$.content[{number}].signature",
                    expected="the block's signature",
                    actual=signature,
                    attempt=attempt,
                )
            )
    return findings


def next_turn(
    body: Mapping[str, Any], content: list[dict[str, Any]], results: Mapping[str, Any]
) -> dict[str, Any]:
    """The next request: the answer's blocks as they came, then each call's result (pure).

    Without a call, the user thanks the model instead (thinking blocks of an earlier turn are
    taken too). The request does not stream.
    """
    calls = [block for block in content if block.get("type") == "tool_use"]
    answered: dict[str, Any] = {"role": "user", "content": "Thank you."}
    if calls:
        answered["content"] = [
            {
                "type": "tool_result",
                "tool_use_id": call.get("id"),
                "content": str(_first(results.get(str(call.get("name"))), NO_RESULT)),
            }
            for call in calls
        ]
    turns = [*body["messages"], {"role": "assistant", "content": content}, answered]
    return {**{k: v for k, v in body.items() if k != "stream"}, "messages": turns}


def _first(value: Any, default: str) -> Any:
    return value[0] if isinstance(value, list) and value else default


def run_thinking_roundtrip(case: Case, ctx: RunContext) -> Graded:
    """Thinking on over Messages, non-stream then streamed; each answer's blocks sent back.

    Raises:
        Rejected: the first turn was refused (thinking is not served there).
        Unsupported: no answer carried a thinking block.
    """
    data = case.data
    chat = ctx.request(
        messages=data["messages"], tools=data["tools"], max_tokens=data.get("max_tokens", 2048)
    )
    findings: list[Finding] = []
    thought = False
    for label, stream in (("non-stream", False), ("stream", True)):
        body = protocol_of("messages").request_body(chat, stream=stream)
        body = {k: v for k, v in body.items() if k not in UNSAMPLED} | {"thinking": THINKING}
        first = yield Raw(_bytes(body), "application/json", f"{label}-turn-1", stream=stream)
        if not first.ok:
            raise Rejected(first)
        content = answer_content(first)
        if not any(block.get("type") == "thinking" for block in content):
            continue
        thought = True
        findings += signature_findings(content, f"{label}-turn-1")
        follow = next_turn(body, content, data.get("results") or {})
        second = yield Raw(_bytes(follow), "application/json", f"{label}-turn-2")
        if not second.ok:
            said = (second.error_object or {}).get("message") or second.body
            findings.append(
                Finding(
                    "thinking_history_rejected",
                    f"the next turn, with the answer's thinking blocks as they came, was "
                    f"refused with HTTP {second.status}: {said!s:.160}",
                    expected="2xx",
                    actual=second.status,
                    attempt=f"{label}-turn-2",
                )
            )
    if not thought:
        raise Unsupported("no answer carried a thinking block, with thinking enabled")
    return findings, {"requests": len(ctx.observed)}


def _bytes(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()
