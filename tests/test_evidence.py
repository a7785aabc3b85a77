"""No evidence, no verdict: every family, on every case of its corpus, given answers that lack
what its checks read, gives no pass (verifier/checks/support/evidence.py holds the rule).

Each family's generator is driven with recorded answers, no server: a 2xx answer that carries
no choice (non-stream and stream alike) must fail the case as ``malformed_response`` (or, for a
request that must be refused, as accepted), or leave it unsupported; and an answer that carries
a choice but no ``usage`` must leave every check that reads ``usage.prompt_tokens`` unsupported,
never passed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from verifier import Case, ChatResult, Outcome, RunContext, Status
from verifier.cases.corpus import load_corpus
from verifier.cases.negative import default_count, negative_cases
from verifier.checks import FAMILIES
from verifier.checks.registry import ParityContext
from verifier.protocol.answers import parse_completion
from verifier.protocol.requests import Chat, Get, Post, Raw, Request, drive
from verifier.protocol.stream import read_recorded

FAMILY_NAMES = [f.name for f in FAMILIES]
# A bad request the endpoint answers with 200 is "accepted" whatever the body: that finding
# needs no choice. Everything else a choiceless answer gives is malformed_response.
ACCEPTED = {
    "sampling_limit_not_enforced",
    "sampling_pin_violated",
    "invalid_request_accepted",
    "malformed_format_accepted",
    "invalid_image_accepted",
    "invalid_history_accepted",
}
MALFORMED = {"malformed_response"}
USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def _body(choices: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-e",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def _answered(body: dict[str, Any], stream: bool) -> ChatResult:
    if not stream:
        return parse_completion(200, json.dumps(body).encode(), {})
    chunks = []
    for choice in body["choices"]:
        delta = dict(choice["message"])
        chunks.append(
            {
                "id": body["id"],
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}],
            }
        )
    chunks.append({**body, "object": "chat.completion.chunk", "choices": []})
    result = read_recorded(chunks, status=200, stream=True)
    result.done = True
    return result


def _stream(request: Request) -> bool:
    if isinstance(request, Chat):
        return request.stream
    return isinstance(request, Raw) and request.stream


# The window the endpoint's model list states (the context family reads it).
MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}


def _route(request: Post | Get) -> ChatResult:
    """The model list (with its window) for the API's route; a route of the server root: none."""
    if isinstance(request, Get) and request.api:
        return parse_completion(200, json.dumps(MODELS).encode(), {})
    return parse_completion(404, b'{"error": {"message": "not found"}}', {})


def no_choice(request: Request) -> ChatResult:
    """A 2xx answer with every field but a choice (a route of the server root: none there)."""
    if isinstance(request, Post | Get):
        return _route(request)
    return _answered(_body([], USAGE), _stream(request))


def no_usage(request: Request) -> ChatResult:
    """A 2xx answer that reports no usage (a route of the server root: none there).

    It calls the first tool offered when the conversation ends with the user's turn (an agent
    loop needs a call to reach a follow-up), else it answers in words.
    """
    if isinstance(request, Post | Get):
        return _route(request)
    body = request.body if isinstance(request, Chat) else {}
    message: dict[str, Any] = {"role": "assistant", "content": "Fine."}
    message["reasoning_content"] = "I think."
    finish = "stop"
    tools = body.get("tools") or []
    if tools and body["messages"][-1]["role"] == "user":
        call = {"name": tools[0]["function"]["name"], "arguments": "{}"}
        message.update(
            content=None, tool_calls=[{"id": "c1", "type": "function", "function": call}]
        )
        finish = "tool_calls"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return _answered(_body([choice], None), _stream(request))


def _reference(request: Request) -> ChatResult:
    """The parity reference's answer: one token with its logprob and an alternative."""
    entry = {
        "token": "Fine",
        "logprob": -0.1,
        "bytes": list(b"Fine"),
        "top_logprobs": [
            {"token": "Fine", "logprob": -0.1, "bytes": list(b"Fine")},
            {"token": "Good", "logprob": -2.5, "bytes": list(b"Good")},
        ],
    }
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "Fine"},
        "logprobs": {"content": [entry]},
        "finish_reason": "length",
    }
    return _answered(_body([choice], USAGE), False)


def _cases(family: str) -> list[Case]:
    if family != "wire":
        return list(load_corpus([family]).cases)
    # The default generated set (one case per field): each accepted bad request is shrunk,
    # which takes seconds over the whole set and shows nothing more here.
    generated, _ = negative_cases(default_count(), 1)
    return [*load_corpus([family]).cases, *generated]


def _run(case: Case, profile: Any, answer: Callable[[Request], ChatResult]) -> Outcome:
    parity = ParityContext(top_logprobs=2, live=True, reference_model="r")
    ctx = RunContext(model="m", seed=1, profile=profile, vision=True, parity=parity)

    def send(request: Request) -> ChatResult:
        if isinstance(request, Chat) and request.target == "reference":
            return _reference(request)
        return answer(request)

    outcome: Outcome = drive(FAMILIES[case.family].run(case, ctx), send)
    return outcome


def _codes(outcome: Outcome) -> set[str]:
    return {f.code for f in outcome.findings} | ({outcome.code} if outcome.code else set())


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_an_answer_without_a_choice_never_passes(family: str, small_profile: Any) -> None:
    seen: dict[str, set[str]] = {}
    for case in _cases(family):
        outcome = _run(case, small_profile, no_choice)
        assert outcome.status is not Status.PASS, case.key
        assert outcome.status is not Status.ERROR, (case.key, outcome.message)
        if outcome.status is Status.FAIL:
            # Exactly malformed_response, or exactly the one "accepted" code of a request
            # that had to be refused.
            codes = {f.code for f in outcome.findings}
            assert codes == MALFORMED or (len(codes) == 1 and codes <= ACCEPTED), (case.key, codes)
        seen.setdefault(outcome.status.value, set()).update(_codes(outcome))
    # Every family grades some of its cases on the answer it got: a choiceless answer fails
    # them, rather than every case being turned away before a request.
    assert "malformed_response" in seen.get("fail", set()), seen


# The checks that read usage.prompt_tokens, by family: (the case's field, its value).
READS_USAGE = {
    "chat_template": None,
    "tool_calling": ("category", "dynamic"),
    "vision": ("check", "tokens"),
    "reasoning": ("check", "agent_loop"),
    "context": ("tokens", 1024),
}


@pytest.mark.parametrize("family", sorted(READS_USAGE))
def test_a_check_that_reads_usage_never_passes_without_it(family: str, small_profile: Any) -> None:
    selected = READS_USAGE[family]
    # The loops written for Messages and Responses read those APIs' answers, not chat's:
    # tests/test_thinking_back.py holds them to the same rule.
    cases = [
        c
        for c in load_corpus([family]).cases
        if (selected is None or c.data.get(selected[0]) == selected[1]) and "api" not in c.data
    ]
    assert cases
    for case in cases:
        outcome = _run(case, small_profile, no_usage)
        assert outcome.status is not Status.PASS, case.key
        if outcome.status is Status.UNSUPPORTED:
            assert "no usage.prompt_tokens" in outcome.message, (case.key, outcome.message)
