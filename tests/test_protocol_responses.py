"""The OpenAI Responses API protocol module: rendering chat bodies, reading answers and streams."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import resources
from verifier.protocol.answers import ChatResult, Choice
from verifier.protocol.apis import NotExpressible
from verifier.protocol.responses import accumulate, parse_answer, read_recorded, request_body

# ---------------------------------------------------------------------------------------------
# Answers, written from the Responses API reference.

USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 3},
    "total_tokens": 21,
}
CHAT_USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 9,
    "total_tokens": 21,
    "prompt_tokens_details": {"cached_tokens": 4},
    "completion_tokens_details": {"reasoning_tokens": 3},
}

# Streams real servers sent, recorded byte for byte (the model path replaced).
STREAMS = Path(__file__).parent / "data" / "streams"


def text_part(text: str, logprobs: list[Any] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def message(*parts: dict[str, Any], item_id: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": "completed",
        "role": "assistant",
        "content": list(parts),
    }


def call(call_id: str, name: str, arguments: str, item_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def reasoning(
    content: list[str] | None = None, summary: tuple[str, ...] = (), item_id: str = "rs_1"
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if content is not None:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in content]
    return item


def response(
    *output: Any,
    status: str | None = "completed",
    usage: Any = USAGE,
    reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1741476542,
        "model": "gpt-test",
        "output": list(output),
        "usage": usage,
        "incomplete_details": None if reason is None else {"reason": reason},
        "error": None,
        **extra,
    }
    if status is not None:
        body["status"] = status
    return body


def parse(body: Any, status: int = 200) -> ChatResult:
    return parse_answer(status, json.dumps(body).encode(), {"content-type": "application/json"})


def codes(result: ChatResult) -> list[str]:
    return [p.code for p in result.problems]


def only(result: ChatResult) -> Choice:
    """The answer's one choice."""
    assert len(result.choices) == 1
    return result.choices[0]


# ---------------------------------------------------------------------------------------------
# Streams: the events a conforming server sends for a final Response, as a test-side server.


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class Stream:
    """Writes the events of one streamed Response, numbering them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> None:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})

    def text_part(self, index: int, item_id: str, position: int, part: dict[str, Any]) -> None:
        where = {"item_id": item_id, "output_index": index, "content_index": position}
        kind, field = (
            ("refusal", "refusal") if part["type"] == "refusal" else ("output_text", "text")
        )
        empty = {**part, field: ""}
        # Text events list their logprobs (none asked for here); refusal events have none.
        extra: dict[str, Any] = {"logprobs": []} if kind == "output_text" else {}
        self.add("response.content_part.added", **where, part=empty)
        for piece in pieces(part[field]):
            self.add(f"response.{kind}.delta", **where, delta=piece, **extra)
        self.add(f"response.{kind}.done", **where, **{field: part[field]}, **extra)
        self.add("response.content_part.done", **where, part=part)

    def reasoning(self, index: int, item: dict[str, Any]) -> None:
        where = {"item_id": item["id"], "output_index": index}
        for position, part in enumerate(item.get("content") or []):
            at = {**where, "content_index": position}
            for piece in pieces(part["text"]):
                self.add("response.reasoning_text.delta", **at, delta=piece)
            self.add("response.reasoning_text.done", **at, text=part["text"])
        for position, part in enumerate(item["summary"]):
            at = {**where, "summary_index": position}
            self.add("response.reasoning_summary_part.added", **at, part={**part, "text": ""})
            for piece in pieces(part["text"]):
                self.add("response.reasoning_summary_text.delta", **at, delta=piece)
            self.add("response.reasoning_summary_text.done", **at, text=part["text"])
            self.add("response.reasoning_summary_part.done", **at, part=part)

    def item(self, index: int, item: dict[str, Any]) -> None:
        started = {**item, "status": "in_progress"}
        if item["type"] == "message":
            started["content"] = []
        elif item["type"] == "function_call":
            started["arguments"] = ""
        elif item["type"] == "reasoning":
            started["summary"] = []
            started.pop("content", None)
        self.add("response.output_item.added", output_index=index, item=started)
        if item["type"] == "message":
            for position, part in enumerate(item["content"]):
                self.text_part(index, item["id"], position, part)
        elif item["type"] == "function_call":
            where = {"item_id": item["id"], "output_index": index}
            for piece in pieces(item["arguments"]):
                self.add("response.function_call_arguments.delta", **where, delta=piece)
            self.add(
                "response.function_call_arguments.done",
                **where,
                arguments=item["arguments"],
                name=item["name"],
            )
        else:
            self.reasoning(index, item)
        self.add("response.output_item.done", output_index=index, item=item)


def events_of(final: dict[str, Any]) -> list[dict[str, Any]]:
    stream = Stream()
    started = {**final, "status": "in_progress", "output": [], "usage": None, "error": None}
    stream.add("response.created", response=started)
    stream.add("response.in_progress", response=started)
    for index, item in enumerate(final["output"]):
        stream.item(index, item)
    stream.add(f"response.{final['status']}", response=final)
    return stream.events


def sse(events: list[Any], names: bool = True) -> bytes:
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        named = names and isinstance(event, dict) and isinstance(event.get("type"), str)
        out.append((f"event: {event['type']}\n" if named else "") + f"data: {data}\n\n")
    return "".join(out).encode()


def run(data: bytes | list[bytes], clock: Callable[[], float] | None = None) -> ChatResult:
    chunks = [data] if isinstance(data, bytes) else data
    return accumulate(chunks, ChatResult(stream=True, status=200), clock)


def stream_of(events: list[Any]) -> ChatResult:
    return run(sse(events))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


# The answers every reading test shares: text, reasoning, several calls, a refusal.
TEXT = response(message(text_part("The capital of France is Paris.")))
REASONED = response(
    reasoning(content=["Think: 6*7.", " It is 42."], summary=("Multiplied.",)),
    message(text_part("42")),
)
SUMMARIZED = response(reasoning(summary=("First I", " checked.")), message(text_part("Done")))
CALLS = response(
    reasoning(summary=("Two cities.",)),
    call("call_a", "get_weather", '{"city": "Oslo"}'),
    call("call_b", "get_weather", '{"city": "Lima", "unit": "c"}'),
)
REFUSED = response(message({"type": "refusal", "refusal": "I can't help with that."}))
ERROR = {"code": "server_error", "message": "The model crashed."}
FAILED = response(message(text_part("Partial")), status="failed", usage=None, error=ERROR)
ANSWERS = {"text": TEXT, "reasoned": REASONED, "summarized": SUMMARIZED, "calls": CALLS}
ANSWERS["refused"] = REFUSED
ANSWERS["cut"] = response(
    message(text_part("Once upon")), status="incomplete", reason="max_output_tokens"
)


# ---------------------------------------------------------------------------------------------
# Rendering a chat body.

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}


def render(**fields: Any) -> dict[str, Any]:
    return request_body({**CHAT, **fields}, stream=False)


def refusal(**fields: Any) -> str:
    with pytest.raises(NotExpressible) as refused:
        render(**fields)
    assert refused.value.api == "responses"
    return refused.value.reason


def test_a_plain_body_names_its_model_stores_nothing_and_streams_only_when_asked() -> None:
    assert request_body(CHAT, stream=False) == {
        "model": "m",
        "store": False,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}
        ],
    }
    assert request_body(CHAT, stream=True)["stream"] is True


def test_stream_options_seed_and_the_chat_stream_flag_are_left_out() -> None:
    body = render(stream=True, stream_options={"include_usage": True}, seed=7)
    assert not {"stream", "stream_options", "seed"} & set(body)


@pytest.mark.parametrize("role", ["system", "developer", "user"])
def test_instruction_and_user_messages_become_message_items_of_input_text(role: str) -> None:
    body = render(messages=[{"role": role, "content": "Be brief."}])
    assert body["input"] == [
        {"type": "message", "role": role, "content": [{"type": "input_text", "text": "Be brief."}]}
    ]


def test_text_and_image_parts_become_input_text_and_input_image() -> None:
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
    ]
    body = render(messages=[{"role": "user", "content": parts}])
    assert body["input"][0]["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
        {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
    ]


def test_a_part_other_than_text_or_image_is_not_expressible() -> None:
    part = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    assert "'input_audio'" in refusal(messages=[{"role": "user", "content": [part]}])


def test_an_assistant_turn_becomes_its_text_then_one_function_call_per_tool_call() -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{ }"}},
    ]
    assistant = {"role": "assistant", "content": "Let me look.", "tool_calls": calls}
    body = render(messages=[CHAT["messages"][0], assistant])
    assert body["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look."}],
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{ }"},
    ]


def test_an_assistant_turn_of_tool_calls_only_has_no_message_item() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    body = render(messages=[{"role": "assistant", "content": None, "tool_calls": calls}])
    assert [item["type"] for item in body["input"]] == ["function_call"]


def test_a_tool_message_becomes_a_function_call_output() -> None:
    tool = {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3}'}
    assert render(messages=[tool])["input"] == [
        {"type": "function_call_output", "call_id": "c1", "output": '{"temp": 3}'}
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_an_assistant_message_carrying_reasoning_is_not_expressible(field: str) -> None:
    assistant = {"role": "assistant", "content": "42", field: "6*7"}
    assert "reasoning" in refusal(messages=[assistant])


def test_tools_become_flat_function_tools_strict_false_unless_chat_said() -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    tools = [
        {
            "type": "function",
            "function": {"name": "w", "description": "Weather", "parameters": params},
        },
        {"type": "function", "function": {"name": "s", "parameters": params, "strict": True}},
    ]
    assert render(tools=tools)["tools"] == [
        {
            "type": "function",
            "name": "w",
            "description": "Weather",
            "parameters": params,
            "strict": False,
        },
        {"type": "function", "name": "s", "parameters": params, "strict": True},
    ]


def test_tool_choice_keeps_its_words_and_flattens_a_named_function() -> None:
    for word in ("auto", "required", "none"):
        assert render(tool_choice=word)["tool_choice"] == word
    named = {"type": "function", "function": {"name": "w"}}
    assert render(tool_choice=named)["tool_choice"] == {"type": "function", "name": "w"}
    assert "tool_choice" in refusal(tool_choice={"type": "allowed_tools", "mode": "auto"})


def test_sampling_and_parallel_tool_calls_pass_as_they_are() -> None:
    body = render(temperature=0, top_p=0.5, parallel_tool_calls=False)
    assert (body["temperature"], body["top_p"], body["parallel_tool_calls"]) == (0, 0.5, False)


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_either_token_limit_becomes_max_output_tokens(field: str) -> None:
    body = render(**{field: 64})
    assert body["max_output_tokens"] == 64
    assert field not in body


def test_two_different_token_limits_are_not_expressible() -> None:
    assert "max_tokens" in refusal(max_tokens=16, max_completion_tokens=32)


def test_a_json_schema_response_format_becomes_text_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}}
    assert render(response_format=fmt)["text"] == {
        "format": {"type": "json_schema", "name": "n", "schema": schema, "strict": True}
    }
    loose = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    assert render(response_format=loose)["text"]["format"]["strict"] is False


def test_json_object_becomes_text_format_and_plain_text_says_nothing() -> None:
    body = render(response_format={"type": "json_object"})
    assert body["text"] == {"format": {"type": "json_object"}}
    assert "text" not in render(response_format={"type": "text"})


def test_logprobs_become_an_include_and_top_logprobs() -> None:
    body = render(logprobs=True, top_logprobs=5)
    assert body["include"] == ["message.output_text.logprobs"]
    assert body["top_logprobs"] == 5
    assert "logprobs" not in body


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"stop": ["\n"]}, "stop sequences"),
        ({"n": 2}, "n=2"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"presence_penalty": -1}, "presence_penalty"),
        ({"logit_bias": {"1": 5}}, "'logit_bias'"),
        ({"reasoning_effort_level": "low"}, "'reasoning_effort_level'"),
        ({"messages": [{"role": "user", "content": "Hi", "name": "bob"}]}, "message name"),
        ({"messages": [{"role": "function", "content": "x"}]}, "'function'"),
    ],
)
def test_what_the_responses_api_cannot_say_is_refused_by_name(
    fields: dict[str, Any], named: str
) -> None:
    assert named in refusal(**fields)


def test_chats_reasoning_effort_is_the_responses_reasoning_effort() -> None:
    """OpenAI's two references name one setting: chat's reasoning_effort, Responses'
    reasoning.effort, with one enumeration."""
    body = render(reasoning_effort="high")
    assert body["reasoning"] == {"effort": "high"}
    assert "reasoning_effort" not in body
    assert "reasoning" not in render(reasoning_effort=None)


def test_neutral_values_of_unsupported_fields_ask_nothing() -> None:
    body = render(n=1, frequency_penalty=0, presence_penalty=0.0, stop=None)
    assert body == render()


TEXTS = st.text(st.characters(codec="utf-8"), max_size=20)
TURNS = st.lists(
    st.tuples(st.sampled_from(["system", "developer", "user", "assistant", "tool"]), TEXTS),
    min_size=1,
    max_size=6,
)


@given(TURNS)
def test_every_turn_renders_to_one_item_carrying_its_text_in_order(
    turns: list[tuple[str, str]],
) -> None:
    messages = [
        {"role": role, "content": text, **({"tool_call_id": "c"} if role == "tool" else {})}
        for role, text in turns
    ]
    items = request_body({"model": "m", "messages": messages}, stream=False)["input"]
    said = [item["output"] if "output" in item else item["content"][0]["text"] for item in items]
    assert said == [text for _, text in turns]


# ---------------------------------------------------------------------------------------------
# Reading a non-stream answer.


def test_a_text_answer_reads_as_one_stopped_choice_with_chat_usage() -> None:
    result = parse(TEXT)
    choice = only(result)
    assert codes(result) == []
    assert result.api == "responses"
    assert (result.id, result.model) == ("resp_1", "gpt-test")
    assert (choice.index, choice.role) == (0, "assistant")
    assert (choice.content, choice.finish_reason) == ("The capital of France is Paris.", "stop")
    assert (choice.reasoning, choice.tool_calls, choice.logprobs) == (None, [], None)
    assert (result.usage, result.usage_source) == (CHAT_USAGE, "body")
    assert result.body == TEXT


def test_the_output_text_of_several_parts_and_messages_is_joined() -> None:
    body = response(
        message(text_part("a"), text_part("b")), message(text_part("c"), item_id="msg_2")
    )
    assert only(parse(body)).content == "abc"


def test_reasoning_is_the_reasoning_text_when_present() -> None:
    choice = only(parse(REASONED))
    assert (choice.reasoning, choice.reasoning_field) == ("Think: 6*7. It is 42.", "reasoning_item")
    assert choice.content == "42"


def test_reasoning_is_the_summary_when_there_is_no_reasoning_text() -> None:
    choice = only(parse(SUMMARIZED))
    assert (choice.reasoning, choice.reasoning_field) == ("First I checked.", "reasoning_item")


def test_several_function_calls_read_in_order_with_their_arguments_as_sent() -> None:
    choice = only(parse(CALLS))
    assert choice.content is None
    assert choice.finish_reason == "tool_calls"
    assert [call.to_dict() for call in choice.tool_calls] == [
        {
            "index": 0,
            "id": "call_a",
            "type": "function",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {
            "index": 1,
            "id": "call_b",
            "type": "function",
            "name": "get_weather",
            "arguments": '{"city": "Lima", "unit": "c"}',
        },
    ]


def test_a_refusal_stays_out_of_the_content_and_finishes_as_content_filter() -> None:
    choice = only(parse(REFUSED))
    assert (choice.content, choice.finish_reason) == (None, "content_filter")


@pytest.mark.parametrize(
    ("status", "reason", "finish"),
    [
        ("incomplete", "max_output_tokens", "length"),
        ("incomplete", "content_filter", "content_filter"),
        ("failed", None, "failed"),
        ("in_progress", None, "in_progress"),
        ("cancelled", None, "cancelled"),
        ("queued", None, "queued"),
    ],
)
def test_each_status_gives_its_finish_reason(status: str, reason: str | None, finish: str) -> None:
    result = parse(response(message(text_part("x")), status=status, reason=reason))
    assert only(result).finish_reason == finish
    assert codes(result) == []


def test_a_response_without_status_has_no_finish_reason_and_says_so() -> None:
    result = parse(response(message(text_part("x")), status=None))
    assert only(result).finish_reason is None
    assert codes(result) == ["finish_reason_missing"]


def test_an_unknown_status_passes_through_and_is_flagged() -> None:
    result = parse(response(message(text_part("x")), status="done"))
    assert only(result).finish_reason == "done"
    assert codes(result) == ["status_unknown"]


def test_an_incomplete_answer_without_a_known_reason_is_flagged() -> None:
    result = parse(response(message(text_part("x")), status="incomplete"))
    assert only(result).finish_reason == "incomplete"
    assert codes(result) == ["incomplete_reason_unknown"]


def test_usage_without_details_maps_the_three_counts() -> None:
    usage = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    result = parse(response(message(text_part("x")), usage=usage))
    assert result.usage == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


@pytest.mark.parametrize(
    ("usage", "code"),
    [
        (None, "usage_missing"),
        ("lots", "usage_malformed"),
        ({"input_tokens": "1", "output_tokens": 2, "total_tokens": 3}, "usage_malformed"),
        ({"input_tokens": 1, "output_tokens": 2.0, "total_tokens": 3}, "usage_malformed"),
        ({"input_tokens": 1, "output_tokens": 2}, "usage_malformed"),
        ({"input_tokens": True, "output_tokens": 2, "total_tokens": 3}, "usage_malformed"),
    ],
)
def test_missing_or_non_integer_usage_counts_give_no_usage(usage: Any, code: str) -> None:
    result = parse(response(message(text_part("x")), usage=usage))
    assert (result.usage, result.usage_source) == (None, None)
    assert codes(result) == [code]


def test_a_failed_response_needs_no_usage_and_keeps_its_error_readable() -> None:
    result = parse(FAILED)
    assert only(result).finish_reason == "failed"
    assert result.error_object == FAILED["error"]
    assert codes(result) == []


def test_output_text_logprobs_become_chat_logprob_entries() -> None:
    logprobs = [
        {
            "token": "Hi",
            "logprob": -0.1,
            "bytes": [72, 105],
            "top_logprobs": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105]}],
        },
        {"token": "!", "logprob": -0.5, "bytes": [33], "top_logprobs": []},
    ]
    result = parse(response(message(text_part("Hi!", logprobs))))
    assert only(result).logprobs == logprobs


def test_empty_logprobs_lists_read_as_no_logprobs() -> None:
    assert only(parse(TEXT)).logprobs is None


def test_an_openai_shaped_error_body_is_kept_without_problems() -> None:
    error = {"error": {"message": "bad model", "type": "invalid_request_error", "param": "model"}}
    result = parse(error, status=400)
    assert (codes(result), result.choices, result.error_object) == ([], [], error["error"])


@pytest.mark.parametrize(
    "body", [{"detail": "Not Found"}, {"error": "bad"}, {"error": {"message": "no type"}}, []]
)
def test_an_error_body_of_another_shape_is_a_problem(body: Any) -> None:
    assert codes(parse(body, status=404)) == ["error_body_malformed"]


def test_a_body_that_is_not_json_is_a_problem_not_an_exception() -> None:
    result = parse_answer(200, b"<html>oops</html>", {})
    assert (codes(result), result.api) == (["body_not_json"], "responses")


@pytest.mark.parametrize(
    "body",
    [[1, 2], "text", {"object": "chat.completion", "choices": []}, {"output": {"a": 1}}],
)
def test_a_2xx_body_that_is_not_a_response_is_a_problem(body: Any) -> None:
    result = parse(body)
    assert (codes(result), result.choices) == (["not_a_completion"], [])


def test_output_items_of_unknown_or_broken_shape_are_problems() -> None:
    broken_call = {**call("c", "f", "{}"), "arguments": {"a": 1}}
    body = response(
        {"type": "web_search_call", "id": "ws"},
        "junk",
        {"type": "message", "content": "not a list"},
        message({"type": "output_audio"}),
        broken_call,
    )
    result = parse(body)
    assert codes(result) == ["output_item_unknown"] + ["output_item_malformed"] * 4
    assert [p.where for p in result.problems][:2] == ["$.output[0]", "$.output[1]"]
    assert only(result).tool_calls[0].arguments == '{"a": 1}'


# ---------------------------------------------------------------------------------------------
# Reading a stream.


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_conforming_stream_reads_without_problems(name: str) -> None:
    result = stream_of(events_of(ANSWERS[name]))
    assert codes(result) == []
    assert (result.api, result.stream, result.done) == ("responses", True, True)
    assert result.usage_source == "completed_event"
    assert result.chunks == events_of(ANSWERS[name])


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_stream_gives_the_choice_its_non_stream_body_gives(name: str) -> None:
    streamed, whole = stream_of(events_of(ANSWERS[name])), parse(ANSWERS[name])
    a, b = only(streamed), only(whole)
    assert (a.content, a.reasoning, a.reasoning_field, a.finish_reason) == (
        b.content,
        b.reasoning,
        b.reasoning_field,
        b.finish_reason,
    )
    assert [(c.id, c.name, json.loads(c.arguments or "")) for c in a.tool_calls] == [
        (c.id, c.name, json.loads(c.arguments or "")) for c in b.tool_calls
    ]
    assert streamed.usage == whole.usage == CHAT_USAGE
    assert (streamed.id, streamed.model) == (whole.id, whole.model)


ARGUMENTS = st.dictionaries(
    st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8)), max_size=3
)


@st.composite
def answers(draw: st.DrawFn) -> dict[str, Any]:
    """A Response of reasoning, text and calls, complete or cut at the token limit."""
    output: list[dict[str, Any]] = []
    if draw(st.booleans()):
        content = draw(st.one_of(st.none(), st.lists(TEXTS, max_size=2)))
        output.append(reasoning(content, tuple(draw(st.lists(TEXTS, max_size=2)))))
    texts = draw(st.lists(TEXTS, max_size=2))
    if texts:
        output.append(message(*[text_part(text) for text in texts]))
    for n, arguments in enumerate(draw(st.lists(ARGUMENTS, max_size=3))):
        output.append(call(f"call_{n}", f"tool_{n}", json.dumps(arguments)))
    if draw(st.booleans()):
        return response(*output)
    return response(*output, status="incomplete", reason="max_output_tokens")


@settings(max_examples=60, deadline=None)
@given(answers())
def test_any_answer_streamed_reads_as_its_body_does(answer: dict[str, Any]) -> None:
    streamed, whole = stream_of(events_of(answer)), parse(answer)
    assert codes(streamed) == codes(whole) == []
    assert only(streamed) == only(whole)
    assert streamed.usage == whole.usage


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(ANSWERS)), st.lists(st.integers(min_value=0), max_size=40))
def test_a_stream_split_anywhere_reads_as_the_whole_stream(name: str, cuts: list[int]) -> None:
    data = sse(events_of(ANSWERS[name]))
    whole, parted = run(data), run(split(data, cuts))
    assert parted == whole


def test_logprobs_of_text_deltas_become_chat_logprob_entries() -> None:
    events = events_of(TEXT)
    delta = next(e for e in events if e["type"] == "response.output_text.delta")
    delta["logprobs"] = [
        {"token": "The", "logprob": -0.2, "top_logprobs": [{"token": "The", "logprob": -0.2}]}
    ]
    entries = only(stream_of(events)).logprobs
    assert entries == [
        {
            "token": "The",
            "logprob": -0.2,
            "bytes": None,
            "top_logprobs": [{"token": "The", "logprob": -0.2, "bytes": None}],
        }
    ]


def test_a_clock_times_each_delta_and_the_first_reasoning() -> None:
    events = events_of(REASONED)
    ticks = iter(range(1, 1000))
    result = run([sse([event]) for event in events], clock=lambda: float(next(ticks)))
    deltas = [n for n, e in enumerate(events) if e["type"].endswith(".delta")]
    # One clock reading per network chunk: event n completed in chunk n (read n + 1).
    assert result.token_arrivals == [float(n + 1) for n in deltas]
    first = next(n for n, e in enumerate(events) if e["type"] == "response.reasoning_text.delta")
    assert result.first_reasoning == float(first + 1)


def test_an_error_event_is_the_answer_not_a_truncated_one() -> None:
    error = {"type": "error", "code": "server_error", "message": "overloaded", "param": None}
    events = events_of(TEXT)[:2] + [error]
    result = stream_of(events)
    assert codes(result) == ["stream_error_event"]
    assert result.body == {"error": error}
    assert result.error_object == error
    assert result.choices == []


def test_a_failed_stream_finishes_failed_and_keeps_its_error() -> None:
    result = stream_of(events_of(FAILED))
    assert codes(result) == []
    assert only(result).finish_reason == "failed"
    assert result.error_object == FAILED["error"]


def mutate(
    events: list[dict[str, Any]], kind: str, change: Callable[[dict[str, Any]], Any], nth: int = 0
) -> list[Any]:
    """`events` with the `nth` event of `kind` replaced by what `change` makes of it."""
    events = copy.deepcopy(events)
    positions = [n for n, e in enumerate(events) if e["type"] == kind]
    at = positions[nth]
    changed = change(events[at])
    return events[:at] + ([] if changed is None else changed) + events[at + 1 :]


def drop(kind: str, nth: int = 0) -> Callable[[list[dict[str, Any]]], list[Any]]:
    return lambda events: mutate(events, kind, lambda e: None, nth)


def edit(kind: str, **fields: Any) -> Callable[[list[dict[str, Any]]], list[Any]]:
    return lambda events: mutate(events, kind, lambda e: [{**e, **fields}])


def after(kind: str, extra: Any) -> Callable[[list[dict[str, Any]]], list[Any]]:
    """Sends `extra` after the first event of `kind` (numbered in turn, when it is an object)."""
    added = {"sequence_number": 0, **extra} if isinstance(extra, dict) else extra
    return lambda events: mutate(events, kind, lambda e: [e, added])


def renumber(events: list[Any]) -> list[Any]:
    for number, event in enumerate(events):
        if isinstance(event, dict) and "sequence_number" in event:
            event["sequence_number"] = number
    return events


DELTA = "response.output_text.delta"
TEXT_DONE = "response.output_text.done"
VIOLATIONS: dict[str, tuple[dict[str, Any], Callable[[list[dict[str, Any]]], list[Any]]]] = {
    "response_created_missing": (TEXT, drop("response.created")),
    "response_in_progress_missing": (TEXT, drop("response.in_progress")),
    "event_out_of_order": (
        TEXT,
        after(DELTA, {"type": "response.in_progress", "response": response(status="in_progress")}),
    ),
    "sequence_number_missing": (
        TEXT,
        lambda events: mutate(
            events, DELTA, lambda e: [{k: v for k, v in e.items() if k != "sequence_number"}]
        ),
    ),
    "output_index_unexpected": (TEXT, edit("response.output_item.added", output_index=1)),
    "output_item_not_open": (
        TEXT,
        after(
            "response.output_item.done",
            {"type": DELTA, "output_index": 0, "content_index": 0, "delta": "x"},
        ),
    ),
    "content_part_not_open": (TEXT, edit(DELTA, content_index=3)),
    "part_index_unexpected": (TEXT, edit("response.content_part.added", content_index=1)),
    "event_item_type_mismatch": (
        CALLS,
        edit("response.function_call_arguments.delta", type=DELTA, content_index=0),
    ),
    "item_id_mismatch": (TEXT, edit(DELTA, item_id="msg_other")),
    "done_text_mismatch": (TEXT, edit(TEXT_DONE, text="Something else.")),
    "delta_after_done": (
        TEXT,
        after(
            TEXT_DONE,
            {
                "type": DELTA,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": "!",
            },
        ),
    ),
    "done_event_repeated": (
        CALLS,
        after(
            "response.function_call_arguments.done",
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_call_a",
                "output_index": 1,
                "arguments": '{"city": "Oslo"}',
            },
        ),
    ),
    "done_event_missing": (TEXT, drop(TEXT_DONE)),
    "output_item_mismatch": (
        CALLS,
        lambda events: mutate(
            events,
            "response.output_item.done",
            lambda e: [{**e, "item": call("call_a", "get_time", '{"city": "Oslo"}')}],
            nth=1,
        ),
    ),
    "final_output_mismatch": (
        TEXT,
        edit("response.completed", response=response(message(text_part("Other.")))),
    ),
    "terminal_status_mismatch": (
        TEXT,
        edit(
            "response.completed",
            response=response(
                message(text_part("The capital of France is Paris.")),
                status="incomplete",
                reason="max_output_tokens",
            ),
        ),
    ),
    "terminal_response_malformed": (TEXT, edit("response.completed", response="gone")),
    "response_terminal_missing": (TEXT, drop("response.completed")),
    "event_after_terminal": (
        TEXT,
        after("response.completed", {"type": "response.in_progress", "response": TEXT}),
    ),
    "event_type_unknown": (
        TEXT,
        after(DELTA, {"type": "response.output_text.annotation.added", "annotation": {}}),
    ),
    "event_malformed": (TEXT, edit(DELTA, delta=7)),
    "event_type_missing": (TEXT, after(DELTA, {"delta": "x"})),
    "chunk_not_object": (TEXT, after(DELTA, [1, 2])),
    "usage_missing": (
        TEXT,
        edit(
            "response.completed",
            response=response(message(text_part("The capital of France is Paris.")), usage=None),
        ),
    ),
    "incomplete_reason_unknown": (
        TEXT,
        edit(
            "response.completed",
            type="response.incomplete",
            response=response(
                message(text_part("The capital of France is Paris.")), status="incomplete"
            ),
        ),
    ),
}


@pytest.mark.parametrize("code", sorted(VIOLATIONS))
def test_each_grammar_violation_gives_its_problem(code: str) -> None:
    answer, change = VIOLATIONS[code]
    events = renumber(change(events_of(answer)))
    result = stream_of(events)
    # The violation is the first problem seen; what it breaks later may follow it.
    assert codes(result)[:1] == [code]
    where = result.problems[0].where
    if code == "response_terminal_missing":
        assert where is None
    else:
        assert where is not None and where.startswith("event ")


def test_a_sequence_number_that_does_not_grow_is_a_problem() -> None:
    events = events_of(TEXT)
    events[4]["sequence_number"] = 2
    result = stream_of(events)
    assert codes(result) == ["sequence_number_not_increasing"]
    assert result.problems[0].where == "event 4"


def test_an_error_event_may_lack_a_sequence_number() -> None:
    result = stream_of([{"type": "error", "code": "x", "message": "no"}])
    assert codes(result) == ["stream_error_event"]


def test_an_sse_event_name_other_than_the_data_type_is_a_problem() -> None:
    events = events_of(TEXT)
    data = sse(events).replace(b"event: response.in_progress", b"event: message", 1)
    result = run(data)
    assert codes(result) == ["event_name_mismatch"]
    assert result.problems[0].where == "event 1"


def test_events_without_an_event_name_are_read_by_their_type() -> None:
    assert codes(run(sse(events_of(CALLS), names=False))) == []


def test_a_done_sentinel_and_a_non_json_event_are_problems() -> None:
    result = run(sse(events_of(TEXT)) + b"data: [DONE]\n\n" + b"data: {oops\n\n")
    assert codes(result) == ["done_sentinel_sent", "chunk_not_json"]
    assert result.chunks[-1] == "{oops"


def test_an_unterminated_last_event_is_a_problem() -> None:
    assert codes(run(sse(events_of(TEXT))[:-1])) == ["event_unterminated"]


def test_deltas_for_an_item_never_added_are_problems_and_build_nothing() -> None:
    events = [e for e in events_of(TEXT) if e["type"] != "response.output_item.added"]
    result = stream_of(renumber(events))
    # Every event of the item that was never added, then the final output the deltas lack.
    assert set(codes(result)) == {"output_item_not_open", "final_output_mismatch"}
    assert codes(result)[-1] == "final_output_mismatch"
    assert only(result).content is None


def test_reasoning_text_may_stream_inside_its_own_content_part() -> None:
    events = events_of(REASONED)
    first = next(n for n, e in enumerate(events) if e["type"] == "response.reasoning_text.delta")
    where = {"item_id": "rs_1", "output_index": 0, "content_index": 0}
    opened = {
        "type": "response.content_part.added",
        "sequence_number": 0,
        **where,
        "part": {"type": "reasoning_text", "text": ""},
    }
    done = next(n for n, e in enumerate(events) if e["type"] == "response.reasoning_text.done")
    closed = {
        "type": "response.content_part.done",
        "sequence_number": 0,
        **where,
        "part": {"type": "reasoning_text", "text": "Think: 6*7."},
    }
    events = events[:first] + [opened] + events[first : done + 1] + [closed] + events[done + 1 :]
    result = stream_of(renumber(events))
    assert codes(result) == []
    assert only(result).reasoning == "Think: 6*7. It is 42."


# ---------------------------------------------------------------------------------------------
# Reading what the transcript recorded.


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_recorded_stream_reads_as_it_did_live(name: str) -> None:
    live = stream_of(events_of(ANSWERS[name]))
    again = read_recorded(live.chunks, status=200, stream=True)
    assert (again.choices, again.usage, again.problems, again.api) == (
        live.choices,
        live.usage,
        live.problems,
        "responses",
    )


def test_a_recorded_body_reads_as_it_did_live() -> None:
    again = read_recorded(CALLS, status=200, stream=False)
    assert (again.choices, again.usage, again.api) == (
        parse(CALLS).choices,
        CHAT_USAGE,
        "responses",
    )


def test_a_stream_answered_with_an_error_body_reads_as_that_body() -> None:
    error = {"error": {"message": "rate limited", "type": "rate_limit_error"}}
    again = read_recorded(error, status=429, stream=True)
    assert (again.stream, again.error_object, codes(again)) == (True, error["error"], [])


# ---------------------------------------------------------------------------------------------
# The schemas.


def errors(schema: str, instance: Any) -> list[str]:
    return [error.message for error in resources.validator(schema).iter_errors(instance)]


@pytest.mark.parametrize("answer", [*ANSWERS.values(), FAILED], ids=[*ANSWERS, "failed"])
def test_the_answers_fit_the_answer_schema(answer: dict[str, Any]) -> None:
    assert errors("responses_answer", answer) == []


@pytest.mark.parametrize("answer", [*ANSWERS.values(), FAILED], ids=[*ANSWERS, "failed"])
def test_every_event_of_the_streams_fits_the_event_schema(answer: dict[str, Any]) -> None:
    for event in events_of(answer):
        assert errors("responses_event", event) == [], event["type"]


def test_an_error_event_fits_the_event_schema_without_a_sequence_number() -> None:
    assert errors("responses_event", {"type": "error", "code": None, "message": "no"}) == []


@pytest.mark.parametrize(
    "broken",
    [
        {**TEXT, "object": "chat.completion"},
        {**TEXT, "status": "done"},
        {k: v for k, v in TEXT.items() if k != "output"},
        {**TEXT, "usage": {**USAGE, "output_tokens": -1}},
        {**TEXT, "usage": {**USAGE, "total_tokens": "21"}},
        {**TEXT, "usage": {k: v for k, v in USAGE.items() if k != "input_tokens_details"}},
        response({**call("c", "f", "{}"), "arguments": {"a": 1}}),
        response(message({"type": "output_audio", "data": ""})),
        response({"type": "web_search_call", "id": "ws"}),
        response(reasoning(summary=("x",)) | {"summary": "x"}),
    ],
)
def test_broken_answers_do_not_fit_the_answer_schema(broken: dict[str, Any]) -> None:
    assert errors("responses_answer", broken) != []


@pytest.mark.parametrize(
    "broken",
    [
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "output_index": 0,
            "content_index": 0,
            "delta": "x",
        },
        {
            "type": "response.output_text.delta",
            "sequence_number": 1,
            "item_id": "m",
            "output_index": 0,
            "content_index": 0,
            "delta": 5,
        },
        {
            "type": "response.function_call_arguments.done",
            "sequence_number": 1,
            "item_id": "f",
            "output_index": 0,
        },
        {"type": "response.completed", "sequence_number": 9, "response": {"id": "r"}},
        {
            "type": "response.reasoning_summary_part.added",
            "sequence_number": 1,
            "item_id": "r",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "reasoning_text", "text": ""},
        },
        {"type": "response.output_text.annotation.added", "sequence_number": 1},
        {"type": "error", "sequence_number": 1},
        {"sequence_number": 1, "delta": "x"},
    ],
)
def test_broken_events_do_not_fit_the_event_schema(broken: dict[str, Any]) -> None:
    assert errors("responses_event", broken) != []


def test_a_real_servers_stream_without_index_fields_is_read_each_gap_reported_once() -> None:
    """llama-server 11434's answer to a forced call: no sequence_number, output_index or
    content_index on any event, no arguments.done, the message item still open when the call
    begins. Its content and call are read by item id and order; each missing field is one
    problem, at the first event that lacks it."""
    data = (STREAMS / "llama-server-responses-tool-call.sse").read_bytes()
    result = accumulate([data], ChatResult(stream=True, status=200))
    choice = result.choice
    assert choice is not None
    assert (choice.content, choice.finish_reason) == ("Hello!", "tool_calls")
    assert [(c.name, c.arguments, c.id) for c in choice.tool_calls] == [
        ("get_weather", '{"city":""}', "call_functions.get_weather:1")
    ]
    assert [(p.code, p.where) for p in result.problems] == [
        ("sequence_number_missing", "event 0"),
        ("output_index_missing", "event 2"),
        ("content_index_missing", "event 3"),
        ("done_event_missing", "event 19"),
    ]
