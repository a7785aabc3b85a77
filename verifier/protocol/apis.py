"""The APIs a verification speaks: chat completions, Anthropic Messages, OpenAI Responses.

A family writes its requests once, as chat-completions bodies (:class:`~.requests.Chat`); the
protocol module of each other API (:mod:`.messages`, :mod:`.responses`) renders such a body
into that API's request and reads that API's answer, whole or streamed, into the same
:class:`~.answers.ChatResult` the graders read. Nothing here does I/O.
"""

from __future__ import annotations

API_NAMES = ("chat", "messages", "responses")
# Each API's route under the base URL (``.../v1``).
ROUTES = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
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
