"""The Anthropic Messages protocol module: chat bodies rendered, answers and streams read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from verifier import resources
from verifier.protocol.answers import ChatResult
from verifier.protocol.apis import NotExpressible
from verifier.protocol.messages import (
    DEFAULT_MAX_TOKENS,
    accumulate,
    parse_answer,
    read_recorded,
    request_body,
)

USER = {"role": "user", "content": "Hi"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}

# Streams real servers sent, recorded byte for byte (the model path replaced).
STREAMS = Path(__file__).parent / "data" / "streams"


def render(**chat: Any) -> dict[str, Any]:
    return request_body({"model": "m", "messages": [USER], **chat}, stream=False)


def refused(**chat: Any) -> str:
    with pytest.raises(NotExpressible) as caught:
        request_body({"model": "m", "messages": [USER], **chat}, stream=False)
    assert caught.value.api == "messages"
    return caught.value.reason


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ----------------------------------------------------------------------------- rendering


def test_a_plain_body_gets_the_default_max_tokens_and_no_stream() -> None:
    assert render() == {"model": "m", "max_tokens": DEFAULT_MAX_TOKENS, "messages": [USER]}
    assert DEFAULT_MAX_TOKENS == 4096


def test_stream_is_the_arguments_and_stream_options_and_seed_are_dropped() -> None:
    chat = {"model": "m", "messages": [USER], "stream": False, "seed": 7}
    body = request_body({**chat, "stream_options": {"include_usage": True}}, stream=True)
    assert body == {"model": "m", "max_tokens": 4096, "messages": [USER], "stream": True}
    assert "stream" not in request_body({**chat, "stream": True}, stream=False)


@pytest.mark.parametrize(
    "thinking", [{"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"}]
)
def test_the_thinking_object_goes_as_it_is(thinking: dict[str, Any]) -> None:
    """Moonshot's, DeepSeek's and Zhipu's chat ``thinking`` is the Messages object itself."""
    assert render(thinking=thinking) == {**render(), "thinking": thinking}


def test_one_system_message_is_a_string_and_several_are_text_blocks() -> None:
    one = render(messages=[{"role": "system", "content": "Be brief."}, USER])
    assert one["system"] == "Be brief." and one["messages"] == [USER]
    several = render(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
            USER,
        ]
    )
    assert several["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Use French."},
    ]


def test_a_system_message_after_the_conversation_began_is_not_expressible() -> None:
    late = [USER, {"role": "assistant", "content": "Hello"}, {"role": "system", "content": "x"}]
    assert "system message after the conversation began" in refused(messages=[*late, USER])


def test_user_parts_become_text_and_image_blocks() -> None:
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg", "detail": "auto"}},
    ]
    body = render(messages=[{"role": "user", "content": parts}])
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
    ]
    # A URL the server must not fetch is sent as it is: refusing it is the server's part.
    ftp = [{"type": "image_url", "image_url": {"url": "ftp://host/a.png"}}]
    (sent,) = render(messages=[{"role": "user", "content": ftp}])["messages"][0]["content"]
    assert sent == {"type": "image", "source": {"type": "url", "url": "ftp://host/a.png"}}


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "input_audio"),
        ({"type": "image_url", "image_url": {"url": "data:image/png,abc"}}, "not base64"),
        ({"type": "image_url", "image_url": {"url": 7}}, "not a string"),
        (
            {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}},
            "image detail",
        ),
    ],
)
def test_a_user_part_messages_cannot_carry_is_not_expressible(
    part: dict[str, Any], reason: str
) -> None:
    assert reason in refused(messages=[{"role": "user", "content": [part]}])


def test_an_assistant_message_becomes_text_and_tool_use_blocks() -> None:
    assistant = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [call("call_1", "get_weather", '{"city": "Zürich"}')],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    body = render(messages=[USER, assistant, result])
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {
                "type": "tool_use",
                "id": "call_1",
                "name": "get_weather",
                "input": {"city": "Zürich"},
            },
        ],
    }


def test_an_assistant_message_with_only_tool_calls_has_no_text_block() -> None:
    assistant = {"role": "assistant", "content": "", "tool_calls": [call("c", "f", "{}")]}
    body = render(messages=[USER, assistant, {"role": "tool", "tool_call_id": "c", "content": ""}])
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c", "name": "f", "input": {}}
    ]


@pytest.mark.parametrize(
    ("assistant", "reason"),
    [
        ({"tool_calls": [call("c", "f", "[1, 2]")]}, "not a JSON object"),
        ({"tool_calls": [call("c", "f", "{oops")]}, "not a JSON object"),
        ({"content": "x", "reasoning_content": "hmm"}, "reasoning_content"),
        ({"content": "x", "reasoning": "hmm"}, "reasoning"),
        ({"content": ""}, "neither text nor tool calls"),
        ({"content": "x", "refusal": "no"}, "refusal"),
    ],
)
def test_an_assistant_message_messages_cannot_carry_is_not_expressible(
    assistant: dict[str, Any], reason: str
) -> None:
    messages = [USER, {"role": "assistant", **assistant}, USER]
    assert reason in refused(messages=messages)


def test_a_conversation_ending_with_an_assistant_message_is_not_expressible() -> None:
    # Messages would continue that message (a prefill); chat answers after it.
    last = {"role": "assistant", "content": "Hello"}
    assert "ends with an assistant message" in refused(messages=[USER, last])


def test_consecutive_tool_messages_go_into_one_user_message() -> None:
    assistant = {"role": "assistant", "tool_calls": [call("a", "f", "{}"), call("b", "f", "{}")]}
    results = [
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "two"}]},
    ]
    body = render(messages=[USER, assistant, *results, USER])
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "user"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "one"},
        {"type": "tool_result", "tool_use_id": "b", "content": "two"},
    ]


def test_tools_become_input_schemas() -> None:
    bare = {"type": "function", "function": {"name": "now", "strict": True}}
    assert render(tools=[WEATHER, bare])["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather of a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"name": "now", "input_schema": {"type": "object", "properties": {}}, "strict": True},
    ]


def test_a_tool_of_another_type_is_not_expressible() -> None:
    assert "no such tool" in refused(tools=[{"type": "custom", "custom": {"name": "x"}}])


@pytest.mark.parametrize(
    ("tool_choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            None,
            {"type": "tool", "name": "get_weather"},
        ),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none"}),
        (None, True, None),
    ],
)
def test_tool_choice_and_parallel_tool_calls(
    tool_choice: Any, parallel: bool | None, expected: dict[str, Any] | None
) -> None:
    chat: dict[str, Any] = {"tools": [WEATHER]}
    if tool_choice is not None:
        chat["tool_choice"] = tool_choice
    if parallel is not None:
        chat["parallel_tool_calls"] = parallel
    assert render(**chat).get("tool_choice") == expected


def test_a_tool_choice_messages_has_not_is_not_expressible() -> None:
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}
    assert "tool_choice" in refused(tools=[WEATHER], tool_choice=allowed)


@pytest.mark.parametrize(
    ("chat", "expected"),
    [
        ({"max_tokens": 16}, 16),
        ({"max_completion_tokens": 32}, 32),
        ({"max_tokens": 8, "max_completion_tokens": 8}, 8),
        ({"max_tokens": None}, DEFAULT_MAX_TOKENS),
    ],
)
def test_max_tokens(chat: dict[str, Any], expected: int) -> None:
    assert render(**chat)["max_tokens"] == expected


def test_two_different_token_limits_are_not_expressible() -> None:
    assert "differ" in refused(max_tokens=8, max_completion_tokens=16)


def test_sampling_fields_pass_and_stop_becomes_stop_sequences() -> None:
    body = render(temperature=0, top_p=0.9, top_k=5, stop="END")
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0, 0.9, 5)
    assert body["stop_sequences"] == ["END"]
    assert render(stop=["a", "b"])["stop_sequences"] == ["a", "b"]


def test_a_temperature_above_one_is_not_expressible() -> None:
    assert "at most 1" in refused(temperature=1.5)


def test_a_json_schema_response_format_becomes_output_config() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    assert render(response_format=response_format)["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}
    }
    assert "output_config" not in render(response_format={"type": "text"})
    assert "json_object" in refused(response_format={"type": "json_object"})


@pytest.mark.parametrize(
    ("chat", "key"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"n": 2}, "n"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"presence_penalty": -1}, "presence_penalty"),
        ({"user": "verifier"}, "user"),
        ({"reasoning_effort": "low"}, "reasoning_effort"),
        ({"messages": [{"role": "user", "content": "Hi", "name": "ann"}]}, "name"),
    ],
)
def test_a_field_messages_has_no_counterpart_for_is_not_expressible_by_name(
    chat: dict[str, Any], key: str
) -> None:
    assert refused(**chat).startswith(f"the Messages API has no {key}")


def test_values_that_ask_nothing_are_said_by_leaving_them_out() -> None:
    chat = {"logprobs": False, "n": 1, "frequency_penalty": 0, "presence_penalty": 0.0}
    assert render(**chat, tools=None, stop=None) == render()


# A chat conversation: system messages first, then user messages, assistant messages (with
# text or with tool calls) and tool results (``tool`` answers one call, ``results`` all calls
# left) in any order, except that a result answers a call of the assistant message before it
# (as chat requires). Half are drawn as rounds that take turns, which any order rarely does.
ANY_ORDER = st.lists(st.sampled_from(["user", "assistant", "calls", "tool", "results"]), max_size=8)
ROUNDS = st.lists(
    st.sampled_from([["user", "assistant"], ["user", "calls", "results", "assistant"]]), max_size=3
)
LAST = st.sampled_from([["user"], ["user", "calls", "results"], ["user", "calls", "tool"]])
TURNS = st.builds(lambda rounds, last: [s for r in rounds for s in r] + last, ROUNDS, LAST)
STEPS = st.one_of(ANY_ORDER.filter(bool), TURNS)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    systems = draw(st.lists(st.sampled_from(["system", "developer"]), max_size=2))
    messages: list[dict[str, Any]] = [
        {"role": role, "content": f"rule {n}"} for n, role in enumerate(systems)
    ]
    pending: list[str] = []
    for n, step in enumerate(draw(STEPS)):
        if step in ("tool", "results") and pending:
            answered = pending if step == "results" else pending[:1]
            messages += [{"role": "tool", "tool_call_id": i, "content": f"{n}"} for i in answered]
            pending = pending[len(answered) :]
            continue
        pending = []
        if step == "calls":
            count = draw(st.integers(1, 3))
            calls = [call(f"c{n}.{i}", "f", json.dumps({"i": i})) for i in range(count)]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            pending = [c["id"] for c in calls]
        elif step == "assistant":
            messages.append({"role": "assistant", "content": f"answer {n}"})
        else:  # a user message, also where a result would have no call left to answer
            messages.append({"role": "user", "content": f"question {n}"})
    return messages


def proper(messages: list[dict[str, Any]]) -> bool:
    """The conversation takes turns in chat's terms: user, assistant, then user or results."""
    allowed = {None: {"user"}, "user": {"assistant"}, "assistant": {"user", "tool"}}
    allowed["tool"] = {"tool", "assistant"}
    previous = None
    for message in messages:
        if message["role"] not in ("system", "developer"):
            if message["role"] not in allowed[previous]:
                return False
            previous = message["role"]
    return True


def chat_turns(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The turns a chat conversation says: a run of tool results is one user turn."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        role = message["role"]
        if role in ("system", "developer"):
            continue
        said = [message["content"]] if message.get("content") else []
        said += [c["function"]["arguments"] for c in message.get("tool_calls", [])]
        if role == "tool" and turns and turns[-1][0] == "results":
            turns[-1][1].extend(said)
        else:
            turns.append(("results" if role == "tool" else role, said))
    return turns


def rendered_turns(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    turns = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        results = all(block["type"] == "tool_result" for block in blocks)
        said = [
            block.get("text") or block.get("content") or json.dumps(block.get("input"))
            for block in blocks
        ]
        turns.append(("results" if results else message["role"], said))
    return turns


def alternates(roles: list[str]) -> bool:
    return all(role == ("user" if n % 2 == 0 else "assistant") for n, role in enumerate(roles))


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_rendered_roles_alternate_exactly_when_the_chat_conversation_takes_turns(
    messages: list[dict[str, Any]],
) -> None:
    turns = chat_turns(messages)
    try:
        body = request_body({"model": "m", "messages": messages}, stream=False)
    except NotExpressible as refusal:
        assert turns[-1][0] == "assistant", refusal.reason
        return
    # Nothing is lost or reordered: each chat turn is one Messages message, tool runs merged.
    assert rendered_turns(body) == turns
    roles = [message["role"] for message in body["messages"]]
    assert alternates(roles) == proper(messages)
    system_count = sum(m["role"] in ("system", "developer") for m in messages)
    assert ("system" in body) == (system_count > 0)


# ----------------------------------------------------------------------------- reading


def message(*content: dict[str, Any], stop_reason: Any = "end_turn", **extra: Any) -> Any:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 7,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
        },
    }
    return {**body, **extra}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "c2ln"}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def parse(body: Any, status: int = 200) -> ChatResult:
    return parse_answer(status, json.dumps(body).encode(), {"content-type": "application/json"})


def codes(result: ChatResult) -> list[str]:
    return [problem.code for problem in result.problems]


def test_a_text_answer_is_one_assistant_choice() -> None:
    result = parse(message(text("Hello"), text(" there")))
    assert codes(result) == [] and result.api == "messages"
    choice = result.choice
    assert choice is not None and len(result.choices) == 1
    assert (choice.index, choice.role, choice.content) == (0, "assistant", "Hello there")
    assert (choice.reasoning, choice.reasoning_field, choice.tool_calls) == (None, None, [])
    assert (result.id, result.model, result.usage_source) == ("msg_1", "claude-test", "body")
    assert result.usage == {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
    assert result.body["content"] == [text("Hello"), text(" there")]


def test_empty_text_blocks_count_and_no_text_block_is_none() -> None:
    empty = parse(message(text("")))
    assert empty.choice is not None and empty.choice.content == ""
    none = parse(message(tool_use("t", "f", {}), stop_reason="tool_use"))
    assert none.choice is not None and none.choice.content is None


def test_thinking_is_the_reasoning_and_redacted_thinking_stays_in_the_body() -> None:
    redacted = {"type": "redacted_thinking", "data": "b3BhcXVl"}
    result = parse(message(thinking("Let me "), redacted, thinking("see."), text("42")))
    assert codes(result) == []
    choice = result.choice
    assert choice is not None
    assert (choice.reasoning, choice.reasoning_field, choice.content) == (
        "Let me see.",
        "thinking",
        "42",
    )
    assert redacted in result.body["content"]


def test_tool_use_blocks_are_tool_calls_with_json_arguments() -> None:
    result = parse(
        message(
            text("Checking."),
            tool_use("toolu_1", "get_weather", {"city": "Zürich"}),
            tool_use("toolu_2", "get_time", {}),
            stop_reason="tool_use",
        )
    )
    assert codes(result) == []
    choice = result.choice
    assert choice is not None and choice.content == "Checking."
    assert [c.to_dict() for c in choice.tool_calls] == [
        {
            "index": 0,
            "id": "toolu_1",
            "type": "function",
            "name": "get_weather",
            "arguments": '{"city": "Zürich"}',
        },
        {"index": 1, "id": "toolu_2", "type": "function", "name": "get_time", "arguments": "{}"},
    ]
    assert choice.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        ("model_context_window_exceeded", "model_context_window_exceeded"),
    ],
)
def test_each_stop_reason(stop_reason: str, finish_reason: str) -> None:
    result = parse(message(text("x"), stop_reason=stop_reason))
    assert codes(result) == []
    assert result.choice is not None and result.choice.finish_reason == finish_reason


@pytest.mark.parametrize("stop_reason", [None, 3])
def test_a_missing_stop_reason_is_none_and_a_problem(stop_reason: Any) -> None:
    result = parse(message(text("x"), stop_reason=stop_reason))
    assert result.choice is not None and result.choice.finish_reason is None
    assert [(p.code, p.where) for p in result.problems] == [
        ("finish_reason_missing", "$.stop_reason")
    ]
    body = message(text("x"))
    del body["stop_reason"]
    assert codes(parse(body)) == ["finish_reason_missing"]


def test_cached_input_counts_in_prompt_tokens() -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 20,
        "output_tokens": 7,
    }
    result = parse(message(text("x"), usage=usage))
    assert result.usage == {
        "prompt_tokens": 35,
        "completion_tokens": 7,
        "total_tokens": 42,
        "prompt_tokens_details": {"cached_tokens": 20},
    }
    # The native usage stays readable in the body.
    assert result.body["usage"] == usage


def test_null_cache_counts_count_nothing() -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "output_tokens": 7,
    }
    result = parse(message(text("x"), usage=usage))
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}


@pytest.mark.parametrize(
    ("usage", "code"),
    [
        (None, "usage_missing"),
        ({"output_tokens": 7}, "usage_malformed"),
        ({"input_tokens": "12", "output_tokens": 7}, "usage_malformed"),
        ({"input_tokens": 12, "output_tokens": -1}, "usage_malformed"),
        ({"input_tokens": 12, "output_tokens": True}, "usage_malformed"),
        (
            {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 1.5},
            "usage_malformed",
        ),
    ],
)
def test_usage_without_counts_is_a_problem_and_no_usage(usage: Any, code: str) -> None:
    result = parse(message(text("x"), usage=usage))
    assert [(p.code, p.where) for p in result.problems] == [(code, "$.usage")]
    assert result.usage is None and result.usage_source is None


@pytest.mark.parametrize(
    ("usage", "absent"),
    [
        (
            {"input_tokens": 3, "output_tokens": 2},
            ["cache_creation_input_tokens", "cache_read_input_tokens"],
        ),
        (
            {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 2},
            ["cache_creation_input_tokens"],
        ),
    ],
)
def test_usage_without_its_cache_counts_is_a_problem_but_still_counts(
    usage: dict[str, Any], absent: list[str]
) -> None:
    """The reference requires both cache counts (null when nothing was cached), as
    llama-server leaves out the creation count; the prompt is still what was given."""
    result = parse(message(text("x"), usage=usage))
    assert codes(result) == ["cache_usage_missing"]
    assert all(name in result.problems[0].message for name in absent)
    assert result.usage is not None and result.usage["prompt_tokens"] == 3


def test_a_messages_error_body_is_read_without_problems() -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    result = parse(error, status=400)
    assert codes(result) == [] and result.choices == [] and result.api == "messages"
    assert result.error_object == {"type": "invalid_request_error", "message": "bad"}


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "bad"}},
        {"type": "error", "error": {"type": "x"}},
        {"type": "error", "error": "bad"},
        ["bad"],
    ],
)
def test_an_error_body_of_another_shape_is_a_problem(body: Any) -> None:
    assert codes(parse(body, status=500)) == ["error_not_messages_shape"]


def test_a_body_that_is_not_json_is_a_problem() -> None:
    result = parse_answer(502, b"<html>Bad gateway</html>", {})
    assert codes(result) == ["body_not_json"] and result.api == "messages"


@pytest.mark.parametrize(
    ("body", "problems", "choices"),
    [
        (["x"], [("not_a_completion", None)], 0),
        (message(text("x"), type="completion"), [("not_a_completion", "$.type")], 1),
        (message(text("x"), role="user"), [("not_a_completion", "$.role")], 1),
        ({**message(), "content": "x"}, [("not_a_completion", "$.content")], 0),
        (message({"type": "image"}), [("unknown_content_block", "$.content[0]")], 1),
        (message({"type": ["text"]}), [("unknown_content_block", "$.content[0]")], 1),
        ({**message(), "content": ["x"]}, [("malformed_content_block", "$.content[0]")], 1),
        (message({"type": "text"}), [("malformed_content_block", "$.content[0]")], 1),
        (
            message({"type": "tool_use", "name": "f", "input": {}}, stop_reason="tool_use"),
            [("malformed_content_block", "$.content[0]")],
            1,
        ),
        (
            message(
                {"type": "tool_use", "id": "t", "name": "f", "input": [1]}, stop_reason="tool_use"
            ),
            [("malformed_tool_calls", "$.content[0]")],
            1,
        ),
    ],
)
def test_a_2xx_body_that_is_not_a_message_is_a_problem(
    body: Any, problems: list[tuple[str, str | None]], choices: int
) -> None:
    result = parse(body)
    assert [(p.code, p.where) for p in result.problems] == problems
    assert len(result.choices) == choices


# ----------------------------------------------------------------------------- streams


def pieces(value: str, size: int) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)]


def events_of(body: dict[str, Any], size: int = 3) -> list[dict[str, Any]]:
    """The events a server streams for `body`, its texts in pieces of `size` characters."""
    start_usage = {k: v for k, v in body["usage"].items() if k != "output_tokens"}
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "usage": {**start_usage, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        begin = dict(block)
        if kind == "text":
            begin["text"] = ""
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"], size)]
        elif kind == "thinking":
            begin = {"type": "thinking", "thinking": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"], size)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            begin["input"] = {}
            arguments = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in pieces(arguments, size)
            ]
        events.append({"type": "content_block_start", "index": index, "content_block": begin})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    final = {"stop_reason": body["stop_reason"], "stop_sequence": body["stop_sequence"]}
    usage = {"output_tokens": body["usage"]["output_tokens"]}
    events += [{"type": "message_delta", "delta": final, "usage": usage}, {"type": "message_stop"}]
    return events


def sse(events: list[Any], *, newline: str = "\n") -> bytes:
    """The SSE body of `events`, each named by its type as Anthropic's server names them."""
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        typed = isinstance(event, dict) and "type" in event
        name = f"event: {event['type']}{newline}" if typed else ""
        out.append(f"{name}data: {data}{newline}{newline}")
    return "".join(out).encode()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def stream(body: bytes | list[Any], cuts: list[int] | None = None) -> ChatResult:
    data = body if isinstance(body, bytes) else sse(body)
    chunks = [data] if cuts is None else split(data, cuts)
    return accumulate(chunks, ChatResult(stream=True, status=200))


def located(result: ChatResult) -> list[tuple[str, str | None]]:
    return [(p.code, p.where) for p in result.problems]


MIXED = message(
    thinking("I should check the weather."),
    text("Checking Zürich."),
    tool_use("toolu_1", "get_weather", {"city": "Zürich", "days": 2}),
    stop_reason="tool_use",
    usage={
        "input_tokens": 30,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": 100,
        "output_tokens": 25,
    },
)
PING = {"type": "ping"}


def test_a_stream_is_read_into_one_choice() -> None:
    events = events_of(MIXED)
    events.insert(1, PING)
    result = stream(events)
    assert codes(result) == [] and result.api == "messages"
    assert result.chunks == events and result.done and result.body is None
    choice = result.choice
    assert choice is not None and len(result.choices) == 1
    assert (choice.reasoning, choice.reasoning_field) == ("I should check the weather.", "thinking")
    assert choice.content == "Checking Zürich." and choice.finish_reason == "tool_calls"
    [tool_call] = choice.tool_calls
    assert (tool_call.index, tool_call.id, tool_call.type, tool_call.name) == (
        0,
        "toolu_1",
        "function",
        "get_weather",
    )
    assert tool_call.arguments == json.dumps({"city": "Zürich", "days": 2})
    assert (result.id, result.model, result.usage_source) == (
        "msg_1",
        "claude-test",
        "message_delta",
    )
    assert result.usage == {
        "prompt_tokens": 130,
        "completion_tokens": 25,
        "total_tokens": 155,
        "prompt_tokens_details": {"cached_tokens": 100},
    }


def test_message_delta_usage_overrides_message_start_input_counts() -> None:
    events = events_of(message(text("x")))
    events[-2]["usage"] = {"input_tokens": 50, "cache_creation_input_tokens": 4, "output_tokens": 9}
    assert stream(events).usage == {"prompt_tokens": 54, "completion_tokens": 9, "total_tokens": 63}


def test_a_tool_use_block_without_input_deltas_has_its_start_input() -> None:
    events = events_of(message(tool_use("t", "now", {}), stop_reason="tool_use"))
    events = [e for e in events if e["type"] != "content_block_delta"]
    result = stream(events)
    assert codes(result) == []
    assert result.choice is not None and result.choice.tool_calls[0].arguments == "{}"


def test_token_arrivals_are_timed_per_delta_carrying_text() -> None:
    events = events_of(MIXED, size=100)
    ticks = iter(float(n) for n in range(100))
    result = accumulate([sse([e]) for e in events], ChatResult(True, 200), lambda: next(ticks))
    # One event per chunk, timed at its chunk: the thinking, text and input deltas (the
    # signature delta carries no token).
    carrying = [
        float(n)
        for n, e in enumerate(events)
        if e["type"] == "content_block_delta" and e["delta"]["type"] != "signature_delta"
    ]
    assert result.token_arrivals == carrying and len(carrying) == 3
    assert result.first_reasoning == carrying[0]


def test_an_untimed_stream_has_no_arrivals() -> None:
    result = stream(events_of(MIXED))
    assert result.token_arrivals == [] and result.first_reasoning is None


@settings(max_examples=100, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0), max_size=40),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_a_stream_split_anywhere_reads_as_the_whole(cuts: list[int], newline: str) -> None:
    body = sse([PING, *events_of(MIXED, size=2)], newline=newline)
    whole, split_up = stream(body), stream(body, cuts)
    assert codes(split_up) == [] and split_up.chunks == whole.chunks
    assert split_up.choices == whole.choices and split_up.usage == whole.usage


# Messages as a server might send them: any blocks, texts and inputs, stop reasons, usage.
TEXTS = st.text(max_size=12)
BLOCKS = st.one_of(
    TEXTS.map(text),
    TEXTS.map(thinking),
    st.builds(
        tool_use,
        st.text("abc", min_size=1, max_size=4).map(lambda s: f"toolu_{s}"),
        st.sampled_from(["f", "get_weather"]),
        st.dictionaries(TEXTS, st.one_of(st.integers(), TEXTS, st.booleans()), max_size=3),
    ),
    st.just({"type": "redacted_thinking", "data": "b3BhcXVl"}),
)
USAGES = st.fixed_dictionaries(
    {
        "input_tokens": st.integers(0, 10**6),
        "output_tokens": st.integers(0, 10**6),
        "cache_creation_input_tokens": st.none() | st.integers(0, 1000),
        "cache_read_input_tokens": st.none() | st.integers(0, 1000),
    },
)
STOP_REASONS = st.sampled_from(
    ["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn"]
)


def test_the_message_s_own_stop_reason_and_stop_sequence_are_kept() -> None:
    """Chat's finish_reason says "stop" for both; the wire family reads which it was."""
    body = message(text("Hello"), stop_reason="stop_sequence", stop_sequence="!")
    for result in (parse(body), stream(events_of(body))):
        choice = result.choice
        assert choice is not None
        assert (choice.finish_reason, choice.stop_reason, choice.stop_sequence) == (
            "stop",
            "stop_sequence",
            "!",
        )


@settings(max_examples=100, deadline=None)
@given(
    blocks=st.lists(BLOCKS, max_size=5),
    stop_reason=STOP_REASONS,
    usage=USAGES,
    size=st.integers(1, 5),
)
def test_a_stream_and_its_message_give_the_same_choice(
    blocks: list[dict[str, Any]], stop_reason: str, usage: dict[str, Any], size: int
) -> None:
    body = message(*blocks, stop_reason=stop_reason, usage=usage)
    whole, streamed = parse(body), stream(events_of(body, size))
    assert codes(whole) == [] and codes(streamed) == []
    a, b = whole.choice, streamed.choice
    assert a is not None and b is not None
    assert (a.content, a.reasoning, a.reasoning_field, a.finish_reason) == (
        b.content,
        b.reasoning,
        b.reasoning_field,
        b.finish_reason,
    )
    calls = [
        [(c.index, c.id, c.name, json.loads(c.arguments or "")) for c in x.tool_calls]
        for x in (a, b)
    ]
    assert calls[0] == calls[1]
    assert whole.usage == streamed.usage and whole.usage is not None


@pytest.mark.parametrize("name", ["messages_answer", "messages_event"])
def test_the_schemas_are_draft_2020_12_schemas_of_the_package(name: str) -> None:
    schema = resources.schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"https://llm-endpoint-verifier.invalid/schemas/{name}.schema.json"


def test_the_events_and_messages_of_these_tests_are_valid_by_the_schemas() -> None:
    answers, events = resources.validator("messages_answer"), resources.validator("messages_event")
    for body in (
        MIXED,
        message(text("")),
        message(thinking("a"), {"type": "redacted_thinking", "data": "x"}),
    ):
        assert list(answers.iter_errors(body)) == []
        for event in [PING, *events_of(body)]:
            assert list(events.iter_errors(event)) == [], event
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert list(events.iter_errors(error)) == []


def bad_answers() -> list[Any]:
    no_stop_reason = message(text("x"))
    del no_stop_reason["stop_reason"]
    return [
        no_stop_reason,
        message(text("x"), usage={"input_tokens": -1, "output_tokens": 7}),
        message(
            text("x"), usage={"input_tokens": 1, "output_tokens": 7, "cache_read_input_tokens": -2}
        ),
        message({"type": "image", "source": {}}),
        message(text("x"), stop_reason="done"),
        message(tool_use("t", "f", {}) | {"input": "x"}),
    ]


@pytest.mark.parametrize("body", bad_answers())
def test_the_answer_schema_refuses_a_broken_message(body: Any) -> None:
    assert not resources.validator("messages_answer").is_valid(body)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "image"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "audio_delta"}},
        {"type": "content_block_delta", "index": -1, "delta": {"type": "text_delta", "text": ""}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": -3},
        },
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_start", "message": {"type": "message"}},
        {"type": "error", "error": {"message": "no type"}},
        {"type": "mystery"},
    ],
)
def test_the_event_schema_refuses_a_broken_event(event: Any) -> None:
    assert not resources.validator("messages_event").is_valid(event)


# Each violation of the event grammar, shown on a text answer's events.
T0, T1, T2, T3, T4, T5 = TEXT = events_of(message(text("Hello")), size=5)
DELTA = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}
DELTA_1 = {**DELTA, "index": 1}
START_1 = {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}
STOP_1 = {"type": "content_block_stop", "index": 1}
UNKNOWN_1 = {**START_1, "content_block": {"type": "server_tool_use", "id": "s", "name": "web"}}
JSON_DELTA = {**DELTA, "delta": {"type": "input_json_delta", "partial_json": "{"}}
THINKING_DELTA = {**DELTA, "delta": {"type": "thinking_delta", "thinking": "Hm."}}
MISNAMED_PING = b'event: message_stop\ndata: {"type": "ping"}\n\n'
NO_STOP_REASON = {**T4, "delta": {"stop_reason": None}}
NO_USAGE = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([T0, "{oops", *TEXT[1:]], [("chunk_not_json", "event 1")]),
        ([T0, [1], *TEXT[1:]], [("chunk_not_object", "event 1")]),
        ([T0, {"index": 0}, *TEXT[1:]], [("event_type_missing", "event 1")]),
        (sse([T0]) + MISNAMED_PING + sse(TEXT[1:]), [("event_name_mismatch", "event 1")]),
        (
            TEXT[1:],
            # Without message_start the stream never says its input tokens.
            [("message_start_missing", "event 0"), ("usage_malformed", "event 3")],
        ),
        ([T0, T0, *TEXT[1:]], [("message_start_repeated", "event 1")]),
        ([T0, START_1, DELTA_1, STOP_1, T4, T5], [("content_block_index_wrong", "event 1")]),
        ([T0, T1, T2, START_1, STOP_1, T4, T5], [("content_block_not_stopped", "event 3")]),
        ([T0, T1, T2, T4, T5], [("content_block_not_stopped", "event 3")]),
        ([T0, T1, T2, T3, DELTA, T4, T5], [("delta_outside_block", "event 4")]),
        ([T0, T1, T2, DELTA_1, T3, T4, T5], [("delta_outside_block", "event 3")]),
        ([T0, T1, T2, JSON_DELTA, T3, T4, T5], [("call_delta_type_mismatch", "event 3")]),
        ([T0, T1, T2, THINKING_DELTA, T3, T4, T5], [("delta_type_mismatch", "event 3")]),
        (
            [T0, T1, T2, T3, {**JSON_DELTA, "index": 1}, T4, T5],
            [("call_delta_outside_block", "event 4")],
        ),
        ([T0, T1, T2, STOP_1, T3, T4, T5], [("content_block_stop_mismatch", "event 3")]),
        (
            [T0, T1, T2, T3, T4, START_1, STOP_1, T5],
            [("event_out_of_order", "event 5"), ("event_out_of_order", "event 6")],
        ),
        (
            [T0, T1, T2, T3, T5],
            [("message_delta_missing", "event 4"), ("finish_reason_missing", None)],
        ),
        ([T0, T1, T2, T3, T4], [("message_stop_missing", None)]),
        ([T0, T1, T2], [("message_stop_missing", None), ("finish_reason_missing", None)]),
        ([*TEXT, T5], [("event_after_message_stop", "event 6")]),
        (
            [T0, T1, T2, T3, T4, {**T4, "delta": {"stop_reason": "max_tokens"}}, T5],
            [("finish_reason_repeated", "event 5")],
        ),
        ([T0, T1, T2, T3, NO_STOP_REASON, T5], [("finish_reason_missing", "event 4")]),
        ([T0, T1, T2, T3, NO_USAGE, T5], [("usage_missing", "event 4")]),
        (
            [T0, T1, T2, T3, {**T4, "usage": {"output_tokens": "5"}}, T5],
            [("usage_malformed", "event 4")],
        ),
        (
            [{"type": "message_start"}, *TEXT[1:]],
            [("malformed_event", "event 0"), ("usage_malformed", "event 4")],
        ),
        (
            [T0, T1, T2, {**DELTA, "delta": {"type": "text_delta", "text": 5}}, T3, T4, T5],
            [("malformed_event", "event 3")],
        ),
        (
            [T0, T1, T2, {"type": "content_block_delta", "index": 0}, T3, T4, T5],
            [("malformed_event", "event 3")],
        ),
        ([T0, T1, T2, T3, UNKNOWN_1, STOP_1, T4, T5], [("unknown_content_block", "event 4")]),
        (
            [T0, T1, T2, T3, {**START_1, "content_block": {"type": []}}, STOP_1, T4, T5],
            [("unknown_content_block", "event 4")],
        ),
        (sse(TEXT).removesuffix(b"\n"), [("event_unterminated", None)]),
        (b"", [("message_start_missing", None), ("message_stop_missing", None)]),
    ],
)
def test_each_violation_of_the_event_grammar_is_its_problem(
    body: bytes | list[Any], expected: list[tuple[str, str | None]]
) -> None:
    assert located(stream(body)) == expected


def test_a_violating_stream_still_reads_what_came() -> None:
    # A delta for a block already stopped is a problem, and its text is kept.
    result = stream([T0, T1, T2, T3, DELTA, T4, T5])
    assert result.choice is not None and result.choice.content == "Hello!"


def test_an_unknown_event_type_and_pings_pass() -> None:
    # Anthropic's versioning policy allows new event types.
    result = stream([PING, T0, T1, {"type": "new_event_kind"}, *TEXT[2:]])
    assert codes(result) == []
    assert result.choice is not None and result.choice.content == "Hello"


def test_an_error_event_is_the_answer_and_not_a_truncation() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    result = stream([*TEXT[:3], error])
    assert located(result) == [("stream_error_event", "event 3")]
    assert result.body == error and result.error_object == error["error"]
    assert not result.done


def test_an_error_event_name_with_other_data_is_an_error_too() -> None:
    body = sse(TEXT[:1]) + b'event: error\ndata: {"type": "overloaded"}\n\n'
    assert codes(stream(body)) == ["event_name_mismatch", "stream_error_event"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
# Objects typed as the reference's events and blocks, their fields anything.
TYPED: st.SearchStrategy[dict[str, Any]] = st.builds(
    lambda kind, fields: {**fields, "type": kind},
    st.sampled_from(
        [
            *{e["type"] for e in events_of(MIXED)},
            "error",
            "ping",
            "text",
            "text_delta",
            "tool_use",
            "input_json_delta",
            "thinking_delta",
        ]
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "index",
                "delta",
                "content_block",
                "message",
                "usage",
                "content",
                "text",
                "stop_reason",
                "input_tokens",
            ]
        ),
        st.integers(0, 2) | JSON | st.deferred(lambda: TYPED),
        max_size=4,
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(TYPED | JSON, max_size=10))
def test_any_events_are_read_without_an_exception(events: list[Any]) -> None:
    result = read_recorded(events, status=200, stream=True)
    assert result.api == "messages" and len(result.chunks) == len(events)
    assert len(result.choices) <= 1


@settings(max_examples=300, deadline=None)
@given(TYPED | JSON)
def test_any_body_is_read_without_an_exception(body: Any) -> None:
    assert parse(body).api == "messages" and parse(body, status=400).api == "messages"


def test_a_recorded_stream_reads_as_it_did_on_the_wire() -> None:
    live = stream(events_of(MIXED))
    again = read_recorded(live.chunks, status=200, stream=True)
    assert again.api == "messages" and again.stream
    assert (again.choices, again.usage, again.problems, again.done) == (
        live.choices,
        live.usage,
        live.problems,
        live.done,
    )
    broken = stream([T0, "{oops", *TEXT[1:]])
    assert read_recorded(broken.chunks, status=200, stream=True).problems == broken.problems


def test_a_recorded_body_reads_as_it_did_on_the_wire() -> None:
    live = parse(MIXED)
    again = read_recorded(MIXED, status=200, stream=False)
    assert (again.choices, again.usage, again.problems, again.api) == (
        live.choices,
        live.usage,
        live.problems,
        "messages",
    )
    error = {"type": "error", "error": {"type": "not_found_error", "message": "no model"}}
    assert read_recorded(error, status=404, stream=False).error_object == error["error"]


def test_a_real_servers_stream_with_overlapping_blocks_is_read_and_its_order_reported() -> None:
    """llama-server 11434's answer to a forced call: the text block is still open when the
    tool_use block starts (and stopped after it), and the tool_use start has no ``input: {}``
    (the event schema's business, not the call's: its input comes in the deltas)."""
    data = (STREAMS / "llama-server-messages-tool-call.sse").read_bytes()
    result = accumulate([data], ChatResult(stream=True, status=200))
    choice = result.choice
    assert choice is not None
    assert (choice.content, choice.finish_reason) == ("Hello!", "tool_calls")
    assert [(c.name, c.arguments) for c in choice.tool_calls] == [("get_weather", '{"city":""}')]
    assert [(p.code, p.where) for p in result.problems] == [
        ("content_block_not_stopped", "event 4"),
        ("content_block_stop_mismatch", "event 14"),
        # Its usage says what was read from the cache, and nothing of what was written to it.
        ("cache_usage_missing", "event 16"),
    ]
