"""The APIs a verification speaks: chat completions, Anthropic Messages, OpenAI Responses.

A family writes its requests once, as chat-completions bodies (:class:`~.requests.Chat`); the
protocol module of each other API (:mod:`.messages`, :mod:`.responses`) renders such a body
into that API's request and reads that API's answer, whole or streamed, into the same
:class:`~.answers.ChatResult` the graders read. Nothing here does I/O.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .answers import ChatResult

API_NAMES = ("chat", "messages", "responses")
# Each API's route under the base URL (``.../v1``).
ROUTES = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
# Each API's own token-counting route, where it has one: the prompt's input tokens, unbilled.
COUNT_ROUTES = {"messages": "/messages/count_tokens", "responses": "/responses/input_tokens"}
# The statuses of a route the endpoint does not serve.
UNSERVED = (404, 405)
# What the scorecard and messages call each API.
TITLES = {
    "chat": "Chat Completions",
    "messages": "Anthropic Messages",
    "responses": "OpenAI Responses",
}
# The Messages API's version header: the one version its reference documents.
ANTHROPIC_VERSION = "2023-06-01"


class NotExpressible(Exception):
    """A chat request that another API cannot say (a field it has no counterpart for).

    Args:
        api: the API.
        reason: one line: what the request asks that the API cannot (``the Messages API has
            no logprobs``).
    """

    def __init__(self, api: str, reason: str) -> None:
        super().__init__(reason)
        self.api = api
        self.reason = reason


class Protocol(NamedTuple):
    """What the client needs of an API's protocol module: render a request, read an answer.

    Args:
        api: the API's name.
        request_body: the API's request for a chat-completions body (raises
            :class:`NotExpressible`); the identity for chat, whose streaming fields the
            client sets itself.
        parse_answer: a non-stream answer of any status, read into a ChatResult.
        accumulate: an SSE body, as the network split it, read into a ChatResult.
        read_recorded: an answer as the transcript recorded it, read again.
        count_body: the body of the API's counting route (:data:`COUNT_ROUTES`) for one of
            its requests: the fields that route takes; None for chat, which has no such route.
    """

    api: str
    request_body: Callable[..., dict[str, Any]]
    parse_answer: Callable[[int, bytes, dict[str, str]], ChatResult]
    accumulate: Callable[..., ChatResult]
    read_recorded: Callable[..., ChatResult]
    count_body: Callable[[dict[str, Any]], dict[str, Any]] | None = None


_IMPORTING = threading.Lock()


@functools.cache
def protocol_of(api: str) -> Protocol:
    """The protocol of `api` (imported when first asked for: a chat-only run loads no other)."""
    if api == "chat":
        from . import answers, stream

        return Protocol(
            api,
            lambda chat, *, stream: dict(chat),
            answers.parse_completion,
            stream.accumulate,
            stream.read_recorded,
        )
    if api not in API_NAMES:
        raise ValueError(f"no API named {api!r}")
    # One import at a time: the probe's and the cases' threads ask for the modules together,
    # and under pytest, which rewrites the plugin's package, importing one parses its source
    # (CPython 3.11's AST building is not safe in two threads at once: "AST constructor
    # recursion depth mismatch").
    with _IMPORTING:
        module = importlib.import_module(f"{__package__}.{api}")
    return Protocol(
        api,
        module.request_body,
        module.parse_answer,
        module.accumulate,
        module.read_recorded,
        module.count_body,
    )
