"""Thinking blocks over Messages: read back as a client sends them, signed, and the next turn."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VerifierRun
from verifier.cases.corpus import load_corpus
from verifier.checks.reasoning import answer_findings, followup_findings
from verifier.checks.registry import RunContext
from verifier.checks.support.accounting import delivered
from verifier.checks.support.evidence import Malformed
from verifier.checks.support.subchecks import Unsupported
from verifier.checks.support.thinking_back import (
    NO_RESULT,
    Counting,
    next_input,
    next_turn,
    run_thinking_roundtrip,
    sealed_findings,
    signature_findings,
)
from verifier.protocol.answers import ChatResult
from verifier.protocol.messages import accumulate, answer_content, parse_answer
from verifier.protocol.requests import drive
from verifier.protocol.responses import output_items
from verifier.reference.profiles import load_profile
from verifier.simulator.process import SimulatorProcess

THOUGHT = {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_a_streams_blocks_are_built_as_a_client_builds_them() -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "x",
                "usage": {"input_tokens": 3, "output_tokens": 0},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Look "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "it up."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "c2ln"},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    result = accumulate([sse(events)], ChatResult(stream=True, status=200))
    assert answer_content(result) == [THOUGHT, CALL]
    whole = ChatResult(stream=False, status=200, body={"content": [THOUGHT, CALL]})
    assert answer_content(whole) == [THOUGHT, CALL]


@pytest.mark.parametrize("signature", [None, "", 7])
def test_a_thinking_block_without_a_signature_is_a_finding(signature: Any) -> None:
    block = {"type": "thinking", "thinking": "x"}
    if signature is not None:
        block["signature"] = signature
    (found,) = signature_findings([{"type": "text", "text": "a"}, block], "non-stream-turn-1")
    assert (
        found.code == "thinking_signature_missing" and found.json_path == "$.content[1].signature"
    )
    assert signature_findings([THOUGHT, REDACTED], "a") == []


@pytest.mark.parametrize("data", [None, "", 7])
def test_a_redacted_block_without_its_data_is_a_finding(data: Any) -> None:
    block = {"type": "redacted_thinking", "data": data}
    (found,) = signature_findings([CALL, block], "stream-turn-1")
    assert (found.code, found.json_path, found.actual) == (
        "redacted_thinking_data_missing",
        "$.content[1].data",
        data,
    )


def test_a_redacted_answer_reasoned_though_none_of_it_can_be_read() -> None:
    """Read whole or streamed, a redacted block marks the answer's reasoning as unreadable:
    the switch counts it as reasoning, the accounting does not count the answer at all."""
    whole = parse_answer(200, json.dumps(message(REDACTED, CALL)).encode(), {})
    start = {
        "type": "message_start",
        "message": {**message(), "stop_reason": None, "content": []},
    }
    events = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": REDACTED},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {**CALL, "input": {}}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    streamed = accumulate([sse(events)], ChatResult(stream=True, status=200))
    profile = load_profile("kimi-k2-thinking")
    assert profile.dialect is not None
    for result in (whole, streamed):
        assert result.choice is not None and result.choice.redacted
        assert result.choice.reasoning is None
        assert answer_content(result) == [REDACTED, CALL]
        assert answer_findings(result, profile.dialect, thinking=True) == []
        assert delivered(profile, {"messages": []}, result) is None
    plain = parse_answer(200, json.dumps(message(THOUGHT, CALL)).encode(), {})
    assert plain.choice is not None and not plain.choice.redacted


def test_redacted_thinking_goes_back_as_it_came_and_its_loop_is_not_counted() -> None:
    """A redacted block is sent back whole, and must carry its data; what it adds to the next
    prompt cannot be counted, so a loop with nothing else wrong is unsupported, not a pass."""
    turns = [(200, message(REDACTED, _call("Oslo", 1))), (200, DONE)]
    sent: list[dict[str, Any]] = []
    count = Counting("reasoning_content", lambda turns: pytest.fail("counted"))
    with pytest.raises(Unsupported, match="redacted thinking block.*non-stream-turn-1"):
        _roundtrip(turns * 2, LOOP, sent, count=count)
    assert sent[1]["messages"][1]["content"] == [REDACTED, _call("Oslo", 1)]
    empty = [(200, message({**REDACTED, "data": ""}, _call("Oslo", 1))), (200, DONE)]
    assert _roundtrip(empty * 2, LOOP) == ["redacted_thinking_data_missing"] * 2
    assert _roundtrip(turns * 2) == []


def test_the_next_turn_sends_the_blocks_back_and_answers_each_call() -> None:
    body = {
        "model": "m",
        "max_tokens": 9,
        "stream": True,
        "messages": [{"role": "user", "content": "Weather?"}],
    }
    follow = next_turn(body, [THOUGHT, CALL], {"get_weather": ["3 C"]})
    assert "stream" not in follow and follow["max_tokens"] == 9
    assert follow["messages"][1:] == [
        {"role": "assistant", "content": [THOUGHT, CALL]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 C"}],
        },
    ]
    unanswered = next_turn(body, [THOUGHT, CALL], {})
    assert unanswered["messages"][2]["content"][0]["content"] == NO_RESULT
    talk = next_turn(body, [THOUGHT, {"type": "text", "text": "Hi"}], {})
    assert talk["messages"][2] == {"role": "user", "content": "Thank you."}


REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [],
    "content": [{"type": "reasoning_text", "text": "Look it up."}],
}
FUNCTION_CALL = {
    "type": "function_call",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city": "Oslo"}',
}


def test_the_next_input_gives_the_items_back_and_each_calls_output() -> None:
    body = {"model": "m", "stream": True, "store": False, "input": "Weather?"}
    follow = next_input(body, [REASONING, FUNCTION_CALL], {"get_weather": ["3 C"]})
    assert "stream" not in follow and follow["store"] is False
    assert follow["input"] == [
        {"role": "user", "content": "Weather?"},
        REASONING,
        FUNCTION_CALL,
        {"type": "function_call_output", "call_id": "call_1", "output": "3 C"},
    ]
    talk = next_input({**body, "input": [{"role": "user", "content": "Hi"}]}, [REASONING], {})
    assert talk["input"][-1] == {"role": "user", "content": "Thank you."}


def test_a_streams_items_are_its_terminal_responses_or_else_its_done_items() -> None:
    done = [
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.done", "output_index": 1, "item": FUNCTION_CALL},
    ]
    terminal = {"type": "response.completed", "response": {"output": [REASONING]}}
    assert output_items(ChatResult(stream=True, status=200, chunks=[*done, terminal])) == [
        REASONING
    ]
    assert output_items(ChatResult(stream=True, status=200, chunks=done)) == [
        REASONING,
        FUNCTION_CALL,
    ]
    whole = ChatResult(stream=False, status=200, body={"output": [REASONING, FUNCTION_CALL]})
    assert output_items(whole) == [REASONING, FUNCTION_CALL]


def _roundtrip(
    answers: list[tuple[int, dict[str, Any]]],
    case_id: str = "signed-thinking-weather",
    sent: list[dict[str, Any]] | None = None,
    count: Counting | None = None,
) -> list[str]:
    """The codes run_thinking_roundtrip gives when the endpoint answers `answers` in turn
    (each request's body kept in `sent`); a loop's follow-ups graded as the family does."""
    case = next(c for c in load_corpus(["reasoning"]).cases if c.id == case_id)
    given = iter(answers)

    def send(request: Any) -> ChatResult:
        if sent is not None:
            sent.append(json.loads(request.content))
        status, body = next(given)
        return parse_answer(status, json.dumps(body).encode(), {})

    tools = case.data["tools"]
    exchange = run_thinking_roundtrip(
        case,
        RunContext(model="m", seed=1),
        followup=lambda result, attempt: followup_findings(result, tools, attempt),
        count=count,
    )
    findings, _ = drive(exchange, send)
    return sorted(f.code for f in findings)


def message(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": list(content),
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 9,
            "output_tokens": 3,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
        },
    }


REFUSED = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
DONE = message({"type": "text", "text": "3 C."})


def test_signed_thinking_taken_back_passes_and_each_failure_is_its_code() -> None:
    signed, unsigned = message(THOUGHT, CALL), message({**THOUGHT, "signature": ""}, CALL)
    assert _roundtrip([(200, signed), (200, DONE)] * 2) == []
    assert _roundtrip([(200, unsigned), (200, DONE)] * 2) == ["thinking_signature_missing"] * 2
    assert _roundtrip([(200, signed), (400, REFUSED)] * 2) == ["thinking_history_rejected"] * 2


def test_an_answer_without_its_evidence_never_passes() -> None:
    """No thinking at all is unsupported; a 2xx turn without a message is malformed."""
    plain = message({"type": "text", "text": "3 C."})
    with pytest.raises(Unsupported):
        _roundtrip([(200, plain), (200, plain)])
    empty = {"id": "x"}
    with pytest.raises(Malformed):
        _roundtrip([(200, empty)])
    with pytest.raises(Malformed):
        _roundtrip([(200, message(THOUGHT, CALL)), (200, empty)])


@pytest.mark.slow
def test_the_switch_and_effort_in_each_apis_terms_pass_a_clean_vendor(
    run_verifier: Callable[..., VerifierRun], small_profile_dir: Path
) -> None:
    """The small profile states a switch and effort levels: over Messages its thinking is
    switched by the Messages reference's ``thinking``, over Responses its effort set by
    ``reasoning.effort``, and the clean vendor, which renders both in the model's terms, passes
    every reasoning case over all three APIs, none of them unsupported. About 10 s."""
    profile = str(small_profile_dir)
    vendor = SimulatorProcess(["--profile", profile])
    try:
        apis = ("--api", "chat,messages,responses")
        run = run_verifier(vendor.url, "--profile", profile, "--families", "reasoning", *apis)
    finally:
        vendor.stop()
    statuses = {key: outcome["status"] for key, outcome in run.outcomes().items()}
    assert set(statuses.values()) == {"pass"}, run.stdout[-3000:]
    assert {
        "reasoning/thinking-on-messages[messages]",
        "reasoning/thinking-off-messages[messages]",
        "reasoning/effort-responses[responses]",
        "reasoning/signed-thinking-weather[messages]",
        "reasoning/loop-two-cities-messages[messages]",
        "reasoning/loop-two-cities-responses[responses]",
    } <= set(statuses)
    # Each loop went round twice, then answered: three turns in each mode.
    for loop in ("loop-two-cities-messages[messages]", "loop-two-cities-responses[responses]"):
        assert run.outcomes()[f"reasoning/{loop}"]["metrics"]["requests"] == 6, loop
    effort = run.outcomes()["reasoning/effort-responses[responses]"]["metrics"]["effort"]
    assert effort["ordered"]["successes"] == 6
    assert run.returncode == 0


@pytest.mark.slow
def test_a_vendor_that_redacts_its_thinking_passes_and_gets_it_back(
    run_verifier: Callable[..., VerifierRun],
) -> None:
    """A clean vendor giving every thinking block redacted (``--redact-thinking``, as the
    Messages reference may): every family it serves passes over Messages, each redacted block
    goes back whole and is taken, and the loop, whose follow-ups cannot be counted, is
    unsupported with that reason. About 15 s."""
    profile = "kimi-k2-thinking"
    vendor = SimulatorProcess(["--profile", profile, "--redact-thinking"])
    try:
        run = run_verifier(
            vendor.url,
            *("--profile", profile, "--api", "chat,messages"),
            *("--families", "reasoning,tool_calling,wire", "--repeats", "tool_calling=2"),
        )
    finally:
        vendor.stop()
    outcomes = run.outcomes()
    assert {o["status"] for o in outcomes.values()} == {"pass", "unsupported"}, run.stdout[-3000:]
    assert run.returncode == 0
    assert outcomes["reasoning/signed-thinking-weather[messages]"]["status"] == "pass"
    assert outcomes["reasoning/thinking-on-messages[messages]"]["status"] == "pass"
    assert outcomes[f"reasoning/{LOOP}[messages]"]["message"] == (
        "unsupported: the reasoning came in a redacted thinking block, which cannot be read "
        "(non-stream-turn-1): whether the reasoning sent back reaches the prompt cannot be seen"
    )
    sent = [
        json.loads(json.loads(line)["request"]["raw"])
        for line in (run.out / "transcript.jsonl").read_text().splitlines()
        if '"reasoning/signed-thinking-weather[messages]#' in line
    ]
    back = [block for body in sent[1::2] for block in body["messages"][1]["content"]]
    assert [b["type"] for b in back] == ["redacted_thinking", "tool_use"] * 2
    assert all(b["data"] for b in back if b["type"] == "redacted_thinking")
    # Tool calling's answers over Messages reason, redacted: their bills cannot be accounted.
    accounted = [
        o["metrics"]["accounting"]
        for key, o in outcomes.items()
        if key.startswith("tool_calling/") and key.endswith("[messages]") and o["status"] == "pass"
    ]
    assert accounted and all(a["unaccounted"] == a["answers"] for a in accounted)


def _call(city: str, number: int) -> dict[str, Any]:
    return {**CALL, "id": f"toolu_{number}", "input": {"city": city}}


LOOP = "loop-two-cities-messages"


def test_a_loop_goes_round_while_the_answers_call_and_answers_each_call_in_order() -> None:
    """Each turn sends every earlier answer back as it came, its thinking first, and the
    case's results for the tool in call order."""
    turns = [
        (200, message(THOUGHT, _call("Oslo", 1))),
        (200, message(THOUGHT, _call("Rome", 2))),
        (200, DONE),
    ]
    sent: list[dict[str, Any]] = []
    assert _roundtrip(turns * 2, LOOP, sent) == []
    assert len(sent) == 6
    assert [body.get("stream", False) for body in sent] == [False] * 3 + [True] * 3
    last = sent[2]["messages"]
    assert [turn["role"] for turn in last] == ["user", "assistant", "user", "assistant", "user"]
    assert last[1]["content"] == [THOUGHT, _call("Oslo", 1)]
    results = [turn["content"][0]["content"] for turn in last[2::2]]
    assert ["Oslo" in results[0], "Rome" in results[1]] == [True, True]


def test_a_loops_follow_ups_are_graded_and_a_refused_one_ends_it() -> None:
    first = (200, message(THOUGHT, _call("Oslo", 1)))
    empty = (200, message())
    unknown = (200, message(THOUGHT, {**_call("Oslo", 2), "name": "get_stock_price"}))
    assert _roundtrip([first, empty] * 2, LOOP) == ["empty_followup"] * 2
    assert _roundtrip([first, unknown] * 2, LOOP) == ["followup_call_invalid"] * 2
    assert _roundtrip([first, (400, REFUSED)] * 2, LOOP) == ["thinking_history_rejected"] * 2
    # Without a call there is no loop to grade; without reasoning, nothing of it goes back.
    with pytest.raises(Unsupported, match="no call"):
        _roundtrip([(200, message(THOUGHT, {"type": "text", "text": "3 C."}))] * 2, LOOP)
    with pytest.raises(Unsupported, match="no answer carried"):
        _roundtrip([(200, message(_call("Oslo", 1)))] * 2, LOOP)


def test_a_loop_whose_follow_ups_report_no_count_is_no_pass() -> None:
    """Each mode's follow-ups go to the count together, each with the conversation it answered
    in chat terms; where they report no prompt tokens and nothing else is wrong, the loop is
    unsupported, never a pass."""
    given: list[list[tuple[dict[str, Any], ChatResult, str]]] = []

    def uncounted(turns: list[tuple[dict[str, Any], ChatResult, str]]) -> None:
        given.append(turns)
        return None

    turns = [(200, message(THOUGHT, _call("Oslo", 1))), (200, DONE)]
    with pytest.raises(Unsupported, match="no usage.prompt_tokens"):
        _roundtrip(turns * 2, LOOP, count=Counting("reasoning_content", uncounted))
    assert [[name for _, _, name in mode] for mode in given] == [
        ["non-stream-turn-2"],
        ["stream-turn-2"],
    ]
    request, _, _ = given[0][0]
    assert request["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert [m["role"] for m in request["messages"]] == ["user", "assistant", "tool"]
    assert request["messages"][1]["reasoning_content"] == "Look it up."
    assert request["messages"][2]["content"].startswith('{"city": "Oslo"')


@pytest.mark.parametrize("sealed", [None, "", 7])
def test_a_reasoning_item_without_its_encrypted_content_is_a_finding(sealed: Any) -> None:
    item = {**REASONING, "encrypted_content": sealed}
    (found,) = sealed_findings([FUNCTION_CALL, item], "turn-1")
    assert (found.code, found.json_path, found.actual) == (
        "encrypted_content_missing",
        "$.output[1].encrypted_content",
        sealed,
    )
    assert sealed_findings([{**REASONING, "encrypted_content": "b3BhcXVl"}], "turn-1") == []


def test_a_mode_whose_first_answer_has_no_reasoning_sends_nothing_back() -> None:
    """Each mode stands on its own answers: the stream's first answer, without reasoning,
    is not sent back because the non-stream one had some (a refusal of that history would
    say nothing of the reasoning)."""
    sent: list[dict[str, Any]] = []
    plain = message(CALL)
    assert _roundtrip([(200, message(THOUGHT, CALL)), (200, DONE), (200, plain)], sent=sent) == []
    assert len(sent) == 3
