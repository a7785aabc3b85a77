"""The Anthropic Messages API (``POST /v1/messages``): its requests and its answers.

A family writes its request once, as a chat-completions body; :func:`request_body` says it in
Messages terms, or raises :class:`~.apis.NotExpressible` when the request asks what Messages
cannot say. An answer, whole (:func:`parse_answer`) or streamed (:func:`accumulate`), is read
into the :class:`~.answers.ChatResult` the graders read, in chat-completions terms (one
choice; ``usage`` as ``prompt_tokens``/``completion_tokens``); the Message and the stream's
events stay as they came in ``body`` and ``chunks``. Reading is lenient: whatever arrives
becomes a result whose ``problems`` say what was wrong, never an exception. Nothing here does
I/O.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from .answers import REASONING_FIELDS, ChatResult, Choice, Problem, ToolCall, parse_body
from .apis import NotExpressible
from .stream import SSEEvent, event_data, note_token, read_events

_API = "messages"
# Messages requires max_tokens; a chat body that gives none gets this.
DEFAULT_MAX_TOKENS = 4096

# Chat fields Messages has no counterpart for, each with the test of a value that asks for it
# (``logprobs: false`` or ``n: 1`` asks nothing, so it is said by leaving it out).
_UNSAYABLE: dict[str, Callable[[Any], bool]] = {
    "logprobs": lambda value: value is not False,
    "top_logprobs": lambda value: value != 0,
    "n": lambda value: value != 1,
    "frequency_penalty": lambda value: value != 0,
    "presence_penalty": lambda value: value != 0,
}
_SAMPLING = ("temperature", "top_p", "top_k")
# Every chat field this module reads; any other is one Messages cannot say. ``stream`` is the
# client's (the `stream` argument decides); Messages streams always carry usage
# (``stream_options``) and the verifier's requests are greedy (``seed``). ``thinking`` is the
# object Moonshot's, DeepSeek's and Zhipu's chat APIs took from Messages: it goes as it is.
_KNOWN = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "seed",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "thinking",
        *_SAMPLING,
        *_UNSAYABLE,
    }
)
_TOOL_CHOICES = {"auto": "auto", "required": "any", "none": "none"}

# Messages' stop reasons in chat-completions terms; any other passes through unchanged.
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
# The content blocks an answer to the verifier's requests may carry, each with the delta
# types that continue it in a stream.
_DELTA_TYPES: dict[str, tuple[str, ...]] = {
    "text": ("text_delta", "citations_delta"),
    "thinking": ("thinking_delta", "signature_delta"),
    "redacted_thinking": (),
    "tool_use": ("input_json_delta",),
}
# The string field each delta type carries; citations_delta carries an object, read nowhere.
_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
}
# Input counts Messages reports apart from input_tokens (which excludes cached input).
_CACHE_FIELDS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def _cannot(reason: str) -> NotExpressible:
    return NotExpressible(_API, reason)


def _given(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` without the null ones: a null chat field asks for the default, as absence does."""
    return {key: value for key, value in fields.items() if value is not None}


def _only(fields: Mapping[str, Any], allowed: set[str], what: str) -> None:
    """Refuse a field of `what` (``a user message``) that has no Messages counterpart."""
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise _cannot(f"the Messages API has no {unknown[0]} in {what}")


def request_body(chat: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The Messages request for a chat-completions body.

    Args:
        chat: the chat-completions body as a family wrote it.
        stream: ask for an SSE stream.

    Returns:
        The ``POST /v1/messages`` body.

    Raises:
        NotExpressible: the body asks for something Messages cannot say (logprobs, a second
            system prompt mid-conversation, a field it has no counterpart for).
    """
    fields = _given(chat)
    for key, asks in _UNSAYABLE.items():
        if key in fields and asks(fields[key]):
            raise _cannot(f"the Messages API has no {key} ({key}={fields[key]!r})")
    unknown = sorted(set(fields) - _KNOWN)
    if unknown:
        raise _cannot(f"the Messages API has no {unknown[0]}")
    system, messages = _conversation(fields.get("messages"))
    body: dict[str, Any] = {"model": fields["model"]} if "model" in fields else {}
    body["max_tokens"] = _max_tokens(fields)
    if system is not None:
        body["system"] = system
    body["messages"] = messages
    if stream:
        body["stream"] = True
    temperature = fields.get("temperature", 0)
    if isinstance(temperature, int | float) and temperature > 1:
        raise _cannot(f"the Messages API's temperature is at most 1 ({temperature})")
    body.update({key: fields[key] for key in _SAMPLING if key in fields})
    if "stop" in fields:
        body["stop_sequences"] = _stop_sequences(fields["stop"])
    if "tools" in fields:
        body["tools"] = [_tool(tool) for tool in _listed(fields["tools"], "tools")]
    tool_choice = _tool_choice(fields)
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    output = _output_config(fields.get("response_format"))
    if output is not None:
        body["output_config"] = output
    if "thinking" in fields:
        body["thinking"] = fields["thinking"]
    return body


# The fields of a request that ``/v1/messages/count_tokens`` takes (its reference's body).
_COUNTED = ("model", "messages", "system", "tools", "tool_choice", "thinking")


def count_body(request: Mapping[str, Any]) -> dict[str, Any]:
    """The ``/v1/messages/count_tokens`` body for a Messages request: its prompt's fields."""
    return {key: request[key] for key in _COUNTED if key in request}


def _listed(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _cannot(f"{what} is not a list")
    return value


def _max_tokens(fields: Mapping[str, Any]) -> Any:
    given = [fields[key] for key in ("max_completion_tokens", "max_tokens") if key in fields]
    if len(given) == 2 and given[0] != given[1]:
        raise _cannot(f"max_completion_tokens {given[0]!r} and max_tokens {given[1]!r} differ")
    return given[0] if given else DEFAULT_MAX_TOKENS


def _stop_sequences(stop: Any) -> list[Any]:
    if isinstance(stop, str):
        return [stop]
    return list(_listed(stop, "stop"))


def _conversation(raw: Any) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """The system prompt (None when there is none) and the turns of a chat messages list."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    previous = None
    for message in _listed(raw, "messages"):
        if not isinstance(message, Mapping):
            raise _cannot(f"a message is not an object: {message!r}")
        fields = _given(message)
        role = fields.get("role")
        if "name" in fields:
            raise _cannot(f"the Messages API has no name for a message ({fields['name']!r})")
        if role in ("system", "developer"):
            if turns:
                raise _cannot(f"a {role} message after the conversation began")
            _only(fields, {"role", "content"}, f"a {role} message")
            system.append(_text_of(fields.get("content"), f"a {role} message"))
        elif role == "tool":
            # All the results of one assistant turn go in the next user turn.
            if previous == "tool":
                turns[-1]["content"].append(_tool_result(fields))
            else:
                turns.append({"role": "user", "content": [_tool_result(fields)]})
        elif role == "user":
            turns.append(_user_turn(fields))
        elif role == "assistant":
            turns.append(_assistant_turn(fields))
        else:
            raise _cannot(f"the Messages API has no {role!r} role")
        previous = role
    if turns and turns[-1]["role"] == "assistant":
        # Messages would continue a last assistant message (a prefill); chat answers after it.
        raise _cannot("a conversation that ends with an assistant message")
    if not system:
        return None, turns
    if len(system) == 1:
        return system[0], turns
    return [{"type": "text", "text": text} for text in system], turns


def _text_of(content: Any, what: str) -> str:
    """Message content that must be text: a string, or text parts joined."""
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in _listed(content, f"the content of {what}"):
        if not isinstance(part, Mapping) or part.get("type") != "text":
            raise _cannot(f"the Messages API has no such part in {what}: {part!r}")
        _only(part, {"type", "text"}, f"a text part of {what}")
        if not isinstance(part.get("text", ""), str):
            raise _cannot(f"a text part of {what} whose text is not a string: {part!r}")
        texts.append(part.get("text", ""))
    return "".join(texts)


def _user_turn(fields: Mapping[str, Any]) -> dict[str, Any]:
    _only(fields, {"role", "content"}, "a user message")
    content = fields.get("content")
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts = _listed(content, "the content of a user message")
    return {"role": "user", "content": [_user_part(part) for part in parts]}


def _user_part(part: Any) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text":
        _only(part, {"type", "text"}, "a text part")
        return {"type": "text", "text": part.get("text")}
    if kind != "image_url":
        raise _cannot(f"the Messages API has no {kind!r} content part")
    _only(part, {"type", "image_url"}, "an image part")
    image = part.get("image_url")
    image = _given(image) if isinstance(image, Mapping) else {}
    _only(image, {"url", "detail"}, "an image_url")
    if image.get("detail", "auto") != "auto":
        raise _cannot(f"the Messages API has no image detail ({image['detail']!r})")
    url = image.get("url")
    if isinstance(url, str) and url.startswith("data:"):
        header, _, data = url.removeprefix("data:").partition(",")
        media, _, encoding = header.partition(";")
        if encoding != "base64":
            raise _cannot(f"an image data URL that is not base64: {url[:40]!r}")
        source = {"type": "base64", "media_type": media, "data": data}
    elif isinstance(url, str):
        # Any other URL is a URL source, as sent: one the server must not fetch (file://,
        # ftp://) is for the server to refuse, over this API as over chat.
        source = {"type": "url", "url": url}
    else:
        raise _cannot(f"an image URL that is not a string: {url!r:.40}")
    return {"type": "image", "source": source}


def _assistant_turn(fields: Mapping[str, Any]) -> dict[str, Any]:
    for key in REASONING_FIELDS:
        if key in fields:
            # A thinking block must carry the signature the API gave it.
            raise _cannot(f"an assistant message's {key} (a thinking block needs its signature)")
    _only(fields, {"role", "content", "tool_calls"}, "an assistant message")
    blocks: list[dict[str, Any]] = []
    text = _text_of(fields.get("content"), "an assistant message")
    if text:
        blocks.append({"type": "text", "text": text})
    for call in _listed(fields.get("tool_calls", []), "tool_calls"):
        blocks.append(_tool_use(call))
    if not blocks:
        raise _cannot("an assistant message with neither text nor tool calls")
    return {"role": "assistant", "content": blocks}


def _tool_use(call: Any) -> dict[str, Any]:
    if not isinstance(call, Mapping) or call.get("type", "function") != "function":
        raise _cannot(f"the Messages API has no such tool call: {call!r}")
    _only(call, {"id", "type", "function"}, "a tool call")
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    _only(function, {"name", "arguments"}, "a tool call's function")
    try:
        arguments = json.loads(function.get("arguments", ""))
    except (TypeError, ValueError, RecursionError):
        arguments = None
    if not isinstance(arguments, dict):
        raise _cannot(f"tool call arguments that are not a JSON object: {function!r}")
    return {
        "type": "tool_use",
        "id": call.get("id"),
        "name": function.get("name"),
        "input": arguments,
    }


def _tool_result(fields: Mapping[str, Any]) -> dict[str, Any]:
    _only(fields, {"role", "content", "tool_call_id"}, "a tool message")
    return {
        "type": "tool_result",
        "tool_use_id": fields.get("tool_call_id"),
        "content": _text_of(fields.get("content"), "a tool message"),
    }


def _tool(tool: Any) -> dict[str, Any]:
    if not isinstance(tool, Mapping) or tool.get("type") != "function":
        raise _cannot(f"the Messages API has no such tool: {tool!r}")
    _only(tool, {"type", "function"}, "a tool")
    function = tool.get("function")
    function = _given(function) if isinstance(function, Mapping) else {}
    _only(function, {"name", "description", "parameters", "strict"}, "a tool's function")
    rendered: dict[str, Any] = {"name": function.get("name")}
    if "description" in function:
        rendered["description"] = function["description"]
    rendered["input_schema"] = function.get("parameters", {"type": "object", "properties": {}})
    if "strict" in function:
        rendered["strict"] = function["strict"]
    return rendered


def _tool_choice(fields: Mapping[str, Any]) -> dict[str, Any] | None:
    choice = fields.get("tool_choice")
    rendered: dict[str, Any] | None
    if choice is None:
        rendered = None
    elif isinstance(choice, str) and choice in _TOOL_CHOICES:
        rendered = {"type": _TOOL_CHOICES[choice]}
    elif (
        isinstance(choice, Mapping)
        and choice.get("type") == "function"
        and isinstance(choice.get("function"), Mapping)
        and set(choice) == {"type", "function"}
        and set(choice["function"]) == {"name"}
    ):
        rendered = {"type": "tool", "name": choice["function"]["name"]}
    else:
        raise _cannot(f"the Messages API has no tool_choice {choice!r}")
    parallel = fields.get("parallel_tool_calls", True)
    if parallel not in (True, False):
        raise _cannot(f"parallel_tool_calls {parallel!r} is not a boolean")
    if parallel is False:
        rendered = rendered or {"type": "auto"}
        # With tool_choice none no call is made, so there is no parallel call to forbid.
        if rendered["type"] != "none":
            rendered["disable_parallel_tool_use"] = True
    return rendered


def _output_config(response_format: Any) -> dict[str, Any] | None:
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if kind == "text":
        return None
    if kind != "json_schema":
        raise _cannot(f"the Messages API has no response_format {kind or response_format!r}")
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if not isinstance(schema, Mapping):
        raise _cannot("a json_schema response_format without a schema object")
    return {"format": {"type": "json_schema", "schema": schema}}


@dataclasses.dataclass(slots=True)
class _Block:
    """One content block of an answer as read so far: its text pieces, or its tool call."""

    type: str
    pieces: list[str] = dataclasses.field(default_factory=list)
    id: Any = None
    name: Any = None
    input: Any = None
    # The block as it began (a stream's content_block_start), and a thinking block's
    # signature pieces (signature_delta).
    start: dict[str, Any] = dataclasses.field(default_factory=dict)
    signature: list[str] | None = None

    def arguments(self) -> str | None:
        """A tool_use block's input as JSON text: the streamed pieces, else the whole input."""
        joined = "".join(self.pieces)
        if joined or self.input is None:
            return joined or None
        return json.dumps(self.input, ensure_ascii=False)

    def native(self) -> dict[str, Any]:
        """The streamed block whole, as the SDKs build it: its start with the deltas joined."""
        block = dict(self.start)
        if self.type in ("text", "thinking"):
            block[self.type] = "".join(self.pieces)
        if self.signature is not None:
            block["signature"] = "".join(self.signature)
        if self.type == "tool_use" and self.pieces:
            try:
                block["input"] = json.loads("".join(self.pieces))
            except json.JSONDecodeError:
                pass  # The start's input stays: the pieces make no JSON (a problem already).
        return block


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_call_piece(event: Mapping[str, Any]) -> bool:
    """A content_block_delta that carries a piece of a tool call's input."""
    delta = event.get("delta")
    return isinstance(delta, Mapping) and delta.get("type") == "input_json_delta"


def _choice(blocks: list[_Block], stop_reason: Any, stop_sequence: Any = None) -> Choice:
    """The one chat choice a Message's content blocks and stop reason say."""
    texts = [block for block in blocks if block.type == "text"]
    thoughts = [block for block in blocks if block.type == "thinking"]
    calls = [block for block in blocks if block.type == "tool_use"]
    finish = _FINISH_REASONS.get(stop_reason, stop_reason) if isinstance(stop_reason, str) else None
    return Choice(
        index=0,
        role="assistant",
        content="".join("".join(block.pieces) for block in texts) if texts else None,
        reasoning="".join("".join(block.pieces) for block in thoughts) if thoughts else None,
        reasoning_field="thinking" if thoughts else None,
        tool_calls=[
            ToolCall(index, block.id, "function", block.name, block.arguments())
            for index, block in enumerate(calls)
        ],
        finish_reason=finish,
        stop_reason=stop_reason,
        stop_sequence=stop_sequence,
        redacted=any(block.type == "redacted_thinking" for block in blocks),
    )


def _chat_usage(native: Any, problems: list[Problem], where: str | None) -> dict[str, Any] | None:
    """Messages usage in chat-completions terms, or None (and a problem) when it has no counts.

    ``prompt_tokens`` counts all input: Messages' ``input_tokens`` excludes the input written
    to and read from the cache, which it reports apart.
    """
    if not isinstance(native, Mapping):
        problems.append(Problem("usage_missing", "the answer carries no usage object", where))
        return None
    bad = [key for key in ("input_tokens", "output_tokens") if not _is_count(native.get(key))]
    # A cache count may be null (nothing cached), as if absent.
    bad += [k for k in _CACHE_FIELDS if native.get(k) is not None and not _is_count(native[k])]
    if bad:
        found = ", ".join(f"{key}={native.get(key)!r}" for key in bad)
        problems.append(Problem("usage_malformed", f"usage counts are not counts: {found}", where))
        return None
    absent = [key for key in _CACHE_FIELDS if key not in native]
    if absent:
        # Required by the reference (null when nothing was cached): without them a client
        # cannot tell what its input cost, nor whether caching works.
        problems.append(
            Problem(
                "cache_usage_missing",
                f"usage leaves out {' and '.join(absent)} (null when nothing was cached)",
                where,
            )
        )
    prompt = native["input_tokens"] + sum(native.get(key) or 0 for key in _CACHE_FIELDS)
    completion = native["output_tokens"]
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if native.get("cache_read_input_tokens") is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": native["cache_read_input_tokens"]}
    return usage


def parse_answer(status: int, body: bytes, headers: dict[str, str]) -> ChatResult:
    """A non-stream Messages answer (any status) as a :class:`ChatResult` with api ``messages``.

    A 2xx body is read as a Message into one choice; another status's body is kept as it came
    (``error_object`` reads its ``error``), and a shape other than Messages' error is a problem.
    """
    result = parse_body(status, body, headers)
    result.api = _API
    if result.problems:
        return result
    if 200 <= status < 300:
        _read_message(result, result.body)
    elif not _is_error(result.body):
        result.problems.append(
            Problem(
                "error_not_messages_shape",
                'the error body is not {"type": "error", "error": {"type", "message"}}',
                "$",
            )
        )
    return result


def _is_error(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        isinstance(body, dict)
        and body.get("type") == "error"
        and isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
    )


def _read_message(result: ChatResult, message: Any) -> None:
    """Read a Message body into `result`: its one choice, its usage, or what is wrong."""
    problems = result.problems
    if not isinstance(message, dict):
        kind = type(message).__name__
        problems.append(Problem("not_a_completion", f"the body is a JSON {kind}, not a message"))
        return
    for key, wanted in (("type", "message"), ("role", "assistant")):
        if message.get(key) != wanted:
            problems.append(
                Problem(
                    "not_a_completion", f"{key} is {message.get(key)!r}, not {wanted!r}", f"$.{key}"
                )
            )
    result.id, result.model = message.get("id"), message.get("model")
    content = message.get("content")
    if not isinstance(content, list):
        problems.append(Problem("not_a_completion", "the message has no content list", "$.content"))
        return
    result.usage = _chat_usage(message.get("usage"), problems, "$.usage")
    result.usage_source = "body" if result.usage is not None else None
    blocks = [_body_block(raw, problems, f"$.content[{n}]") for n, raw in enumerate(content)]
    stop_reason = message.get("stop_reason")
    kept = [block for block in blocks if block is not None]
    result.choices.append(_choice(kept, stop_reason, message.get("stop_sequence")))
    if not isinstance(stop_reason, str):
        problems.append(
            Problem(
                "finish_reason_missing",
                f"the message's stop_reason is {stop_reason!r}, not a reason",
                "$.stop_reason",
            )
        )


def _body_block(raw: Any, problems: list[Problem], where: str) -> _Block | None:
    """A content block of a Message body, or None when it is not one this module reads."""
    if not isinstance(raw, dict):
        problems.append(
            Problem("malformed_content_block", "a content block is not an object", where)
        )
        return None
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in _DELTA_TYPES:
        problems.append(
            Problem("unknown_content_block", f"a content block of type {kind!r}", where)
        )
        return None
    if kind in ("text", "thinking"):
        text = raw.get(kind)
        if not isinstance(text, str):
            problems.append(
                Problem("malformed_content_block", f"a {kind} block's {kind} is {text!r}", where)
            )
        return _Block(kind, [text] if isinstance(text, str) else [])
    if kind == "tool_use":
        _check_tool_use(raw, problems, where)
        return _Block(kind, [], raw.get("id"), raw.get("name"), raw.get("input"))
    return _Block(kind)


def _check_tool_use(
    block: Mapping[str, Any], problems: list[Problem], where: str, *, streamed: bool = False
) -> None:
    """Problems of a tool_use block (at its start, for a stream): an id, a name, an input.

    A stream's block delivers its input in ``input_json_delta`` pieces: one that leaves out
    the ``input: {}`` of its start breaks the event schema (the shape check says so), not the
    call.
    """
    missing = [key for key in ("id", "name") if not isinstance(block.get(key), str)]
    if missing:
        problems.append(
            Problem(
                "malformed_content_block", f"a tool_use block without {' or '.join(missing)}", where
            )
        )
    given = block.get("input")
    if not isinstance(given, dict) and not (streamed and given is None):
        problems.append(Problem("malformed_tool_calls", f"a tool_use input is {given!r}", where))


class _EventReader:
    """Reads the events of a Messages stream into one :class:`ChatResult`, recording violations.

    The grammar (Anthropic's streaming reference): ``message_start``; per content block, in
    index order, ``content_block_start``, its deltas, ``content_block_stop``; one or more
    ``message_delta``; ``message_stop`` last; ``ping`` anywhere. An event type the reference
    does not name is let pass: its versioning policy allows new ones.
    """

    def __init__(self, result: ChatResult) -> None:
        self.result = result
        result.api = _API
        # When the bytes of the events being added arrived, or None when they are not timed.
        self.now: float | None = None
        self.blocks: list[_Block] = []
        self.by_index: dict[int, _Block] = {}
        self.open: int | None = None
        self.usage: dict[str, Any] = {}
        self.usage_seen = False
        self.stop_reason: Any = None
        self.stop_sequence: Any = None
        self.started = self.start_missed = self.stopped = self.errored = False
        # The event number of the last message_delta, None before the first.
        self.delta_at: int | None = None
        self._handlers: dict[str, Callable[[dict[str, Any], int], None]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
        }

    def add_event(self, event: SSEEvent) -> None:
        """Take one SSE event of the stream."""
        result = self.result
        number = len(result.chunks)
        data = event_data(event, result, lambda code, message: self._problem(code, message, number))
        if data is None:
            return
        kind = data.get("type")
        if event.event is not None and event.event != kind:
            self._problem(
                "event_name_mismatch",
                f"event {event.event!r} carries data of type {kind!r}",
                number,
            )
        if kind == "error" or event.event == "error":
            self.errored = True
            result.body = data
            self._problem(
                "stream_error_event", f"the stream sent an error: {event.data[:200]}", number
            )
        elif not isinstance(kind, str):
            self._problem("event_type_missing", "event data has no type", number)
        elif kind != "ping" and kind in self._handlers:
            self._grammar(kind, number)
            self._handlers[kind](data, number)

    def _grammar(self, kind: str, number: int) -> None:
        """Problems of where an event of `kind` comes.

        Before message_start, after message_stop, or (a block's event) after message_delta.
        """
        if self.stopped:
            self._problem("event_after_message_stop", f"{kind} after message_stop", number)
        if kind != "message_start" and not self.started and not self.start_missed:
            self.start_missed = True
            self._problem("message_start_missing", f"{kind} before message_start", number)
        if kind.startswith("content_block") and self.delta_at is not None:
            self._problem("event_out_of_order", f"{kind} after message_delta", number)

    def _message_start(self, data: dict[str, Any], number: int) -> None:
        if self.started:
            self._problem("message_start_repeated", "a second message_start", number)
            return
        self.started = True
        message = data.get("message")
        if not isinstance(message, dict):
            self._problem("malformed_event", "message_start without a message object", number)
            return
        self.result.id, self.result.model = message.get("id"), message.get("model")
        usage = message.get("usage")
        if isinstance(usage, dict):
            # output_tokens is message_delta's to give: message_start's is a running count.
            self.usage.update({k: usage[k] for k in ("input_tokens", *_CACHE_FIELDS) if k in usage})

    def _block_start(self, data: dict[str, Any], number: int) -> None:
        given, expected = data.get("index"), len(self.blocks)
        index = given if _is_count(given) else expected
        if self.open is not None:
            self._problem(
                "content_block_not_stopped", f"block {self.open} open when {given!r} began", number
            )
        if not _is_count(given):
            self._problem("malformed_event", f"content_block_start index {given!r}", number)
        elif index != expected:
            self._problem(
                "content_block_index_wrong", f"block {index} began where {expected} was due", number
            )
        raw = data.get("content_block")
        raw = raw if isinstance(raw, dict) else {}
        kind = raw.get("type")
        block = _Block(kind if isinstance(kind, str) else "", start=dict(raw))
        if block.type not in _DELTA_TYPES:
            self._problem("unknown_content_block", f"a content block of type {kind!r}", number)
        elif kind in ("text", "thinking") and isinstance(raw.get(kind), str) and raw[kind]:
            block.pieces.append(raw[kind])
        elif kind == "tool_use":
            _check_tool_use(raw, self.result.problems, f"event {number}", streamed=True)
            block.id, block.name, block.input = raw.get("id"), raw.get("name"), raw.get("input")
        self.blocks.append(block)
        self.by_index[index] = block
        self.open = index

    def _block_delta(self, data: dict[str, Any], number: int) -> None:
        index = data.get("index")
        block = self.by_index.get(index) if _is_count(index) else None
        if block is None or index != self.open:
            # A call's piece out of place can build the wrong call; another block's cannot.
            code = "call_delta_outside_block" if _is_call_piece(data) else "delta_outside_block"
            self._problem(code, f"a delta for block {index!r} with {self._state()}", number)
        # A delta for no block is a problem above; an unknown block's was when it began.
        if block is None or block.type not in _DELTA_TYPES:
            return
        delta = data.get("delta")
        if not isinstance(delta, dict):
            self._problem("malformed_event", "content_block_delta without a delta", number)
            return
        kind = delta.get("type")
        if kind not in _DELTA_TYPES[block.type]:
            # Into or out of a call's block, the call is built wrong; otherwise it is not.
            call = block.type == "tool_use" or _is_call_piece(data)
            code = "call_delta_type_mismatch" if call else "delta_type_mismatch"
            self._problem(code, f"a {kind!r} delta for a {block.type} block", number)
            return
        field = _DELTA_FIELDS.get(kind)
        value = delta.get(field) if field else ""
        if not isinstance(value, str):
            self._problem("malformed_event", f"a {kind} whose {field} is {value!r}", number)
        elif kind == "signature_delta":
            block.signature = [*(block.signature or []), value]
        elif field:
            block.pieces.append(value)
            if value:
                note_token(self.result, self.now, reasoning=kind == "thinking_delta")

    def _block_stop(self, data: dict[str, Any], number: int) -> None:
        index = data.get("index")
        if self.open is None or index != self.open:
            self._problem(
                "content_block_stop_mismatch",
                f"content_block_stop for block {index!r} with {self._state()}",
                number,
            )
        else:
            self.open = None

    def _state(self) -> str:
        return "no block open" if self.open is None else f"block {self.open} open"

    def _message_delta(self, data: dict[str, Any], number: int) -> None:
        self._close_open_block("message_delta", number)
        self.delta_at = number
        delta = data.get("delta")
        if not isinstance(delta, dict):
            self._problem("malformed_event", "message_delta without a delta object", number)
        elif delta.get("stop_reason") is not None:
            if self.stop_reason is not None:
                self._problem(
                    "finish_reason_repeated",
                    f"stop_reason {delta['stop_reason']!r} after {self.stop_reason!r}",
                    number,
                )
            else:
                self.stop_reason = delta["stop_reason"]
                self.stop_sequence = delta.get("stop_sequence")
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage_seen = True
            self.usage.update({key: value for key, value in usage.items() if value is not None})

    def _message_stop(self, data: dict[str, Any], number: int) -> None:
        self._close_open_block("message_stop", number)
        if self.delta_at is None:
            self._problem("message_delta_missing", "message_stop without a message_delta", number)
        self.stopped = self.result.done = True

    def _close_open_block(self, kind: str, number: int) -> None:
        if self.open is not None:
            self._problem(
                "content_block_not_stopped", f"block {self.open} still open at {kind}", number
            )
            self.open = None

    def finish(self, *, unterminated: bool = False) -> ChatResult:
        """Close the stream and return the result: its one choice, its usage, what was wrong."""
        result = self.result
        if unterminated:
            self._problem(
                "event_unterminated", "the last event has no terminating blank line", None
            )
        # After an error event the stream ends early by design: not a truncated answer.
        if not self.errored:
            if not self.started and not self.start_missed:
                self._problem("message_start_missing", "the stream carried no message_start", None)
            if not self.stopped:
                self._problem("message_stop_missing", "the stream ended before message_stop", None)
        if self.started or self.blocks:
            choice = _choice(self.blocks, self.stop_reason, self.stop_sequence)
            choice.blocks = [block.native() for block in self.blocks]
            result.choices.append(choice)
            if choice.finish_reason is None and not self.errored:
                where = None if self.delta_at is None else f"event {self.delta_at}"
                reason = f"the stream's stop_reason is {self.stop_reason!r}, not a reason"
                result.problems.append(Problem("finish_reason_missing", reason, where))
        if self.delta_at is not None:
            where = f"event {self.delta_at}"
            native = self.usage if self.usage_seen else None
            result.usage = _chat_usage(native, result.problems, where)
            result.usage_source = "message_delta" if result.usage is not None else None
        return result

    def _problem(self, code: str, message: str, number: int | None) -> None:
        where = None if number is None else f"event {number}"
        self.result.problems.append(Problem(code, message, where))


def accumulate(
    chunks: Iterable[bytes], result: ChatResult, clock: Callable[[], float] | None = None
) -> ChatResult:
    """Read a Messages SSE body, given as the network split it, into `result`.

    Every event's data goes to ``result.chunks`` in order. With `clock` (seconds since the
    request was sent), each delta carrying text, thinking or tool input is timed in
    ``result.token_arrivals`` (and the first thinking in ``result.first_reasoning``): the time
    the bytes that completed its event were read, as the chat accumulator does.
    """
    return read_events(chunks, _EventReader(result), clock)


def answer_content(result: ChatResult) -> list[dict[str, Any]]:
    """The answer's content blocks as a client sends them back in its next turn (pure).

    A non-stream answer's ``content`` as it came; a stream's blocks as its reading built
    them (:attr:`~.answers.Choice.blocks`). Thinking blocks keep their signatures.
    """
    if not result.stream:
        content = result.body.get("content") if isinstance(result.body, dict) else None
        return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    choice = result.choice
    return list(choice.blocks or []) if choice is not None else []


def read_recorded(response: Any, *, status: int, stream: bool) -> ChatResult:
    """An answer as the transcript recorded it, read again by the code that read it first.

    Args:
        response: the body of a non-stream answer; for a stream, its events' data objects in
            order (each with its ``type``).
        status: the answer's HTTP status.
        stream: whether the answer streamed.
    """
    if not stream:
        return parse_answer(status, json.dumps(response).encode(), {})
    reader = _EventReader(ChatResult(stream=True, status=status))
    for data in response if isinstance(response, list) else []:
        reader.add_event(SSEEvent(None, data if isinstance(data, str) else json.dumps(data)))
    return reader.finish()
