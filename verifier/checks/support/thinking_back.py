"""Thinking sent back over the other APIs: each answer's reasoning given back as it came.

A client of Anthropic Messages sends an answer's content blocks back unchanged in its next
turn: in a tool loop, the turn that answers the calls carries the assistant's thinking before
its ``tool_use`` blocks, and the API checks each thinking block's ``signature``. A client of
OpenAI Responses that keeps no state at the vendor (``store: false``, including
``reasoning.encrypted_content`` as Codex does) sends the answer's output items back in its
next ``input``: its ``reasoning`` items, messages and function calls, then each call's
``function_call_output``. A gateway that translates these APIs to another
loses the signature, or cannot take the reasoning back. Codes: ``thinking_signature_missing``
(a Messages thinking block without a signature, or with an empty one),
``redacted_thinking_data_missing`` (a Messages ``redacted_thinking`` block, whose thinking the
API encrypts in its ``data``, without that data, or with an empty one),
``encrypted_content_missing`` (a Responses reasoning item without the encrypted content the
request included, or with an empty one), ``thinking_history_rejected`` (the next turn, with
the reasoning as it came, refused).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...outcome import Finding
from ...protocol.apis import protocol_of
from ...protocol.messages import answer_content
from ...protocol.requests import Raw
from ...protocol.responses import output_items
from .evidence import NO_PROMPT_TOKENS, Malformed, evidence_findings
from .subchecks import Graded, Rejected, Unsupported

if TYPE_CHECKING:
    from ...cases.corpus import Case
    from ...protocol.answers import ChatResult, Choice
    from ..registry import RunContext

# Extended thinking as the Messages reference turns it on, with its smallest budget.
THINKING = {"type": "enabled", "budget_tokens": 1024}
# Thinking takes no sampling changes (the Messages reference: not with temperature or top_k).
UNSAMPLED = ("temperature", "top_p", "top_k")
# What a call's result says when the case gives none for its tool.
NO_RESULT = '{"ok": true}'
# What a Responses request includes for its reasoning items to come with their encrypted
# content (stateless clients such as Codex send it with store: false).
ENCRYPTED = "reasoning.encrypted_content"
# What each API's answer calls its reasoning, for findings and the unsupported reason.
REASONING = {"messages": "thinking block", "responses": "reasoning item"}


@dataclasses.dataclass(frozen=True, slots=True)
class _Opaque:
    """An opaque field the API gives a kind of reasoning part, for the client to send back."""

    kind: str
    noun: str
    field: str
    code: str
    where: str
    why: str


_SIGNATURE = _Opaque(
    "thinking",
    "thinking block",
    "signature",
    "thinking_signature_missing",
    "$.content",
    "the API signs every thinking block, and a client must send the signature back",
)
_SEALED = _Opaque(
    "reasoning",
    "reasoning item",
    "encrypted_content",
    "encrypted_content_missing",
    "$.output",
    f"the request included {ENCRYPTED}, which a stateless client (store: false) sends back "
    "for the reasoning to be taken up again",
)

_REDACTED = _Opaque(
    "redacted_thinking",
    "redacted thinking block",
    "data",
    "redacted_thinking_data_missing",
    "$.content",
    "the API encrypts a redacted block's thinking in its data, which a client must send back "
    "for the reasoning to be taken up again",
)
# Why a mode whose answers came redacted has no count of what its reasoning sent back adds.
UNREADABLE = "the reasoning came in a redacted thinking block, which cannot be read"


def _opaque_findings(
    opaque: _Opaque, parts: Sequence[Mapping[str, Any]], attempt: str
) -> list[Finding]:
    """A finding for each part of `opaque`'s kind without its field, or with an empty one."""
    findings = []
    for number, part in enumerate(parts):
        value = part.get(opaque.field)
        if part.get("type") == opaque.kind and not (isinstance(value, str) and value):
            findings.append(
                Finding(
                    opaque.code,
                    f"{opaque.noun} {number} has {opaque.field} {value!r}: {opaque.why}",
                    f"{opaque.where}[{number}].{opaque.field}",
                    expected=f"the {opaque.noun}'s {opaque.field}",
                    actual=value,
                    attempt=attempt,
                )
            )
    return findings


def signature_findings(content: Sequence[Mapping[str, Any]], attempt: str) -> list[Finding]:
    """A finding for each thinking block of an answer without its signature (pure).

    And for each redacted block without its data.
    """
    return [
        *_opaque_findings(_SIGNATURE, content, attempt),
        *_opaque_findings(_REDACTED, content, attempt),
    ]


def sealed_findings(output: Sequence[Mapping[str, Any]], attempt: str) -> list[Finding]:
    """A finding for each reasoning item of an answer without its encrypted content (pure)."""
    return _opaque_findings(_SEALED, output, attempt)


def next_turn(
    body: Mapping[str, Any],
    content: list[dict[str, Any]],
    results: Mapping[str, Any],
    used: Counter[str] | None = None,
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
                "content": scripted_result(results, call.get("name"), used),
            }
            for call in calls
        ]
    turns = [*body["messages"], {"role": "assistant", "content": content}, answered]
    return {**_unstreamed(body), "messages": turns}


def next_input(
    body: Mapping[str, Any],
    output: list[dict[str, Any]],
    results: Mapping[str, Any],
    used: Counter[str] | None = None,
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
            "output": scripted_result(results, call.get("name"), used),
        }
        for call in calls
    ] or [{"role": "user", "content": "Thank you."}]
    return {**_unstreamed(body), "input": [*earlier, *output, *answered]}


def scripted_result(results: Mapping[str, Any], name: Any, used: Counter[str] | None = None) -> str:
    """What a call of `name` returns.

    The case's results for the tool in call order (the last repeats), counted in `used`; a
    tool the case scripts none for returns :data:`NO_RESULT`.
    """
    given = results.get(str(name))
    if not (isinstance(given, list) and given):
        return NO_RESULT
    count = 0
    if used is not None:
        count = used[str(name)]
        used[str(name)] += 1
    return str(given[min(count, len(given) - 1)])


def chat_turns(choice: Choice, outputs: Sequence[str], field: str) -> list[dict[str, Any]]:
    """An answer's calls as chat messages (pure).

    The assistant turn, its reasoning in `field`, then a tool message with each call's output,
    in order.
    """
    assistant: dict[str, Any] = {
        "role": "assistant",
        "content": choice.content or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in choice.tool_calls
        ],
    }
    if choice.reasoning:
        assistant[field] = choice.reasoning
    tools = [
        {"role": "tool", "tool_call_id": c.id, "content": output}
        for c, output in zip(choice.tool_calls, outputs, strict=True)
    ]
    return [assistant, *tools]


def _unstreamed(body: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "stream"}


def _first_turn(api: str, chat: Mapping[str, Any], stream: bool) -> dict[str, Any]:
    """The case's first request in `api`'s terms.

    Over Messages, with thinking on; over Responses, with the reasoning items' encrypted
    content included, as Codex asks.
    """
    body = protocol_of(api).request_body(chat, stream=stream)
    if api == "responses":
        return {**body, "include": [*body.get("include", []), ENCRYPTED]}
    return {k: v for k, v in body.items() if k not in UNSAMPLED} | {"thinking": THINKING}


@dataclasses.dataclass(frozen=True, slots=True)
class Counting:
    """How a loop's answers after tool results are counted.

    Args:
        field: the chat field an answer's reasoning goes in, in the conversation counted.
        grade: one loop's answers after tool results, each with the conversation it answered
            (a chat request) and its name, counted together against the model's template:
            the findings, or None when an answer reports no count.
    """

    field: str
    grade: Callable[[list[tuple[dict[str, Any], ChatResult, str]]], list[Finding] | None]


@dataclasses.dataclass(frozen=True, slots=True)
class _Read:
    """What one answer holds for the loop: its reasoning and calls, in the API's own terms."""

    reasoning: bool
    calls: bool
    findings: list[Finding]
    redacted: bool = False


def _read(api: str, answer: ChatResult, attempt: str) -> _Read:
    """Whether `answer` carries reasoning and calls, and what its reasoning shows by itself.

    Over Messages that is each thinking block's signature, and each redacted block's data.
    """
    if api == "messages":
        content = answer_content(answer)
        kinds = {block.get("type") for block in content}
        return _Read(
            bool(kinds & {"thinking", "redacted_thinking"}),
            "tool_use" in kinds,
            signature_findings(content, attempt),
            "redacted_thinking" in kinds,
        )
    output = output_items(answer)
    kinds = {item.get("type") for item in output}
    return _Read("reasoning" in kinds, "function_call" in kinds, sealed_findings(output, attempt))


def _next(
    api: str,
    body: Mapping[str, Any],
    answer: ChatResult,
    results: Mapping[str, Any],
    used: Counter[str],
    stream: bool,
) -> dict[str, Any]:
    """The next request: the answer as it came, then each call's result, in the loop's mode.

    A tool choice the first turn forced is ``auto`` from then on (the model may answer).
    """
    if api == "messages":
        follow = next_turn(body, answer_content(answer), results, used)
    else:
        follow = next_input(body, output_items(answer), results, used)
    if "tool_choice" in follow:
        follow["tool_choice"] = {"type": "auto"} if api == "messages" else "auto"
    return {**follow, "stream": True} if stream else follow


@dataclasses.dataclass(slots=True)
class _Case:
    """One case's round trips: what every mode sends, and what the modes saw together."""

    api: str
    chat: dict[str, Any]
    # The conversation in chat terms, as the model's template renders what the API was sent.
    said: dict[str, Any]
    messages: list[dict[str, Any]]
    results: Mapping[str, Any]
    loop: bool
    turns: int
    findings: list[Finding] = dataclasses.field(default_factory=list)
    thought: bool = False
    called: bool = False
    uncounted: str | None = None


def run_thinking_roundtrip(
    case: Case,
    ctx: RunContext,
    effort: Mapping[str, Any] | None = None,
    followup: Callable[[ChatResult, str], list[Finding]] | None = None,
    count: Counting | None = None,
) -> Graded:
    """Each answer's reasoning given back as it came, non-stream then streamed, turn by turn.

    A ``thinking_roundtrip`` case sends the first answer back once (thanking the model where
    it made no call); an ``agent_loop`` case goes on while the answers call tools, up to its
    ``max_turns``, each call answered with the case's results in call order, its first turn
    with the case's ``first_tool_choice``. Every answer's reasoning parts must carry what the
    API gives them to be sent back, and every next turn must be taken. A mode stops where
    nothing of the reasoning would go back (a first answer without any).

    Args:
        case: a case written for Messages or Responses (its ``api``).
        ctx: the run's context.
        effort: the chat fields that ask a Responses answer for reasoning (its effort), where
            the model's contract states them.
        followup: grades an answer after tool results (an empty one, an invalid next call).
        count: counts a loop's answers after tool results against the conversations in chat
            terms, every earlier answer's reasoning in them (None: not counted).

    Raises:
        Rejected: the first turn was refused (thinking is not served there).
        Unsupported: no answer carried reasoning, or a loop's model made no call, or an
            answer after tool results reported no prompt tokens and nothing else was found.
        Malformed: a 2xx answer cannot be read or carries no choice.
    """
    state = _case(case, ctx, effort)
    for label, stream in (("non-stream", False), ("stream", True)):
        yield from _mode(state, label, stream, followup, count)
    if not state.thought:
        raise Unsupported(f"no answer carried a {REASONING[state.api]}")
    if state.loop and not state.called:
        raise Unsupported("the model made no call: there was no loop to grade")
    if state.uncounted is not None and not state.findings:
        raise Unsupported(
            f"{state.uncounted}: whether the reasoning sent back reaches the prompt cannot be seen"
        )
    return state.findings, {"requests": len(ctx.observed)}


def _case(case: Case, ctx: RunContext, effort: Mapping[str, Any] | None) -> _Case:
    """What every mode of `case` sends first, in chat terms."""
    data = case.data
    # The API the case is written for (the only one it is sent through).
    api = data["api"]
    chat = ctx.request(
        messages=data["messages"], tools=data["tools"], max_tokens=data.get("max_tokens", 2048)
    )
    if "first_tool_choice" in data:
        chat["tool_choice"] = data["first_tool_choice"]
    if api == "responses":
        chat.update(effort or {})
    loop = data["check"] == "agent_loop"
    return _Case(
        api=api,
        chat=chat,
        said={**chat, "thinking": THINKING} if api == "messages" else dict(chat),
        messages=list(data["messages"]),
        results=data.get("results") or {},
        loop=loop,
        turns=data.get("max_turns", 4) if loop else 2,
    )


def _mode(
    state: _Case,
    label: str,
    stream: bool,
    followup: Callable[[ChatResult, str], list[Finding]] | None,
    count: Counting | None,
) -> Generator[Raw, ChatResult, None]:
    """One mode's turns, their findings added to `state`, then its follow-ups counted."""
    api = state.api
    body = _first_turn(api, state.chat, stream)
    used: Counter[str] = Counter()
    mirror = list(state.messages)
    counted: list[tuple[dict[str, Any], ChatResult, str]] = []
    thought = after_calls = False
    # The first answer whose reasoning came redacted: no count can say what it added.
    redacted: str | None = None
    for turn in range(1, state.turns + 1):
        name = f"{label}-turn-{turn}"
        answer = yield Raw(_bytes(body), "application/json", name, stream=stream)
        if not answer.ok:
            if turn == 1:
                raise Rejected(answer)
            state.findings.append(_history_rejected(api, answer, name))
            break
        _readable(answer, name)
        graded = followup(answer, name) if after_calls and followup is not None else []
        if after_calls:
            counted.append(({**state.said, "messages": list(mirror)}, answer, name))
        read = _read(api, answer, name)
        redacted = redacted or (name if read.redacted else None)
        state.findings += graded + read.findings
        thought = thought or read.reasoning
        state.thought, state.called = state.thought or thought, state.called or read.calls
        # An invalid next call ends the loop: its result would answer nothing.
        invalid = any(f.code == "followup_call_invalid" for f in graded)
        if not thought or invalid or not (read.calls or (turn == 1 and not state.loop)):
            break
        body = _next(api, body, answer, state.results, used, stream)
        after_calls = read.calls
        if count is not None and answer.choice is not None and read.calls:
            mirror += chat_turns(answer.choice, _outputs(api, body), count.field)
    if count is None or not counted:
        return
    if redacted is not None:
        state.uncounted = state.uncounted or f"{UNREADABLE} ({redacted})"
        return
    found = count.grade(counted)
    if found is None:
        state.uncounted = state.uncounted or f"{NO_PROMPT_TOKENS} ({counted[-1][2]})"
    state.findings += found or []


def _outputs(api: str, body: Mapping[str, Any]) -> list[str]:
    """The call outputs a next request ends with, in order."""
    if api == "messages":
        return [str(part.get("content")) for part in body["messages"][-1]["content"]]
    trailing = itertools.takewhile(
        lambda item: item.get("type") == "function_call_output", reversed(body["input"])
    )
    return [str(item.get("output")) for item in reversed(list(trailing))]


def _history_rejected(api: str, refused: ChatResult, attempt: str) -> Finding:
    said = (refused.error_object or {}).get("message") or refused.body
    return Finding(
        "thinking_history_rejected",
        f"the next turn, with the answers' {REASONING[api]}s as they came, was refused with "
        f"HTTP {refused.status}: {said!s:.160}",
        expected="2xx",
        actual=refused.status,
        attempt=attempt,
    )


def _readable(result: ChatResult, attempt: str) -> None:
    """Raise :class:`Malformed` for a 2xx answer that cannot be read or has no choice."""
    broken = evidence_findings(result, attempt)
    if broken:
        raise Malformed(broken)


def _bytes(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()
