"""The one SSE reader and stream accumulator of the package.

:class:`SSEDecoder` turns the bytes of a ``text/event-stream`` body, however
the network split them, into events (WHATWG server-sent events rules: any of
CRLF, LF, CR ends a line; ``data:`` lines join with newlines; a blank line
ends an event; ``:`` lines are comments). :class:`StreamAccumulator` turns the
events of a chat-completions stream into the same :class:`ChatResult` a
non-stream answer gives, and records every protocol violation it sees instead
of repairing it: a missing ``finish_reason`` stays missing, a renamed tool call
keeps its first name and records the second.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from .answers import (
    ChatResult,
    Choice,
    Problem,
    ToolCall,
    logprob_entries,
    parse_completion,
    reasoning_field_of,
    reasoning_of,
)


@dataclasses.dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: its type (None when not given) and its data."""

    event: str | None
    data: str


class SSEDecoder:
    """Incremental server-sent-events parser; feed it bytes, it yields whole events."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event: str | None = None
        self.unterminated = False

    def feed(self, chunk: bytes) -> Iterator[SSEEvent]:
        """Events completed by `chunk`."""
        self._buffer += self._decoder.decode(chunk)
        yield from self._drain(final=False)

    def close(self) -> Iterator[SSEEvent]:
        """Events left when the body ends; an event without its blank line is flagged."""
        self._buffer += self._decoder.decode(b"", final=True)
        yield from self._drain(final=True)
        if self._data:
            self.unterminated = True
            yield self._dispatch()

    def _drain(self, *, final: bool) -> Iterator[SSEEvent]:
        buffer = self._buffer
        start, size = 0, len(buffer)
        while start < size:
            ends = [i for i in (buffer.find("\n", start), buffer.find("\r", start)) if i >= 0]
            if not ends:
                break
            cut = min(ends)
            width = 1
            if buffer[cut] == "\r":
                # A CR at the very end may be the first half of a CRLF split by the network.
                if cut + 1 == size and not final:
                    break
                if buffer.startswith("\n", cut + 1):
                    width = 2
            line = buffer[start:cut]
            start = cut + width
            event = self._line(line)
            if event is not None:
                yield event
        rest = buffer[start:]
        self._buffer = "" if final else rest
        if final and rest:
            event = self._line(rest)
            if event is not None:
                yield event

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if self._data:
                return self._dispatch()
            self._event = None
            return None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None

    def _dispatch(self) -> SSEEvent:
        event = SSEEvent(self._event, "\n".join(self._data))
        self._data = []
        self._event = None
        return event


def decode_sse(chunks: Iterable[bytes]) -> tuple[list[SSEEvent], bool]:
    """All events of a body given as byte chunks, and whether the last one was unterminated."""
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events, decoder.unterminated


@dataclasses.dataclass(slots=True)
class _ChoiceState:
    choice: Choice
    content: list[str] = dataclasses.field(default_factory=list)
    reasoning: list[str] = dataclasses.field(default_factory=list)
    calls: dict[int, ToolCall] = dataclasses.field(default_factory=dict)
    arguments: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    # What the first delta of each call lacked, and the chunk it came in.
    incomplete: dict[int, tuple[list[str], int]] = dataclasses.field(default_factory=dict)
    roles_seen: int = 0
    first_chunk: int = 0
    tool_calls_started: bool = False


class StreamAccumulator:
    """Reassembles chat-completion chunks into one :class:`ChatResult`, recording violations."""

    def __init__(self, result: ChatResult) -> None:
        self.result = result
        self._choices: dict[int, _ChoiceState] = {}
        self._ids: list[str] = []
        # When the bytes of the events being added arrived (seconds since the request was
        # sent), or None when they are not timed.
        self.now: float | None = None
        self._timed = -1

    def add_event(self, event: SSEEvent) -> None:
        """Take one SSE event of the stream."""
        result = self.result
        number = len(result.chunks)
        if event.data.strip() == "[DONE]":
            if result.done:
                self._problem("done_repeated", "[DONE] was sent more than once", number)
            result.done = True
            return
        if result.done:
            self._problem("data_after_done", "data arrived after [DONE]", number)
        try:
            chunk = json.loads(event.data)
        except (ValueError, RecursionError):
            # As in parse_body: also an integer of over 4300 digits, or nesting too deep.
            result.chunks.append(event.data)
            self._problem("chunk_not_json", f"chunk is not JSON: {event.data[:80]!r}", number)
            return
        result.chunks.append(chunk)
        if not isinstance(chunk, dict):
            self._problem("chunk_not_object", "chunk is not a JSON object", number)
            return
        if isinstance(chunk.get("error"), dict) or event.event == "error":
            self._problem(
                "stream_error_event", f"the stream sent an error: {event.data[:200]}", number
            )
            return
        if isinstance(chunk.get("id"), str) and chunk["id"] not in self._ids:
            self._ids.append(chunk["id"])
        result.id = result.id or chunk.get("id")
        result.model = result.model or chunk.get("model")
        result.system_fingerprint = result.system_fingerprint or chunk.get("system_fingerprint")
        choices = chunk.get("choices")
        if isinstance(chunk.get("usage"), dict):
            if result.usage is not None:
                self._problem("usage_repeated", "usage was sent in more than one chunk", number)
            result.usage = chunk["usage"]
            result.usage_source = "final_chunk" if not choices else "chunk_with_choices"
        if choices is None:
            if chunk.get("usage") is None:
                self._problem(
                    "chunk_without_choices", "chunk has neither choices nor usage", number
                )
            return
        if not isinstance(choices, list):
            self._problem("chunk_not_object", "chunk choices is not a list", number)
            return
        for raw in choices:
            if isinstance(raw, dict):
                self._add_choice(raw, number)
            else:
                self._problem("chunk_not_object", "a chunk choice is not an object", number)

    def _add_choice(self, raw: dict[str, Any], number: int) -> None:
        state = self._state_of(raw, number)
        delta = raw.get("delta")
        if not isinstance(delta, dict):
            delta = {}
            if raw.get("finish_reason") is None:
                self._problem("delta_missing", "a chunk choice has no delta object", number)
        if isinstance(raw.get("usage"), dict) and self.result.usage is None:
            self.result.usage, self.result.usage_source = raw["usage"], "choice"
        entries = logprob_entries(raw.get("logprobs"))
        if entries is not None:
            state.choice.logprobs = (state.choice.logprobs or []) + entries
        role = delta.get("role")
        if role is not None:
            self._add_role(state, role, number)
        content = delta.get("content")
        reasoning = reasoning_of(delta)
        calls = delta.get("tool_calls")
        if content or reasoning or calls:
            self._time_token(number, bool(reasoning))
        # Reasoning first: a delta may carry the end of the reasoning and the start of the answer.
        if reasoning:
            # Whitespace before the reasoning (a newline some servers send) is not an answer.
            if any(part.strip() for part in state.content):
                self._problem(
                    "reasoning_after_content",
                    f"reasoning {reasoning[:40]!r} after the answer's content began",
                    number,
                )
            state.reasoning.append(reasoning)
            state.choice.reasoning_field = state.choice.reasoning_field or reasoning_field_of(delta)
        if isinstance(content, str) and content:
            if state.tool_calls_started:
                self._problem(
                    "content_after_tool_calls",
                    f"content {content[:40]!r} after the first tool-call delta",
                    number,
                )
            state.content.append(content)
        if calls:
            state.tool_calls_started = True
            self._add_calls(state, calls, number)
        finish = raw.get("finish_reason")
        if finish is not None:
            self._add_finish(state, finish, number)
        if role is None and not content and not reasoning and not calls and finish is None:
            self.result.empty_deltas += 1

    def _state_of(self, raw: dict[str, Any], number: int) -> _ChoiceState:
        """The state of the choice `raw` continues, begun at chunk `number` when it is new."""
        index = raw.get("index")
        if not isinstance(index, int):
            self._problem("choice_index_missing", "a chunk choice has no integer index", number)
            index = 0
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceState(Choice(index=index), first_chunk=number)
        return state

    def _add_role(self, state: _ChoiceState, role: Any, number: int) -> None:
        """Take a delta's role: the first one counts, a later or repeated one is recorded."""
        state.roles_seen += 1
        if state.roles_seen > 1:
            self._problem("role_repeated", f"role sent again in a later delta ({role!r})", number)
        elif number != state.first_chunk:
            self._problem("role_not_first", "role is not in the first delta of the choice", number)
        state.choice.role = state.choice.role or role

    def _add_finish(self, state: _ChoiceState, finish: Any, number: int) -> None:
        """Take a choice's finish_reason: the first one counts, a second is recorded."""
        if state.choice.finish_reason is not None:
            self._problem(
                "finish_reason_repeated",
                f"a second finish_reason {finish!r} after {state.choice.finish_reason!r}",
                number,
            )
        else:
            state.choice.finish_reason = finish

    def _time_token(self, number: int, reasoning: bool) -> None:
        """Note when chunk `number`, which carries a token, arrived (once per chunk)."""
        if self.now is None:
            return
        result = self.result
        if number != self._timed:
            self._timed = number
            result.token_arrivals.append(self.now)
        if reasoning and result.first_reasoning is None:
            result.first_reasoning = self.now

    def _add_calls(self, state: _ChoiceState, calls: Any, number: int) -> None:
        if not isinstance(calls, list):
            self._problem("malformed_tool_calls", "delta tool_calls is not a list", number)
            return
        for item in calls:
            if not isinstance(item, dict):
                self._problem("malformed_tool_calls", "a tool-call delta is not an object", number)
                continue
            index = item.get("index")
            if not isinstance(index, int):
                self._problem("tool_call_index_missing", "a tool-call delta has no index", number)
                index = 0
            function: dict[str, Any] = (
                item["function"] if isinstance(item.get("function"), dict) else {}
            )
            name = function.get("name")
            call = state.calls.get(index)
            if call is None:
                call = state.calls[index] = ToolCall(
                    index, item.get("id"), item.get("type"), None, None
                )
                state.arguments[index] = []
                missing = [k for k in ("id", "type") if not item.get(k)] + (
                    [] if name else ["name"]
                )
                if missing:
                    state.incomplete[index] = (missing, number)
            else:
                if item.get("id") and call.id and item["id"] != call.id:
                    self._problem(
                        "tool_call_id_changed",
                        f"tool call {index} id changed from {call.id!r} to {item['id']!r}",
                        number,
                    )
                call.id = call.id or item.get("id")
                call.type = call.type or item.get("type")
            if name:
                if call.name is None:
                    call.name = name
                elif name != call.name:
                    self._problem(
                        "tool_call_name_changed",
                        f"tool call {index} renamed from {call.name!r} to {name!r}",
                        number,
                    )
                else:
                    self._problem(
                        "tool_call_name_repeated",
                        f"tool call {index} name {name!r} sent again in a later delta",
                        number,
                    )
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                state.arguments[index].append(arguments)
            elif arguments is not None:
                self._problem(
                    "malformed_tool_calls", "tool-call arguments delta is not a string", number
                )

    def finish(self, *, unterminated: bool = False) -> ChatResult:
        """Close the stream and return the reassembled result."""
        result = self.result
        if unterminated:
            self._problem(
                "event_unterminated", "the last event has no terminating blank line", None
            )
        if not result.done:
            self._problem("done_missing", "the stream ended without data: [DONE]", None)
        if len(self._ids) > 1:
            self._problem("chunk_id_changed", f"chunks carry {len(self._ids)} different ids", None)
        for index in sorted(self._choices):
            state = self._choices[index]
            choice = state.choice
            if state.content:
                choice.content = "".join(state.content)
            if state.reasoning:
                choice.reasoning = "".join(state.reasoning)
            for call_index in sorted(state.calls):
                call = state.calls[call_index]
                parts = state.arguments[call_index]
                call.arguments = "".join(parts) if parts else None
                choice.tool_calls.append(call)
                self._late_fields(state, call)
            if choice.finish_reason is None:
                self._problem(
                    "finish_reason_missing", f"choice {index} ended without a finish_reason", None
                )
            result.choices.append(choice)
        if not self._choices and not result.problems:
            self._problem("no_choices", "the stream carried no choice", None)
        return result

    def _late_fields(self, state: _ChoiceState, call: ToolCall) -> None:
        """A call's id, type or name that came after its first delta.

        One that never came is the call's own defect (no id, no type, no name), which
        grading reports on the assembled call; here only the order is wrong.
        """
        missing, number = state.incomplete.get(call.index, ([], 0))
        late = [field for field in missing if getattr(call, field)]
        if late:
            self._problem(
                "tool_call_first_delta_incomplete",
                f"first delta of tool call {call.index} lacks {', '.join(late)}, "
                "sent in a later delta",
                number,
            )

    def _problem(self, code: str, message: str, number: int | None) -> None:
        where = None if number is None else f"chunk {number}"
        self.result.problems.append(Problem(code, message, where))


def accumulate(
    chunks: Iterable[bytes], result: ChatResult, clock: Callable[[], float] | None = None
) -> ChatResult:
    """Read a whole SSE body given as byte chunks into `result`.

    With `clock` (seconds since the request was sent), the arrival of every chunk that
    carries a token (content, reasoning or a tool call's piece) is noted in
    ``result.token_arrivals``, and the first reasoning's in ``result.first_reasoning``: the
    time the bytes that completed the chunk were read, before it was parsed.
    """
    return read_events(chunks, StreamAccumulator(result), clock)


def note_token(result: ChatResult, now: float | None, *, reasoning: bool) -> None:
    """Note that an event carrying a token (of reasoning, when `reasoning`) arrived at `now`.

    Nothing when the stream is not timed (`now` None).
    """
    if now is None:
        return
    result.token_arrivals.append(now)
    if reasoning and result.first_reasoning is None:
        result.first_reasoning = now


def event_data(
    event: SSEEvent, result: ChatResult, problem: Callable[[str, str], None]
) -> dict[str, Any] | None:
    """An event's data as a JSON object, kept in ``result.chunks`` as it came.

    None, after telling `problem` (code, message), when it is not JSON or not an object.
    """
    try:
        data = json.loads(event.data)
    except (ValueError, RecursionError):
        # As in parse_body: also an integer of over 4300 digits, or nesting too deep.
        result.chunks.append(event.data)
        problem("chunk_not_json", f"event data is not JSON: {event.data[:80]!r}")
        return None
    result.chunks.append(data)
    if not isinstance(data, dict):
        problem("chunk_not_object", "event data is not a JSON object")
        return None
    return data


class EventReader(Protocol):
    """What reads one API's stream events into a ChatResult (chat's, Messages', Responses')."""

    now: float | None

    def add_event(self, event: SSEEvent) -> None:
        """Take one event."""

    def finish(self, *, unterminated: bool = False) -> ChatResult:
        """The answer, once the body has ended."""


def read_events(
    chunks: Iterable[bytes], reader: EventReader, clock: Callable[[], float] | None = None
) -> ChatResult:
    """Feed a whole SSE body, as the network split it, to `reader`, event by event.

    With `clock`, ``reader.now`` is the time the bytes that completed the events being added
    were read (seconds since the request was sent).
    """
    decoder = SSEDecoder()
    for chunk in chunks:
        reader.now = clock() if clock is not None else None
        for event in decoder.feed(chunk):
            reader.add_event(event)
    reader.now = clock() if clock is not None else None
    for event in decoder.close():
        reader.add_event(event)
    return reader.finish(unterminated=decoder.unterminated)


def read_recorded(response: Any, *, status: int, stream: bool) -> ChatResult:
    """An answer as the transcript recorded it (a body, or a stream's chunks), read again.

    By the same parsers an answer on the wire goes through: a stream's chunks through the one
    accumulator, a body through :func:`~verifier.protocol.answers.parse_completion`.
    """
    if not stream:
        return parse_completion(status, json.dumps(response).encode(), {})
    accumulator = StreamAccumulator(ChatResult(stream=True, status=status))
    for chunk in response if isinstance(response, list) else []:
        data = chunk if isinstance(chunk, str) else json.dumps(chunk)
        accumulator.add_event(SSEEvent(None, data))
    return accumulator.finish()
