"""The simulated vendor's Anthropic Messages and OpenAI Responses APIs.

The same toy model answers ``/v1/messages`` and ``/v1/responses`` through the chat path: the
tests send real HTTP (urllib) and hold each answer against the chat answer to the same
conversation; each stream against its API's event grammar and against the whole answer; and
the pure translations (verifier/simulator/api_frontends.py) against exact expected values.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import KIMI_PROFILE, fake_key, serve_in_thread
from verifier.protocol.stream import decode_sse
from verifier.simulator.api_frontends import (
    MessagesStream,
    ResponsesStream,
    chat_request,
    message_object,
    response_object,
    sealed,
    signature,
)
from verifier.simulator.defects import parse_defects
from verifier.simulator.pace import Pace
from verifier.simulator.rules import GREETING, MODEL_ID, Reply, ToolCall, ToyPath
from verifier.simulator.server import SimulatorServer
from verifier.simulator.validation import Rejection, request_problem
from verifier.simulator.wire_answers import completion_body, stream_events

Vendor = Callable[..., SimulatorServer]

HELLO = f"{GREETING} You said: Say hello."
# What the toy model thinks when asked to (the generic dialect's reasoning at the lowest effort).
THOUGHT = "The user asked a question; a short answer will do. First, restate what is asked."
WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
DESCRIPTION = "Get the current weather conditions (temperature, sky, wind) for a city."
MESSAGES_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": DESCRIPTION,
    "input_schema": WEATHER_PARAMETERS,
}
RESPONSES_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": DESCRIPTION,
    "parameters": WEATHER_PARAMETERS,
    "strict": False,
}
CHAT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": DESCRIPTION,
        "parameters": WEATHER_PARAMETERS,
    },
}
# The corpus prompts whose natural answer is one call, and two parallel calls.
ONE_CITY = "What's the weather like in Oslo right now?"
TWO_CITIES = "What's the weather in Oslo and in Lima right now?"
PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
ASKS_JSON = 'Reply with {"name": "Ada", "age": 36} please.'
# The chat request that says what the Messages and Responses text requests below say.
BRIEF = {
    "model": MODEL_ID,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello."},
    ],
}
NO_CACHE = {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


@dataclasses.dataclass
class Answer:
    """One HTTP answer: its status, headers and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def post(url: str, body: Any, headers: dict[str, str] | None = None) -> Answer:
    """POST `body` (JSON, or bytes as they are) and read the whole answer."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=data, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Answer(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, dict(error.headers), error.read())


@pytest.fixture
def vendor(local_simulator: Vendor) -> Callable[[], str]:
    """A fresh simulated vendor's base URL each call (its requests numbered from 1)."""
    return lambda: local_simulator().base_url


def messages(said: str, /, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL_ID,
        "max_tokens": 200,
        "messages": [{"role": "user", "content": said}],
    } | extra


def responses(said: str, /, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL_ID, "input": said} | extra


def chat(said: str, /, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL_ID, "messages": [{"role": "user", "content": said}]} | extra


def events_of(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """A stream's events: the SSE event name and the parsed data of each."""
    found, unterminated = decode_sse([body])
    assert not unterminated
    return [(event.event, json.loads(event.data)) for event in found]


# What each Messages block's deltas are, in order (a thinking block ends with its signature).
BLOCK_DELTAS = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}
BLOCK_TEXT = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
}


def read_messages_stream(body: bytes) -> dict[str, Any]:
    """A Messages stream checked against the API's event grammar; the message it builds."""
    events = events_of(body)
    assert all(name == data["type"] for name, data in events)
    kinds = [data["type"] for _, data in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    blocks: list[dict[str, Any]] = []
    deltas: list[list[dict[str, Any]]] = []
    opened = False
    for _, data in events[1:-2]:
        if data["type"] == "content_block_start":
            assert not opened and data["index"] == len(blocks)
            blocks.append(dict(data["content_block"]))
            deltas.append([])
            opened = True
        elif data["type"] == "content_block_delta":
            assert opened and data["index"] == len(blocks) - 1
            deltas[-1].append(data["delta"])
        else:
            assert data == {"type": "content_block_stop", "index": len(blocks) - 1} and opened
            opened = False
    assert not opened
    for block, pieces in zip(blocks, deltas, strict=True):
        kind = BLOCK_DELTAS[block["type"]]
        if block["type"] == "thinking":
            assert block == {"type": "thinking", "thinking": "", "signature": ""}
            *pieces, last = pieces
            assert last["type"] == "signature_delta"
            block["signature"] = last["signature"]
        assert [piece["type"] for piece in pieces] == [kind] * len(pieces)
        joined = "".join(piece[BLOCK_TEXT[kind]] for piece in pieces)
        if block["type"] == "tool_use":
            assert block["input"] == {}
            block["input"] = json.loads(joined)
        else:
            block[block["type"]] = joined
    delta = events[-2][1]
    assert delta["usage"]["input_tokens"] == start["usage"]["input_tokens"]
    assert events[-1][1] == {"type": "message_stop"}
    return {**start, "content": blocks, **delta["delta"], "usage": delta["usage"]}


# The events inside each Responses output item, between output_item.added and .done.
ITEM_EVENTS = {
    "message": ("response.output_text.delta", "response.output_text.done"),
    "reasoning": ("response.reasoning_text.delta", "response.reasoning_text.done"),
    "function_call": (
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
    ),
}


def read_responses_stream(body: bytes) -> dict[str, Any]:
    """A Responses stream checked against the API's event grammar; its final Response."""
    events = events_of(body)
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    kinds = [data["type"] for _, data in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    for _, data in events[:2]:
        assert data["response"]["status"] == "in_progress" and data["response"]["output"] == []
    output: list[dict[str, Any]] = []
    inside: list[dict[str, Any]] = []
    item: dict[str, Any] | None = None
    for _, data in events[2:-1]:
        if data["type"] == "response.output_item.added":
            assert item is None and data["output_index"] == len(output)
            item, inside = data["item"], []
        elif data["type"] == "response.output_item.done":
            assert item is not None and data["output_index"] == len(output)
            output.append(_item_done(item, inside, data["item"]))
            item = None
        else:
            assert item is not None
            assert (data["item_id"], data["output_index"]) == (item["id"], len(output))
            inside.append(data)
    assert item is None
    final: dict[str, Any] = events[-1][1]["response"]
    assert final["output"] == output
    return final


def _item_done(begun: dict[str, Any], inside: list[dict[str, Any]], done: dict[str, Any]) -> Any:
    """Check one output item's events: in order, its .done texts the joined deltas."""
    kind = begun["type"]
    delta, finished = ITEM_EVENTS[kind]
    if kind == "message":
        added, *inside, part_done = inside
        assert added["type"] == "response.content_part.added" and added["part"]["text"] == ""
        assert part_done["type"] == "response.content_part.done"
        assert part_done["part"] == done["content"][0]
    *deltas, last = inside
    assert [d["type"] for d in deltas] == [delta] * len(deltas) and last["type"] == finished
    joined = "".join(d["delta"] for d in deltas)
    if kind == "function_call":
        assert last["arguments"] == joined == done["arguments"]
    else:
        assert last["text"] == joined == done["content"][0]["text"]
    assert done["id"] == begun["id"]
    return done


def without_time(response: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in response.items() if key != "created_at"}


# -- whole answers --------------------------------------------------------------------------


def test_a_messages_text_answer_is_the_chat_answer(vendor: Callable[[], str]) -> None:
    url = vendor()
    body = messages("Say hello.", system="Be brief.")
    answer = post(f"{url}/messages", body)
    same = post(f"{url}/chat/completions", {**BRIEF, "max_tokens": 200}).json()
    assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
    assert answer.json() == {
        "id": "msg_sim-1",
        "type": "message",
        "role": "assistant",
        "model": MODEL_ID,
        "content": [{"type": "text", "text": HELLO}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 15, **NO_CACHE},
    }
    assert same["choices"][0]["message"]["content"] == HELLO
    assert same["usage"] == {"prompt_tokens": 11, "completion_tokens": 15, "total_tokens": 26}


def test_a_responses_text_answer_is_the_chat_answer(vendor: Callable[[], str]) -> None:
    url = vendor()
    answer = post(
        f"{url}/responses", responses("Say hello.", instructions="Be brief.", store=False)
    )
    same = post(f"{url}/chat/completions", BRIEF).json()
    assert answer.status == 200
    assert without_time(answer.json()) == {
        "id": "resp_sim-1",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": MODEL_ID,
        "output": [
            {
                "id": "msg_sim-1_0",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": HELLO, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 11,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 15,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 26,
        },
        "instructions": "Be brief.",
        "max_output_tokens": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
    }
    assert same["usage"] == {"prompt_tokens": 11, "completion_tokens": 15, "total_tokens": 26}


def test_an_answer_cut_by_the_token_limit_says_so(vendor: Callable[[], str]) -> None:
    url = vendor()
    message = post(f"{url}/messages", messages("Say hello.", max_tokens=3)).json()
    response = post(f"{url}/responses", responses("Say hello.", max_output_tokens=3)).json()
    assert message["content"] == [{"type": "text", "text": "Hello! I"}]
    assert message["stop_reason"] == "max_tokens" and message["usage"]["output_tokens"] == 3
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][0]["content"][0]["text"] == "Hello! I"


def test_a_forced_tool_call(vendor: Callable[[], str]) -> None:
    url = vendor()
    forced = {"type": "tool", "name": "get_weather"}
    message = post(
        f"{url}/messages", messages("Say hello.", tools=[MESSAGES_TOOL], tool_choice=forced)
    )
    choice = {"type": "function", "name": "get_weather"}
    response = post(
        f"{url}/responses", responses("Say hello.", tools=[RESPONSES_TOOL], tool_choice=choice)
    )
    assert message.json()["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_call_1_0",
            "name": "get_weather",
            "input": {"city": "text"},
        }
    ]
    assert message.json()["stop_reason"] == "tool_use"
    assert response.json()["status"] == "completed"
    assert response.json()["output"] == [
        {
            "id": "fc_call_2_0",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_2_0",
            "name": "get_weather",
            "arguments": '{"city": "text"}',
        }
    ]


def test_parallel_tool_calls_and_their_switch(vendor: Callable[[], str]) -> None:
    url = vendor()
    both = post(f"{url}/messages", messages(TWO_CITIES, tools=[MESSAGES_TOOL])).json()
    single = {"type": "auto", "disable_parallel_tool_use": True}
    one = post(f"{url}/messages", messages(TWO_CITIES, tools=[MESSAGES_TOOL], tool_choice=single))
    calls = post(f"{url}/responses", responses(TWO_CITIES, tools=[RESPONSES_TOOL])).json()
    serial = responses(TWO_CITIES, tools=[RESPONSES_TOOL], parallel_tool_calls=False)
    first = post(f"{url}/responses", serial).json()
    assert [(b["id"], b["input"]) for b in both["content"]] == [
        ("toolu_call_1_0", {"city": "Oslo"}),
        ("toolu_call_1_1", {"city": "Lima"}),
    ]
    assert [b["input"] for b in one.json()["content"]] == [{"city": "Oslo"}]
    assert [(i["call_id"], i["arguments"]) for i in calls["output"]] == [
        ("call_3_0", '{"city": "Oslo"}'),
        ("call_3_1", '{"city": "Lima"}'),
    ]
    assert [i["arguments"] for i in first["output"]] == ['{"city": "Oslo"}']


def test_a_messages_tool_round_trip_is_the_chat_one(vendor: Callable[[], str]) -> None:
    url = vendor()
    asked = messages(ONE_CITY, tools=[MESSAGES_TOOL])
    call = post(f"{url}/messages", asked).json()["content"]
    assert call == [
        {
            "type": "tool_use",
            "id": "toolu_call_1_0",
            "name": "get_weather",
            "input": {"city": "Oslo"},
        }
    ]
    result = {"type": "tool_result", "tool_use_id": "toolu_call_1_0", "content": "12 C, cloudy"}
    turns = [
        *asked["messages"],
        {"role": "assistant", "content": call},
        {"role": "user", "content": [result]},
    ]
    answer = post(f"{url}/messages", {**asked, "messages": turns}).json()
    chat_turns = [
        {"role": "user", "content": ONE_CITY},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_call_1_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_call_1_0", "content": "12 C, cloudy"},
    ]
    same = post(
        f"{url}/chat/completions", {**chat(ONE_CITY), "tools": [CHAT_TOOL], "messages": chat_turns}
    ).json()
    text = f"{GREETING} You said: What's the weather like in Oslo"
    assert answer["content"] == [{"type": "text", "text": text}]
    assert answer["stop_reason"] == "end_turn"
    usage = same["usage"]
    assert answer["usage"] == {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        **NO_CACHE,
    }
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (154, 20)


def test_a_responses_tool_round_trip_is_the_chat_one(vendor: Callable[[], str]) -> None:
    url = vendor()
    asked = responses(ONE_CITY, tools=[RESPONSES_TOOL])
    call = post(f"{url}/responses", asked).json()["output"]
    assert [(i["type"], i["call_id"], i["arguments"]) for i in call] == [
        ("function_call", "call_1_0", '{"city": "Oslo"}')
    ]
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ONE_CITY}]},
        *call,
        {"type": "function_call_output", "call_id": "call_1_0", "output": "12 C, cloudy"},
    ]
    answer = post(f"{url}/responses", {**asked, "input": items}).json()
    chat_turns = [
        {"role": "user", "content": ONE_CITY},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1_0", "content": "12 C, cloudy"},
    ]
    # A Responses tool that is not strict is a chat tool as chat's default has it.
    same = post(
        f"{url}/chat/completions",
        {**chat(ONE_CITY), "tools": [CHAT_TOOL], "messages": chat_turns},
    ).json()
    text = f"{GREETING} You said: What's the weather like in Oslo"
    assert [item["content"][0]["text"] for item in answer["output"]] == [text]
    assert answer["status"] == "completed"
    usage = same["usage"]
    assert (answer["usage"]["input_tokens"], answer["usage"]["output_tokens"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert answer["usage"]["total_tokens"] == usage["total_tokens"] == 174


def test_structured_output_through_both_apis(vendor: Callable[[], str]) -> None:
    url = vendor()
    output_config = {"format": {"type": "json_schema", "schema": PERSON}}
    message = post(f"{url}/messages", messages(ASKS_JSON, output_config=output_config)).json()
    text_format = {
        "format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}
    }
    response = post(f"{url}/responses", responses(ASKS_JSON, text=text_format)).json()
    assert message["content"] == [{"type": "text", "text": '{"name": "Ada", "age": 36}'}]
    assert response["output"][0]["content"][0]["text"] == '{"name": "Ada", "age": 36}'
    assert response["text"] == text_format


def test_thinking_comes_as_a_signed_thinking_block_and_a_reasoning_item(
    vendor: Callable[[], str],
) -> None:
    url = vendor()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    message = post(f"{url}/messages", messages("Say hello.", thinking=thinking)).json()
    response = post(f"{url}/responses", responses("Say hello.", reasoning={"effort": "low"})).json()
    assert message["content"] == [
        {
            "type": "thinking",
            "thinking": THOUGHT,
            "signature": "FsyEkfe0JwE2A6MghFd1Rgzk2kMkTwAZB20UPUzy7e0=",
        },
        {"type": "text", "text": HELLO},
    ]
    assert response["output"][0] == {
        "id": "rs_sim-2_0",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": THOUGHT}],
    }
    assert response["usage"]["output_tokens_details"] == {"reasoning_tokens": 19}
    assert response["usage"]["output_tokens"] == message["usage"]["output_tokens"] == 34


def test_responses_logprobs_are_the_chat_ones(vendor: Callable[[], str]) -> None:
    url = vendor()
    include = ["message.output_text.logprobs"]
    asked = responses("Say hello.", include=include, top_logprobs=2, max_output_tokens=3)
    response = post(f"{url}/responses", asked).json()
    same = post(
        f"{url}/chat/completions", chat("Say hello.", logprobs=True, top_logprobs=2, max_tokens=3)
    ).json()
    part = response["output"][0]["content"][0]
    assert part["logprobs"] == same["choices"][0]["logprobs"]["content"]
    assert [entry["token"] for entry in part["logprobs"]] == ["Hello", "!", " I"]
    assert all(len(entry["top_logprobs"]) == 2 for entry in part["logprobs"])


# -- streams --------------------------------------------------------------------------------

# Requests whose stream is held against the whole answer, for both APIs.
STREAMED = {
    "text": (
        messages("Say hello.", system="Be brief."),
        responses("Say hello.", instructions="Hi"),
    ),
    "cut": (messages("Say hello.", max_tokens=3), responses("Say hello.", max_output_tokens=3)),
    "forced call": (
        messages("Say hello.", tools=[MESSAGES_TOOL], tool_choice={"type": "any"}),
        responses("Say hello.", tools=[RESPONSES_TOOL], tool_choice="required"),
    ),
    "parallel calls": (
        messages(TWO_CITIES, tools=[MESSAGES_TOOL]),
        responses(TWO_CITIES, tools=[RESPONSES_TOOL]),
    ),
    "structured": (
        messages(ASKS_JSON, output_config={"format": {"type": "json_schema", "schema": PERSON}}),
        responses(ASKS_JSON, text={"format": {"type": "json_object"}}),
    ),
    "thinking and a call": (
        messages(
            ONE_CITY, tools=[MESSAGES_TOOL], thinking={"type": "enabled", "budget_tokens": 1024}
        ),
        responses(ONE_CITY, tools=[RESPONSES_TOOL], reasoning={"effort": "high"}),
    ),
    "logprobs": (
        messages("Say hello."),
        responses("Say hello.", include=["message.output_text.logprobs"], top_logprobs=1),
    ),
}


@pytest.mark.parametrize("name", list(STREAMED))
def test_a_messages_stream_builds_the_whole_answer(vendor: Callable[[], str], name: str) -> None:
    body = STREAMED[name][0]
    whole = post(f"{vendor()}/messages", body).json()
    streamed = post(f"{vendor()}/messages", {**body, "stream": True})
    assert streamed.status == 200 and streamed.headers["Content-Type"] == "text/event-stream"
    assert b"[DONE]" not in streamed.body
    assert read_messages_stream(streamed.body) == whole


@pytest.mark.parametrize("name", list(STREAMED))
def test_a_responses_stream_builds_the_whole_answer(vendor: Callable[[], str], name: str) -> None:
    body = STREAMED[name][1]
    whole = post(f"{vendor()}/responses", body).json()
    streamed = post(f"{vendor()}/responses", {**body, "stream": True})
    assert streamed.status == 200 and streamed.headers["Content-Type"] == "text/event-stream"
    assert b"[DONE]" not in streamed.body
    assert without_time(read_responses_stream(streamed.body)) == without_time(whole)


def test_a_stream_bills_what_the_chat_stream_bills(vendor: Callable[[], str]) -> None:
    url = vendor()
    message = read_messages_stream(
        post(f"{url}/messages", messages(TWO_CITIES, tools=[MESSAGES_TOOL], stream=True)).body
    )
    response = read_responses_stream(
        post(f"{url}/responses", responses(TWO_CITIES, tools=[RESPONSES_TOOL], stream=True)).body
    )
    chat_stream = {
        **chat(TWO_CITIES),
        "tools": [CHAT_TOOL],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks = [
        json.loads(e.data)
        for e in decode_sse([post(f"{url}/chat/completions", chat_stream).body])[0]
        if e.data != "[DONE]"
    ]
    usage = chunks[-1]["usage"]
    billed = (usage["prompt_tokens"], usage["completion_tokens"])
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == billed
    assert (response["usage"]["input_tokens"], response["usage"]["output_tokens"]) == billed
    assert billed == (147, 24)


def test_a_cut_stream_stays_cut(local_simulator: Vendor) -> None:
    url = local_simulator("fault-truncated-stream:1").base_url
    request = urllib.request.Request(
        f"{url}/messages",
        data=json.dumps(messages("Say hello.", stream=True)).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
    kinds = [data["type"] for _, data in events_of(cut.value.partial)]
    assert kinds[0] == "message_start" and "message_stop" not in kinds
    assert "content_block_delta" in kinds


def test_a_stream_keeps_the_vendors_pace() -> None:
    server = SimulatorServer(
        ("127.0.0.1", 0), defects=parse_defects([]), pace=Pace(ttft=0.3, per_token=0.02)
    )
    serve_in_thread(server)
    try:
        started = time.monotonic()
        streamed = post(f"{server.base_url}/responses", responses("Say hello.", stream=True))
        elapsed = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    # 15 tokens: the first after 0.3 s, each next one 0.02 s later.
    assert read_responses_stream(streamed.body)["usage"]["output_tokens"] == 15
    assert elapsed >= 0.3 + 14 * 0.02


# -- the translations, pure -----------------------------------------------------------------

words = st.sampled_from(["Hello", " world", "!", " 4", "\n", " café", " 日本", '"', " {"])
call_arguments = st.dictionaries(
    st.sampled_from(["city", "unit", "q"]), st.text(max_size=12), max_size=3
)


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    """A reply the toy model could give: text, maybe reasoning, maybe calls."""
    tokens = draw(st.lists(words, max_size=12))
    calls = [
        ToolCall(f"call_9_{n}", draw(st.sampled_from(["get_weather", "search"])), json.dumps(args))
        for n, args in enumerate(draw(st.lists(call_arguments, max_size=3)))
    ]
    reasoning = draw(st.none() | st.text(min_size=1, max_size=30))
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    thought = None if reasoning is None else len(reasoning.split())
    return Reply(tokens, finish, calls, reasoning=reasoning, reasoning_tokens=thought)


def translated(translator: MessagesStream | ResponsesStream, events: list[bytes]) -> bytes:
    return b"".join(translator.feed(event) for event in events) + translator.close()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(replies(), st.booleans(), st.lists(st.integers(min_value=0, max_value=20_000), max_size=8))
def test_any_translated_stream_builds_the_translated_whole_answer(
    reply: Reply, logprobs: bool, cuts: list[int]
) -> None:
    path, defects = ToyPath(parse_defects([])), parse_defects([])
    request = chat("hi", stream=True, stream_options={"include_usage": True})
    native = responses("hi")
    if logprobs:
        request |= {"logprobs": True, "top_logprobs": 2}
        native |= {"include": ["message.output_text.logprobs"], "top_logprobs": 2}
    events = stream_events(request, reply, 9, defects, path)
    body = completion_body(request, reply, 9, defects, path)
    as_messages = translated(MessagesStream(path.prompt_tokens(request)), events)
    as_responses = translated(ResponsesStream(native), events)
    assert read_messages_stream(as_messages) == message_object(body)
    final = read_responses_stream(as_responses)
    assert without_time(final) == without_time(response_object(body, native))
    for data in (as_messages, as_responses):
        # However the network splits the bytes, the same events arrive.
        assert decode_sse(split(data, cuts)) == decode_sse([data])


def test_a_rich_messages_request_becomes_its_chat_request() -> None:
    body = {
        "model": MODEL_ID,
        "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/a.png"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    # Signed and sealed as this vendor does: it checks what comes back.
                    {"type": "thinking", "thinking": "Hmm.", "signature": signature("Hmm.")},
                    {"type": "redacted_thinking", "data": sealed(" More.")},
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "12 C"}],
                    },
                    {"type": "text", "text": "And now?"},
                ],
            },
        ],
        "tools": [{**MESSAGES_TOOL, "strict": True}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "stop_sequences": ["END"],
        "stream": True,
        "metadata": {"user_id": "u"},
        "output_config": {"format": {"type": "json_schema", "schema": PERSON}},
    }
    assert chat_request("messages", body) == {
        "model": MODEL_ID,
        "messages": [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "Be brief."},
                    {"type": "text", "text": "Be kind."},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Let me look.",
                "reasoning_content": "Hmm. More.",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "12 C"},
            {"role": "user", "content": "And now?"},
        ],
        "max_tokens": 64,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "stop": ["END"],
        "tools": [{"type": "function", "function": {**CHAT_TOOL["function"], "strict": True}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": PERSON, "strict": True},
        },
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    # A redacted block this vendor did not seal is refused, naming it.
    body["messages"][1]["content"][1]["data"] = "xyz"
    refused = chat_request("messages", body)
    assert isinstance(refused, Rejection) and refused.status == 400
    assert refused.message.startswith("messages[1].content[1].data: not the data of")


def test_a_rich_responses_request_becomes_its_chat_request() -> None:
    body = {
        "model": MODEL_ID,
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Use tools."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Look:"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AAAA",
                        "detail": "low",
                    },
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Hmm."}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "12 C"},
        ],
        "tools": [{key: value for key, value in RESPONSES_TOOL.items() if key != "strict"}],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "max_output_tokens": 64,
        "temperature": 0.5,
        "top_p": 0.9,
        "text": {"format": {"type": "json_object"}},
        "include": ["message.output_text.logprobs"],
        "top_logprobs": 3,
        "reasoning": {"effort": "low"},
        "store": False,
    }
    assert chat_request("responses", body) == {
        "model": MODEL_ID,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Use tools."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look:"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": "Looking.",
                "reasoning_content": "Hmm.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "12 C"},
        ],
        "max_tokens": 64,
        "temperature": 0.5,
        "top_p": 0.9,
        "parallel_tool_calls": False,
        # A Responses tool is strict unless it says otherwise.
        "tools": [{"type": "function", "function": {**CHAT_TOOL["function"], "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_object"},
        "logprobs": True,
        "top_logprobs": 3,
        "reasoning_effort": "low",
    }


texts = st.text(min_size=1, max_size=20)


@given(st.none() | texts, st.lists(st.tuples(texts, texts), min_size=1, max_size=4))
def test_a_plain_conversation_translates_turn_for_turn(
    system: str | None, turns: list[tuple[str, str]]
) -> None:
    conversation = [
        message
        for asked, answered in turns
        for message in (
            {"role": "user", "content": asked},
            {"role": "assistant", "content": answered},
        )
    ][:-1]
    expected = (
        [{"role": "system", "content": system}] if system is not None else []
    ) + conversation
    as_messages = chat_request("messages", messages("", system=system) | {"messages": conversation})
    items = [{"type": "message", "role": m["role"], "content": m["content"]} for m in conversation]
    as_responses = chat_request("responses", responses("", instructions=system, input=items))
    for request in (as_messages, as_responses):
        assert isinstance(request, dict) and request["messages"] == expected
        assert request_problem(request) is None


# -- errors, authentication, counting -------------------------------------------------------

MESSAGES_ERRORS = [
    (b"{not json", 400, "invalid_request_error", "the request body is not valid JSON"),
    (
        json.dumps(messages("hi") | {"max_tokens": None}).encode(),
        400,
        "invalid_request_error",
        "max_tokens: field required",
    ),
    (
        json.dumps(messages("hi", model="gpt-4")).encode(),
        404,
        "not_found_error",
        "The model 'gpt-4' does not exist",
    ),
    (
        json.dumps(messages("hi", temperature=5)).encode(),
        400,
        "invalid_request_error",
        "$.temperature: 5 is greater than the maximum of 1",
    ),
    (
        json.dumps(
            messages("hi") | {"messages": [{"role": "user", "content": [{"type": "video"}]}]}
        ).encode(),
        400,
        "invalid_request_error",
        "messages[0].content[0]: a user turn cannot hold a 'video' block",
    ),
]


@pytest.mark.parametrize(("sent", "status", "kind", "message"), MESSAGES_ERRORS)
def test_messages_errors_come_in_the_messages_shape(
    vendor: Callable[[], str], sent: bytes, status: int, kind: str, message: str
) -> None:
    answer = post(f"{vendor()}/messages", sent)
    assert answer.status == status
    assert answer.json() == {"type": "error", "error": {"type": kind, "message": message}}


RESPONSES_ERRORS = [
    (b"{not json", 400, "the request body is not valid JSON", None, None),
    (json.dumps({"input": "hi"}).encode(), 400, "model: field required", "model", None),
    (
        json.dumps(responses("hi", input=7)).encode(),
        400,
        "input: must be a string or an array of items",
        "input",
        None,
    ),
    (
        json.dumps(responses("hi", previous_response_id="resp_1")).encode(),
        404,
        "Previous response with id 'resp_1' not found.",
        "previous_response_id",
        "previous_response_not_found",
    ),
    (
        json.dumps(responses("hi", tools=[{"type": "web_search"}])).encode(),
        400,
        "tools[0]: tool type 'web_search' is not offered",
        "tools",
        None,
    ),
]


@pytest.mark.parametrize(("sent", "status", "message", "param", "code"), RESPONSES_ERRORS)
def test_responses_errors_come_in_the_openai_shape(
    vendor: Callable[[], str],
    sent: bytes,
    status: int,
    message: str,
    param: str | None,
    code: str | None,
) -> None:
    answer = post(f"{vendor()}/responses", sent)
    assert answer.status == status
    expected = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    assert answer.json() == {"error": expected}


@pytest.mark.parametrize(
    ("fault", "status", "kind"),
    [("fault-429:1", 429, "rate_limit_error"), ("fault-500:1", 500, "api_error")],
)
def test_a_fault_answers_in_the_messages_shape(
    local_simulator: Vendor, fault: str, status: int, kind: str
) -> None:
    answer = post(f"{local_simulator(fault).base_url}/messages", messages("hi"))
    assert answer.status == status
    assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == kind


def test_a_refused_request_poisons_the_next_whatever_api_it_came_by(
    local_simulator: Vendor,
) -> None:
    host, port = local_simulator("invalid-request-poisons:2").server_address[:2]
    # One connection: its requests are answered in turn, each after the one before is done
    # (the vendor poisons itself once its refusal has gone out).
    connection = http.client.HTTPConnection(str(host), port, timeout=30)

    def send(route: str, body: dict[str, Any]) -> tuple[int, Any]:
        connection.request(
            "POST", f"/v1{route}", json.dumps(body), {"Content-Type": "application/json"}
        )
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())

    try:
        refused = send("/messages", messages("hi", temperature=5))
        poisoned = [send("/responses", responses("hi")), send("/messages", messages("hi"))]
        healthy = send("/chat/completions", chat("hi"))
    finally:
        connection.close()
    assert [status for status, _ in (refused, *poisoned, healthy)] == [400, 500, 500, 200]
    assert poisoned[0][1]["error"]["message"] == "the worker is restarting"
    assert poisoned[1][1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "the worker is restarting"},
    }


def test_messages_take_the_key_in_x_api_key(local_simulator: Vendor) -> None:
    key = fake_key("messages")
    url = local_simulator(api_key=key).base_url
    by_header = post(f"{url}/messages", messages("hi"), {"x-api-key": key})
    by_bearer = post(f"{url}/messages", messages("hi"), {"Authorization": f"Bearer {key}"})
    wrong = post(f"{url}/messages", messages("hi"), {"x-api-key": fake_key("other")})
    not_responses = post(f"{url}/responses", responses("hi"), {"x-api-key": key})
    assert (by_header.status, by_bearer.status) == (200, 200)
    assert wrong.status == 401
    assert wrong.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "Incorrect API key provided."},
    }
    assert not_responses.status == 401
    assert not_responses.json()["error"]["code"] == "invalid_api_key"


@pytest.fixture(scope="module")
def profiled(simulator: Callable[..., str]) -> str:
    """A vendor that renders and counts prompts with the Kimi K2 profile."""
    return simulator("--profile", KIMI_PROFILE)


def test_the_count_routes_count_what_the_answer_bills(profiled: str) -> None:
    call = {"type": "tool_use", "id": "toolu_7", "name": "get_weather", "input": {"city": "Oslo"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_7", "content": "12 C"}
    counted = {
        "model": MODEL_ID,
        "system": "Be brief.",
        "tools": [MESSAGES_TOOL],
        "messages": [
            {"role": "user", "content": ONE_CITY},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ],
    }
    items = [
        {"role": "user", "content": ONE_CITY},
        {
            "type": "function_call",
            "call_id": "toolu_7",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "toolu_7", "output": "12 C"},
    ]
    strict_tool = {**RESPONSES_TOOL, "strict": True}
    asked = {"model": MODEL_ID, "instructions": "Be brief.", "tools": [strict_tool], "input": items}
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": ONE_CITY},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_7",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_7", "content": "12 C"},
    ]
    billed = post(
        f"{profiled}/chat/completions",
        {"model": MODEL_ID, "tools": [CHAT_TOOL], "messages": conversation},
    ).json()
    strict_billed = post(
        f"{profiled}/chat/completions",
        {
            "model": MODEL_ID,
            "tools": [{"type": "function", "function": {**CHAT_TOOL["function"], "strict": True}}],
            "messages": conversation,
        },
    ).json()
    anthropic = post(f"{profiled}/messages/count_tokens", counted)
    openai = post(f"{profiled}/responses/input_tokens", asked)
    assert anthropic.json() == {"input_tokens": billed["usage"]["prompt_tokens"]}
    assert openai.json() == {
        "object": "response.input_tokens",
        "input_tokens": strict_billed["usage"]["prompt_tokens"],
    }
    assert (anthropic.json()["input_tokens"], openai.json()["input_tokens"]) == (161, 166)


def test_a_count_route_refuses_what_the_answer_refuses(profiled: str) -> None:
    answer = post(
        f"{profiled}/messages/count_tokens",
        {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status == 404
    assert answer.json() == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "The model 'gpt-4' does not exist"},
    }


def test_without_a_profile_there_is_nothing_to_count(vendor: Callable[[], str]) -> None:
    url = vendor()
    anthropic = post(f"{url}/messages/count_tokens", {"model": MODEL_ID, "messages": []})
    openai = post(f"{url}/responses/input_tokens", responses("hi"))
    assert anthropic.status == openai.status == 404
    assert anthropic.json()["error"] == {
        "type": "not_found_error",
        "message": "no route POST /v1/messages/count_tokens",
    }
    assert openai.json()["error"]["code"] == "not_found"
