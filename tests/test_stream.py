"""The SSE decoder and the stream accumulator, on recorded and generated chunk sequences."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from verifier.protocol.answers import ChatResult
from verifier.protocol.stream import accumulate, decode_sse


def sse(*events: Any, done: bool = True, newline: str = "\n") -> bytes:
    parts = [f"data: {json.dumps(e)}{newline}{newline}" for e in events]
    if done:
        parts.append(f"data: [DONE]{newline}{newline}")
    return "".join(parts).encode()


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
        **extra,
    }


def run(body: bytes, pieces: list[int] | None = None) -> ChatResult:
    chunks = [body] if pieces is None else split(body, pieces)
    return accumulate(chunks, ChatResult(stream=True, status=200))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def codes(result: ChatResult) -> list[str]:
    return [p.code for p in result.problems]


# A recorded vLLM-style tool-call stream: role first, name on the first delta, arguments in pieces.
TOOL_STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
    chunk({}, "tool_calls"),
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    },
)


def test_tool_call_stream_is_reassembled_without_violations() -> None:
    result = run(TOOL_STREAM)
    assert codes(result) == []
    choice = result.choice
    assert choice is not None and choice.role == "assistant"
    assert [(c.id, c.type, c.name, c.arguments) for c in choice.tool_calls] == [
        ("call_1", "function", "get_weather", '{"city": "Oslo"}')
    ]
    assert choice.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert result.usage_source == "final_chunk"
    assert result.done


def test_missing_finish_reason_is_recorded_never_defaulted() -> None:
    result = run(sse(chunk({"role": "assistant", "content": "hi"})))
    assert result.choice is not None and result.choice.finish_reason is None
    assert codes(result) == ["finish_reason_missing"]


def test_missing_done_and_unterminated_event() -> None:
    result = run(
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}'
    )
    assert {"done_missing", "event_unterminated"} <= set(codes(result))
    assert result.choice is not None and result.choice.content == "x"


def test_later_different_name_is_a_violation_and_first_name_kept() -> None:
    result = run(
        sse(
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "g"}}]}),
            chunk({}, "tool_calls"),
        )
    )
    assert result.choice is not None and result.choice.tool_calls[0].name == "f"
    assert codes(result) == ["tool_call_name_changed"]


def test_name_from_first_non_empty_delta() -> None:
    result = run(
        sse(
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "", "arguments": ""},
                        }
                    ],
                }
            ),
            chunk(
                {"tool_calls": [{"index": 0, "function": {"name": "lookup", "arguments": "{}"}}]}
            ),
            chunk({}, "tool_calls"),
        )
    )
    assert result.choice is not None and result.choice.tool_calls[0].name == "lookup"
    assert codes(result) == ["tool_call_first_delta_incomplete"]


def test_an_id_that_never_comes_is_not_a_late_first_delta() -> None:
    """An empty id on every delta is the call's own defect (bad_call_id), not an ordering one."""
    result = run(
        sse(
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": ""},
                        }
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
            chunk({}, "tool_calls"),
        )
    )
    assert result.choice is not None and not result.choice.tool_calls[0].id
    assert codes(result) == []


def test_usage_inside_a_choice_is_taken_and_labelled() -> None:
    body = sse(
        {
            "id": "c",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "a"},
                    "finish_reason": "stop",
                    "usage": {"prompt_tokens": 1},
                }
            ],
        }
    )
    result = run(body)
    assert result.usage == {"prompt_tokens": 1}
    assert result.usage_source == "choice"


def test_garbage_chunks_are_problems_not_exceptions() -> None:
    result = run(b"data: {not json\n\ndata: 42\n\n: comment\n\ndata: [DONE]\n\n")
    assert {"chunk_not_json", "chunk_not_object"} <= set(codes(result))


def test_content_after_tool_calls_and_repeated_role() -> None:
    result = run(
        sse(
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                }
            ),
            chunk({"role": "assistant", "content": "oops"}),
            chunk({}, "tool_calls"),
        )
    )
    assert {"content_after_tool_calls", "role_repeated"} <= set(codes(result))


def test_crlf_and_cr_line_endings() -> None:
    for newline in ("\r\n", "\r"):
        result = run(sse(chunk({"role": "assistant", "content": "ok"}, "stop"), newline=newline))
        assert codes(result) == []
        assert result.choice is not None and result.choice.content == "ok"


def test_multiline_data_and_event_fields() -> None:
    events, unterminated = decode_sse([b"event: message\ndata: a\ndata: b\n\n"])
    assert [(e.event, e.data) for e in events] == [("message", "a\nb")]
    assert not unterminated


message_pieces = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12)


@given(
    pieces=message_pieces,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_reassembly_does_not_depend_on_chunking(
    pieces: list[str], cuts: list[int], newline: str
) -> None:
    """The same message, split into different deltas and network chunks, reassembles the same."""
    text = "".join(pieces)
    by_pieces = sse(
        chunk({"role": "assistant", "content": ""}),
        *[chunk({"content": p}) for p in pieces],
        chunk({}, "stop"),
        newline=newline,
    )
    whole = sse(chunk({"role": "assistant", "content": text}), chunk({}, "stop"), newline=newline)
    split_result = run(by_pieces, cuts)
    whole_result = run(whole)
    for result in (split_result, whole_result):
        assert codes(result) == []
        assert result.choice is not None
        assert result.choice.content == text
        assert result.choice.finish_reason == "stop"


@given(
    arguments=st.text(max_size=60),
    sizes=st.lists(st.integers(1, 7), max_size=20),
    cuts=st.lists(st.integers(0, 5000), max_size=30),
)
def test_tool_arguments_reassemble_whatever_the_split(
    arguments: str, sizes: list[int], cuts: list[int]
) -> None:
    parts, position = [], 0
    for size in sizes:
        parts.append(arguments[position : position + size])
        position += size
    parts.append(arguments[position:])
    body = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "x",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ],
            }
        ),
        *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts],
        chunk({}, "tool_calls"),
    )
    result = run(body, cuts)
    assert result.choice is not None
    assert result.choice.tool_calls[0].arguments == arguments


@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=10))
def test_arbitrary_bytes_never_raise(data: bytes, cuts: list[int]) -> None:
    result = run(data, cuts)
    assert isinstance(result.problems, list)


def test_the_chunks_that_carry_a_token_are_timed_when_their_bytes_arrive() -> None:
    """Role-only, finish and usage chunks carry no token; a chunk is timed once, however many
    choices it carries; the first reasoning is noted apart."""
    two_choices = chunk({"content": "a"})
    two_choices["choices"].append({"index": 1, "delta": {"content": "b"}, "finish_reason": None})
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Hm"}),
        chunk({"content": "Hi"}),
        two_choices,
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}),
        chunk({}, finish="stop"),
        {**chunk({}), "choices": [], "usage": {"completion_tokens": 4}},
    ]
    # One event's bytes a read, the clock at 10, 20, ... ms; [DONE] last.
    pieces = [sse(e, done=False) for e in events] + [b"data: [DONE]\n\n"]
    ticks = iter(t / 100 for t in range(1, 20))
    result = accumulate(pieces, ChatResult(stream=True, status=200), clock=lambda: next(ticks))
    assert result.token_arrivals == [0.02, 0.03, 0.04, 0.05]
    assert result.first_reasoning == 0.02
    untimed = accumulate(pieces, ChatResult(stream=True, status=200))
    assert untimed.token_arrivals == [] and untimed.first_reasoning is None
