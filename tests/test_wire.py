"""Wire grading as pure functions: shapes, the streaming protocol, parameters, errors, usage."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier import Outcome, RunContext, Status, resources
from verifier.cases.corpus import load_corpus
from verifier.checks import FAMILIES
from verifier.checks.support.bad_requests import invalid_request_findings
from verifier.checks.support.logprob_rules import (
    MAX_TOP_LOGPROBS,
    STREAM_TOLERANCE,
    content_entries,
    limit_findings,
    logprob_findings,
    stream_logprob_findings,
)
from verifier.checks.support.shapes import number_bounds
from verifier.checks.wire import (
    max_tokens_findings,
    off_pin,
    pin_findings,
    protocol_findings,
    served_model_findings,
    shape_findings,
    stop_findings,
    stop_reason_findings,
    usage_findings,
)
from verifier.protocol.answers import ChatResult, Choice, parse_completion
from verifier.protocol.requests import Chat, Request, drive
from verifier.protocol.stream import accumulate

GOOD = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
SSE = {"content-type": "text/event-stream"}


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def body(data: Any, status: int = 200) -> ChatResult:
    return parse_completion(status, json.dumps(data).encode(), {"content-type": "application/json"})


def stream(*chunks: Any, done: bool = True) -> ChatResult:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + (
        "data: [DONE]\n\n" if done else ""
    )
    return accumulate([text.encode()], ChatResult(stream=True, status=200, headers=dict(SSE)))


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


USAGE_CHUNK = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def test_a_good_answer_has_the_right_shape() -> None:
    assert shape_findings(body(GOOD)) == []
    assert usage_findings(body(GOOD)) == []


@pytest.mark.parametrize(
    ("change", "code", "path"),
    [
        (lambda d: d.pop("id"), "response_shape", "$"),
        (lambda d: d.update(object="completion"), "response_shape", "$.object"),
        (
            lambda d: d["choices"][0].update(finish_reason="stop_163586"),
            "finish_reason_invalid",
            "$.choices[0].finish_reason",
        ),
        (lambda d: d["usage"].update(total_tokens="4"), "response_shape", "$.usage.total_tokens"),
        (
            lambda d: d["choices"][0]["message"].update(role="bot"),
            "response_shape",
            "$.choices[0].message.role",
        ),
    ],
)
def test_shape_violations_name_the_path(change: Any, code: str, path: str) -> None:
    data = json.loads(json.dumps(GOOD))
    change(data)
    found = shape_findings(body(data))
    assert (found[0].code, found[0].json_path) == (code, path)


def test_vendor_extras_and_omitted_nullable_fields_are_fine() -> None:
    data = json.loads(json.dumps(GOOD))
    data["timings"] = {"prompt_ms": 1}
    data["choices"][0]["message"]["reasoning_content"] = None
    assert shape_findings(body(data)) == []


def test_a_chunk_against_the_chunk_schema_names_its_chunk_and_path() -> None:
    bad = chunk({"content": "Hi"})
    bad["object"] = "chat.completion"
    result = stream(chunk({"role": "assistant", "content": ""}), bad, chunk({}, "stop"))
    found = shape_findings(result)
    assert [(f.code, f.json_path) for f in found] == [("chunk_shape", "$[chunk 1].object")]


def test_a_good_stream() -> None:
    result = stream(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hi"}),
        chunk({}, "stop"),
        USAGE_CHUNK,
    )
    assert shape_findings(result) == [] and protocol_findings(result, include_usage=True) == []


@pytest.mark.parametrize(
    ("chunks", "done", "include", "code"),
    [
        (
            [chunk({"role": "assistant", "content": "Hi"}), chunk({}, "stop")],
            True,
            True,
            "usage_missing",
        ),
        (
            [chunk({"role": "assistant", "content": "Hi"}), chunk({}, "stop"), USAGE_CHUNK],
            True,
            False,
            "usage_unrequested",
        ),
        (
            [chunk({"role": "assistant", "content": "Hi"}), chunk({}, "stop"), USAGE_CHUNK],
            False,
            True,
            "done_missing",
        ),
        ([chunk({"content": "Hi"}), chunk({}, "stop"), USAGE_CHUNK], True, True, "role_missing"),
        (
            [
                chunk({"role": "assistant", "content": "H"}),
                chunk({"role": "assistant", "content": "i"}),
                chunk({}, "stop"),
                USAGE_CHUNK,
            ],
            True,
            True,
            "role_repeated",
        ),
        (
            [
                chunk({"role": "assistant", "content": "Hi"}),
                chunk({}),
                chunk({}, "stop"),
                USAGE_CHUNK,
            ],
            True,
            True,
            "empty_delta",
        ),
        (
            [
                chunk({"role": "assistant", "content": "Hi"}),
                chunk({}, "stop"),
                chunk({}, "stop"),
                USAGE_CHUNK,
            ],
            True,
            True,
            "finish_reason_repeated",
        ),
        (
            [chunk({"role": "assistant", "content": "Hi"}), USAGE_CHUNK],
            True,
            True,
            "finish_reason_missing",
        ),
        (
            [
                chunk(
                    {"role": "assistant", "content": "Hi"},
                    "stop",
                    usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                )
            ],
            True,
            True,
            "usage_not_final_chunk",
        ),
    ],
)
def test_protocol_violations(chunks: list[Any], done: bool, include: bool, code: str) -> None:
    found = protocol_findings(stream(*chunks, done=done), include_usage=include)
    assert codes(found) == [code]


def test_a_stream_that_is_not_sse() -> None:
    result = ChatResult(stream=True, status=200, headers={"content-type": "application/json"})
    assert codes(protocol_findings(result, include_usage=True)) == ["not_event_stream"]


def test_usage_total() -> None:
    data = json.loads(json.dumps(GOOD))
    data["usage"]["total_tokens"] = 5
    assert codes(usage_findings(body(data))) == ["usage_total_wrong"]
    data.pop("usage")
    assert codes(usage_findings(body(data))) == ["usage_missing"]


@pytest.mark.parametrize(
    ("details", "part"),
    [("prompt_tokens_details", "cached_tokens"), ("completion_tokens_details", "reasoning_tokens")],
)
def test_a_part_of_a_count_may_not_exceed_it(details: str, part: str) -> None:
    data = json.loads(json.dumps(GOOD))
    whole = data["usage"]["prompt_tokens" if part == "cached_tokens" else "completion_tokens"]
    data["usage"][details] = {part: whole}
    assert usage_findings(body(data)) == []
    data["usage"][details] = {part: whole + 1}
    (found,) = usage_findings(body(data))
    assert found.code == "usage_details_inconsistent" and found.actual == whole + 1
    assert found.json_path == f"$.usage.{details}.{part}"


@pytest.mark.parametrize(
    ("status", "data", "code"),
    [
        (200, GOOD, "invalid_request_accepted"),
        (500, {"error": {"message": "boom"}}, "invalid_request_5xx"),
        (400, {"object": "error", "message": "bad"}, "error_shape"),
        (422, {"detail": [{"msg": "field required"}]}, "error_shape"),
    ],
)
def test_invalid_requests_need_a_4xx_with_an_error_object(
    status: int, data: Any, code: str
) -> None:
    assert codes(invalid_request_findings(body(data, status))) == [code]
    assert invalid_request_findings(body({"error": {"message": "bad", "type": "x"}}, 400)) == []


def answer(
    content: str, finish: str = "stop", logprobs: Any = None, usage: Any = None
) -> ChatResult:
    return ChatResult(
        stream=False,
        status=200,
        usage=usage,
        choices=[Choice(0, "assistant", content, None, [], finish, logprobs)],
    )


def test_logprobs() -> None:
    entries = [
        {"token": "He", "logprob": -0.1, "top_logprobs": [{"token": "He", "logprob": -0.1}]},
        {"token": "llo", "logprob": 0.0, "top_logprobs": []},
    ]
    assert logprob_findings(answer("Hello", logprobs=entries), None, greedy=True) == []
    assert codes(logprob_findings(answer("Hello!", logprobs=entries), None, greedy=True)) == [
        "logprobs_inconsistent"
    ]
    # The rules still read entries that do not join to the content (vLLM lists its end token).
    assert codes(logprob_findings(answer("Hello!", logprobs=entries), 1, greedy=True)) == [
        "logprobs_inconsistent",
        "top_logprobs_count_wrong",
    ]
    assert codes(logprob_findings(answer("Hello", logprobs=None), 1, greedy=True)) == [
        "logprobs_missing"
    ]
    broken = [{**entries[0], "logprob": "-0.1"}, entries[1]]
    assert codes(logprob_findings(answer("Hello", logprobs=broken), None, greedy=True)) == [
        "logprobs_inconsistent"
    ]


# -- the logprob rules, on answers made from a distribution --------------------------------

WORDS = [f" w{i}" for i in range(30)]


@st.composite
def distributions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """Greedy entries with `top` distinct alternatives each, the chosen token the likeliest."""
    top = draw(st.integers(min_value=1, max_value=20))
    length = draw(st.integers(min_value=1, max_value=6))
    entries = []
    for _ in range(length):
        tokens = draw(st.lists(st.sampled_from(WORDS), min_size=top, max_size=top, unique=True))
        values = sorted(draw(st.lists(st.floats(-30, 0), min_size=top, max_size=top)), reverse=True)
        alternatives = [
            {"token": t, "logprob": v, "bytes": list(t.encode())}
            for t, v in zip(tokens, values, strict=True)
        ]
        entries.append({**alternatives[0], "top_logprobs": alternatives})
    return entries, top


def graded(entries: list[dict[str, Any]], top: int | None, greedy: bool = True) -> set[str]:
    content = "".join(e["token"] for e in entries)
    return set(codes(logprob_findings(answer(content, logprobs=entries), top, greedy=greedy)))


def edited(entries: list[dict[str, Any]], position: int, **changes: Any) -> list[dict[str, Any]]:
    return [{**e, **changes} if i == position else e for i, e in enumerate(entries)]


@given(distributions(), st.data())
def test_each_violation_of_the_logprob_rules_gets_its_own_code(
    made: tuple[list[dict[str, Any]], int], data: st.DataObject
) -> None:
    entries, top = made
    assert graded(entries, top) == set()
    at = data.draw(st.integers(0, len(entries) - 1))
    alternatives = entries[at]["top_logprobs"]
    assert graded(edited(entries, at, top_logprobs=alternatives[:-1]), top) == {
        "top_logprobs_count_wrong"
    }
    assert graded(entries, top + 1) == {"top_logprobs_count_wrong"}
    # llama-server under speculative decoding: 0.0 and no alternatives for accepted drafts.
    assert graded(edited(entries, at, logprob=0.0, top_logprobs=[]), top) == {
        "top_logprobs_count_wrong"
    }
    raised = [{**alt, "logprob": alt["logprob"] + 31} for alt in alternatives]
    assert graded(edited(entries, at, logprob=raised[0]["logprob"], top_logprobs=raised), top) == {
        "logprob_positive"
    }
    own = [{**alternatives[0], "logprob": alternatives[0]["logprob"] - 0.5}, *alternatives[1:]]
    assert graded(edited(entries, at, top_logprobs=own), top) == {"chosen_logprob_differs"}
    if top >= 2:
        twice = [*alternatives[:-1], dict(alternatives[0])]
        assert graded(edited(entries, at, top_logprobs=twice), top) == {"top_logprobs_duplicated"}
        best = alternatives[1]["logprob"]
        if best > alternatives[0]["logprob"] - 1:
            below = best - 1
            swapped = [{**alternatives[0], "logprob": below}, *alternatives[1:]]
            changed = edited(entries, at, logprob=below, top_logprobs=swapped)
            assert graded(changed, top) == {"chosen_not_top"}
            # Sampled at a temperature above 0, a less likely token may be chosen.
            assert graded(changed, top, greedy=False) == set()
        absent = edited(
            entries, at, top_logprobs=[*alternatives[1:], {"token": " zz", "logprob": -40.0}]
        )
        assert graded(absent, top) == {"chosen_not_top"}


def test_tokens_are_told_apart_by_id_then_bytes_then_text() -> None:
    # llama-server: the chosen entry of a character's last byte carries the bytes of the tokens
    # before it; its own entry among the alternatives has the same id and one byte.
    emoji = {
        "id": 229,
        "token": " 👋",
        "bytes": [32, 240, 159, 145, 139],
        "logprob": -0.37,
        "top_logprobs": [
            {"id": 229, "token": "\ufffd", "bytes": [139], "logprob": -0.37},
            {"id": 231, "token": "\ufffd", "bytes": [141], "logprob": -2.5},
        ],
    }
    assert graded([emoji], 2) == set()
    # Two ids that render as the same text are two tokens (llama.cpp, the tiny Kimi model).
    end = {
        "id": 163586,
        "token": "",
        "bytes": [],
        "logprob": 0.0,
        "top_logprobs": [
            {"id": 163586, "token": "", "bytes": [], "logprob": 0.0},
            {"id": 163597, "token": "", "bytes": [], "logprob": -88.8},
            {"id": 163595, "token": "", "bytes": [], "logprob": -3.4e38},
        ],
    }
    assert graded([end], 3) == set()
    # vLLM names a token that ends inside a UTF-8 character "" with no bytes: unidentifiable,
    # never a duplicate, and the chosen one may be any of them.
    partial = {
        "token": "",
        "bytes": [],
        "logprob": -0.17,
        "top_logprobs": [
            {"token": "", "bytes": [], "logprob": -0.17},
            {"token": "", "bytes": [], "logprob": -2.66},
        ],
    }
    assert graded([partial], 2) == set()
    same_text = {
        "token": "a",
        "logprob": -0.1,
        "top_logprobs": [{"token": "a", "logprob": -0.1}] * 2,
    }
    assert graded([same_text], 2) == {"top_logprobs_duplicated"}


def test_the_token_that_stopped_an_answer_is_not_a_content_token() -> None:
    hi = {"token": "Hi", "logprob": -0.1, "bytes": [72, 105]}
    llama_end = {"token": "", "logprob": -1.6, "bytes": []}
    vllm_end = {"token": "<|im_end|>", "logprob": -0.3}
    assert content_entries([hi, llama_end], "Hi", "stop") == [hi]
    assert content_entries([hi, vllm_end], "Hi", "stop") == [hi]
    assert content_entries([hi], "Hi", "stop") == [hi]
    assert content_entries([hi, llama_end], "Hi", "length") == [hi, llama_end]


def pair(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[str]:
    content = "".join(e["token"] for e in first)
    return codes(
        stream_logprob_findings(
            answer(content, logprobs=first),
            dataclasses.replace(answer(content, logprobs=second), stream=True),
        )
    )


@given(distributions(), st.floats(0, STREAM_TOLERANCE / 2))
def test_stream_logprobs_equal_within_the_tolerance(
    made: tuple[list[dict[str, Any]], int], noise: float
) -> None:
    entries, _ = made
    near = [
        {
            **e,
            "logprob": e["logprob"] - noise,
            "top_logprobs": [{**a, "logprob": a["logprob"] - noise} for a in e["top_logprobs"]],
        }
        for e in entries
    ]
    assert pair(entries, near) == []
    far = [{**near[0], "logprob": entries[0]["logprob"] - 2 * STREAM_TOLERANCE}, *near[1:]]
    assert pair(entries, far) == ["stream_logprobs_differ"]
    # llama-server lists the token that stopped the answer in a non-stream answer only.
    assert pair([*entries, {"token": "", "bytes": [], "logprob": -1.0}], entries) == []
    assert pair(entries, entries[:-1]) == ["stream_logprobs_differ"]


def test_an_alternative_far_apart_between_the_modes_differs() -> None:
    chosen = {"token": "a", "logprob": -0.1}
    first = [{**chosen, "top_logprobs": [chosen, {"token": "b", "logprob": -2.0}]}]
    second = [{**chosen, "top_logprobs": [chosen, {"token": "b", "logprob": -2.5}]}]
    assert pair(first, second) == ["stream_logprobs_differ"]
    renamed = [{**chosen, "token": "c", "top_logprobs": []}]
    assert pair([{**chosen, "top_logprobs": []}], renamed) == ["stream_logprobs_differ"]


def test_top_logprobs_above_the_maximum_is_refused_or_honoured_never_cut() -> None:
    asked = MAX_TOP_LOGPROBS + 1
    refused = body({"error": {"message": "at most 20", "type": "invalid_request_error"}}, 400)
    assert limit_findings(refused, asked) == []
    alternatives = [{"token": f"t{i}", "logprob": -1.0 - i} for i in range(asked)]
    entry = {**alternatives[0], "top_logprobs": alternatives}
    assert limit_findings(answer("t0", logprobs=[entry]), asked) == []
    cut = {**entry, "top_logprobs": alternatives[:MAX_TOP_LOGPROBS]}
    assert codes(limit_findings(answer("t0", logprobs=[cut]), asked)) == [
        "top_logprobs_limit_not_enforced"
    ]


def graded_logprob_case(case_id: str, non_stream: ChatResult, streamed: ChatResult) -> Outcome:
    """The wire corpus's case `case_id` graded from two recorded answers."""
    case = next(c for c in load_corpus(["wire"]).cases if c.id == case_id)

    def send(request: Request) -> ChatResult:
        assert isinstance(request, Chat)
        return streamed if request.stream else non_stream

    return drive(FAMILIES["wire"].run(case, RunContext(model="m", seed=1)), send)


def test_logprobs_spent_on_reasoning_are_no_evidence_and_missing_ones_still_fail() -> None:
    reasoning = "The user asked a question; a short"
    thought = ChatResult(
        stream=False,
        status=200,
        choices=[Choice(0, "assistant", None, reasoning, [], "length", [])],
    )
    thought_streamed = stream(
        chunk({"role": "assistant", "reasoning_content": reasoning}), chunk({}, "length")
    )
    spent = graded_logprob_case("parity-logprobs", thought, thought_streamed)
    assert spent.status is Status.UNSUPPORTED
    assert "no content token to read logprobs of" in spent.message
    alternatives = [
        {"token": token, "logprob": -0.1 - i} for i, token in enumerate(["Hi", "!", "?", ".", ","])
    ]
    entry = {"token": "Hi", "logprob": -0.1, "top_logprobs": alternatives}
    said = answer("Hi", logprobs=[entry])
    said_streamed = stream(
        chunk({"role": "assistant", "content": "Hi"}), chunk({}, "stop"), USAGE_CHUNK
    )
    missing = graded_logprob_case("parity-logprobs", said, said_streamed)
    assert {f.code for f in missing.findings} == {"logprobs_missing"}


def said(content: str, reason: str, sequence: str | None = None) -> ChatResult:
    """A Messages answer as the protocol module reads it: its own stop_reason kept."""
    finish = {"max_tokens": "length"}.get(reason, "stop")
    choice = Choice(0, "assistant", content, finish_reason=finish)
    choice.stop_reason, choice.stop_sequence = reason, sequence
    return ChatResult(stream=False, status=200, choices=[choice], api="messages")


def test_messages_says_which_stop_sequence_ended_the_answer() -> None:
    free = said("Hello! You said hi.", "end_turn")
    # A stop sequence ended it: the same request without one goes on with it there.
    assert stop_reason_findings(said("Hello", "stop_sequence", "!"), ["!"], free) == []
    assert stop_reason_findings(said("He", "stop_sequence", "l"), ["zz", "l"], free) == []
    (wrong,) = stop_reason_findings(said("Hello", "end_turn", "!"), ["!"], free, "non-stream")
    assert (wrong.code, wrong.expected, wrong.actual, wrong.attempt) == (
        "stop_reason_mismatch",
        {"stop_reason": "stop_sequence", "stop_sequence": "!"},
        {"stop_reason": "end_turn", "stop_sequence": "!"},
        "non-stream",
    )
    assert codes(stop_reason_findings(said("Hello", "stop_sequence", "zz"), ["zz", "!"], free))
    # It ended its turn: the answer without stop sequences is the same, and ends its turn.
    assert stop_reason_findings(said("Hi.", "end_turn"), ["!"], said("Hi.", "end_turn")) == []
    assert codes(
        stop_reason_findings(said("Hi.", "stop_sequence", "!"), ["!"], said("Hi.", "end_turn"))
    ) == ["stop_reason_mismatch"]
    # Without evidence (none, or an answer that went another way) the fields must agree.
    other = said("Goodbye.", "end_turn")
    for evidence in (None, other, said("Hello", "max_tokens")):
        assert stop_reason_findings(said("Hello", "stop_sequence", "!"), ["!"], evidence) == []
        assert stop_reason_findings(said("Hello", "end_turn"), ["!"], evidence) == []
        for reason, sequence in (
            ("end_turn", "!"),
            ("stop_sequence", None),
            ("stop_sequence", "?"),
        ):
            found = stop_reason_findings(said("Hello", reason, sequence), ["!"], evidence)
            assert codes(found) == ["stop_reason_mismatch"], (reason, sequence)
    # Chat's answers carry no stop_reason of their own: nothing to hold.
    assert stop_reason_findings(answer("Hello"), ["!"], free) == []


def test_stop_and_max_tokens() -> None:
    assert stop_findings(answer("Hello"), ["!"]) == []
    assert codes(stop_findings(answer("Hello!"), ["zz", "!"])) == ["stop_not_honoured"]
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert max_tokens_findings(answer("He", "length", usage=usage), 2) == []
    assert codes(max_tokens_findings(answer("He", "length", usage=usage), 3)) == [
        "max_tokens_not_honoured"
    ]
    assert codes(max_tokens_findings(answer("He", "stop", usage=usage), 1)) == [
        "max_tokens_not_honoured"
    ]


FREE = st.one_of(st.just(""), st.text(max_size=8), st.none(), st.integers())


@given(
    content=FREE,
    chunk_id=FREE,
    model=FREE,
    arguments=FREE,
    obj=st.sampled_from(["chat.completion.chunk", "chat.completion", 3]),
    finish=st.sampled_from([None, "stop", "length", "stop_163586", 7]),
)
def test_the_shape_cache_never_hides_a_finding(
    content: object, chunk_id: object, model: object, arguments: object, obj: object, finish: object
) -> None:
    chunk = {
        "id": chunk_id,
        "object": obj,
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "delta": {
                    "content": content,
                    "tool_calls": [{"index": 0, "function": {"arguments": arguments}}],
                },
                "finish_reason": finish,
            }
        ],
    }
    uncached = list(resources.validator("chat_completion_chunk").iter_errors(chunk))
    for _ in range(2):  # the second time, a passing shape comes from the cache
        findings = shape_findings(ChatResult(stream=True, status=200, chunks=[chunk]))
        assert bool(findings) == bool(uncached)


# Numbers on, beside and between the answer schemas' bounds, of every kind JSON has.
EDGES = [-1, -0.5, -0.0, 0, 0.0, 0.5, 1, 1.0, 254.5, 255, 255.0, 255.5, 256, 256.0, 1e300, True]
NUMBER = st.one_of(
    st.sampled_from(EDGES),
    st.integers(min_value=-300, max_value=300),
    st.floats(min_value=-300, max_value=300, allow_nan=False),
)


def _numbered(field: str, value: object) -> dict[str, Any]:
    """GOOD with logprobs, and `value` at one of its numbers."""
    choice = {
        **GOOD["choices"][0],
        "logprobs": {"content": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}]},
    }
    answer = {**GOOD, "choices": [choice], "usage": dict(GOOD["usage"])}
    if field in ("created",):
        answer[field] = value
    elif field == "index":
        choice[field] = value
    elif field in ("logprob", "bytes"):
        token = choice["logprobs"]["content"][0]
        token[field] = value if field == "logprob" else [value]
    else:
        answer["usage"][field] = value
    return answer


@given(
    field=st.sampled_from(["created", "index", "prompt_tokens", "logprob", "bytes"]),
    values=st.lists(NUMBER, min_size=2, max_size=6),
)
def test_the_shape_cache_s_number_classes_never_hide_a_finding(
    field: str, values: list[object]
) -> None:
    # Every number the answer schemas bound (minimum 0, logprob maximum 0, bytes 0..255), of
    # every kind, one after another at the same place: a memo that answered for a class of
    # numbers wider than the schemas allow would pass a later one wrongly.
    for value in values:
        answer = _numbered(field, value)
        uncached = list(resources.validator("chat_completion").iter_errors(answer))
        assert bool(shape_findings(body(answer))) == bool(uncached), (field, value)


@pytest.mark.parametrize("field", ["created", "index", "prompt_tokens", "logprob", "bytes"])
def test_the_shape_cache_is_right_for_every_pair_of_edge_numbers(field: str) -> None:
    for first, second in itertools.product(EDGES, repeat=2):
        for value in (first, second):
            answer = _numbered(field, value)
            uncached = list(resources.validator("chat_completion").iter_errors(answer))
            assert bool(shape_findings(body(answer))) == bool(uncached), (field, first, second)


def test_the_answer_schemas_bounds_are_found_in_them_and_what_they_refer_to() -> None:
    # 0 and 255 (chat: counts and byte values); Responses' max_output_tokens >= 1 and
    # top_logprobs <= 20.
    assert number_bounds() == (0, 1, 20, 255)


def test_a_count_over_max_tokens_is_weighed_against_the_text_with_a_tokenizer(
    small_profile: Any,
) -> None:
    tokenizer = small_profile.tokenizer
    text = "Hello"
    length = len(tokenizer.encode_ordinary(text))
    inflated = {"prompt_tokens": 3, "completion_tokens": length + 5, "total_tokens": length + 8}
    # The text fits the limit: the usage figure is what is wrong, and output accounting
    # reports the bill (tests/test_accounting.py), not the max_tokens rule.
    found = max_tokens_findings(answer(text, "length", usage=inflated), length, tokenizer)
    assert found == []
    # The text itself is over the limit: the generation is what is wrong.
    over = {"prompt_tokens": 3, "completion_tokens": length, "total_tokens": length + 3}
    found = max_tokens_findings(answer(text, "length", usage=over), length - 1, tokenizer)
    assert codes(found) == ["max_tokens_not_honoured"]
    # Without a tokenizer the two cannot be told apart, and the message says so.
    found = max_tokens_findings(answer(text, "length", usage=inflated), length)
    assert codes(found) == ["max_tokens_not_honoured"]
    assert "without a profile's tokenizer" in found[0].message


PINS = [
    ("temperature", {"fixed": 1.0}),
    ("temperature", {"values": [1.0, 0.6]}),
    ("top_p", {"fixed": 0.95, "min": 0, "max": 1}),
    ("n", {"fixed": 1}),
    ("presence_penalty", {"fixed": 0}),
]


@pytest.mark.parametrize(("name", "pin"), PINS)
def test_off_pin_is_none_of_the_pinned_values_and_within_range(
    name: str, pin: dict[str, Any]
) -> None:
    value = off_pin(name, pin)
    pinned = [pin["fixed"]] if "fixed" in pin else pin["values"]
    assert value not in pinned
    assert pin.get("min", value) <= value <= pin.get("max", value) and value >= 0
    if name == "n":
        assert value == int(value)


@pytest.mark.parametrize(
    ("policy", "status", "found"),
    [
        ("reject", 400, []),
        ("reject", 200, ["sampling_pin_violated"]),
        ("reject", 500, ["sampling_pin_violated"]),
        ("coerce", 200, []),
        ("coerce", 400, ["sampling_pin_violated"]),
    ],
)
def test_pin_findings(policy: str, status: int, found: list[str]) -> None:
    result = body(GOOD if status == 200 else {"error": {"message": "no"}}, status)
    pin = {"fixed": 1.0, "off_policy": policy}
    assert codes(pin_findings("temperature", 1.25, pin, result)) == found


@pytest.mark.parametrize(
    ("answered", "header", "found"),
    [
        ("kimi-k2.5", None, []),
        ("moonshotai/Kimi-K2.5", None, []),  # an id the contract lists, by its last part
        ("KIMI-K2.5", None, []),
        ("accounts/vendor/models/kimi-k2.5", None, []),
        ("kimi-k2.5", "kimi-k2.5", []),
        ("kimi-k2-turbo", None, ["served_model_mismatch"]),
        ("kimi-k2.5", "qwen3-8b", ["served_model_mismatch"]),
    ],
)
def test_served_model(answered: str, header: str | None, found: list[str]) -> None:
    result = body({**GOOD, "model": answered})
    if header is not None:
        result.headers["openai-model"] = header
    aliases = ["moonshotai/Kimi-K2.5", "kimi-k2.5"]
    assert codes(served_model_findings(result, "vendor-kimi", aliases)) == found
