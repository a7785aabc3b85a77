"""Families as exchanges: graded from recorded answers, with no server and no client."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from verifier import Case, ChatResult, Outcome, RunContext, Status
from verifier.cases.corpus import load_corpus
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


def replay(
    case: Case, answer: Callable[[Request], ChatResult], ctx: RunContext = CONTEXT
) -> tuple[Outcome, list[Request]]:
    """Drive the case's family with recorded answers; the outcome and what it asked for."""
    asked: list[Request] = []

    def send(request: Request) -> ChatResult:
        asked.append(request)
        return answer(request)

    return drive(FAMILIES[case.family].run(case, ctx), send), asked


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


def said(text: str) -> ChatResult:
    """A recorded non-stream answer saying `text`."""
    body = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
    return parse_completion(200, json.dumps(body).encode(), {})


REFUSED = parse_completion(400, b'{"error": {"message": "no", "type": "invalid_request"}}', {})


def corpus_case(family: str, case_id: str) -> Case:
    return next(c for c in load_corpus([family]).cases if c.id == case_id)


@pytest.mark.parametrize(
    ("more", "codes"),
    [
        (11, set()),  # one more tool, more prompt tokens
        (5, {"dynamic_tools_ignored"}),
        (None, {"dynamic_tools_rejected"}),  # refused
    ],
)
def test_dynamic_tools_must_be_accepted_and_reach_the_prompt(
    small_profile: Any, more: int | None, codes: set[str]
) -> None:
    def answer(request: Request) -> ChatResult:
        assert isinstance(request, Chat) and "tools" not in request.body
        assert request.body["messages"][0]["role"] == "system"
        if request.name != "one-more-tool":
            return called('{"city": "Lisbon"}')
        if more is None:
            return REFUSED
        return dataclasses.replace(
            called('{"city": "Lisbon"}'), usage={"prompt_tokens": more, "total_tokens": more}
        )

    outcome, asked = replay(
        corpus_case("tool_calling", "dynamic-weather-lisbon"),
        answer,
        RunContext(model="m", seed=7, profile=small_profile),
    )
    assert {f.code for f in outcome.findings} == codes
    assert [r.name for r in asked] == ["non-stream-1", "stream-2", "one-more-tool"]
