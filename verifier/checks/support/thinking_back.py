"""Thinking sent back over the other APIs: each answer's reasoning given back as it came.

A client of Anthropic Messages sends an answer's content blocks back unchanged in its next
turn: in a tool loop, the turn that answers the calls carries the assistant's thinking before
its ``tool_use`` blocks, and the API checks each thinking block's ``signature``. A client of
OpenAI Responses that keeps no state at the vendor (``store: false``) sends the answer's
output items back in its next ``input``: its ``reasoning`` items, messages and function calls,
then each call's ``function_call_output``. A gateway that translates these APIs to another
loses the signature, or cannot take the reasoning back. Codes: ``thinking_signature_missing``
(a Messages thinking block without a signature, or with an empty one),
``thinking_history_rejected`` (the next turn, with the reasoning as it came, refused).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...outcome import Finding
from ...protocol.apis import protocol_of
from ...protocol.messages import answer_content
from ...protocol.requests import Raw
from ...protocol.responses import output_items
from .evidence import Malformed, evidence_findings
from .subchecks import Graded, Rejected, Unsupported

if TYPE_CHECKING:
    from ...cases.corpus import Case
    from ...protocol.answers import ChatResult
    from ..registry import RunContext

# Extended thinking as the Messages reference turns it on, with its smallest budget.
THINKING = {"type": "enabled", "budget_tokens": 1024}
# Thinking takes no sampling changes (the Messages reference: not with temperature or top_k).
UNSAMPLED = ("temperature", "top_p", "top_k")
# What a call's result says when the case gives none for its tool.
NO_RESULT = '{"ok": true}'
# What each API's answer calls its reasoning, for findings and the unsupported reason.
REASONING = {"messages": "thinking block", "responses": "reasoning item"}


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
    """The next Messages request: the answer's blocks as they came, then each call's result.

    Without a call, the user thanks the model instead (thinking blocks of an earlier turn are
    taken too). The request does not stream (pure).
    """
    calls = [block for block in content if block.get("type") == "tool_use"]
    answered: dict[str, Any] = {"role": "user", "content": "Thank you."}
    if calls:
        answered["content"] = [
            {
                "type": "tool_result",
                "tool_use_id": call.get("id"),
                "content": _result(results, call.get("name")),
            }
            for call in calls
        ]
    turns = [*body["messages"], {"role": "assistant", "content": content}, answered]
    return {**_unstreamed(body), "messages": turns}


def next_input(
    body: Mapping[str, Any], output: list[dict[str, Any]], results: Mapping[str, Any]
) -> dict[str, Any]:
    """The next Responses request: the answer's output items as they came, then each call's.

    Each call's output follows (the user thanks the model where it made none); the request
    does not stream (pure).
    """
    given = body.get("input")
    earlier = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
    calls = [item for item in output if item.get("type") == "function_call"]
    answered: list[dict[str, Any]] = [
        {
            "type": "function_call_output",
            "call_id": call.get("call_id"),
            "output": _result(results, call.get("name")),
        }
        for call in calls
    ] or [{"role": "user", "content": "Thank you."}]
    return {**_unstreamed(body), "input": [*earlier, *output, *answered]}


def _result(results: Mapping[str, Any], name: Any) -> str:
    given = results.get(str(name))
    return str(given[0]) if isinstance(given, list) and given else NO_RESULT


def _unstreamed(body: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "stream"}


def _first_turn(api: str, chat: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    """The case's first request in `api`'s terms; over Messages, with thinking on."""
    body = protocol_of(api).request_body(chat, stream=stream)
    if api != "messages":
        return body
    return {k: v for k, v in body.items() if k not in UNSAMPLED} | {"thinking": THINKING}


def _answered(
    api: str, body: Mapping[str, Any], first: ChatResult, results: Mapping[str, Any], label: str
) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The next request for an answer with reasoning (None without), and its findings.

    The findings are what the reasoning shows by itself (a thinking block's signature).
    """
    if api == "messages":
        content = answer_content(first)
        if not any(block.get("type") == "thinking" for block in content):
            return None, []
        return next_turn(body, content, results), signature_findings(content, label)
    output = output_items(first)
    if not any(item.get("type") == "reasoning" for item in output):
        return None, []
    return next_input(body, output, results), []


def run_thinking_roundtrip(
    case: Case, ctx: RunContext, effort: Mapping[str, Any] | None = None
) -> Graded:
    """Each answer's reasoning, non-stream then streamed, given back in the next turn.

    `effort`: the chat fields that ask a Responses answer for reasoning (its effort), where
    the model's contract states them. An answer without a choice (either turn) is malformed:
    it shows nothing of the reasoning.

    Raises:
        Rejected: the first turn was refused (thinking is not served there).
        Unsupported: no answer carried reasoning.
        Malformed: a 2xx answer cannot be read or carries no choice.
    """
    data = case.data
    # The API the case is written for (the only one it is sent through).
    api = data["api"]
    chat = ctx.request(
        messages=data["messages"], tools=data["tools"], max_tokens=data.get("max_tokens", 2048)
    )
    if api == "responses":
        chat.update(effort or {})
    results = data.get("results") or {}
    findings: list[Finding] = []
    thought = False
    for label, stream in (("non-stream", False), ("stream", True)):
        body = _first_turn(api, chat, stream)
        first = yield Raw(_bytes(body), "application/json", f"{label}-turn-1", stream=stream)
        if not first.ok:
            raise Rejected(first)
        _readable(first, f"{label}-turn-1")
        follow, found = _answered(api, body, first, results, f"{label}-turn-1")
        if follow is None:
            continue
        thought = True
        findings += found
        second = yield Raw(_bytes(follow), "application/json", f"{label}-turn-2")
        if second.ok:
            _readable(second, f"{label}-turn-2")
        else:
            said = (second.error_object or {}).get("message") or second.body
            findings.append(
                Finding(
                    "thinking_history_rejected",
                    f"the next turn, with the answer's {REASONING[api]}s as they came, was "
                    f"refused with HTTP {second.status}: {said!s:.160}",
                    expected="2xx",
                    actual=second.status,
                    attempt=f"{label}-turn-2",
                )
            )
    if not thought:
        raise Unsupported(f"no answer carried a {REASONING[api]}")
    return findings, {"requests": len(ctx.observed)}


def _readable(result: ChatResult, attempt: str) -> None:
    """Raise :class:`Malformed` for a 2xx answer that cannot be read or has no choice."""
    broken = evidence_findings(result, attempt)
    if broken:
        raise Malformed(broken)


def _bytes(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()
