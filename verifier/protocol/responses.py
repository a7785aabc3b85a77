"""The OpenAI Responses API (``POST /v1/responses``) as a protocol module.

:func:`request_body` renders a chat-completions body into a Responses request, or refuses
(:class:`~.apis.NotExpressible`) what the Responses API cannot say: nothing is dropped
silently. :func:`parse_answer` and :func:`accumulate` read a Response, whole or streamed as
semantic events, into the :class:`~.answers.ChatResult` the graders read, in
chat-completions terms: one choice, its ``finish_reason`` from the response's status, its
usage renamed; the native body and events stay in ``body`` and ``chunks``. A stream's text
comes from its deltas (what a streaming client shows); the events that repeat it (each
``.done``, ``response.output_item.done``, the final response) must agree with them. Reading is
lenient, as in :mod:`.answers`: every violation is a :class:`~.answers.Problem`, never an
exception. Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from .answers import ChatResult, Choice, Problem, ToolCall, parse_body
from .apis import NotExpressible
from .stream import SSEEvent, event_data, note_token, read_events

API = "responses"

# ---------------------------------------------------------------------------------------------
# Rendering a chat-completions body.

# Chat keys that keep their name and value.
_SAME = ("temperature", "top_p", "parallel_tool_calls")
# Chat keys left out: Responses streams always end with the usage, and has no seed (the
# verifier's requests are greedy). `stream` is the `stream` argument's to say.
_LEFT_OUT = ("stream_options", "seed", "stream")
# Chat keys whose neutral value asks nothing; any other value is refused.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "frequency_penalty": (None, 0),
    "presence_penalty": (None, 0),
    "stop": (None, []),
}
_RENDERED = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "max_completion_tokens",
    "response_format",
    "logprobs",
    "top_logprobs",
    "reasoning_effort",
)
_KNOWN = frozenset((*_SAME, *_LEFT_OUT, *_NEUTRAL, *_RENDERED))
# The one-line reason each neutral-only key's other values are refused with.
_NO_COUNTERPART = {
    "n": "the Responses API answers one choice (n={value!r})",
    "frequency_penalty": "the Responses API has no frequency_penalty ({value!r})",
    "presence_penalty": "the Responses API has no presence_penalty ({value!r})",
    "stop": "the Responses API has no stop sequences",
}
# The keys a message of each role may carry.
_MESSAGE_KEYS = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
_TOOL_CHOICES = ("auto", "required", "none")
_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})
_JSON_SCHEMA_KEYS = frozenset({"name", "schema", "strict", "description"})


def _refusal(reason: str) -> NotExpressible:
    return NotExpressible(API, reason)


def request_body(chat: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The Responses request for a chat-completions body.

    Args:
        chat: the chat-completions body.
        stream: ask for an SSE stream.

    Raises:
        NotExpressible: the body asks what the Responses API cannot say (its reason names
            the field).
    """
    unknown = sorted(set(chat) - _KNOWN)
    if unknown:
        raise _refusal(f"the Responses API has no counterpart for {unknown[0]!r}")
    for key, neutral in _NEUTRAL.items():
        if key in chat and chat[key] not in neutral:
            raise _refusal(_NO_COUNTERPART[key].format(value=chat[key]))
    body: dict[str, Any] = {}
    if "model" in chat:
        body["model"] = chat["model"]
    if stream:
        body["stream"] = True
    # The verifier must not leave its conversations stored at the vendor.
    body["store"] = False
    if "messages" in chat:
        body["input"] = _input(chat["messages"])
    if "tools" in chat:
        body["tools"] = _tools(chat["tools"])
    if "tool_choice" in chat:
        body["tool_choice"] = _tool_choice(chat["tool_choice"])
    body.update({key: chat[key] for key in _SAME if key in chat})
    body.update(_max_output_tokens(chat))
    body.update(_text_format(chat.get("response_format")))
    body.update(_logprobs(chat))
    if chat.get("reasoning_effort") is not None:
        # OpenAI's chat field and Responses' reasoning.effort are one setting, one enumeration.
        body["reasoning"] = {"effort": chat["reasoning_effort"]}
    return body


# The fields of a request that ``/v1/responses/input_tokens`` takes (its reference's body).
_COUNTED = (
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "truncation",
)


def count_body(request: Mapping[str, Any]) -> dict[str, Any]:
    """The ``/v1/responses/input_tokens`` body for a Responses request: its prompt's fields."""
    return {key: request[key] for key in _COUNTED if key in request}


def _input(messages: Any) -> list[dict[str, Any]]:
    """The ``input`` items of a chat ``messages`` list, in order."""
    if not isinstance(messages, list):
        raise _refusal("messages is not a list")
    items: list[dict[str, Any]] = []
    for message in messages:
        items += _items_of(message)
    return items


def _items_of(message: Any) -> list[dict[str, Any]]:
    """The input items one chat message becomes."""
    role = message.get("role") if isinstance(message, Mapping) else None
    if not isinstance(message, Mapping) or not isinstance(role, str) or role not in _MESSAGE_KEYS:
        raise _refusal(f"a message with role {role!r} has no Responses counterpart")
    if "name" in message:
        raise _refusal("the Responses API has no message name")
    if role == "assistant" and ("reasoning_content" in message or "reasoning" in message):
        # Responses reasoning items round-trip with their own ids and encrypted content.
        raise _refusal("an assistant message's reasoning cannot be given back to the Responses API")
    extra = sorted(set(message) - _MESSAGE_KEYS[role])
    if extra:
        raise _refusal(f"a {role} message's {extra[0]!r} has no Responses counterpart")
    if role == "assistant":
        return _assistant_items(message)
    if role == "tool":
        output = _text_of(message.get("content"), "a tool message's")
        return [
            {
                "type": "function_call_output",
                "call_id": message.get("tool_call_id"),
                "output": output,
            }
        ]
    content = message.get("content")
    if isinstance(content, str):
        parts = [{"type": "input_text", "text": content}]
    elif isinstance(content, list):
        parts = [_input_part(part, role) for part in content]
    else:
        raise _refusal(f"a {role} message's content is neither text nor a list of parts")
    return [{"type": "message", "role": role, "content": parts}]


def _input_part(part: Any, role: str) -> dict[str, Any]:
    """One content part of a system, developer or user message."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text" and isinstance(part, Mapping) and set(part) <= {"type", "text"}:
        return {"type": "input_text", "text": part.get("text")}
    if kind == "image_url" and isinstance(part, Mapping) and set(part) <= {"type", "image_url"}:
        image = part.get("image_url")
        if isinstance(image, Mapping) and set(image) <= {"url", "detail"}:
            detail = image.get("detail") or "auto"
            return {"type": "input_image", "image_url": image.get("url"), "detail": detail}
    raise _refusal(f"a {role} message's {kind!r} part has no Responses counterpart")


def _text_of(content: Any, what: str) -> str | None:
    """Text content as one string: a string, or a list of text parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, Mapping) and p.get("type") == "text" and set(p) <= {"type", "text"}
        for p in content
    ):
        return "".join(str(p.get("text", "")) for p in content)
    raise _refusal(f"{what} content other than text has no Responses counterpart")


def _assistant_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An assistant message: its text as a message item, then one item per tool call."""
    text = _text_of(message.get("content"), "an assistant message's")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _refusal("an assistant message's tool_calls is not a list")
    items: list[dict[str, Any]] = []
    # An empty text beside tool calls says nothing; alone it is the turn itself.
    if text or not calls:
        content = [{"type": "output_text", "text": text}] if text is not None else []
        items.append({"type": "message", "role": "assistant", "content": content})
    return items + [_function_call(call) for call in calls]


def _function_call(call: Any) -> dict[str, Any]:
    """One chat tool call as a ``function_call`` item, its arguments string as it is."""
    function = call.get("function") if isinstance(call, Mapping) else None
    if (
        not isinstance(call, Mapping)
        or call.get("type", "function") != "function"
        or not set(call) <= {"id", "type", "function"}
        or not isinstance(function, Mapping)
        or not set(function) <= {"name", "arguments"}
    ):
        raise _refusal("only function tool calls have a Responses counterpart")
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments"),
    }


def _tools(tools: Any) -> list[dict[str, Any]]:
    """Chat function tools as Responses function tools (strict said: the APIs' defaults differ)."""
    if not isinstance(tools, list):
        raise _refusal("tools is not a list")
    rendered = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type") != "function"
            or set(tool) != {"type", "function"}
            or not isinstance(function, Mapping)
        ):
            raise _refusal("only function tools have a Responses counterpart")
        extra = sorted(set(function) - _FUNCTION_KEYS)
        if extra:
            raise _refusal(f"a function tool's {extra[0]!r} has no Responses counterpart")
        rendered.append(
            {
                "type": "function",
                "name": function.get("name"),
                **({"description": function["description"]} if "description" in function else {}),
                "parameters": function.get("parameters"),
                # Responses defaults strict to true, chat to false: say chat's.
                "strict": function.get("strict", False),
            }
        )
    return rendered


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str) and choice in _TOOL_CHOICES:
        return choice
    function = choice.get("function") if isinstance(choice, Mapping) else None
    if (
        isinstance(choice, Mapping)
        and choice.get("type") == "function"
        and set(choice) == {"type", "function"}
        and isinstance(function, Mapping)
        and set(function) == {"name"}
    ):
        return {"type": "function", "name": function["name"]}
    raise _refusal(f"the tool_choice {choice!r} has no Responses counterpart")


def _max_output_tokens(chat: Mapping[str, Any]) -> dict[str, Any]:
    values = [
        chat[key] for key in ("max_tokens", "max_completion_tokens") if chat.get(key) is not None
    ]
    if not values:
        return {}
    if any(value != values[0] for value in values):
        raise _refusal("max_tokens and max_completion_tokens differ: one max_output_tokens")
    return {"max_output_tokens": values[0]}


def _text_format(response_format: Any) -> dict[str, Any]:
    """``text.format`` for a chat ``response_format`` (nothing for plain text)."""
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if response_format is None or (kind == "text" and set(response_format) == {"type"}):
        return {}
    if kind == "json_object" and set(response_format) == {"type"}:
        return {"text": {"format": {"type": "json_object"}}}
    schema = response_format.get("json_schema") if isinstance(response_format, Mapping) else None
    if (
        kind == "json_schema"
        and set(response_format) == {"type", "json_schema"}
        and isinstance(schema, Mapping)
        and set(schema) <= _JSON_SCHEMA_KEYS
    ):
        described = {"description": schema["description"]} if "description" in schema else {}
        json_format = {
            "type": "json_schema",
            "name": schema.get("name"),
            **described,
            "schema": schema.get("schema"),
            "strict": schema.get("strict", False),
        }
        return {"text": {"format": json_format}}
    raise _refusal(f"the response_format {kind!r} has no Responses counterpart")


def _logprobs(chat: Mapping[str, Any]) -> dict[str, Any]:
    rendered: dict[str, Any] = {}
    if chat.get("logprobs") is True:
        rendered["include"] = ["message.output_text.logprobs"]
    elif chat.get("logprobs") not in (None, False):
        raise _refusal(f"logprobs {chat['logprobs']!r} is not a boolean")
    if chat.get("top_logprobs") is not None:
        rendered["top_logprobs"] = chat["top_logprobs"]
    return rendered


# ---------------------------------------------------------------------------------------------
# Reading a Response object (a non-stream body, or what a stream's events built).

_STATUSES = ("completed", "incomplete", "failed", "in_progress", "cancelled", "queued")
# The chat finish_reason of each reason an incomplete response gives.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}
# The usage counts, chat name and Responses name.
_COUNTS = (
    ("prompt_tokens", "input_tokens"),
    ("completion_tokens", "output_tokens"),
    ("total_tokens", "total_tokens"),
)
# The usage details, chat name, Responses name and the count kept.
_DETAILS = (
    ("prompt_tokens_details", "input_tokens_details", "cached_tokens"),
    ("completion_tokens_details", "output_tokens_details", "reasoning_tokens"),
)
# The field that holds the text of each kind of content part.
_TEXT_FIELD = {
    "output_text": "text",
    "refusal": "refusal",
    "reasoning_text": "text",
    "summary_text": "text",
}


@dataclasses.dataclass(slots=True)
class _Read:
    """What a Response's output says, in chat terms."""

    texts: list[str] = dataclasses.field(default_factory=list)
    reasoning: list[str] | None = None
    calls: list[ToolCall] = dataclasses.field(default_factory=list)
    logprobs: list[Any] = dataclasses.field(default_factory=list)
    refused: bool = False


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_output(output: list[Any], problems: list[Problem], wheres: list[str]) -> _Read:
    """The content, reasoning, tool calls and logprobs of a Response's output items."""
    read = _Read()
    for item, where in zip(output, wheres, strict=True):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            _read_message(item, read, problems, where)
        elif kind == "function_call":
            _read_call(item, read, problems, where)
        elif kind == "reasoning":
            _read_reasoning(item, read)
        elif isinstance(item, dict):
            problems.append(
                Problem("output_item_unknown", f"an output item of type {kind!r}", where)
            )
        else:
            problems.append(
                Problem("output_item_malformed", "an output item is not an object", where)
            )
    return read


def _read_message(item: dict[str, Any], read: _Read, problems: list[Problem], where: str) -> None:
    content = item.get("content")
    if not isinstance(content, list):
        problems.append(Problem("output_item_malformed", "a message has no content list", where))
        return
    for position, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        at = f"{where}.content[{position}]"
        if kind == "output_text" and isinstance(part, dict) and isinstance(part.get("text"), str):
            read.texts.append(part["text"])
            read.logprobs += _logprob_entries(part.get("logprobs"), problems, at)
        elif kind == "refusal" and isinstance(part, dict) and isinstance(part.get("refusal"), str):
            # The refusal's text is no answer: it stays in the body, the finish says it.
            read.refused = True
        else:
            problems.append(
                Problem("output_item_malformed", f"a message part of type {kind!r}", at)
            )


def _logprob_entries(raw: Any, problems: list[Problem], where: str) -> list[Any]:
    """Responses token logprobs as chat ``logprobs.content`` entries."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        problems.append(
            Problem("output_item_malformed", "logprobs is not a list of objects", where)
        )
        return []
    return [_logprob_entry(entry) for entry in raw]


def _logprob_entry(entry: dict[str, Any]) -> dict[str, Any]:
    top = entry.get("top_logprobs")
    alternatives = top if isinstance(top, list) else []
    return {
        "token": entry.get("token"),
        "logprob": entry.get("logprob"),
        "bytes": entry.get("bytes"),
        "top_logprobs": [
            {"token": alt.get("token"), "logprob": alt.get("logprob"), "bytes": alt.get("bytes")}
            for alt in alternatives
            if isinstance(alt, dict)
        ],
    }


def _read_call(item: dict[str, Any], read: _Read, problems: list[Problem], where: str) -> None:
    arguments = item.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        problems.append(
            Problem("output_item_malformed", "a function call's arguments is not a string", where)
        )
        # Kept, as JSON, for grading (as the chat reader keeps such arguments).
        arguments = json.dumps(arguments)
    read.calls.append(
        ToolCall(
            index=len(read.calls),
            id=item.get("call_id"),
            type="function",
            name=item.get("name"),
            arguments=arguments,
        )
    )


def _part_texts(parts: Any, kind: str) -> list[str]:
    """The texts of the parts of `kind` in a list of content parts."""
    if not isinstance(parts, list):
        return []
    return [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == kind and isinstance(p.get("text"), str)
    ]


def _read_reasoning(item: dict[str, Any], read: _Read) -> None:
    """A reasoning item's text: its reasoning text when it has some, else its summary."""
    texts = _part_texts(item.get("content"), "reasoning_text") or _part_texts(
        item.get("summary"), "summary_text"
    )
    read.reasoning = (read.reasoning or []) + texts


def _finish_reason(
    response: dict[str, Any], read: _Read, problems: list[Problem], where: str | None
) -> str | None:
    """The chat finish_reason of a Response's status (None, and a problem, when it has none)."""
    status = response.get("status")
    if not isinstance(status, str):
        problems.append(
            Problem("finish_reason_missing", f"the response's status is {status!r}", where)
        )
        return None
    if status == "completed":
        if read.refused:
            return "content_filter"
        return "tool_calls" if read.calls else "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if isinstance(reason, str) and reason in _INCOMPLETE:
            return _INCOMPLETE[reason]
        problems.append(
            Problem("incomplete_reason_unknown", f"incomplete for the reason {reason!r}", where)
        )
        return status
    if status not in _STATUSES:
        problems.append(Problem("status_unknown", f"the status {status!r}", where))
    return status


def _usage(
    raw: Any, problems: list[Problem], where: str | None, *, required: bool
) -> dict[str, Any] | None:
    """A Responses usage object in chat terms (None, and a problem, when it is unreadable)."""
    if raw is None:
        if required:
            problems.append(Problem("usage_missing", "the response has no usage", where))
        return None
    if not isinstance(raw, dict):
        problems.append(Problem("usage_malformed", "usage is not an object", where))
        return None
    bad = [native for _, native in _COUNTS if not _is_count(raw.get(native))]
    if bad:
        problems.append(
            Problem("usage_malformed", f"usage {', '.join(bad)}: not an integer", where)
        )
        return None
    usage: dict[str, Any] = {chat: raw[native] for chat, native in _COUNTS}
    for chat, native, count in _DETAILS:
        details = raw.get(native)
        if details is None:
            continue
        if not isinstance(details, dict) or not _is_count(details.get(count, 0)):
            problems.append(
                Problem("usage_malformed", f"usage {native}.{count}: not an integer", where)
            )
        elif count in details:
            usage[chat] = {count: details[count]}
    return usage


def _choice(
    output: list[Any],
    response: dict[str, Any] | None,
    problems: list[Problem],
    wheres: tuple[list[str], str | None],
) -> Choice:
    """The one chat choice of a Response: `output` read, its finish from `response`'s status.

    `response` None: the stream never said how it ended (no finish_reason).
    """
    read = _read_output(output, problems, wheres[0])
    finish = None if response is None else _finish_reason(response, read, problems, wheres[1])
    return Choice(
        index=0,
        role="assistant",
        content="".join(read.texts) if read.texts else None,
        reasoning=None if read.reasoning is None else "".join(read.reasoning),
        reasoning_field=None if read.reasoning is None else "reasoning_item",
        tool_calls=read.calls,
        finish_reason=finish,
        logprobs=read.logprobs or None,
    )


def _usage_required(response: dict[str, Any]) -> bool:
    """A finished response (completed, incomplete) must count its tokens."""
    return response.get("status") in ("completed", "incomplete")


def parse_answer(status: int, body: bytes, headers: dict[str, str]) -> ChatResult:
    """A non-stream Responses answer (any status) as a ChatResult with ``api="responses"``.

    A rejected request keeps its body, which must be the OpenAI error shape; a 2xx body must
    be a Response object, read into one choice.
    """
    result = parse_body(status, body, headers)
    result.api = API
    if result.problems:
        return result
    if not result.ok:
        result.problems += _error_shape_problems(result.body)
        return result
    response = result.body
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(response, dict) or not isinstance(output, list):
        what = "an object without an output list" if isinstance(response, dict) else "not an object"
        result.problems.append(Problem("not_a_completion", f"the body is {what}", "$.output"))
        return result
    result.id, result.model = response.get("id"), response.get("model")
    wheres = [f"$.output[{position}]" for position in range(len(output))]
    result.choices.append(_choice(output, response, result.problems, (wheres, "$.status")))
    result.usage = _usage(
        response.get("usage"), result.problems, "$.usage", required=_usage_required(response)
    )
    result.usage_source = "body" if result.usage is not None else None
    return result


def _error_shape_problems(body: Any) -> list[Problem]:
    """A problem unless `body` is ``{"error": {"message": str, "type": str, ...}}``."""
    error = body.get("error") if isinstance(body, dict) else None
    if (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and isinstance(error.get("type"), str)
    ):
        return []
    return [
        Problem(
            "error_body_malformed",
            'the error body is not {"error": {"message": ..., "type": ...}}',
            "$.error",
        )
    ]


# ---------------------------------------------------------------------------------------------
# Reading a stream of Responses events.

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@dataclasses.dataclass(frozen=True, slots=True)
class _TextEvents:
    """Where the text of a delta or ``.done`` event goes: an item kind and a part kind.

    ``summary``: the part is indexed by ``summary_index`` (a reasoning summary part), not by
    ``content_index``; ``field``: the ``.done`` event's field with the whole text.
    """

    item: str
    part: str
    summary: bool = False
    field: str = "text"


_OUTPUT_TEXT = _TextEvents("message", "output_text")
_REFUSAL = _TextEvents("message", "refusal", field="refusal")
_REASONING_TEXT = _TextEvents("reasoning", "reasoning_text")
_SUMMARY_TEXT = _TextEvents("reasoning", "summary_text", summary=True)
_DELTAS = {
    "response.output_text.delta": _OUTPUT_TEXT,
    "response.refusal.delta": _REFUSAL,
    "response.reasoning_text.delta": _REASONING_TEXT,
    "response.reasoning_summary_text.delta": _SUMMARY_TEXT,
}
_TEXT_DONES = {
    "response.output_text.done": _OUTPUT_TEXT,
    "response.refusal.done": _REFUSAL,
    "response.reasoning_text.done": _REASONING_TEXT,
    "response.reasoning_summary_text.done": _SUMMARY_TEXT,
}
# The part kinds a content part of each item kind may be.
_PART_KINDS = {"message": ("output_text", "refusal"), "reasoning": ("reasoning_text",)}


@dataclasses.dataclass(slots=True)
class _Part:
    """A content or summary part as its events built it.

    ``explicit``: opened by its own ``.added`` event (reasoning text may stream without one).
    """

    kind: str
    explicit: bool = True
    texts: list[str] = dataclasses.field(default_factory=list)
    logprobs: list[Any] = dataclasses.field(default_factory=list)
    text_done: bool = False
    closed: bool = False

    def as_content(self) -> dict[str, Any]:
        """The part in the shape of a Response's content part."""
        part: dict[str, Any] = {"type": self.kind, _TEXT_FIELD[self.kind]: "".join(self.texts)}
        if self.kind == "output_text":
            part["logprobs"] = self.logprobs
        return part


@dataclasses.dataclass(slots=True)
class _Item:
    """An output item as its events built it; `event` is the number of the one that added it."""

    kind: str
    id: Any
    event: int
    call_id: Any = None
    name: Any = None
    arguments: list[str] = dataclasses.field(default_factory=list)
    arguments_done: bool = False
    parts: dict[int, _Part] = dataclasses.field(default_factory=dict)
    summary: dict[int, _Part] = dataclasses.field(default_factory=dict)
    closed: bool = False

    def as_output(self) -> dict[str, Any]:
        """The item in the shape of a Response's output item."""
        contents = [self.parts[i].as_content() for i in sorted(self.parts)]
        if self.kind == "message":
            return {"type": "message", "id": self.id, "role": "assistant", "content": contents}
        if self.kind == "function_call":
            return {
                "type": "function_call",
                "id": self.id,
                "call_id": self.call_id,
                "name": self.name,
                "arguments": "".join(self.arguments),
            }
        if self.kind == "reasoning":
            summary = [self.summary[i].as_content() for i in sorted(self.summary)]
            return {"type": "reasoning", "id": self.id, "content": contents, "summary": summary}
        return {"type": self.kind, "id": self.id}


def _view(item: Any) -> tuple[Any, ...]:
    """What two readings of one output item must agree on: its kind, ids and texts."""
    if not isinstance(item, dict):
        return (None,)
    kind = item.get("type")
    if kind == "message":
        return (kind, _texts(item.get("content")))
    if kind == "function_call":
        return (kind, item.get("call_id"), item.get("name"), item.get("arguments"))
    if kind == "reasoning":
        return (kind, _texts(item.get("content")), _texts(item.get("summary")))
    return (kind,)


def _texts(parts: Any) -> tuple[tuple[Any, Any], ...]:
    if not isinstance(parts, list):
        return ()
    return tuple(
        (p.get("type"), p.get(_TEXT_FIELD.get(str(p.get("type")), "text")))
        for p in parts
        if isinstance(p, dict)
    )


class _Events:
    """Reads the events of a Responses stream into `result`, recording every violation."""

    def __init__(self, result: ChatResult) -> None:
        self.result = result
        result.api = API
        # When the bytes of the events being added arrived, or None when they are not timed.
        self.now: float | None = None
        self._items: dict[int, _Item] = {}
        self._next_index = 0
        self._seen = 0
        self._previous: str | None = None
        self._sequence: int | None = None
        self._final: dict[str, Any] | None = None
        self._final_event: int | None = None
        self._ended = False
        self._errored = False
        # The required index fields an event left out, each reported once per stream.
        self._missing: set[str] = set()
        self._handlers: dict[str, Callable[[dict[str, Any], int], None]] = {
            "response.created": self._lifecycle,
            "response.in_progress": self._lifecycle,
            "response.output_item.added": self._item_added,
            "response.output_item.done": self._item_done,
            "response.content_part.added": lambda data, n: self._part_added(data, n, False),
            "response.content_part.done": lambda data, n: self._part_done(data, n, False),
            "response.reasoning_summary_part.added": lambda data, n: self._part_added(
                data, n, True
            ),
            "response.reasoning_summary_part.done": lambda data, n: self._part_done(data, n, True),
            "response.function_call_arguments.delta": self._arguments_delta,
            "response.function_call_arguments.done": self._arguments_done,
            "error": self._error,
            **{kind: self._terminal for kind in _TERMINAL},
            **{kind: self._delta for kind in _DELTAS},
            **{kind: self._text_done for kind in _TEXT_DONES},
        }

    def add_event(self, event: SSEEvent) -> None:
        """Take one SSE event of the stream."""
        result = self.result
        number = len(result.chunks)
        if event.data.strip() == "[DONE]":
            self._problem(
                "done_sentinel_sent",
                "data: [DONE] (chat's end of stream): a Responses stream ends with its "
                "terminal event",
                number,
            )
            return
        data = event_data(event, result, lambda code, message: self._problem(code, message, number))
        if data is None:
            return
        kind = data.get("type")
        if not isinstance(kind, str):
            self._problem("event_type_missing", "event data has no string type", number)
            return
        if event.event is not None and event.event != kind:
            self._problem(
                "event_name_mismatch", f"SSE event {event.event!r} carries a {kind!r}", number
            )
        self._check_sequence(data, kind, number)
        if self._ended:
            self._problem("event_after_terminal", f"{kind} after the terminal event", number)
            return
        self._check_order(kind, number)
        handler = self._handlers.get(kind)
        if handler is None:
            self._problem("event_type_unknown", f"an event of type {kind!r}", number)
            return
        handler(data, number)

    def _check_sequence(self, data: dict[str, Any], kind: str, number: int) -> None:
        """Every event but ``error`` has a sequence_number, each greater than the last."""
        value = data.get("sequence_number")
        if value is None and kind == "error":
            return
        if value is None:
            self._index_missing("sequence_number", kind, number)
            return
        if not _is_count(value):
            self._problem(
                "sequence_number_missing", f"{kind} has sequence_number {value!r}", number
            )
            return
        if self._sequence is not None and value <= self._sequence:
            self._problem(
                "sequence_number_not_increasing",
                f"sequence_number {value} after {self._sequence}",
                number,
            )
        self._sequence = value

    def _check_order(self, kind: str, number: int) -> None:
        """``response.created`` first, then ``response.in_progress``, each once."""
        previous, self._previous = self._previous, kind
        self._seen += 1
        if self._seen == 1:
            # A stream that is only an error is that error's finding alone.
            if kind not in ("response.created", "error"):
                self._problem("response_created_missing", f"the first event is {kind}", number)
        elif kind == "response.created":
            self._problem("event_out_of_order", "response.created after the first event", number)
        elif kind == "response.in_progress" and previous != "response.created":
            self._problem(
                "event_out_of_order", "response.in_progress not right after created", number
            )
        elif previous == "response.created" and kind not in ("response.in_progress", "error"):
            self._problem(
                "response_in_progress_missing", f"{kind} right after response.created", number
            )

    def _lifecycle(self, data: dict[str, Any], number: int) -> None:
        """``response.created``, ``response.in_progress``: the response's id and model."""
        response = data.get("response")
        if isinstance(response, dict):
            self.result.id = self.result.id or response.get("id")
            self.result.model = self.result.model or response.get("model")
        else:
            self._problem("event_malformed", f"{data['type']} has no response object", number)

    def _item_added(self, data: dict[str, Any], number: int) -> None:
        index, raw = data.get("output_index"), data.get("item")
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            self._problem("event_malformed", "output_item.added lacks its item", number)
            return
        if index is None:
            # Placed where it comes, so that its content is still read: a client that follows
            # the reference cannot place it (reported once).
            self._index_missing("output_index", data["type"], number)
            index = self._next_index
        if not _is_count(index):
            self._problem("event_malformed", f"output_item.added at output_index {index!r}", number)
            return
        if index in self._items:
            self._problem("output_index_unexpected", f"output item {index} added again", number)
            return
        if index != self._next_index:
            self._problem(
                "output_index_unexpected",
                f"output item {index} added where {self._next_index} was next",
                number,
            )
        self._next_index = max(self._next_index, index + 1)
        self._items[index] = _Item(
            raw["type"], raw.get("id"), number, raw.get("call_id"), raw.get("name")
        )

    def _index_missing(self, field: str, kind: str, number: int) -> None:
        """Report the first event that leaves out the required `field`."""
        if field not in self._missing:
            self._missing.add(field)
            self._problem(
                f"{field}_missing",
                f"{kind} has no {field}, which the reference requires (the first such event "
                f"only; the verifier places events by item id and order, a client may not)",
                number,
            )

    def _open_item(
        self, data: dict[str, Any], number: int, kinds: tuple[str, ...] | None
    ) -> _Item | None:
        """The open item an event is for (of one of `kinds`), or None and a problem.

        Without an ``output_index`` the event's ``item_id`` names it (or, without that too,
        the last item added).
        """
        kind, index = data["type"], data.get("output_index")
        named = data.get("item_id")
        if named is None and isinstance(data.get("item"), dict):
            named = data["item"].get("id")  # output_item.done names its item in the item
        if index is None:
            self._index_missing("output_index", kind, number)
            index = self._index_of(named)
        item = self._items.get(index) if _is_count(index) else None
        if item is None or item.closed:
            self._problem(
                "output_item_not_open", f"{kind} for output item {index!r}, not open", number
            )
            return None
        if kinds is not None and item.kind not in kinds:
            self._problem(
                "event_item_type_mismatch", f"{kind} for output item {index}, a {item.kind}", number
            )
            return None
        item_id = data.get("item_id")
        if isinstance(item_id, str) and isinstance(item.id, str) and item_id != item.id:
            self._problem(
                "item_id_mismatch", f"{kind} names item {item_id!r}, not {item.id!r}", number
            )
        return item

    def _index_of(self, item_id: Any) -> int | None:
        """The index of the item with `item_id`; the last one added when no id names one."""
        found = [i for i, item in self._items.items() if item.id == item_id and item_id]
        if found:
            return found[-1]
        open_items = [i for i, item in self._items.items() if not item.closed]
        return open_items[-1] if open_items and item_id is None else None

    def _item_done(self, data: dict[str, Any], number: int) -> None:
        item = self._open_item(data, number, None)
        if item is None:
            return
        self._close_item(item, number)
        raw = data.get("item")
        if not isinstance(raw, dict):
            self._problem("event_malformed", "output_item.done has no item", number)
            return
        # An id or name first sent with the finished item still names the call.
        item.call_id = item.call_id if item.call_id is not None else raw.get("call_id")
        item.name = item.name if item.name is not None else raw.get("name")
        built, said = _view(item.as_output()), _view(raw)
        if built != said:
            self._problem(
                "output_item_mismatch",
                f"output_item.done says {said!r:.160}, the events built {built!r:.160}",
                number,
            )

    def _close_item(self, item: _Item, number: int) -> None:
        """Close `item`, recording each of its parts (or its arguments) left without a .done."""
        item.closed = True
        if item.kind == "function_call" and not item.arguments_done:
            self._problem(
                "done_event_missing", "a function call ended before arguments.done", number
            )
        for what, parts in (("content part", item.parts), ("summary part", item.summary)):
            for index, part in sorted(parts.items()):
                # A reasoning text streamed without its own part events needs only its .done.
                unfinished = not part.closed if part.explicit else not part.text_done
                if unfinished:
                    self._problem(
                        "done_event_missing", f"{what} {index} ended without its .done", number
                    )
                part.closed = True

    def _part_added(self, data: dict[str, Any], number: int, summary: bool) -> None:
        item = self._open_item(
            data, number, ("reasoning",) if summary else ("message", "reasoning")
        )
        if item is None:
            return
        key = "summary_index" if summary else "content_index"
        index, raw = data.get(key), data.get("part")
        parts = item.summary if summary else item.parts
        if index is None:
            self._index_missing(key, data["type"], number)
            index = len(parts)
        kind = raw.get("type") if isinstance(raw, dict) else None
        allowed = ("summary_text",) if summary else _PART_KINDS[item.kind]
        if not _is_count(index) or kind not in allowed:
            self._problem(
                "event_malformed", f"{data['type']} of part {kind!r} at {key} {index!r}", number
            )
            return
        if index in parts:
            self._problem("part_index_unexpected", f"{key} {index} added again", number)
            return
        if index != len(parts):
            self._problem(
                "part_index_unexpected", f"{key} {index} added where {len(parts)} was next", number
            )
        parts[index] = _Part(str(kind))

    def _open_part(
        self, data: dict[str, Any], number: int, kinds: tuple[str, ...], summary: bool
    ) -> _Part | None:
        """The open part an event is for, or None and a problem.

        A reasoning text's delta or .done may open its part itself (no content_part.added).
        """
        item = self._open_item(data, number, kinds)
        if item is None:
            return None
        key = "summary_index" if summary else "content_index"
        parts, index = (item.summary if summary else item.parts), data.get(key)
        if index is None:
            self._index_missing(key, data["type"], number)
            # The part still open, else the next one (a reasoning text may open its own).
            open_parts = [i for i, p in parts.items() if not p.closed]
            index = open_parts[-1] if open_parts else len(parts)
        part = parts.get(index) if _is_count(index) else None
        opens = data["type"] in ("response.reasoning_text.delta", "response.reasoning_text.done")
        if part is None and opens and _is_count(index):
            part = parts[index] = _Part("reasoning_text", explicit=False)
        if part is None or part.closed:
            self._problem(
                "content_part_not_open", f"{data['type']} for {key} {index!r}, not open", number
            )
            return None
        return part

    def _part_done(self, data: dict[str, Any], number: int, summary: bool) -> None:
        kinds = ("reasoning",) if summary else ("message", "reasoning")
        part = self._open_part(data, number, kinds, summary)
        if part is None:
            return
        part.closed = True
        if not part.text_done:
            self._problem(
                "done_event_missing", f"{data['type']} before its text's .done event", number
            )
        raw = data.get("part")
        text = raw.get(_TEXT_FIELD[part.kind]) if isinstance(raw, dict) else None
        self._same_text(text, part.texts, data["type"], number)

    def _text_part(self, data: dict[str, Any], number: int, spec: _TextEvents) -> _Part | None:
        part = self._open_part(data, number, (spec.item,), spec.summary)
        if part is not None and part.kind != spec.part:
            self._problem(
                "event_item_type_mismatch", f"{data['type']} for a {part.kind} part", number
            )
            return None
        return part

    def _delta(self, data: dict[str, Any], number: int) -> None:
        spec = _DELTAS[data["type"]]
        part = self._text_part(data, number, spec)
        delta = data.get("delta")
        if part is None:
            return
        if not isinstance(delta, str):
            self._problem("event_malformed", f"{data['type']} delta is {delta!r:.40}", number)
            return
        if part.text_done:
            self._problem("delta_after_done", f"{data['type']} after the text's .done", number)
            return
        part.texts.append(delta)
        if spec.part == "output_text" and isinstance(data.get("logprobs"), list):
            part.logprobs += data["logprobs"]
        if delta:
            note_token(self.result, self.now, reasoning=spec.item == "reasoning")

    def _text_done(self, data: dict[str, Any], number: int) -> None:
        spec = _TEXT_DONES[data["type"]]
        part = self._text_part(data, number, spec)
        if part is None:
            return
        if part.text_done:
            self._problem("done_event_repeated", f"{data['type']} sent again", number)
            return
        part.text_done = True
        self._same_text(data.get(spec.field), part.texts, data["type"], number)

    def _same_text(self, text: Any, deltas: list[str], kind: str, number: int) -> None:
        """A ``.done`` event's whole text must be its deltas joined."""
        joined = "".join(deltas)
        if text != joined:
            self._problem(
                "done_text_mismatch",
                f"{kind} says {text!r:.80}, the deltas joined {joined!r:.80}",
                number,
            )

    def _arguments_delta(self, data: dict[str, Any], number: int) -> None:
        item = self._open_item(data, number, ("function_call",))
        delta = data.get("delta")
        if item is None:
            return
        if not isinstance(delta, str):
            self._problem("event_malformed", f"arguments delta is {delta!r:.40}", number)
            return
        if item.arguments_done:
            self._problem("delta_after_done", "arguments delta after arguments.done", number)
            return
        item.arguments.append(delta)
        if delta:
            note_token(self.result, self.now, reasoning=False)

    def _arguments_done(self, data: dict[str, Any], number: int) -> None:
        item = self._open_item(data, number, ("function_call",))
        if item is None:
            return
        if item.arguments_done:
            self._problem("done_event_repeated", "function_call_arguments.done sent again", number)
            return
        item.arguments_done = True
        self._same_text(data.get("arguments"), item.arguments, data["type"], number)
        name = data.get("name")
        if isinstance(name, str) and item.name is not None and name != item.name:
            self._problem(
                "output_item_mismatch", f"arguments.done names {name!r}, not {item.name!r}", number
            )

    def _error(self, data: dict[str, Any], number: int) -> None:
        """An ``error`` event: the stream's answer is that error (no truncated answer)."""
        self._errored = True
        self._problem(
            "stream_error_event", f"the stream sent an error: {json.dumps(data)[:200]}", number
        )
        if self.result.body is None:
            self.result.body = {"error": data}

    def _terminal(self, data: dict[str, Any], number: int) -> None:
        """The terminal event: its response says the status, usage and incomplete details."""
        kind = data["type"]
        self._ended = self.result.done = True
        response = data.get("response")
        if not isinstance(response, dict):
            self._problem("terminal_response_malformed", f"{kind} has no response", number)
            return
        self._final, self._final_event = response, number
        self.result.id = self.result.id or response.get("id")
        self.result.model = self.result.model or response.get("model")
        status = response.get("status")
        if isinstance(status, str) and status != kind.removeprefix("response."):
            self._problem(
                "terminal_status_mismatch", f"{kind} carries a response {status!r}", number
            )
        if kind == "response.failed":
            # A failed stream may break off anywhere: its error is the finding.
            if isinstance(response.get("error"), dict) and self.result.body is None:
                self.result.body = {"error": response["error"]}
            return
        for item in self._items.values():
            if not item.closed:
                self._problem("done_event_missing", f"{kind} before output_item.done", number)
                self._close_item(item, number)
        self._compare_output(response.get("output"), number)

    def _compare_output(self, output: Any, number: int) -> None:
        """The final response's output must be what the events built."""
        if not isinstance(output, list):
            self._problem("terminal_response_malformed", "the response has no output list", number)
            return
        built = [_view(self._items[i].as_output()) for i in sorted(self._items)]
        said = [_view(item) for item in output]
        if len(built) != len(said):
            self._problem(
                "final_output_mismatch",
                f"the final response has {len(said)} output items, the events {len(built)}",
                number,
            )
            return
        for position, (mine, theirs) in enumerate(zip(built, said, strict=True)):
            if mine != theirs:
                self._problem(
                    "final_output_mismatch",
                    f"output[{position}] is {theirs!r:.160}, the events built {mine!r:.160}",
                    number,
                )

    def finish(self, *, unterminated: bool = False) -> ChatResult:
        """Close the stream and return the result: its one choice, as the deltas built it."""
        result = self.result
        if unterminated:
            self._problem(
                "event_unterminated", "the last event has no terminating blank line", None
            )
        if not self._ended and not self._errored:
            self._problem(
                "response_terminal_missing", "the stream ended without a terminal event", None
            )
        if not self._items and self._final is None:
            return result
        items = [self._items[i] for i in sorted(self._items)]
        wheres = [f"event {item.event}" for item in items]
        where = None if self._final_event is None else f"event {self._final_event}"
        output = [item.as_output() for item in items]
        result.choices.append(_choice(output, self._final, result.problems, (wheres, where)))
        if self._final is not None:
            required = _usage_required(self._final)
            result.usage = _usage(
                self._final.get("usage"), result.problems, where, required=required
            )
            result.usage_source = "completed_event" if result.usage is not None else None
        return result

    def _problem(self, code: str, message: str, number: int | None) -> None:
        where = None if number is None else f"event {number}"
        self.result.problems.append(Problem(code, message, where))


def accumulate(
    chunks: Iterable[bytes], result: ChatResult, clock: Callable[[], float] | None = None
) -> ChatResult:
    """A Responses SSE body (bytes as the network split them) into `result` (api="responses").

    With `clock` (seconds since the request was sent), the arrival of every delta event that
    carries text, reasoning or arguments is noted in ``result.token_arrivals``, and the first
    reasoning delta's in ``result.first_reasoning``: the time the bytes that completed the
    event were read, before it was parsed.
    """
    return read_events(chunks, _Events(result), clock)


def output_items(result: ChatResult) -> list[dict[str, Any]]:
    """The answer's output items as a client sends them back in its next input (pure).

    A non-stream Response's ``output``; a stream's, from the Response its terminal event
    carries, else its ``response.output_item.done`` items in order.
    """
    if not result.stream:
        output = result.body.get("output") if isinstance(result.body, dict) else None
        return [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
    done: list[dict[str, Any]] = []
    for event in result.chunks:
        if not isinstance(event, dict):
            continue
        response = event.get("response")
        if event.get("type") in _TERMINAL and isinstance(response, dict):
            output = response.get("output")
            if isinstance(output, list) and output:
                return [i for i in output if isinstance(i, dict)]
        if event.get("type") == "response.output_item.done" and isinstance(event.get("item"), dict):
            done.append(event["item"])
    return done


def read_recorded(response: Any, *, status: int, stream: bool) -> ChatResult:
    """An answer as the transcript recorded it, read again by the same code.

    Args:
        response: the body; or, for a stream, the list of its events' data objects in order
            (a string where the data was not JSON). A stream answered with a plain body
            (an error) was recorded as that body.
        status: the HTTP status.
        stream: whether the request streamed.
    """
    if not stream or not isinstance(response, list):
        result = parse_answer(status, json.dumps(response).encode(), {})
        result.stream = stream
        return result
    events = _Events(ChatResult(stream=True, status=status))
    for data in response:
        events.add_event(SSEEvent(None, data if isinstance(data, str) else json.dumps(data)))
    return events.finish()
