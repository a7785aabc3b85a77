"""The normalized view of a chat-completions answer, the same for stream and non-stream.

Grading works on these types only; nothing here does I/O. Parsing is lenient:
whatever the body looks like, it becomes a :class:`ChatResult` whose
``problems`` say what was wrong with its shape, so that a garbage answer is a
graded failure and never an exception.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """A shape or protocol violation seen while reading an answer.

    Args:
        code: stable name (``body_not_json``, ``finish_reason_missing``, ...).
        message: one line: what was found versus what is allowed.
        where: the chunk number or JSON path it was seen at.
    """

    code: str
    message: str
    where: str | None = None


@dataclasses.dataclass(slots=True)
class ToolCall:
    """One tool call as the endpoint produced it; ``arguments`` is the raw string."""

    index: int
    id: str | None
    type: str | None
    name: str | None
    arguments: str | None

    def to_dict(self) -> dict[str, Any]:
        """The call as plain JSON data."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(slots=True)
class Choice:
    """One choice of an answer: the assistant message and why it ended.

    ``finish_reason`` None means the endpoint sent none: it is never defaulted.
    ``reasoning_field`` is the field the reasoning came in (see :data:`REASONING_FIELDS`).
    ``stop_reason`` and ``stop_sequence`` are an Anthropic Messages answer's own, as sent
    (``finish_reason`` says the same in chat's words, which cannot tell a stop sequence
    from the end of the turn); None over the other APIs. ``blocks`` is a Messages answer's
    content as a client sends it back in its next turn (a stream's built from its events,
    thinking with its signature); None over the other APIs. ``redacted``: some of the
    reasoning came encrypted (a Messages ``redacted_thinking`` block), so what the model
    reasoned cannot be read or counted; ``reasoning`` holds only what came readable.
    """

    index: int
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    finish_reason: str | None = None
    logprobs: list[Any] | None = None
    reasoning_field: str | None = None
    stop_reason: Any = None
    stop_sequence: Any = None
    blocks: list[dict[str, Any]] | None = None
    redacted: bool = False


@dataclasses.dataclass(slots=True)
class ChatResult:
    """One chat-completions exchange that produced an HTTP answer.

    Args:
        stream: whether the request streamed.
        status: the HTTP status of the answer.
        headers: response headers, credentials removed.
        choices: the parsed choices, by index (empty when there were none).
        usage: the usage object, or None when none was sent.
        usage_source: ``body``, ``final_chunk`` or ``choice`` (where usage was found).
        body: the parsed JSON body of a non-stream answer or an error answer.
        chunks: the parsed JSON chunks of a streamed answer, in order.
        done: a stream ended with ``data: [DONE]``.
        problems: shape and protocol violations, in the order seen.
        latency: seconds from sending to the end of the answer.
        first_byte: seconds from sending to the answer's status and headers.
        token_arrivals: for a stream, seconds from sending to the arrival of each chunk that
            carries a token (content, reasoning or a tool call's piece).
        first_reasoning: for a stream, seconds from sending to its first reasoning, if any.
        attempts: how many attempts this answer took (1 = no retry).
        empty_deltas: stream chunks whose delta carried nothing (no role, content,
            reasoning or tool call) and no finish_reason.
        api: the API that answered (:data:`~verifier.protocol.apis.API_NAMES`); the answer of
            another API than ``chat`` is read into the same fields, in chat-completions terms
            (its ``usage`` too: ``prompt_tokens``, ``completion_tokens``), its own body and
            events kept as they came in ``body`` and ``chunks``.
    """

    stream: bool
    status: int
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    choices: list[Choice] = dataclasses.field(default_factory=list)
    usage: dict[str, Any] | None = None
    usage_source: str | None = None
    body: Any = None
    chunks: list[Any] = dataclasses.field(default_factory=list)
    done: bool = False
    problems: list[Problem] = dataclasses.field(default_factory=list)
    id: str | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    latency: float = 0.0
    first_byte: float | None = None
    token_arrivals: list[float] = dataclasses.field(default_factory=list)
    first_reasoning: float | None = None
    attempts: int = 1
    empty_deltas: int = 0
    api: str = "chat"

    @property
    def ok(self) -> bool:
        """The endpoint accepted the request (2xx)."""
        return 200 <= self.status < 300

    @property
    def choice(self) -> Choice | None:
        """The first choice, or None when the answer has none."""
        return self.choices[0] if self.choices else None

    @property
    def error_object(self) -> dict[str, Any] | None:
        """The OpenAI-shaped ``error`` object of a rejected request, when there is one."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            error: dict[str, Any] = self.body["error"]
            return error
        return None

    @property
    def label(self) -> str:
        """``stream`` or ``non-stream``, for messages."""
        return "stream" if self.stream else "non-stream"


def _text(value: Any) -> str | None:
    """Content as a string; list-of-parts content (some vendors) is joined."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") for p in value if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return json.dumps(value)


# The names vendors give the reasoning field of a message or delta, in the order read.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def reasoning_field_of(message: dict[str, Any]) -> str | None:
    """The field a message's reasoning text came in (``reasoning_content``, ``reasoning``)."""
    return next((k for k in REASONING_FIELDS if isinstance(message.get(k), str)), None)


def reasoning_of(message: dict[str, Any]) -> str | None:
    """Reasoning text under either name vendors use (``reasoning_content``, ``reasoning``)."""
    field = reasoning_field_of(message)
    return None if field is None else str(message[field])


def logprob_entries(logprobs: Any) -> list[Any] | None:
    """The per-token entries of a choice's ``logprobs.content``, or None when there are none."""
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
        return list(logprobs["content"])
    return None


def _tool_calls(raw: Any, problems: list[Problem], where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(Problem("malformed_tool_calls", "tool_calls is not a list", where))
        return []
    calls = []
    for position, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(
                Problem(
                    "malformed_tool_calls", "a tool call is not an object", f"{where}[{position}]"
                )
            )
            continue
        function: dict[str, Any] = (
            item["function"] if isinstance(item.get("function"), dict) else {}
        )
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            # Some servers send arguments as an object; keep it, as JSON, for grading.
            arguments = json.dumps(arguments)
        index = item.get("index", position)
        calls.append(
            ToolCall(
                index=index if isinstance(index, int) else position,
                id=item.get("id"),
                type=item.get("type"),
                name=function.get("name"),
                arguments=arguments,
            )
        )
    return calls


def parse_body(status: int, body_bytes: bytes, headers: dict[str, str]) -> ChatResult:
    """Any answer (a GET, an error) as a :class:`ChatResult` holding its JSON body."""
    result = ChatResult(stream=False, status=status, headers=headers)
    try:
        result.body = json.loads(body_bytes)
    except (ValueError, RecursionError):
        # ValueError covers bad syntax and bad UTF-8, but also an integer of more than 4300
        # digits; RecursionError is nesting deeper than the interpreter allows.
        excerpt = body_bytes[:120].decode("utf-8", "replace")
        result.body = excerpt
        result.problems.append(Problem("body_not_json", f"the body is not JSON: {excerpt!r}"))
    return result


def parse_completion(status: int, body_bytes: bytes, headers: dict[str, str]) -> ChatResult:
    """A non-stream chat-completions answer (any status) as a :class:`ChatResult`."""
    result = parse_body(status, body_bytes, headers)
    if result.problems:
        return result
    body = result.body
    if not 200 <= status < 300:
        return result
    if not isinstance(body, dict):
        result.problems.append(
            Problem("not_a_completion", f"the body is a JSON {type(body).__name__}, not an object")
        )
        return result
    result.id = body.get("id")
    result.model = body.get("model")
    result.system_fingerprint = body.get("system_fingerprint")
    if isinstance(body.get("usage"), dict):
        result.usage, result.usage_source = body["usage"], "body"
    choices = body.get("choices")
    if not isinstance(choices, list):
        result.problems.append(
            Problem("not_a_completion", "the body has no choices list", "$.choices")
        )
        return result
    if not choices:
        result.problems.append(Problem("no_choices", "the answer carried no choice", "$.choices"))
    for position, raw in enumerate(choices):
        where = f"$.choices[{position}]"
        if not isinstance(raw, dict):
            result.problems.append(Problem("not_a_completion", "a choice is not an object", where))
            continue
        message = raw.get("message")
        if not isinstance(message, dict):
            result.problems.append(
                Problem("not_a_completion", "a choice has no message object", f"{where}.message")
            )
            message = {}
        index = raw.get("index", position)
        result.choices.append(
            Choice(
                index=index if isinstance(index, int) else position,
                role=message.get("role"),
                content=_text(message.get("content")),
                reasoning=reasoning_of(message),
                reasoning_field=reasoning_field_of(message),
                tool_calls=_tool_calls(
                    message.get("tool_calls"), result.problems, f"{where}.message.tool_calls"
                ),
                finish_reason=raw.get("finish_reason"),
                logprobs=logprob_entries(raw.get("logprobs")),
            )
        )
    return result
