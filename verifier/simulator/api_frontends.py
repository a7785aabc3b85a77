"""The simulated vendor's other APIs: Anthropic Messages and OpenAI Responses, by translation.

A real vendor serves one model behind several APIs and translates between them; so does the
simulated one. A Messages or Responses request becomes the chat-completions request the
simulator already answers (:func:`chat_request`), and the chat answer becomes the other API's
answer: whole (:func:`answer_body`), or chunk by chunk as it streams (:class:`MessagesStream`,
:class:`ResponsesStream`), as a translating gateway does. So validation, faults, defects and
pacing are the same whichever API asked. Pure: nothing here does I/O.

Written from Anthropic's Messages API reference (and its streaming page) and OpenAI's
Responses API reference (and its streaming events page).
"""

from __future__ import annotations

import abc
import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from jsonschema.exceptions import best_match

from .. import resources
from ..reference.dialect import DEFAULT_FIELD
from .validation import Rejection

MESSAGES = "messages"
RESPONSES = "responses"
# The routes that answer, and those that count a request's prompt tokens, by API.
ANSWER_ROUTES = {"/v1/messages": MESSAGES, "/v1/responses": RESPONSES}
COUNT_ROUTES = {"/v1/messages/count_tokens": MESSAGES, "/v1/responses/input_tokens": RESPONSES}
# The name a Messages structured-output request's schema gets (Messages formats have none).
FORMAT_NAME = "output"
# What the Responses API includes to return the output text's logprobs, and reasoning items'
# encrypted content.
LOGPROBS_INCLUDE = "message.output_text.logprobs"
ENCRYPTED_INCLUDE = "reasoning.encrypted_content"
# What this vendor's encrypted content begins with.
SEAL = "sim-sealed:"
# The Messages error type of each HTTP status (others: api_error for 5xx, else
# invalid_request_error).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
# A chat finish_reason as a Messages stop_reason (any other passes through as it is).
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
# The chat fields a message's reasoning comes in.
_REASONING_FIELDS = ("reasoning_content", "reasoning")
# The Response object's request fields, echoed with the API's defaults when not given.
_ECHOED: Mapping[str, Any] = {
    "instructions": None,
    "max_output_tokens": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# The stream's open block while a redacted one gathers its thinking.
_REDACTED = ("redacted_thinking", None)


def api_of(route: str) -> str | None:
    """The API a route of the vendor speaks (``messages``, ``responses``); None for chat."""
    return ANSWER_ROUTES.get(route) or COUNT_ROUTES.get(route)


# -- requests -------------------------------------------------------------------------------


class _Unreadable(Exception):
    """A request the translation cannot read: refused (400 unless said otherwise)."""

    def __init__(
        self, message: str, status: int = 400, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.rejection = Rejection(status, message, code, param)


def native_problem(api: str, body: Any) -> Rejection | None:
    """A Messages or Responses body against its API's request schema, as its reference has it.

    The clean vendor refuses what the reference refuses, with the first complaint's path.
    """
    error = best_match(resources.validator(f"{api}_request").iter_errors(body))
    if error is None:
        return None
    param = str(error.absolute_path[0]) if error.absolute_path else None
    return Rejection(400, f"{error.json_path}: {error.message}", param=param)


def chat_request(
    api: str, body: Any, *, counting: bool = False, quirks: Quirks | None = None
) -> dict[str, Any] | Rejection:
    """The chat-completions request a Messages or Responses body asks for, or why it cannot.

    Args:
        api: ``messages`` or ``responses``.
        body: the request body as sent (parsed JSON).
        counting: the body is for a token-counting route (Messages: no max_tokens needed).
        quirks: how the vendor departs from the reference (it reads thinking blocks by them).

    Returns:
        The chat request, which the vendor then validates as any other; or a
        :class:`~.validation.Rejection` for a body the translation cannot read.
    """
    try:
        if api == MESSAGES:
            return _messages_chat(body, needs_max_tokens=not counting, quirks=quirks or Quirks())
        return _responses_chat(body, quirks or Quirks())
    except _Unreadable as unreadable:
        return unreadable.rejection


def _fields(body: Any, required: Mapping[str, type]) -> dict[str, Any]:
    """`body`, once it is an object whose `required` fields have their types."""
    if not isinstance(body, dict):
        raise _Unreadable("the request body must be a JSON object")
    nouns = {str: "a string", int: "an integer", list: "an array"}
    for name, kind in required.items():
        value = body.get(name)
        if value is None:
            raise _Unreadable(f"{name}: field required", param=name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _Unreadable(f"{name}: must be {nouns[kind]}", param=name)
    return body


def _copied(body: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The fields of `body` that are set, under their chat names (``names``: theirs -> chat's)."""
    return {chat: body[name] for name, chat in names.items() if body.get(name) is not None}


def _streamed(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat stream fields: a stream always ends with usage (both APIs send it)."""
    stream = body.get("stream")
    if stream is None or stream is False:
        return {}
    if stream is not True:
        raise _Unreadable("stream: must be a boolean", param="stream")
    return {"stream": True, "stream_options": {"include_usage": True}}


def _kind(block: Any, where: str) -> str:
    """A content block's or item's type."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _Unreadable(f"{where}: must be an object with a type", param=_field(where))
    kind: str = block["type"]
    return kind


def _string(block: Mapping[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise _Unreadable(f"{where}.{key}: must be a string", param=_field(where))
    return value


def _field(where: str) -> str:
    """The request field a place in it is under (``input[2].content``: input)."""
    return re.split(r"[.\[]", where, maxsplit=1)[0]


def _collapsed(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Chat content: one text part is its text (a client's one-block list means the string)."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# -- Messages requests ----------------------------------------------------------------------


def _messages_chat(body: Any, *, needs_max_tokens: bool, quirks: Quirks) -> dict[str, Any]:
    """The chat request of a Messages body."""
    required: dict[str, type] = {"model": str, "messages": list}
    if needs_max_tokens:
        required["max_tokens"] = int
    _fields(body, required)
    turns = [
        message
        for position, turn in enumerate(body["messages"])
        for message in _turn(turn, f"messages[{position}]", quirks)
    ]
    chat: dict[str, Any] = {
        "model": body["model"],
        "messages": [*_system(body.get("system")), *turns],
    }
    names = ("max_tokens", "temperature", "top_p", "top_k", "thinking")
    chat.update(_copied(body, {name: name for name in names} | {"stop_sequences": "stop"}))
    if body.get("tools") is not None:
        chat["tools"] = _messages_tools(body["tools"])
    chat.update(_messages_tool_choice(body.get("tool_choice")))
    chat.update(_messages_format(body.get("output_config")))
    chat.update(_streamed(body))
    return chat


def _system(system: Any) -> list[dict[str, Any]]:
    """The top-level system prompt as a leading system message (none when not given)."""
    if system is None:
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    if not isinstance(system, list):
        raise _Unreadable("system: must be a string or an array of text blocks", param="system")
    parts = [_text_block(block, f"system[{n}]") for n, block in enumerate(system)]
    return [{"role": "system", "content": _collapsed(parts)}] if parts else []


def _text_block(block: Any, where: str) -> dict[str, Any]:
    if _kind(block, where) != "text":
        raise _Unreadable(f"{where}: must be a text block", param="messages")
    return _text_part(_string(block, "text", where))


def _turn(message: Any, where: str, quirks: Quirks) -> list[dict[str, Any]]:
    """One Messages turn as chat messages (a user turn's tool results become tool messages)."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise _Unreadable(f"{where}.role: must be user or assistant", param="messages")
    content = message.get("content")
    if not isinstance(content, str | list):
        raise _Unreadable(
            f"{where}.content: must be a string or an array of blocks", param="messages"
        )
    if message["role"] == "assistant":
        return [_assistant_turn(content, where, quirks)]
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    results, parts = [], []
    for position, block in enumerate(content):
        spot = f"{where}.content[{position}]"
        kind = _kind(block, spot)
        if kind == "tool_result":
            results.append(_tool_result(block, spot))
        elif kind == "text":
            parts.append(_text_block(block, spot))
        elif kind == "image":
            parts.append(_image_block(block, spot))
        else:
            raise _Unreadable(f"{spot}: a user turn cannot hold a {kind!r} block", param="messages")
    # An empty turn stays one, for the chat validation to refuse.
    user = [{"role": "user", "content": _collapsed(parts)}] if parts or not results else []
    return [*results, *user]


def _assistant_turn(content: str | list[Any], where: str, quirks: Quirks) -> dict[str, Any]:
    """An assistant turn: its text, its thinking (as chat reasoning) and its tool calls.

    A thinking block must carry the signature this vendor gave it, as the reference's API
    checks (an unsigned vendor takes its own unsigned blocks back).
    """
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts, thoughts, calls = [], [], []
    for position, block in enumerate(content):
        spot = f"{where}.content[{position}]"
        kind = _kind(block, spot)
        if kind == "text":
            texts.append(_string(block, "text", spot))
        elif kind == "thinking":
            thought = _string(block, "thinking", spot)
            if quirks.refuses_thinking:
                raise _Unreadable(f"{spot}: thinking blocks cannot be sent back", param="messages")
            if block.get("signature") != quirks.sign(thought):
                raise _Unreadable(
                    f"{spot}.signature: not the signature of this thinking block", param="messages"
                )
            thoughts.append(thought)
        elif kind == "tool_use":
            calls.append(_tool_use_call(block, spot))
        elif kind == "redacted_thinking":
            thoughts += _redacted(_string(block, "data", spot), f"{spot}.data", quirks)
        else:
            raise _Unreadable(
                f"{spot}: an assistant turn cannot hold a {kind!r} block", param="messages"
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if thoughts:
        message[DEFAULT_FIELD] = "".join(thoughts)
    if calls:
        message["tool_calls"] = calls
    return message


def _redacted(data: str, where: str, quirks: Quirks) -> list[str]:
    """The thinking a redacted_thinking block sent back seals, as this vendor takes it up.

    Its data must be this vendor's seal; an empty one (``messages-redacted-thinking-empty``
    gives them) is taken and holds nothing.
    """
    if quirks.refuses_thinking or quirks.refuses_redacted:
        raise _Unreadable(
            f"{where}: redacted_thinking blocks cannot be sent back", param="messages"
        )
    if quirks.redacted_empty and not data:
        return []
    thought = unsealed(data)
    if thought is None:
        raise _Unreadable(
            f"{where}: not the data of this vendor's redacted block", param="messages"
        )
    return [thought]


def _tool_use_call(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A tool_use block as a chat tool call (its input as JSON text)."""
    tool_input = block.get("input")
    if not isinstance(tool_input, dict):
        raise _Unreadable(f"{where}.input: must be an object", param="messages")
    arguments = json.dumps(tool_input, ensure_ascii=False)
    name = _string(block, "name", where)
    return {
        "id": _string(block, "id", where),
        "type": "function",
        "function": _named(name, arguments),
    }


def _named(name: str, arguments: str) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _tool_result(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A tool_result block as a chat tool message (text only: chat tool messages hold no images)."""
    content = block.get("content")
    if content is None:
        content = ""
    elif isinstance(content, list):
        parts = [_text_block(item, f"{where}.content[{n}]") for n, item in enumerate(content)]
        content = _collapsed(parts) if parts else ""
    elif not isinstance(content, str):
        raise _Unreadable(f"{where}.content: must be a string or text blocks", param="messages")
    return {
        "role": "tool",
        "tool_call_id": _string(block, "tool_use_id", where),
        "content": content,
    }


def _image_block(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An image block as a chat image part: base64 data as a data URL, a URL as it is."""
    source = _object(block.get("source"))
    kind = _kind(source, f"{where}.source")
    if kind == "base64":
        media = _string(source, "media_type", f"{where}.source")
        url = f"data:{media};base64,{_string(source, 'data', f'{where}.source')}"
    elif kind == "url":
        url = _string(source, "url", f"{where}.source")
    else:
        raise _Unreadable(f"{where}.source: type {kind!r} is not supported", param="messages")
    return {"type": "image_url", "image_url": {"url": url}}


def _messages_tools(tools: Any) -> list[dict[str, Any]]:
    """Messages tools as chat function tools (server tools are not offered)."""
    if not isinstance(tools, list):
        raise _Unreadable("tools: must be an array", param="tools")
    found = []
    for position, tool in enumerate(tools):
        where = f"tools[{position}]"
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise _Unreadable(f"{where}: tool type {kind!r} is not offered", param="tools")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise _Unreadable(f"{where}.input_schema: must be an object", param="tools")
        function = {"name": tool.get("name"), **_copied(tool, {"description": "description"})}
        function["parameters"] = schema
        found.append(_function_tool(function, strict=tool.get("strict") is True))
    return found


def _function_tool(function: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """A chat function tool; strict only when true (false is chat's default: left out)."""
    return {"type": "function", "function": {**function, **({"strict": True} if strict else {})}}


def _messages_tool_choice(choice: Any) -> dict[str, Any]:
    """The chat tool_choice (and parallel_tool_calls) of a Messages tool_choice."""
    if choice is None:
        return {}
    kinds = {"auto": "auto", "any": "required", "none": "none"}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or (kind not in kinds and kind != "tool"):
        raise _Unreadable(
            "tool_choice: must be {'type': 'auto' | 'any' | 'tool' | 'none'}", param="tool_choice"
        )
    chosen = kinds.get(str(kind)) or {"type": "function", "function": {"name": choice.get("name")}}
    fields: dict[str, Any] = {"tool_choice": chosen}
    if choice.get("disable_parallel_tool_use") is True:
        fields["parallel_tool_calls"] = False
    return fields


def _messages_format(config: Any) -> dict[str, Any]:
    """The chat response_format of a Messages output_config (its json_schema format)."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise _Unreadable("output_config: must be an object", param="output_config")
    output_format = config.get("format")
    if output_format is None:
        return {}
    if (
        not isinstance(output_format, dict)
        or output_format.get("type") != "json_schema"
        or not isinstance(output_format.get("schema"), dict)
    ):
        raise _Unreadable(
            "output_config.format: must be {'type': 'json_schema', 'schema': {...}}",
            param="output_config",
        )
    # Messages structured outputs are always enforced: strict, in chat terms.
    schema = {"name": FORMAT_NAME, "schema": output_format["schema"], "strict": True}
    return {"response_format": {"type": "json_schema", "json_schema": schema}}


# -- Responses requests ---------------------------------------------------------------------


def _responses_chat(body: Any, quirks: Quirks) -> dict[str, Any]:
    """The chat request of a Responses body."""
    _fields(body, {"model": str})
    previous = body.get("previous_response_id")
    if previous is not None:
        # The vendor stores no response (store is accepted and ignored): none can be continued.
        raise _Unreadable(
            f"Previous response with id {previous!r} not found.",
            404,
            "previous_response_not_found",
            "previous_response_id",
        )
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _Unreadable("instructions: must be a string", param="instructions")
    system = [{"role": "system", "content": instructions}] if instructions is not None else []
    chat: dict[str, Any] = {"model": body["model"], "messages": [*system, *_items(body, quirks)]}
    names = {"max_output_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p"}
    chat.update(_copied(body, names | {"parallel_tool_calls": "parallel_tool_calls"}))
    if body.get("tools") is not None:
        chat["tools"] = _responses_tools(body["tools"])
    chat.update(_responses_tool_choice(body.get("tool_choice")))
    chat.update(_text_format(body.get("text")))
    chat.update(_logprobs(body))
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        chat["reasoning_effort"] = reasoning["effort"]
    chat.update(_streamed(body))
    return chat


def _items(body: Mapping[str, Any], quirks: Quirks) -> list[dict[str, Any]]:
    """The chat messages of a Responses input (a string is one user message)."""
    given = body.get("input")
    if given is None:
        return []
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    if not isinstance(given, list):
        raise _Unreadable("input: must be a string or an array of items", param="input")
    messages: list[dict[str, Any]] = []
    for position, item in enumerate(given):
        _add_item(messages, item, f"input[{position}]", quirks)
    return messages


def _add_item(messages: list[dict[str, Any]], item: Any, where: str, quirks: Quirks) -> None:
    """Add one input item to the chat messages.

    An assistant turn comes as several items (reasoning, message, function calls): they join
    the assistant message before them, as the chat message they were rendered from.
    """
    if not isinstance(item, dict):
        raise _Unreadable(f"{where}: must be an object", param="input")
    kind = item.get("type", "message")
    last = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
    if kind == "message" and item.get("role") == "assistant":
        text = _output_text(item.get("content"), where)
        if last is not None and last["content"] is None and "tool_calls" not in last:
            last["content"] = text
        else:
            messages.append({"role": "assistant", "content": text})
    elif kind == "message":
        role = item.get("role")
        if role not in ("user", "system", "developer"):
            raise _Unreadable(f"{where}.role: {role!r} is not a role", param="input")
        messages.append({"role": role, "content": _input_content(item.get("content"), where)})
    elif kind == "function_call":
        call = {
            "id": _string(item, "call_id", where),
            "type": "function",
            "function": _named(_string(item, "name", where), _string(item, "arguments", where)),
        }
        if last is None:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            last.setdefault("tool_calls", []).append(call)
    elif kind == "function_call_output":
        output = _input_content(item.get("output"), where, key="output")
        call_id = _string(item, "call_id", where)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    elif kind == "reasoning":
        if quirks.refuses_thinking:
            raise _Unreadable(f"{where}: reasoning items cannot be sent back", param="input")
        thought = _reasoning_text(item)
        sealed_content = item.get("encrypted_content")
        if isinstance(sealed_content, str) and sealed_content:
            # This vendor's own encrypted content is the reasoning, whatever else the item says.
            opened = unsealed(sealed_content)
            if opened is None:
                raise _Unreadable(
                    f"{where}.encrypted_content: not an encrypted content of this vendor's",
                    param="input",
                )
            thought = opened
        messages.append({"role": "assistant", "content": None, DEFAULT_FIELD: thought})
    else:
        raise _Unreadable(f"{where}: item type {kind!r} is not supported", param="input")


def _input_content(content: Any, where: str, key: str = "content") -> str | list[dict[str, Any]]:
    """A user, system or tool input's content as chat content."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Unreadable(f"{where}.{key}: must be a string or an array of parts", param="input")
    parts = []
    for position, part in enumerate(content):
        spot = f"{where}.{key}[{position}]"
        kind = _kind(part, spot)
        if kind in ("input_text", "output_text"):
            parts.append(_text_part(_string(part, "text", spot)))
        elif kind == "input_image":
            parts.append(_input_image(part, spot))
        else:
            raise _Unreadable(f"{spot}: part type {kind!r} is not supported", param="input")
    return _collapsed(parts)


def _input_image(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An input_image part as a chat image part (by URL: the vendor stores no files)."""
    url = part.get("image_url")
    if not isinstance(url, str):
        raise _Unreadable(
            f"{where}.image_url: must be a string (file_id is not supported)", param="input"
        )
    image = {"url": url, **_copied(part, {"detail": "detail"})}
    return {"type": "image_url", "image_url": image}


def _output_text(content: Any, where: str) -> str:
    """An assistant message item's text (its output_text and refusal parts joined)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Unreadable(f"{where}.content: must be a string or an array of parts", param="input")
    texts = []
    for position, part in enumerate(content):
        spot = f"{where}.content[{position}]"
        kind = _kind(part, spot)
        if kind not in ("output_text", "refusal"):
            raise _Unreadable(f"{spot}: part type {kind!r} is not supported", param="input")
        texts.append(_string(part, "text" if kind == "output_text" else "refusal", spot))
    return "".join(texts)


def _reasoning_text(item: Mapping[str, Any]) -> str:
    """A reasoning item's text: its reasoning_text content, else its summary."""
    for key in ("content", "summary"):
        parts = item.get(key)
        texts = [p["text"] for p in parts or [] if isinstance(p, dict) and "text" in p]
        if texts:
            return "".join(str(text) for text in texts)
    return ""


def _responses_tools(tools: Any) -> list[dict[str, Any]]:
    """Responses function tools as chat function tools (built-in tools are not offered)."""
    if not isinstance(tools, list):
        raise _Unreadable("tools: must be an array", param="tools")
    found = []
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise _Unreadable(
                f"tools[{position}]: tool type {kind!r} is not offered", param="tools"
            )
        function = _copied(
            tool, {"name": "name", "description": "description", "parameters": "parameters"}
        )
        # Responses tools are strict unless they say otherwise.
        found.append(_function_tool(function, strict=tool.get("strict") is not False))
    return found


def _responses_tool_choice(choice: Any) -> dict[str, Any]:
    """The chat tool_choice of a Responses tool_choice."""
    if choice is None:
        return {}
    if choice in ("auto", "required", "none"):
        return {"tool_choice": choice}
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"tool_choice": {"type": "function", "function": {"name": choice.get("name")}}}
    raise _Unreadable(
        "tool_choice: must be auto, required, none or {'type': 'function', 'name': ...}",
        param="tool_choice",
    )


def _text_format(text: Any) -> dict[str, Any]:
    """The chat response_format of a Responses text.format."""
    if text is None:
        return {}
    if not isinstance(text, dict):
        raise _Unreadable("text: must be an object", param="text")
    output_format = text.get("format")
    kind = output_format.get("type") if isinstance(output_format, dict) else None
    if output_format is None or kind == "text":
        return {}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if not isinstance(output_format, dict) or kind != "json_schema":
        raise _Unreadable(
            "text.format: must be of type text, json_object or json_schema", param="text"
        )
    keys = ("name", "description", "schema", "strict")
    schema = {key: output_format[key] for key in keys if key in output_format}
    return {"response_format": {"type": "json_schema", "json_schema": schema}}


def _logprobs_asked(body: Any) -> bool:
    """Whether a Responses request includes the output text's logprobs."""
    return _included(body, LOGPROBS_INCLUDE)


def _included(body: Any, what: str) -> bool:
    include = body.get("include") if isinstance(body, dict) else None
    return isinstance(include, list) and what in include


def _seal(request: Any, quirks: Quirks, text: str) -> str | None:
    """A reasoning item's encrypted content where the request included it, else None."""
    return quirks.seal(text) if _included(request, ENCRYPTED_INCLUDE) else None


def _logprobs(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat logprobs fields of a Responses include and top_logprobs."""
    include = body.get("include")
    if include is not None and not isinstance(include, list):
        raise _Unreadable("include: must be an array", param="include")
    if not _logprobs_asked(body):
        return {}
    return {"logprobs": True, **_copied(body, {"top_logprobs": "top_logprobs"})}


# -- answers --------------------------------------------------------------------------------


def count_body(api: str, tokens: int) -> dict[str, Any]:
    """The answer of a token-counting route."""
    if api == MESSAGES:
        return {"input_tokens": tokens}
    return {"object": "response.input_tokens", "input_tokens": tokens}


def error_answer(api: str | None, status: int, body: Any) -> Any:
    """An OpenAI-shaped error body in the API's own shape (Responses keeps OpenAI's)."""
    if api != MESSAGES:
        return body
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": str(message or "")}}


def answer_body(
    api: str,
    completion: Mapping[str, Any],
    request: Any,
    ended: Ended | None = None,
    *,
    quirks: Quirks | None = None,
) -> dict[str, Any]:
    """A chat.completion object as the API's answer: a Messages message or a Response.

    Args:
        api: ``messages`` or ``responses``.
        completion: the chat answer.
        request: the request as sent (a Response echoes its settings).
        ended: the stop sequence that ended the answer, which a Message names.
        quirks: how the answer departs from the reference (defects).
    """
    if api == MESSAGES:
        return message_object(completion, ended, quirks=quirks)
    return response_object(completion, request, quirks)


class Ended(NamedTuple):
    """The stop sequence that ended an answer, and how a Message says so.

    Args:
        sequence: the sequence, None when none ended it.
        as_end_turn: say ``end_turn`` all the same, naming the sequence
            (``messages-stop-sequence-as-end-turn``, as llama-server 11434 does).
    """

    sequence: str | None = None
    as_end_turn: bool = False

    def stop(self, finish: Any) -> dict[str, Any]:
        """A Message's ``stop_reason`` and ``stop_sequence`` for a chat finish_reason."""
        if finish == "stop" and self.sequence is not None:
            reason = "end_turn" if self.as_end_turn else "stop_sequence"
            return {"stop_reason": reason, "stop_sequence": self.sequence}
        return {"stop_reason": stop_reason(finish), "stop_sequence": None}


def message_object(
    completion: Mapping[str, Any], ended: Ended | None = None, *, quirks: Quirks | None = None
) -> dict[str, Any]:
    """A chat.completion object as a Messages ``message``: thinking, text, tool_use blocks."""
    quirks = quirks or Quirks()
    choice = _first_choice(completion)
    message = _object(choice.get("message"))
    content: list[dict[str, Any]] = []
    reasoning = _reasoning(message)
    if reasoning:
        content.append(quirks.thinking_block(reasoning))
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for call in _calls(message):
        function = _object(call.get("function"))
        content.append(
            {
                "type": "tool_use",
                "id": tool_use_id(call.get("id")),
                "name": function.get("name"),
                "input": _tool_input(function.get("arguments")),
            }
        )
    return {
        "id": f"msg_{_suffix(completion.get('id'))}",
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": content,
        **(ended or Ended()).stop(choice.get("finish_reason")),
        "usage": _messages_usage(completion.get("usage"), quirks),
    }


def response_object(
    completion: Mapping[str, Any], request: Any, quirks: Quirks | None = None
) -> dict[str, Any]:
    """A chat.completion object as a Response: reasoning, message, function_call items."""
    choice = _first_choice(completion)
    message = _object(choice.get("message"))
    chat_id = completion.get("id")
    output: list[dict[str, Any]] = []
    reasoning = _reasoning(message)
    if reasoning:
        seal = _seal(request, quirks or Quirks(), reasoning)
        output.append(_reasoning_item(_item_id("rs", chat_id, len(output)), reasoning, seal=seal))
    text = message.get("content")
    if isinstance(text, str) and text:
        logprobs = choice.get("logprobs")
        entries = logprobs.get("content") if isinstance(logprobs, dict) else None
        kept = (entries or []) if _logprobs_asked(request) else None
        output.append(_message_item(_item_id("msg", chat_id, len(output)), text, kept))
    for call in _calls(message):
        function = _object(call.get("function"))
        output.append(_call_item(call.get("id"), function.get("name"), function.get("arguments")))
    return _response(
        {"id": chat_id, "created": completion.get("created"), "model": completion.get("model")},
        request,
        choice.get("finish_reason"),
        output,
        _responses_usage(completion.get("usage")),
    )


def sealed(reasoning: str) -> str:
    """A reasoning item's encrypted content: opaque to clients, the reasoning to this vendor."""
    return SEAL + base64.b64encode(reasoning.encode("utf-8")).decode("ascii")


def unsealed(content: str) -> str | None:
    """The reasoning a reasoning item's encrypted content holds, None when not this vendor's."""
    if not content.startswith(SEAL):
        return None
    try:
        return base64.b64decode(content.removeprefix(SEAL), validate=True).decode("utf-8")
    except ValueError:
        return None


def signature(thinking: str) -> str:
    """The signature of a thinking block: opaque to clients, the same for the same thinking."""
    return base64.b64encode(hashlib.sha256(thinking.encode("utf-8")).digest()).decode("ascii")


class Quirks(NamedTuple):
    """How the simulated vendor's other APIs depart from their references (its defects).

    Args:
        double_counted: the usage says every prompt token but the last was read from the
            cache, and counts them in input_tokens as well (``messages-cache-double-counted``).
        unsigned: thinking blocks come with an empty signature (``messages-thinking-unsigned``,
            as llama-server 11434's streams do).
        refuses_thinking: a thinking block or reasoning item sent back is refused
            (``messages-thinking-history-rejected``, ``responses-reasoning-items-rejected``).
        creation_omitted: the usage leaves out cache_creation_input_tokens
            (``messages-cache-creation-omitted``, as llama-server 11434's does).
        unsealed: reasoning items asked for their encrypted content come with an empty one
            (``responses-encrypted-content-empty``, as llama-server 11434's do).
        redacts: every thinking block comes as a redacted_thinking block, its thinking sealed
            in its data, as the reference gives a block its safety systems flag (the vendor's
            ``--redact-thinking``; the two defects below imply it).
        redacted_empty: a redacted block's data is empty (``messages-redacted-thinking-empty``).
        refuses_redacted: a redacted block sent back is refused
            (``messages-redacted-thinking-rejected``).
    """

    double_counted: bool = False
    unsigned: bool = False
    refuses_thinking: bool = False
    creation_omitted: bool = False
    unsealed: bool = False
    redacts: bool = False
    redacted_empty: bool = False
    refuses_redacted: bool = False

    def thinking_block(self, thinking: str) -> dict[str, Any]:
        """The content block an answer's whole thinking comes in."""
        if self.redacts:
            return {"type": "redacted_thinking", "data": self.redact(thinking)}
        return {"type": "thinking", "thinking": thinking, "signature": self.sign(thinking)}

    def redact(self, thinking: str) -> str:
        """A redacted block's data: opaque to clients, the thinking to this vendor."""
        return "" if self.redacted_empty else sealed(thinking)

    def sign(self, thinking: str) -> str:
        """A thinking block's signature, as these quirks give it."""
        return "" if self.unsigned else signature(thinking)

    def seal(self, reasoning: str) -> str:
        """A reasoning item's encrypted content, as these quirks give it."""
        return "" if self.unsealed else sealed(reasoning)


def stop_reason(finish: Any) -> str | None:
    """A chat finish_reason as a Messages stop_reason (an unknown one passes through)."""
    if not isinstance(finish, str):
        return None
    return STOP_REASONS.get(finish, finish)


def tool_use_id(call_id: Any) -> str:
    """The Messages id of a chat tool call (``toolu_`` and the call's id, in the id alphabet)."""
    return f"toolu_{_safe(call_id)}"


def _safe(text: Any) -> str:
    """`text` in the letters, digits, ``_`` and ``-`` that ids are made of."""
    return _UNSAFE.sub("_", "" if text is None else str(text))


def _suffix(chat_id: Any) -> str:
    """What makes an answer's id its own, for the other APIs' ids (``chatcmpl-sim-7``: sim-7)."""
    return _safe(str(chat_id or "").removeprefix("chatcmpl-"))


def _item_id(prefix: str, chat_id: Any, index: int) -> str:
    """The id of the Response output item at `index`."""
    return f"{prefix}_{_suffix(chat_id)}_{index}"


def _object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else {} (a broken answer reads as an empty one)."""
    return value if isinstance(value, dict) else {}


def _first_choice(completion: Mapping[str, Any]) -> dict[str, Any]:
    """The first choice of a chat answer (the other APIs have one), or {} when there is none."""
    choices = completion.get("choices")
    return _object(choices[0] if isinstance(choices, list) and choices else None)


def _reasoning(message: Mapping[str, Any]) -> str | None:
    """A chat message's or delta's reasoning, in whichever field it came."""
    return next(
        (message[k] for k in _REASONING_FIELDS if isinstance(message.get(k), str)),
        None,
    )


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def _tool_input(arguments: Any) -> Any:
    """A tool_use input: the arguments parsed; text that is no JSON object goes as it is.

    A call the model broke stays visibly broken, as through a gateway that passes it on.
    """
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return arguments
    return value if isinstance(value, dict) else arguments


def _cached(usage: dict[str, Any]) -> int:
    """The chat usage's cached prompt tokens (0 when it says none)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) else 0


def _messages_usage(usage: Any, quirks: Quirks) -> dict[str, Any] | None:
    """Chat usage as Messages usage, as `quirks` say.

    The prompt's tokens read from the cache are ``cache_read_input_tokens``, and
    ``input_tokens`` the rest (Messages counts them apart). Double counted, the usage says every
    prompt token but the last was read from the cache, as a prefix cache that held the prompt
    would, and counts them in input_tokens all the same.
    """
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens")
    if quirks.double_counted:
        read = prompt - 1 if isinstance(prompt, int) and prompt > 1 else 0
        fresh = prompt
    else:
        read = _cached(usage)
        fresh = prompt - read if isinstance(prompt, int) else prompt
    native = {
        "input_tokens": fresh,
        "output_tokens": usage.get("completion_tokens"),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": read,
    }
    if quirks.creation_omitted:
        del native["cache_creation_input_tokens"]
    return native


def _responses_usage(usage: Any) -> dict[str, Any] | None:
    """Chat usage as Responses usage."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens", 0) if isinstance(details, dict) else 0
    return {
        "input_tokens": usage.get("prompt_tokens"),
        "input_tokens_details": {"cached_tokens": _cached(usage)},
        "output_tokens": usage.get("completion_tokens"),
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.get("total_tokens"),
    }


def _status(finish: Any) -> tuple[str, dict[str, Any] | None]:
    """A Response's status and incomplete_details for a chat finish_reason."""
    if finish == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if finish == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _response(
    head: Mapping[str, Any],
    request: Any,
    finish: Any,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    *,
    done: bool = True,
) -> dict[str, Any]:
    """A Response object: `head` holds the chat answer's id, created and model.

    Not `done`: the Response as it begins (in progress, no output, no usage).
    """
    status, details = _status(finish) if done else ("in_progress", None)
    asked = _object(request)
    echoed = {
        key: asked[key] if asked.get(key) is not None else default
        for key, default in _ECHOED.items()
    }
    return {
        "id": f"resp_{_suffix(head.get('id'))}",
        "object": "response",
        "created_at": head.get("created"),
        "status": status,
        "error": None,
        "incomplete_details": details,
        "model": head.get("model"),
        "output": output,
        "usage": usage,
        **echoed,
    }


def _output_text_part(text: str, logprobs: list[Any] | None) -> dict[str, Any]:
    """An output_text part (with its tokens' logprobs when they were asked for)."""
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    if logprobs is not None:
        part["logprobs"] = logprobs
    return part


def _message_item(
    item_id: str, text: str, logprobs: list[Any] | None, *, done: bool = True
) -> dict[str, Any]:
    """A message output item; not `done`: as it begins, without content."""
    content = [_output_text_part(text, logprobs)] if done else []
    status = "completed" if done else "in_progress"
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _reasoning_item(
    item_id: str, text: str, *, done: bool = True, seal: str | None = None
) -> dict[str, Any]:
    """A reasoning output item: the raw reasoning as content, no summary.

    Its encrypted content (`seal`) where the request included it.
    """
    content = [{"type": "reasoning_text", "text": text}] if done else []
    item = {"id": item_id, "type": "reasoning", "summary": [], "content": content}
    return item if seal is None else {**item, "encrypted_content": seal}


def _call_item(call_id: Any, name: Any, arguments: Any, *, done: bool = True) -> dict[str, Any]:
    """A function_call output item; not `done`: as it begins, without arguments."""
    return {
        "id": f"fc_{_safe(call_id)}",
        "type": "function_call",
        "status": "completed" if done else "in_progress",
        "call_id": call_id,
        "name": name,
        "arguments": arguments if done else "",
    }


# -- streams --------------------------------------------------------------------------------


class StreamTranslator(Protocol):
    """Turns a chat stream's events, one at a time, into another API's events."""

    def feed(self, event: bytes) -> bytes:
        """What to send for one chat SSE event (b"": nothing)."""

    def close(self) -> bytes:
        """What to send once the chat stream has ended."""


class Verbatim:
    """The chat stream as it is (the chat route's translator)."""

    def feed(self, event: bytes) -> bytes:
        """The event unchanged."""
        return event

    def close(self) -> bytes:
        """Nothing more."""
        return b""


def stream_translator(
    api: str | None,
    request: Any,
    input_tokens: int,
    *,
    overlap: bool = False,
    unindexed: bool = False,
    ended: Ended | None = None,
    quirks: Quirks | None = None,
) -> StreamTranslator:
    """The translator of a chat stream into the API's stream.

    Args:
        api: ``messages``, ``responses``, or None for chat (the stream unchanged).
        request: the request as sent (a Response echoes its settings).
        input_tokens: the prompt's tokens (a Messages stream says them in its first event).
        overlap: Messages blocks that overlap (``messages-blocks-overlap``).
        unindexed: Responses events without their index fields (``responses-stream-unindexed``).
        ended: the stop sequence that ended the answer, which a Messages stream names.
        quirks: how the stream departs from the reference (defects).
    """
    if api == MESSAGES:
        return MessagesStream(input_tokens, overlap=overlap, ended=ended, quirks=quirks)
    if api == RESPONSES:
        return ResponsesStream(request, unindexed=unindexed, quirks=quirks)
    return Verbatim()


def _chunk_of(event: bytes) -> dict[str, Any] | None:
    """The chunk a chat SSE event of this vendor carries (None for [DONE] or a broken one)."""
    data = event.removeprefix(b"data: ").strip()
    if not data.startswith(b"{"):
        return None
    try:
        chunk = json.loads(data)
    except ValueError:
        return None
    return chunk if isinstance(chunk, dict) else None


def cut_said_ended(answer: dict[str, Any]) -> dict[str, Any]:
    """A chat answer (or chunk) cut by its limit said to have ended on its own."""
    choices = answer.get("choices") or []
    return {
        **answer,
        "choices": [
            {**c, "finish_reason": "stop"} if c.get("finish_reason") == "length" else c
            for c in choices
        ],
    }


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escaped_twice(text: str) -> str:
    # In JSON text a non-ASCII character can only be inside a string: there, "\\u00e9" is
    # the six characters \u00e9, not the character.
    return _NON_ASCII.sub(lambda m: f"\\\\u{ord(m.group()):04x}", text)


def arguments_escaped(answer: dict[str, Any]) -> dict[str, Any]:
    """A chat answer (or chunk) whose calls' arguments are escaped twice.

    ``translated-arguments-escaped``: the translation then gives those arguments to the other
    API as it got them, as a gateway that escapes a string already escaped does.
    """
    choices = []
    for choice in answer.get("choices") or []:
        part = choice.get("message") or choice.get("delta") or {}
        calls = part.get("tool_calls")
        if not calls:
            choices.append(choice)
            continue
        escaped = [
            {**call, "function": {**fn, "arguments": _escaped_twice(fn["arguments"])}}
            if isinstance(fn := call.get("function"), dict) and isinstance(fn.get("arguments"), str)
            else call
            for call in calls
        ]
        key = "message" if "message" in choice else "delta"
        choices.append({**choice, key: {**part, "tool_calls": escaped}})
    return {**answer, "choices": choices}


def arguments_escaped_event(event: bytes) -> bytes:
    """A chat SSE event with its calls' arguments escaped twice (see :func:`arguments_escaped`)."""
    return _rewritten(event, arguments_escaped)


def cut_said_completed(event: bytes) -> bytes:
    """A chat SSE event whose answer was cut said to have ended (``responses-cut-as-completed``).

    The translation then gives the Response the status ``completed``, as a gateway that maps
    every finished chat answer to it does.
    """
    return _rewritten(event, cut_said_ended)


def _rewritten(event: bytes, change: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    """A chat SSE event whose chunk `change` rewrites; the bytes as they were if it does not."""
    chunk = _chunk_of(event)
    changed = chunk if chunk is None else change(chunk)
    if changed == chunk:
        return event
    return b"data: " + json.dumps(changed).encode("utf-8") + b"\n\n"


class _Gateway(abc.ABC):
    """What both translators share: reading chat chunks (choice 0), writing typed SSE events.

    Subclasses say what the pieces of the answer become: its start, a piece of reasoning, of
    content, of a tool call, the end of the open block or item, and the end of the answer.
    """

    def __init__(self) -> None:
        self._out: list[bytes] = []
        self.head: dict[str, Any] | None = None
        self.finish: Any = None
        self.usage: Any = None

    def feed(self, event: bytes) -> bytes:
        """The API's events for one chat SSE event."""
        chunk = _chunk_of(event)
        if chunk is not None:
            self._take(chunk)
        return self._flush()

    def close(self) -> bytes:
        """The API's closing events, once the chat stream has ended (none if it never began)."""
        if self.head is not None:
            self._end()
        return self._flush()

    def _take(self, chunk: dict[str, Any]) -> None:
        if self.head is None:
            self.head = {k: chunk.get(k) for k in ("id", "created", "model")}
            self._begin()
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = _object(choice.get("delta"))
        reasoning = _reasoning(delta)
        if reasoning:
            self._reasoning(reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            logprobs = choice.get("logprobs")
            entries = logprobs.get("content") if isinstance(logprobs, dict) else None
            self._text(content, entries if isinstance(entries, list) else [])
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                self._call(call)
        if choice.get("finish_reason") is not None:
            self._close()
            self.finish = choice["finish_reason"]

    def _emit(self, kind: str, fields: dict[str, Any]) -> None:
        data = json.dumps({"type": kind, **fields})
        self._out.append(f"event: {kind}\ndata: {data}\n\n".encode())

    def _flush(self) -> bytes:
        out, self._out = b"".join(self._out), []
        return out

    @abc.abstractmethod
    def _begin(self) -> None:
        """The events that open the answer."""

    @abc.abstractmethod
    def _reasoning(self, text: str) -> None:
        """A piece of reasoning."""

    @abc.abstractmethod
    def _text(self, text: str, entries: list[Any]) -> None:
        """A piece of content, with its tokens' logprobs entries."""

    @abc.abstractmethod
    def _call(self, call: dict[str, Any]) -> None:
        """A tool call's delta: its head (id, name) or a piece of its arguments."""

    @abc.abstractmethod
    def _close(self) -> None:
        """End the open block or item, if any."""

    @abc.abstractmethod
    def _end(self) -> None:
        """The events that end the answer."""


class MessagesStream(_Gateway):
    """A chat stream as a Messages stream: message_start, content blocks, message_delta, stop.

    Args:
        input_tokens: the prompt's tokens, which message_start's usage says.
        overlap: start each block before stopping the one before it, whose stop comes at
            the end (a defect).
        ended: the stop sequence that ended the answer, named in message_delta.
        quirks: how the stream departs from the reference (defects).
    """

    def __init__(
        self,
        input_tokens: int,
        *,
        overlap: bool = False,
        ended: Ended | None = None,
        quirks: Quirks | None = None,
    ) -> None:
        super().__init__()
        self.input_tokens = input_tokens
        self.overlap = overlap
        self.ended = ended or Ended()
        self.quirks = quirks or Quirks()
        self.index = -1
        # The open block: its type and, for a tool_use block, its call's index.
        self.block: tuple[str, Any] | None = None
        self.thinking: list[str] = []
        # With overlap: the blocks begun and not yet stopped, stopped at the end.
        self.unstopped: list[int] = []

    def _begin(self) -> None:
        assert self.head is not None
        usage = _messages_usage(
            {"prompt_tokens": self.input_tokens, "completion_tokens": 0},
            self.quirks,
        )
        message = {
            "id": f"msg_{_suffix(self.head['id'])}",
            "type": "message",
            "role": "assistant",
            "model": self.head["model"],
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        self._emit("message_start", {"message": message})

    def _open(self, key: tuple[str, Any], block: dict[str, Any]) -> None:
        """Start the block `key` names, unless it is the open one."""
        if self.block == key:
            return
        if self.overlap and self.block not in (None, _REDACTED):
            self.unstopped.append(self.index)
            self.block = None
        self._close()
        self.index += 1
        self.block = key
        self._emit("content_block_start", {"index": self.index, "content_block": block})

    def _delta(self, delta: dict[str, Any]) -> None:
        self._emit("content_block_delta", {"index": self.index, "delta": delta})

    def _reasoning(self, text: str) -> None:
        if self.quirks.redacts:
            # A redacted block comes whole, its data sealing all its thinking: it begins
            # when it ends (_close).
            if self.block != _REDACTED:
                self._close()
                self.index += 1
                self.block = _REDACTED
            self.thinking.append(text)
            return
        self._open(("thinking", None), {"type": "thinking", "thinking": "", "signature": ""})
        self.thinking.append(text)
        self._delta({"type": "thinking_delta", "thinking": text})

    def _text(self, text: str, entries: list[Any]) -> None:
        self._open(("text", None), {"type": "text", "text": ""})
        self._delta({"type": "text_delta", "text": text})

    def _call(self, call: dict[str, Any]) -> None:
        function = _object(call.get("function"))
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": tool_use_id(call.get("id")),
            "name": function.get("name"),
            "input": {},
        }
        self._open(("tool_use", call.get("index")), block)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self._delta({"type": "input_json_delta", "partial_json": arguments})

    def _close(self) -> None:
        """End the open block (a thinking block with its signature)."""
        if self.block is None:
            return
        if self.block == _REDACTED:
            data = self.quirks.redact("".join(self.thinking))
            block = {"type": "redacted_thinking", "data": data}
            self._emit("content_block_start", {"index": self.index, "content_block": block})
            self.thinking = []
        elif self.block[0] == "thinking":
            signed = self.quirks.sign("".join(self.thinking))
            self._delta({"type": "signature_delta", "signature": signed})
            self.thinking = []
        self._emit("content_block_stop", {"index": self.index})
        self.block = None

    def _end(self) -> None:
        self._close()
        for index in self.unstopped:
            self._emit("content_block_stop", {"index": index})
        fields: dict[str, Any] = {"delta": self.ended.stop(self.finish)}
        usage = _messages_usage(self.usage, self.quirks)
        if usage is not None:
            fields["usage"] = usage
        self._emit("message_delta", fields)
        self._emit("message_stop", {})


# The fields a stream without its indices leaves out of every event.
UNINDEXED = frozenset({"output_index", "content_index", "summary_index"})


class ResponsesStream(_Gateway):
    """A chat stream as a Responses stream: created, in_progress, items, then the final Response.

    Args:
        request: the Responses request as sent (its settings are echoed; its include says
            whether the text's logprobs go out).
    """

    def __init__(
        self, request: Any, *, unindexed: bool = False, quirks: Quirks | None = None
    ) -> None:
        super().__init__()
        self.request = request
        self.unindexed = unindexed
        self.quirks = quirks or Quirks()
        self.logprobs = _logprobs_asked(request)
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        # The open item: its kind and, for a function call, its call's index; and the item.
        self.key: tuple[str, Any] | None = None
        self.item: dict[str, Any] = {}
        self.pieces: list[str] = []
        self.entries: list[Any] = []

    def _emit(self, kind: str, fields: dict[str, Any]) -> None:
        if self.unindexed:
            super()._emit(kind, {k: v for k, v in fields.items() if k not in UNINDEXED})
            return
        super()._emit(kind, {**fields, "sequence_number": self.sequence})
        self.sequence += 1

    def _begin(self) -> None:
        assert self.head is not None
        begun = _response(self.head, self.request, None, [], None, done=False)
        self._emit("response.created", {"response": begun})
        self._emit("response.in_progress", {"response": begun})

    def _where(self) -> dict[str, Any]:
        """The open item's id and output index, which its events carry."""
        return {"item_id": self.item["id"], "output_index": len(self.output)}

    def _open(self, key: tuple[str, Any], begun: Callable[[int], dict[str, Any]]) -> None:
        """Add the item `key` names, unless it is the open one.

        `begun` makes the item as it begins, given its output index.
        """
        if self.key == key:
            return
        self._close()
        item = begun(len(self.output))
        self.key, self.item, self.pieces, self.entries = key, item, [], []
        self._emit("response.output_item.added", {"output_index": len(self.output), "item": item})
        if item["type"] == "message":
            part = _output_text_part("", [] if self.logprobs else None)
            self._emit(
                "response.content_part.added", {**self._where(), "content_index": 0, "part": part}
            )

    def _reasoning(self, text: str) -> None:
        assert self.head is not None
        chat_id = self.head["id"]
        self._open(
            ("reasoning", None),
            lambda index: _reasoning_item(_item_id("rs", chat_id, index), "", done=False),
        )
        self.pieces.append(text)
        self._emit(
            "response.reasoning_text.delta", {**self._where(), "content_index": 0, "delta": text}
        )

    def _text(self, text: str, entries: list[Any]) -> None:
        assert self.head is not None
        chat_id = self.head["id"]
        self._open(
            ("message", None),
            lambda index: _message_item(_item_id("msg", chat_id, index), "", None, done=False),
        )
        self.pieces.append(text)
        self.entries += entries
        fields = {**self._where(), "content_index": 0, "delta": text}
        self._emit("response.output_text.delta", fields | self._logprobs(entries))

    def _call(self, call: dict[str, Any]) -> None:
        function = _object(call.get("function"))
        begun = _call_item(call.get("id"), function.get("name"), None, done=False)
        self._open(("function_call", call.get("index")), lambda _: begun)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self.pieces.append(arguments)
            self._emit(
                "response.function_call_arguments.delta", {**self._where(), "delta": arguments}
            )

    def _logprobs(self, entries: list[Any]) -> dict[str, Any]:
        return {"logprobs": entries} if self.logprobs else {}

    def _close(self) -> None:
        """Finish the open item: its closing events, then output_item.done."""
        if self.key is None:
            return
        item, text, where = self.item, "".join(self.pieces), self._where()
        if item["type"] == "message":
            entries = self.entries if self.logprobs else None
            done = _message_item(item["id"], text, entries)
            fields = {**where, "content_index": 0, "text": text}
            self._emit("response.output_text.done", fields | self._logprobs(self.entries))
            part = done["content"][0]
            self._emit("response.content_part.done", {**where, "content_index": 0, "part": part})
        elif item["type"] == "reasoning":
            done = _reasoning_item(item["id"], text, seal=_seal(self.request, self.quirks, text))
            fields = {**where, "content_index": 0, "text": text}
            self._emit("response.reasoning_text.done", fields)
        else:
            done = _call_item(item["call_id"], item["name"], text)
            fields = {**where, "name": item["name"], "arguments": text}
            self._emit("response.function_call_arguments.done", fields)
        self._emit("response.output_item.done", {"output_index": len(self.output), "item": done})
        self.output.append(done)
        self.key = None

    def _end(self) -> None:
        self._close()
        assert self.head is not None
        usage = _responses_usage(self.usage)
        final = _response(self.head, self.request, self.finish, self.output, usage)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        self._emit(kind, {"response": final})
