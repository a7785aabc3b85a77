"""The reasoning family's pure graders, the dialect they read, and the stream's reasoning order."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.cases.corpus import Case
from verifier.checks import reasoning
from verifier.checks.reasoning import (
    Turn,
    answer_findings,
    attributed,
    effort_findings,
    followup_findings,
    loop_findings,
    paired,
    reasoning_token_findings,
    split_findings,
    structured_findings,
    summarize,
)
from verifier.checks.registry import RunContext
from verifier.checks.support.renderings import Conversation, reference
from verifier.checks.support.subchecks import Undecided
from verifier.outcome import CaseRecord, Outcome, Status
from verifier.protocol.answers import ChatResult, Choice, ToolCall
from verifier.protocol.requests import drive
from verifier.protocol.stream import accumulate
from verifier.reference.dialect import Dialect, Effort, merged

SWITCH = Dialect.of(
    {
        "on": {"chat_template_kwargs": {"thinking": True}},
        "off": {"chat_template_kwargs": {"thinking": False}},
    },
    {
        "field": "reasoning_content",
        "tags": {"start": "<think>", "end": "</think>"},
        "tool_markers": ["<tool_call>"],
        "effort": {"field": "chat_template_kwargs.reasoning_effort", "levels": ["low", "high"]},
        "history": "tool_turns",
    },
)
WEATHER = [
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


def answer(
    content: str | None = "Yes.",
    reasoning: str | None = "Think it through.",
    *,
    calls: tuple[tuple[str, str], ...] = (),
    finish: str = "stop",
    field: str = "reasoning_content",
    stream: bool = False,
    usage: dict[str, Any] | None = None,
) -> ChatResult:
    choice = Choice(
        index=0,
        role="assistant",
        content=content,
        reasoning=reasoning,
        reasoning_field=field if reasoning is not None else None,
        tool_calls=[ToolCall(i, f"call_{i}", "function", n, a) for i, (n, a) in enumerate(calls)],
        finish_reason=finish,
    )
    return ChatResult(stream=stream, status=200, choices=[choice], usage=usage)


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def test_the_dialect_of_a_profile() -> None:
    assert SWITCH is not None
    assert SWITCH.mode({"chat_template_kwargs": {"thinking": True}}) is True
    assert SWITCH.mode({"chat_template_kwargs": {"thinking": False}}) is False
    # An effort level asks for reasoning; nothing at all says nothing.
    assert SWITCH.mode({"chat_template_kwargs": {"reasoning_effort": "low"}}) is True
    assert SWITCH.mode({"messages": []}) is None
    # A value of another type is not the switch (1 is not True).
    assert SWITCH.mode({"chat_template_kwargs": {"thinking": 1}}) is None
    always = Dialect.of(None, {"always_on": True})
    assert always is not None and always.always_on and always.off is None
    assert always.mode({"chat_template_kwargs": {"thinking": False}}) is True
    assert Dialect.of(None, None) is None
    assert Dialect.of(None, {"field": "reasoning"}) == Dialect(on=None, off=None, field="reasoning")


def test_effort_fields_nest_under_their_object() -> None:
    effort = Effort("chat_template_kwargs.reasoning_effort", ("low", "high"))
    assert effort.fields("high") == {"chat_template_kwargs": {"reasoning_effort": "high"}}
    assert effort.level_of(effort.fields("low")) == "low"
    assert Effort("reasoning_effort", ("low", "high")).fields("low") == {"reasoning_effort": "low"}


def test_the_other_apis_reasoning_settings_in_the_models_terms() -> None:
    """Messages' thinking becomes the contract's switch, OpenAI's reasoning_effort its effort
    field; what the contract has no field for, or another kind, stays as it came."""
    assert SWITCH is not None
    enabled, disabled = {"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"}
    assert SWITCH.in_model_terms({"model": "m", "thinking": enabled}) == {
        "model": "m",
        "chat_template_kwargs": {"thinking": True},
    }
    assert SWITCH.in_model_terms({"thinking": disabled}) == {
        "chat_template_kwargs": {"thinking": False}
    }
    assert SWITCH.in_model_terms({"thinking": {"type": "adaptive"}}) == {
        "thinking": {"type": "adaptive"}
    }
    nested = dataclasses.replace(
        SWITCH, effort=Effort("chat_template_kwargs.reasoning_effort", ("low", "high"))
    )
    assert nested.in_model_terms({"reasoning_effort": "low"}) == {
        "chat_template_kwargs": {"reasoning_effort": "low"}
    }
    always = Dialect.of(None, {"always_on": True})
    assert always is not None
    assert always.in_model_terms({"thinking": enabled}) == {}
    assert always.in_model_terms({"thinking": disabled}) == {"thinking": disabled}


def test_merged_joins_objects_field_by_field() -> None:
    assert merged({"a": 1, "k": {"x": 1}}, {"k": {"y": 2}}, {"a": 3}) == {
        "a": 3,
        "k": {"x": 1, "y": 2},
    }


ROLES = st.sampled_from(["user", "assistant", "tool", "system"])
MESSAGES = st.lists(
    st.builds(
        lambda role, r: {"role": role, "content": "x", **({"reasoning_content": "r"} if r else {})},
        ROLES,
        st.booleans(),
    ),
    max_size=8,
)


@given(MESSAGES)
def test_the_history_rule_keeps_what_it_says(messages: list[dict[str, Any]]) -> None:
    def kept(rule: str) -> list[bool]:
        replay = Dialect(on={}, off=None, history=rule).replayed(messages)
        assert [m["role"] for m in replay] == [m["role"] for m in messages]
        return ["reasoning_content" in m for m in replay]

    has = ["reasoning_content" in m for m in messages]
    assert kept("all") == has
    assert kept("none") == [
        h and m["role"] != "assistant" for h, m in zip(has, messages, strict=True)
    ]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    assert kept("tool_turns") == [
        h and (i > last_user or m["role"] != "assistant")
        for i, (h, m) in enumerate(zip(has, messages, strict=True))
    ]


@pytest.mark.parametrize(
    ("result", "thinking", "expected"),
    [
        (answer(), True, []),
        (answer(reasoning=None), True, ["thinking_not_honoured"]),
        (answer(content="", reasoning="All of it here."), True, ["reasoning_only_response"]),
        # A call is an answer too; a cut answer is not "all reasoning".
        (answer(content=None, calls=(("get_weather", "{}"),)), True, []),
        (answer(content="", finish="length"), True, []),
        (
            answer(content="<think>Hmm.</think>Yes.", reasoning=None),
            True,
            ["reasoning_markers_in_content"],
        ),
        (
            answer(reasoning='Call it: <tool_call>{"name": "x"}', content=""),
            True,
            ["markers_in_reasoning"],
        ),
        (answer(reasoning=None), False, []),
        (answer(), False, ["thinking_not_honoured"]),
        (answer(content="", reasoning="Yes."), False, ["content_in_reasoning"]),
        (answer(field="reasoning"), True, ["reasoning_field_mismatch"]),
    ],
)
def test_one_answer_is_graded_by_its_dialect(
    result: ChatResult, thinking: bool, expected: list[str]
) -> None:
    assert SWITCH is not None
    assert codes(answer_findings(result, SWITCH, thinking=thinking)) == expected


def test_the_field_is_free_where_the_contract_states_none() -> None:
    unstated = Dialect(on={}, off=None)
    assert answer_findings(answer(field="reasoning"), unstated, thinking=True) == []


def test_an_entirely_empty_followup_is_named_once() -> None:
    assert SWITCH is not None
    empty = answer(content="", reasoning=None)
    assert codes(answer_findings(empty, SWITCH, thinking=True, followup=True)) == []
    assert codes(followup_findings(empty, WEATHER, "turn-2")) == ["empty_followup"]
    # All reasoning is reasoning_only_response, not also an empty follow-up.
    only = answer(content="", reasoning="Thinking only.")
    assert followup_findings(only, WEATHER, "turn-2") == []


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        ((("get_weather", '{"city": "Oslo"}'),), []),
        ((("get_time", "{}"),), ["followup_call_invalid"]),
        ((("get_weather", "{city"),), ["followup_call_invalid"]),
        ((("get_weather", "{}"),), ["followup_call_invalid"]),
    ],
)
def test_a_next_call_must_be_valid(calls: tuple[tuple[str, str], ...], expected: list[str]) -> None:
    result = answer(content=None, calls=calls, finish="tool_calls")
    assert codes(followup_findings(result, WEATHER, "turn-2")) == expected


class Words:
    """A tokenizer stand-in: one token a word."""

    def encode_ordinary(self, text: str) -> list[int]:
        return list(range(len(text.split())))


@pytest.mark.parametrize(
    ("reported", "expected"),
    [(3, []), (5, []), (1, ["reasoning_tokens_mismatch"]), (9, ["reasoning_tokens_mismatch"])],
)
def test_reasoning_tokens_within_the_tags_slack(reported: int, expected: list[str]) -> None:
    usage = {"completion_tokens_details": {"reasoning_tokens": reported}}
    result = answer(reasoning="one two three", usage=usage)
    assert codes(reasoning_token_findings(result, Words())) == expected  # type: ignore[arg-type]
    assert reasoning_token_findings(answer(usage={}), Words()) == []  # type: ignore[arg-type]


def test_stream_and_non_stream_split_the_same_text_the_same_way() -> None:
    plain = answer(content="Yes, it is.", reasoning="Check 91 = 7 x 13.")
    assert (
        split_findings(
            plain, answer(content="Yes, it is.", reasoning="Check 91 = 7 x 13.", stream=True)
        )
        == []
    )
    moved = answer(content="13. Yes, it is.", reasoning="Check 91 = 7 x", stream=True)
    assert codes(split_findings(plain, moved)) == ["stream_split_differs"]
    # Another generation is the wire family's concern, not a split.
    assert (
        split_findings(plain, answer(content="No.", reasoning="Other thoughts.", stream=True)) == []
    )
    dropped = answer(content="", reasoning="I will call get_weather.", stream=True)
    called = answer(
        content=None, reasoning="I will call get_weather.", calls=(("get_weather", "{}"),)
    )
    assert codes(split_findings(called, dropped)) == ["stream_split_differs"]


def test_the_stream_path_is_named_when_only_it_is_wrong() -> None:
    assert SWITCH is not None
    plain = answer(
        content=None, reasoning="Call it.", calls=(("get_weather", "{}"),), finish="tool_calls"
    )
    streamed = answer(content="", reasoning="Call it.\n<tool_call>{}", stream=True)
    found = [(r, answer_findings(r, SWITCH, thinking=True)) for r in (plain, streamed)]
    assert codes(found[1][1]) == ["markers_in_reasoning"]
    both = paired(found[0], found[1], compare=True)
    assert codes(both) == ["stream_split_differs"]
    assert "markers_in_reasoning" in both[0].message
    # Sampled answers are not compared: each answer's own findings stand.
    assert codes(paired(found[0], found[1], compare=False)) == ["markers_in_reasoning"]


FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "v", "schema": {"type": "object", "required": ["answer"]}},
}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (answer(content='{"answer": "yes"}'), []),
        (answer(content='{"answer": "yes"}', reasoning=None), ["thinking_mode_overridden"]),
        (
            answer(content="", reasoning='Here: {"answer": "yes"}'),
            ["structured_output_in_reasoning"],
        ),
        (answer(content='{"other": 1}'), ["structured_output_invalid"]),
        (answer(content="Yes."), ["structured_output_invalid"]),
        (
            answer(content='<think>x</think>{"answer": "yes"}', reasoning=None),
            ["reasoning_markers_in_content"],
        ),
    ],
)
def test_structured_output_with_thinking(result: ChatResult, expected: list[str]) -> None:
    assert SWITCH is not None
    assert codes(structured_findings(result, FORMAT, SWITCH, "non-stream")) == expected


def test_json_is_named_the_cause_only_when_the_control_differs() -> None:
    assert SWITCH is not None
    overridden = structured_findings(
        answer(content='{"answer": "y"}', reasoning=None), FORMAT, SWITCH, "a"
    )
    assert codes(attributed(overridden, answer())) == ["thinking_mode_overridden"]
    assert codes(attributed(overridden, answer(reasoning=None))) == ["thinking_not_honoured"]
    swallowed = structured_findings(
        answer(content="", reasoning='{"answer": "y"}'), FORMAT, SWITCH, "a"
    )
    assert codes(attributed(swallowed, answer())) == ["structured_output_in_reasoning"]
    assert codes(attributed(swallowed, answer(content=""))) == ["reasoning_only_response"]
    ends = Dialect(on={}, off=None, json_ends_thinking=True)
    assert (
        structured_findings(answer(content='{"answer": "y"}', reasoning=None), FORMAT, ends, "a")
        == []
    )


def test_effort_is_decided_by_a_sign_test() -> None:
    levels = ("low", "high")
    found, metrics = effort_findings({"low": [5] * 6, "high": [9] * 6}, levels)
    assert found == [] and metrics["ordered"]["successes"] == 6
    found, _ = effort_findings({"low": [5] * 6, "high": [5] * 6}, levels)
    assert codes(found) == ["effort_not_honoured"]
    found, _ = effort_findings({"low": [0] * 6, "high": [0] * 6}, levels)
    assert codes(found) == ["thinking_not_honoured"]
    with pytest.raises(Undecided) as undecided:
        effort_findings({"low": [5, 5, 5, 5, 9, 9], "high": [9, 9, 9, 9, 5, 5]}, levels)
    assert undecided.value.code == "effort_undecided"


def test_loops_are_compared_until_the_stream_departs() -> None:
    assert SWITCH is not None
    call = answer(
        content=None,
        reasoning="Call.",
        calls=(("get_weather", '{"city": "Oslo"}'),),
        finish="tool_calls",
    )
    lost = answer(content="", reasoning="Call.", stream=True)
    final = answer(content="It snows.", reasoning="Done.")
    plain = [Turn("non-stream-turn-1", call, []), Turn("non-stream-turn-2", final, [], True)]
    empty = answer(content="", reasoning=None, stream=True)
    streamed = [
        Turn("stream-turn-1", lost, []),
        Turn("stream-turn-2", empty, [reasoning.Finding("empty_followup", "x")], False),
    ]
    found = loop_findings(plain, streamed, compare=True)
    assert codes(found) == ["stream_split_differs"]
    assert found[0].attempt == "stream-turn-1"


def test_summary_rates_by_turn() -> None:
    def record(case: str, metrics: dict[str, Any], status: Status = Status.PASS) -> CaseRecord:
        return CaseRecord(f"reasoning/{case}", "reasoning", Outcome(status, metrics=metrics))

    summary = summarize(
        [
            record("on", {"check": "thinking_on", "answers": 2, "reasoning_only": 1}, Status.FAIL),
            record(
                "loop",
                {
                    "check": "agent_loop",
                    "followups": [
                        {"turn": 2, "ok": True},
                        {"turn": 3, "ok": False},
                        {"turn": 2, "ok": True},
                    ],
                },
            ),
            record(
                "effort", {"check": "effort", "effort": {"ordered": {"successes": 5, "trials": 6}}}
            ),
        ],
        None,
    )
    assert summary["checks"] == {
        "agent_loop": {"pass": 1},
        "effort": {"pass": 1},
        "thinking_on": {"fail": 1},
    }
    assert summary["reasoning_only"]["rate"] == 0.5
    assert summary["followups"]["by_turn"]["2"]["successes"] == 2
    assert summary["followups"]["by_turn"]["3"]["rate"] == 0.0
    assert summary["effort_ordered"]["trials"] == 6


def stream_of(*deltas: dict[str, Any]) -> ChatResult:
    chunks = [
        {"id": "c", "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
    return accumulate(body, ChatResult(stream=True, status=200))


def test_the_stream_accumulator_sees_reasoning_after_content() -> None:
    late = stream_of(
        {"role": "assistant", "content": ""},
        {"reasoning": "a"},
        {"content": "b"},
        {"reasoning": "c"},
    )
    assert [p.code for p in late.problems] == ["reasoning_after_content"]
    assert late.choices[0].reasoning == "ac" and late.choices[0].reasoning_field == "reasoning"
    # A newline before the reasoning, and one delta carrying both, are in order.
    fine = stream_of({"content": "\n"}, {"reasoning_content": "a", "content": "b"})
    assert fine.problems == [] and fine.choices[0].reasoning_field == "reasoning_content"


def test_the_profile_widens_the_reasoning_tokens_tolerance() -> None:
    usage = {"completion_tokens_details": {"reasoning_tokens": 9}}
    result = answer(reasoning="one two three", usage=usage)
    assert reasoning_token_findings(result, Words(), tolerance=4) == []  # type: ignore[arg-type]
    dialect = Dialect.of(None, {"always_on": True, "tokens_tolerance": 4})
    assert dialect is not None and dialect.tokens_tolerance == 4


def driven(profile: Any, data: dict[str, Any], *answers: ChatResult) -> Outcome:
    """The reasoning family's outcome for a case, answered from `answers` in order."""
    ctx = RunContext(model="m", seed=1, profile=profile)
    replies = iter(answers)
    case = Case("reasoning", data["id"], data, "test:1")
    return drive(reasoning.run(case, ctx), lambda _request: next(replies))


PRIME = {
    "id": "p",
    "check": "thinking_on",
    "messages": [{"role": "user", "content": "Is 7 prime?"}],
}


def test_an_answer_cut_inside_its_reasoning_is_an_error_not_a_failure(small_profile: Any) -> None:
    cut = answer(content=None, reasoning="Let me see", finish="length")
    outcome = driven(
        small_profile,
        PRIME,
        cut,
        answer(content=None, reasoning="Let me", finish="length", stream=True),
    )
    assert (outcome.status, outcome.code) == (Status.ERROR, "reasoning_truncated")


REFUSED = ChatResult(stream=False, status=400, body={"error": {"message": "no thinking here"}})


def asked_for(profile: Any, data: dict[str, Any], reply: Any) -> tuple[Outcome, list[Any]]:
    """The reasoning family's outcome with each request answered by `reply(request)`."""
    sent: list[Any] = []
    case = Case("reasoning", data["id"], data, "test:1")
    ctx = RunContext(model="m", seed=1, profile=profile)
    return drive(reasoning.run(case, ctx), lambda r: sent.append(r) or reply(r)), sent


def test_a_refused_thinking_switch_the_contract_states_is_a_failure(small_profile: Any) -> None:
    """The same request without the contract's switch is answered: the switch is refused."""

    def reply(request: Any) -> ChatResult:
        return REFUSED if "chat_template_kwargs" in request.body else answer()

    outcome, sent = asked_for(small_profile, PRIME, reply)
    assert {f.code for f in outcome.findings} == {"thinking_switch_rejected"}
    assert "no thinking here" in outcome.message
    assert [r.name for r in sent] == ["thinking_on-non-stream", "without-chat_template_kwargs"]


def test_a_refusal_the_switch_does_not_explain_is_unsupported(small_profile: Any) -> None:
    outcome, sent = asked_for(small_profile, PRIME, lambda _: REFUSED)
    assert outcome.status is Status.UNSUPPORTED and "no thinking here" in outcome.message
    assert [r.name for r in sent] == ["thinking_on-non-stream", "without-chat_template_kwargs"]


EFFORT = {"id": "e", "check": "effort", "prompts": ["a", "b", "c", "d"]}


@pytest.mark.parametrize(
    ("refuses", "code", "controls"),
    [
        ("reasoning_effort", "effort_rejected", ["without-reasoning_effort"]),
        (
            "chat_template_kwargs",
            "thinking_switch_rejected",
            ["without-reasoning_effort", "without-chat_template_kwargs"],
        ),
    ],
)
def test_a_refused_effort_level_names_the_field_refused(
    small_profile: Any, refuses: str, code: str, controls: list[str]
) -> None:
    outcome, sent = asked_for(
        small_profile, EFFORT, lambda r: REFUSED if refuses in r.body else answer()
    )
    assert {f.code for f in outcome.findings} == {code}
    assert [r.name for r in sent][1:] == controls


def test_a_case_the_dialect_does_not_state_is_unsupported_without_a_request(
    small_profile: Any,
) -> None:
    always = dataclasses.replace(small_profile, settings={"reasoning": {"always_on": True}})
    off = {**PRIME, "check": "thinking_off"}
    outcome = driven(always, off)
    assert outcome.status is Status.UNSUPPORTED
    assert (
        outcome.message
        == "unsupported: the model always reasons: its contract has no way to turn thinking off"
    )


HISTORY = {
    "id": "h",
    "check": "invalid_history",
    "messages": [
        {"role": "user", "content": "Weather in Lima?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ],
    "tools": WEATHER,
}


def test_a_history_without_reasoning_must_be_refused_with_a_4xx(small_profile: Any) -> None:
    refused = ChatResult(stream=False, status=400, body={"error": {"message": "missing"}})
    assert driven(small_profile, HISTORY, refused).status is Status.PASS
    assert driven(small_profile, HISTORY, answer()).code == "invalid_history_accepted"
    failed = ChatResult(stream=False, status=500, body={"error": {"message": "boom"}})
    assert driven(small_profile, HISTORY, failed).code == "invalid_history_5xx"


def test_a_held_history_without_reasoning_is_the_vendors_hang(small_profile: Any) -> None:
    from verifier.errors import EndpointTimeout

    ctx = RunContext(model="m", seed=1, profile=small_profile)
    exchange = reasoning.run(Case("reasoning", "h", HISTORY, "test:1"), ctx)
    request = next(exchange)
    assert request.body["chat_template_kwargs"] == {"thinking": True}  # type: ignore[union-attr]
    assert all("reasoning_content" not in m for m in request.body["messages"])  # type: ignore[union-attr]
    with pytest.raises(StopIteration) as done:
        exchange.throw(EndpointTimeout("no answer in 10 s", attempts=1))
    assert done.value.value.code == "invalid_history_hang"


def test_a_loop_over_another_api_is_counted_by_its_counts_alone(small_profile: Any) -> None:
    """The follow-ups of a loop over Messages or Responses, counted against the model's
    template with every earlier answer's reasoning: a count that leaves it out, more so at
    each turn, is named; one off by the same at every turn is not; no count, no verdict."""
    dialect = small_profile.dialect
    tool = WEATHER[0]
    asked = {"model": "m", "tools": [tool], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    history: list[dict[str, Any]] = [{"role": "user", "content": "Oslo, then Rome."}]
    conversations = []
    for number, city in enumerate(("Oslo", "Rome"), start=1):
        history = [
            *history,
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": f"I should look up {city} next.",
                "tool_calls": [
                    {
                        "id": f"call_{number}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{number}", "content": "3 C"},
        ]
        conversations.append({**asked, "messages": history})

    def counts(without_reasoning: bool, offset: int = 0) -> list[int]:
        rendering = small_profile.with_template_variables({"thinking": True})
        out = []
        for request in conversations:
            messages = request["messages"]
            if without_reasoning:
                messages = [
                    {k: v for k, v in m.items() if k != "reasoning_content"} for m in messages
                ]
            out.append(len(reference(rendering, Conversation(messages, [tool])).ids) + offset)
        return out

    def graded(prompts: list[int | None]) -> list[str] | None:
        turns = [
            (request, answer(usage=None if n is None else {"prompt_tokens": n}), f"turn-{i + 2}")
            for i, (request, n) in enumerate(zip(conversations, prompts, strict=True))
        ]
        found = reasoning.api_loop_counts(small_profile, dialect, turns)
        return None if found is None else [f.code for f in found]

    assert graded(list(counts(False))) == []
    assert graded(list(counts(True))) == ["reasoning_history_dropped"]
    assert graded(list(counts(False, offset=3))) == ["prompt_tokens_skew"]
    assert graded([counts(False)[0], None]) is None
