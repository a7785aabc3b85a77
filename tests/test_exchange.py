"""Families as exchanges: graded from recorded answers, with no server and no client."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from verifier import Case, ChatResult, Outcome, RunContext, Status
from verifier.checks import FAMILIES
from verifier.errors import EndpointTimeout, EndpointUnreachable
from verifier.protocol.answers import parse_completion
from verifier.protocol.requests import Chat, Raw, Request, drive

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOL_CASE = Case(
    "tool_calling",
    "weather",
    {
        "id": "weather",
        "category": "single",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": TOOLS,
    },
    "test:1",
)
CONTEXT = RunContext(model="m", seed=7, repeats=1)


def called(arguments: str) -> ChatResult:
    """A recorded non-stream answer calling get_weather with `arguments`."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": arguments},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    return parse_completion(200, json.dumps(body).encode(), {})


def replay(case: Case, answer: Callable[[Request], ChatResult]) -> tuple[Outcome, list[Request]]:
    """Drive the case's family with recorded answers; the outcome and what it asked for."""
    asked: list[Request] = []

    def send(request: Request) -> ChatResult:
        asked.append(request)
        return answer(request)

    return drive(FAMILIES[case.family].run(case, CONTEXT), send), asked


def test_a_family_is_graded_from_recorded_answers() -> None:
    outcome, asked = replay(TOOL_CASE, lambda _: called('{"city": "Paris"}'))
    assert outcome.status is Status.PASS
    assert asked == [
        Chat(
            {
                "model": "m",
                "temperature": 0,
                "seed": 7,
                "messages": TOOL_CASE.data["messages"],
                "tools": TOOLS,
                "max_tokens": 512,
            },
            "non-stream-1",
        )
    ]


def test_the_same_family_fails_a_recorded_defect() -> None:
    outcome, _ = replay(TOOL_CASE, lambda _: called('{"city": "Par'))
    assert outcome.status is Status.FAIL
    assert {f.code for f in outcome.findings} == {"invalid_json"}


def test_a_fault_thrown_in_is_graded_where_the_family_waits_for_it() -> None:
    case = Case("wire", "bad", {"id": "bad", "check": "invalid", "raw_body": "{not json"}, "t:1")

    def hang(request: Request) -> ChatResult:
        assert request == Raw(b"{not json", "application/json", "invalid")
        raise EndpointTimeout("read timed out after 1 s", attempts=4)

    outcome, _ = replay(case, hang)
    assert outcome.status is Status.FAIL
    assert [f.code for f in outcome.findings] == ["invalid_request_hang"]


def test_a_fault_the_family_does_not_handle_comes_out_of_drive() -> None:
    def refuse(_: Request) -> ChatResult:
        raise EndpointUnreachable("connection refused", attempts=4)

    with pytest.raises(EndpointUnreachable, match="connection refused"):
        replay(TOOL_CASE, refuse)


def test_drive_returns_what_the_exchange_returns() -> None:
    def exchange() -> Any:
        first = yield Chat({"n": 1}, "one")
        second = yield Chat({"n": 2}, "two")
        return first.status + second.status

    assert drive(exchange(), lambda request: ChatResult(stream=False, status=200)) == 400
