"""The simulated vendor's tiny deterministic "model".

It is not a language model: it answers from rules, so that every answer a
correct endpoint must give is known. A plain prompt gets a fixed greeting that
echoes the start of the last user message. A ``response_format`` request gets
the JSON the prompt spells out (its "natural answer"), bent into the schema by
the simulated grammar engine (:func:`~verifier.simulator.conform.conform`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from typing import Any, Protocol

from jsonschema import Draft202012Validator

from ..cases.rotation import Rotation
from ..jsontext import first_json
from ..reference.dialect import Dialect
from .conform import MISSING, conform
from .defects import (
    COMPLETION_TOKENS_INFLATED,
    CONTENT_CUT,
    FOLLOWUP_CALLS_UNKNOWN_TOOL,
    GENERATION_DEFAULTS_IGNORED,
    IGNORE_KEYWORD,
    IGNORE_RESPONSE_FORMAT,
    JSON_IN_MARKDOWN_FENCE,
    MAX_TOKENS_NOT_HONOURED,
    PARALLEL_TOOL_CALLS_IGNORED,
    PUBLIC_PROMPTS_ONLY,
    REASONING_DROPPED,
    RESPONSE_FORMAT_IGNORED_WHEN_THINKING,
    SEED_IGNORED,
    STOP_NOT_HONOURED,
    STRICT_ACCEPTED_NOT_ENFORCED,
    TOOL_ARGS_NOT_JSON,
    TOOL_ARGS_VIOLATE_SCHEMA,
    TOOL_CALL_ID_FORMAT,
    TOOL_CALLS_DROPPED,
    TOOL_CHOICE_NAMED_IGNORED,
    TOOL_CHOICE_NONE_IGNORED,
    TOOL_CHOICE_REQUIRED_IGNORED,
    TOOL_DUPLICATE_CALL_IDS,
    TOOL_FINISH_REASON_STOP,
    TOOL_MARKERS_IN_CONTENT,
    TOOL_NONDETERMINISTIC_ARGS,
    TOOL_STREAM_ARGS_DIFFER,
    TOOL_UNKNOWN_NAME,
    TRUNCATED_JSON_FINISH_STOP,
    Defects,
)
from .oracle import natural_calls, planned_calls
from .recall import recalled
from .sampling import pick
from .sight import Eyes, answer
from .thinking import call_markup, split, thinks

MODEL_ID = "simulated-tiny"
GREETING = "Hello! I am a tiny deterministic model."

# Toy tokens: a word or a digit or one other character, each with its leading
# space, or a run of whitespace. Joining the tokens gives the text back.
_TOKEN = re.compile(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\s+")


def tokenize(text: str) -> list[str]:
    """The toy tokens of `text` ("".join of them is `text`)."""
    return _TOKEN.findall(text)


def message_text(message: dict[str, Any]) -> str:
    """The text of a message's content (string, or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def count_prompt_tokens(request: dict[str, Any]) -> int:
    """Prompt tokens under the toy template: 2 markers a message, the text, 1 to start the reply."""
    total = 1
    for message in request.get("messages", []):
        total += 2 + len(tokenize(message_text(message)))
    if request.get("tools"):
        total += len(tokenize(json.dumps(request["tools"])))
    return total


def natural_json(request: dict[str, Any]) -> Any:
    """The JSON value the last user message spells out, or MISSING when it has none."""
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    if not users:
        return MISSING
    found = first_json(message_text(users[-1]))
    return MISSING if found is None else found[2]


@dataclasses.dataclass(slots=True)
class ToolCall:
    """One call as the server will send it: arguments already a JSON string."""

    id: str
    name: str
    arguments: str


@dataclasses.dataclass(slots=True)
class Reply:
    """What the model says: content split into tokens, tool calls, and why it stopped."""

    tokens: list[str]
    finish_reason: str
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    # Only for the defect that makes streamed arguments differ from non-stream ones.
    stream_tool_calls: list[ToolCall] | None = None
    # The completion tokens the answer costs; None: count the toy tokens.
    counted: int | None = None
    reasoning: str | None = None
    # The message field the reasoning goes out in.
    reasoning_field: str = "reasoning_content"
    # The stop sequence that ended the text, when one did (Messages names it).
    stop_sequence: str | None = None
    # The reasoning's tokens (in usage.completion_tokens_details), when there is reasoning.
    reasoning_tokens: int | None = None

    @property
    def content(self) -> str | None:
        """The tokens joined (None for a reply that is only tool calls or only reasoning)."""
        if not self.tokens and (self.tool_calls or self.reasoning):
            return None
        return "".join(self.tokens)

    @property
    def completion_tokens(self) -> int:
        """The tokens counted for the answer (toy tokens of content and calls by default)."""
        if self.counted is not None:
            return self.counted
        calls = sum(len(tokenize(c.name + c.arguments)) for c in self.tool_calls)
        return len(self.tokens) + calls


class ToyPath:
    """Counting without a profile: the toy template and toy tokens, images as 32-pixel tiles."""

    def __init__(self, defects: Defects) -> None:
        self.defects = defects
        self.eyes = Eyes(defects)
        self.named_call_ids = False
        self.dialect: Dialect | None = None
        self.generation_defaults: Mapping[str, float] = {}

    def prompt_tokens(self, request: dict[str, Any]) -> int:
        """Prompt tokens under the toy template, and the images'."""
        return count_prompt_tokens(request) + self.eyes.prompt_tokens(request)

    def completion(self, text: str, limit: int | None) -> tuple[str, int, bool]:
        """The answer cut to `limit` toy tokens: (text, completion tokens, cut)."""
        tokens = tokenize(text)
        if limit is None or len(tokens) <= limit:
            return text, len(tokens), False
        keep = limit + 1 if self.defects.has(MAX_TOKENS_NOT_HONOURED) else limit
        return "".join(tokens[:keep]), keep, True

    def seen(self, request: dict[str, Any]) -> str:
        """The prompt the model reads: every message's text."""
        return "\n".join(message_text(m) for m in request.get("messages", []))

    def count(self, text: str) -> int:
        """Toy tokens of `text`."""
        return len(tokenize(text))

    def bill(self, request: dict[str, Any], message: dict[str, Any]) -> int | None:
        """Without a profile the toy tokens are the bill."""
        return None

    def markup(self, text: str) -> int:
        """Toy tokens of markup."""
        return len(tokenize(text))

    def written(self, request: dict[str, Any], message: dict[str, Any]) -> str | None:
        """Without a profile there is no template to write the message."""
        return None


class Path(Protocol):
    """How the vendor counts: the toy path, or a profile's (simulator/prompt.py)."""

    eyes: Eyes
    # Tool-call ids as Kimi's contract documents them (functions.NAME:IDX), not call_N_I.
    named_call_ids: bool
    # The profile's reasoning dialect (None: the generic one).
    dialect: Dialect | None
    # The sampling values of the model's generation config, used where a request omits one.
    generation_defaults: Mapping[str, float]

    def prompt_tokens(self, request: dict[str, Any]) -> int:
        """usage.prompt_tokens of a request."""

    def completion(self, text: str, limit: int | None) -> tuple[str, int, bool]:
        """The answer cut to `limit` tokens: (text, completion tokens, cut)."""

    def count(self, text: str) -> int:
        """Tokens of `text`."""

    def seen(self, request: dict[str, Any]) -> str:
        """The prompt text the model reads (the part the vendor kept of it)."""

    def bill(self, request: dict[str, Any], message: dict[str, Any]) -> int | None:
        """The completion tokens of the model's `message`, or None to count toy tokens."""

    def markup(self, text: str) -> int:
        """Tokens of markup the model writes (`text`, its special tokens as such)."""

    def written(self, request: dict[str, Any], message: dict[str, Any]) -> str | None:
        """The model's `message` as its template writes it (None: it cannot say)."""


def _last_user_text(request: dict[str, Any]) -> str:
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    return message_text(users[-1]) if users else ""


def _plain_reply(request: dict[str, Any], defaults: Mapping[str, float] | None = None) -> str:
    asked = _last_user_text(request)
    words = asked.split()[:6]
    echo = f" You said: {' '.join(words)}" if words else ""
    picked = pick(asked, request, defaults or {})
    return f"{picked.capitalize()}." if picked else GREETING + echo


def _structured_text(request: dict[str, Any], defects: Defects) -> str | None:
    """The JSON text for a response_format request, or None when no format applies."""
    response_format = request.get("response_format")
    if not isinstance(response_format, dict) or defects.has(IGNORE_RESPONSE_FORMAT):
        return None
    kind = response_format.get("type")
    natural = natural_json(request)
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema", {})
        if spec.get("strict") is True and defects.has(STRICT_ACCEPTED_NOT_ENFORCED):
            value = natural if natural is not MISSING else {}
        else:
            ignored = defects.param(IGNORE_KEYWORD)
            value = conform(
                natural, schema, ignore=frozenset(ignored.split(",") if ignored else ())
            )
    elif kind == "json_object":
        value = natural if isinstance(natural, dict) else {"answer": _plain_reply(request)}
    else:
        return None
    text = json.dumps(value, ensure_ascii=False)
    if defects.has(JSON_IN_MARKDOWN_FENCE):
        text = f"```json\n{text}\n```"
    return text


def max_tokens_of(request: dict[str, Any]) -> int | None:
    """The completion budget the request asks for, if any."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _tools_of(request: dict[str, Any]) -> dict[str, Any]:
    """Offered tools by name -> parameters schema."""
    tools = request.get("tools") or []
    return {
        t["function"]["name"]: t["function"].get("parameters", {})
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"]
    }


def _forced_call(name: str, parameters: Any) -> dict[str, Any]:
    return {"name": name, "arguments": conform(MISSING, parameters)}


def choose_calls(
    request: dict[str, Any], defects: Defects, rotation: Rotation | None = None
) -> list[dict[str, Any]]:
    """The calls to make, honouring tool_choice and parallel_tool_calls (unless a defect says).

    The model knows the natural calls of the published prompts, and of `rotation`'s twins
    when told it (unless it special-cases the published prompts).
    """
    tools = _tools_of(request)
    if not tools:
        return []
    known = None if defects.has(PUBLIC_PROMPTS_ONLY) else rotation
    known_calls = natural_calls(request, known) or planned_calls(request, known)
    natural = [c for c in known_calls if c["name"] in tools]
    choice = request.get("tool_choice", "auto")
    if choice == "none":
        if not defects.has(TOOL_CHOICE_NONE_IGNORED):
            return []
        choice = "auto"
        natural = natural or [_forced_call(*next(iter(tools.items())))]
    if choice == "required" and defects.has(TOOL_CHOICE_REQUIRED_IGNORED):
        choice = "auto"
    if isinstance(choice, dict) and defects.has(TOOL_CHOICE_NAMED_IGNORED):
        choice = "auto"
    if choice == "required":
        calls = natural or [_forced_call(*next(iter(tools.items())))]
    elif isinstance(choice, dict):
        name = choice.get("function", {}).get("name")
        calls = [c for c in natural if c["name"] == name][:1]
        if not calls and name in tools:
            calls = [_forced_call(name, tools[name])]
    else:
        calls = natural
    if request.get("parallel_tool_calls") is False and not defects.has(PARALLEL_TOOL_CALLS_IGNORED):
        calls = calls[:1]
    return calls


def _variants(value: Any, tag: str, step: int) -> list[Any]:
    """`value` with one leaf changed, at any depth: a string tagged, a number moved by `step`."""
    if isinstance(value, str):
        return [f"{value} {tag}", tag]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [value + step, value - step]
    found: list[Any] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += [{**value, key: variant} for variant in _variants(item, tag, step)]
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += [
                [*value[:index], variant, *value[index + 1 :]]
                for variant in _variants(item, tag, step)
            ]
    return found


def _vary(arguments: Any, parameters: Any, tag: str, step: int) -> Any:
    """Arguments changed by `tag` or `step` that still satisfy `parameters`.

    A nondeterministic engine samples other valid values; it does not break the schema
    (that would be another defect). Arguments with nothing to vary within the schema stay.
    """
    if not isinstance(arguments, dict):
        return arguments
    schema = parameters if isinstance(parameters, dict) else {}
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for candidate in _variants(arguments, tag, step):
        if validator.is_valid(candidate):
            return candidate
    return arguments


def _violate(arguments: Any, parameters: Any) -> Any:
    """Arguments that break the parameters schema: a required property left out, or a stranger."""
    required = parameters.get("required", []) if isinstance(parameters, dict) else []
    if required and isinstance(arguments, dict):
        return {k: v for k, v in arguments.items() if k != required[0]}
    return {**(arguments if isinstance(arguments, dict) else {}), "unexpected_property": True}


def _earlier_calls(request: dict[str, Any]) -> int:
    """How many tool calls the conversation's assistant messages already made."""
    return sum(
        len(m.get("tool_calls") or [])
        for m in request.get("messages", [])
        if isinstance(m, dict) and m.get("role") == "assistant"
    )


def tool_calls_for(
    request: dict[str, Any],
    defects: Defects,
    number: int,
    named_ids: bool = False,
    rotation: Rotation | None = None,
) -> tuple[list[ToolCall], list[ToolCall] | None]:
    """The calls as sent, with tool defects applied; and the streamed version when it differs.

    With `named_ids` the ids are Kimi's ``functions.NAME:IDX`` (IDX counts the conversation's
    calls), else OpenAI-style ``call_`` ids. `rotation`: see :func:`choose_calls`.
    """
    tools = _tools_of(request)
    calls = choose_calls(request, defects, rotation)
    named_ids = named_ids and not defects.has(TOOL_CALL_ID_FORMAT)
    earlier = _earlier_calls(request) if named_ids else 0
    sent: list[ToolCall] = []
    streamed: list[ToolCall] = []
    for index, call in enumerate(calls):
        name, arguments = call["name"], call["arguments"]
        if defects.has(TOOL_ARGS_VIOLATE_SCHEMA):
            arguments = _violate(arguments, tools.get(name, {}))
        if defects.has(TOOL_NONDETERMINISTIC_ARGS):
            arguments = _vary(arguments, tools.get(name, {}), f"#{number}", number)
        text = json.dumps(arguments, ensure_ascii=False)
        if defects.has(TOOL_ARGS_NOT_JSON):
            text = text[:-1]
        if defects.has(TOOL_UNKNOWN_NAME):
            name = f"{name}_v2"
        call_id = f"functions.{name}:{earlier + index}" if named_ids else f"call_{number}_{index}"
        if defects.has(TOOL_DUPLICATE_CALL_IDS):
            shared = f"functions.{name}:{earlier}" if named_ids else "call_dup"
            call_id = shared if len(calls) > 1 else ""
        sent.append(ToolCall(call_id, name, text))
        if defects.has(TOOL_STREAM_ARGS_DIFFER):
            streamed_arguments = _vary(arguments, tools.get(name, {}), "streamed", 1)
            text = json.dumps(streamed_arguments, ensure_ascii=False)
        streamed.append(ToolCall(call_id, name, text))
    return sent, (streamed if defects.has(TOOL_STREAM_ARGS_DIFFER) else None)


def kimi_markup(calls: list[ToolCall]) -> str:
    """The calls written as Kimi K2's chat template writes them (what a parser must extract)."""
    inner = "".join(
        f"<|tool_call_begin|>functions.{c.name}:{i}<|tool_call_argument_begin|>{c.arguments}"
        "<|tool_call_end|>"
        for i, c in enumerate(calls)
    )
    return f"<|tool_calls_section_begin|>{inner}<|tool_calls_section_end|>"


def _apply_stop(text: str, stop: Any, defects: Defects) -> tuple[str, str | None]:
    """The text up to the first stop sequence (which is not included), and that sequence."""
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    if defects.has(STOP_NOT_HONOURED):
        return text, None
    found = [(text.find(s), s) for s in stops if isinstance(s, str) and s and s in text]
    if not found:
        return text, None
    at, sequence = min(found, key=lambda hit: hit[0])
    return text[:at], sequence


def respond(
    request: dict[str, Any],
    defects: Defects,
    number: int = 0,
    path: Path | None = None,
    rotation: Rotation | None = None,
) -> Reply:
    """The model's reply to a (valid) chat-completions request (`number` orders the requests).

    `rotation`: the secret rotation whose twins the model knows too (``--rotate``).
    """
    path = path or ToyPath(defects)
    calls, streamed = tool_calls_for(request, defects, number, path.named_call_ids, rotation)
    last = (request.get("messages") or [{}])[-1]
    if (
        defects.has(FOLLOWUP_CALLS_UNKNOWN_TOOL)
        and last.get("role") == "tool"
        and thinks(request, path.dialect, defects)
    ):
        calls, streamed = [ToolCall(f"call_{number}_0", "search_more", "{}")], None
    if calls:
        tokens = tokenize(kimi_markup(calls)) if defects.has(TOOL_MARKERS_IN_CONTENT) else []
        finish = "stop" if defects.has(TOOL_FINISH_REASON_STOP) else "tool_calls"
        reply = _reasoned(Reply(tokens, finish, calls, streamed), request, defects, path)
        return _lost(billed(reply, request, path), defects)
    text = _structured_text(request, defects)
    if defects.has(RESPONSE_FORMAT_IGNORED_WHEN_THINKING) and thinks(
        request, path.dialect, defects
    ):
        text = None
    seen = path.eyes.look(request)
    if text is None and seen is None:
        text = recalled(_last_user_text(request), lambda: path.seen(request))
    if text is None:
        defaults = {} if defects.has(GENERATION_DEFAULTS_IGNORED) else path.generation_defaults
        text = _plain_reply(request, defaults) if seen is None else answer(seen)
    if defects.has(SEED_IGNORED) and (request.get("temperature") or 0) > 0:
        text += f" Variation {number}."
    text, sequence = _apply_stop(text, request.get("stop"), defects)
    text, counted, cut = path.completion(text, max_tokens_of(request))
    finish = "length" if cut else "stop"
    if (
        cut
        and isinstance(request.get("response_format"), dict)
        and defects.has(TRUNCATED_JSON_FINISH_STOP)
    ):
        finish = "stop"
    reply = _reasoned(
        Reply(tokenize(text), finish, counted=counted, stop_sequence=None if cut else sequence),
        request,
        defects,
        path,
    )
    reply = billed(reply, request, path)
    if defects.has(COMPLETION_TOKENS_INFLATED) and reply.counted is not None:
        reply.counted *= 2
    return _lost(reply, defects)


def billed(reply: Reply, request: dict[str, Any], path: Path) -> Reply:
    """The reply billed as the model generated it (an answer cut by max_tokens bills the limit).

    With a profile, the model's output is its message as the chat template writes it: the
    markup of its calls, its reasoning between the dialect's tags, and the token closing it.
    """
    if reply.finish_reason == "length":
        return reply
    count = path.bill(request, _message(reply, request, path))
    if count is not None:
        reply.counted = count
    return reply


def _message(reply: Reply, request: dict[str, Any], path: Path) -> dict[str, Any]:
    """The reply as an assistant message of the conversation."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
    if reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        earlier = _earlier_calls(request)
        message["tool_calls"] = [
            {
                "id": f"functions.{call.name}:{earlier + index}"
                if path.named_call_ids
                else call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    return message


def calls_as_generated(reply: Reply, request: dict[str, Any], path: Path) -> str:
    """The text the model generated for the reply's tool calls, as its template writes them.

    Without a profile (or where the template cannot say): the dialect's own markup.
    """
    message = _message(reply, request, path)
    whole = path.written(request, message)
    bare = path.written(request, {k: v for k, v in message.items() if k != "tool_calls"})
    if whole is None or bare is None:
        return "\n" + call_markup(reply.tool_calls, path.dialect)
    head = len(os.path.commonprefix([whole, bare]))
    tail = len(os.path.commonprefix([whole[head:][::-1], bare[head:][::-1]]))
    return whole[head : len(whole) - tail]


def _lost(reply: Reply, defects: Defects) -> Reply:
    """The reply after a parser or filter lost part of it: billed as the model generated it."""
    if not (
        (defects.has(TOOL_CALLS_DROPPED) and len(reply.tool_calls) > 1)
        or (defects.has(REASONING_DROPPED) and reply.reasoning)
        or (defects.has(CONTENT_CUT) and len(reply.tokens) > 1 and not reply.tool_calls)
    ):
        return reply
    reply.counted = reply.completion_tokens
    if defects.has(TOOL_CALLS_DROPPED) and len(reply.tool_calls) > 1:
        reply.tool_calls = reply.tool_calls[:-1]
        if reply.stream_tool_calls is not None:
            reply.stream_tool_calls = reply.stream_tool_calls[:-1]
    if defects.has(REASONING_DROPPED) and reply.reasoning:
        reply.reasoning = None
    if defects.has(CONTENT_CUT) and len(reply.tokens) > 1 and not reply.tool_calls:
        reply.tokens = reply.tokens[: len(reply.tokens) // 2]
    return reply


def _reasoned(reply: Reply, request: dict[str, Any], defects: Defects, path: Path) -> Reply:
    """The reply as the vendor's reasoning parser splits the model's raw output."""
    parsed = split(request, reply.content, reply.tool_calls, path.dialect, defects)
    if parsed.reasoning is None and parsed.content is None:
        return reply
    if not parsed.calls_kept:
        reply.tool_calls, reply.stream_tool_calls, reply.finish_reason = [], None, "stop"
    if parsed.content is not None:
        reply.tokens = tokenize(parsed.content)
    reply.reasoning, reply.reasoning_field = parsed.reasoning, parsed.field
    if parsed.reasoning:
        _share_budget(reply, parsed.reasoning, max_tokens_of(request), path)
    return reply


def _share_budget(reply: Reply, reasoning: str, limit: int | None, path: Path) -> None:
    """Reasoning and answer share max_tokens: the reasoning first, the answer in what is left.

    The dialect's tags are generated tokens too: the opening tag comes out of the budget
    before the reasoning, the closing tag before the answer.
    """
    tags = (path.dialect.tags if path.dialect is not None else None) or ("", "")
    opening, closing = (path.markup(tag) for tag in tags)
    if limit is not None and opening + path.count(reasoning) >= limit:
        reply.reasoning, spent, _ = path.completion(reasoning, max(limit - opening, 0))
        reply.reasoning_tokens, reply.counted = spent, spent + min(opening, limit)
        reply.tokens, reply.tool_calls, reply.stream_tool_calls = [], [], None
        reply.finish_reason = "length"
        return
    reply.reasoning_tokens = path.count(reasoning)
    if limit is not None and not reply.tool_calls:
        used = opening + reply.reasoning_tokens + closing
        text, spent, cut = path.completion("".join(reply.tokens), max(limit - used, 0))
        reply.tokens = tokenize(text)
        reply.counted = spent + min(used, limit)
        reply.finish_reason = "length" if cut else reply.finish_reason
        return
    base = reply.counted if reply.counted is not None else reply.completion_tokens
    reply.counted = base + reply.reasoning_tokens
