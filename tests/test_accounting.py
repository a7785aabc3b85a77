"""Output accounting: the bill against the delivery, rendered as the model generates it."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.checks.support.accounting import (
    BOUNDS,
    account,
    account_answers,
    delivered,
    with_accounting,
)
from verifier.outcome import Finding, Outcome, Status
from verifier.protocol.answers import ChatResult, Choice, ToolCall
from verifier.reference.profiles import Profile, load_profile

ASKED = {"messages": [{"role": "user", "content": "Weather in Paris and Rome?"}]}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
WITH_TOOLS = {**ASKED, "tools": TOOLS}


@functools.cache
def _kimi() -> Profile:
    return load_profile("kimi-k2")


@pytest.fixture(scope="module")
def kimi() -> Profile:
    return _kimi()


@pytest.fixture(scope="module")
def thinking() -> Profile:
    return load_profile("kimi-k2-thinking")


def _call(index: int, city: str, call_id: str | None = None) -> ToolCall:
    return ToolCall(
        index, call_id or f"call_{index}", "function", "get_weather", f'{{"city": "{city}"}}'
    )


def _answer(
    content: str | None = None,
    *,
    calls: tuple[ToolCall, ...] = (),
    reasoning: str | None = None,
    finish: str = "stop",
    billed: int | None = None,
    choices: int = 1,
) -> ChatResult:
    choice = [
        Choice(i, "assistant", content, reasoning, list(calls), finish) for i in range(choices)
    ]
    usage = None if billed is None else {"prompt_tokens": 9, "completion_tokens": billed}
    return ChatResult(False, 200, choices=choice, usage=usage)


def _ids(profile: Profile, text: str) -> int:
    """The text's tokens with the profile's special tokens recognised (the test's own count)."""
    specials = profile.tokenizer.special_tokens
    ids, rest = [], text
    while rest:
        at = min(((rest.find(t), t) for t in specials if t in rest), default=(-1, ""))
        if at[0] < 0:
            ids += profile.tokenizer.encode_ordinary(rest)
            break
        ids += profile.tokenizer.encode_ordinary(rest[: at[0]]) + [specials[at[1]]]
        rest = rest[at[0] + len(at[1]) :]
    return len(ids)


def test_two_calls_are_counted_in_the_model_s_own_markup_with_its_end_token(kimi: Profile) -> None:
    both = delivered(kimi, WITH_TOOLS, _answer(calls=(_call(0, "Paris"), _call(1, "Rome"))))
    assert both is not None and both.exact
    # Kimi K2's template writes its own ids (functions.NAME:IDX) and closes with <|im_end|>.
    assert both.text == (
        "<|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}'
        "<|tool_call_end|>"
        '<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{"city": "Rome"}'
        "<|tool_call_end|><|tool_calls_section_end|><|im_end|>"
    )
    assert both.tokens == _ids(kimi, both.text)
    assert (
        account(
            kimi,
            WITH_TOOLS,
            _answer(calls=(_call(0, "Paris"), _call(1, "Rome")), billed=both.tokens),
        )[1]
        == []
    )


def test_a_dropped_call_billed_all_the_same_is_undelivered_with_counts_and_text(
    kimi: Profile,
) -> None:
    made = delivered(kimi, WITH_TOOLS, _answer(calls=(_call(0, "Paris"), _call(1, "Rome"))))
    assert made is not None
    sent = _answer(calls=(_call(0, "Paris"),), billed=made.tokens)
    found, findings = account(kimi, WITH_TOOLS, sent)
    assert found is not None and found.tokens < made.tokens
    assert [f.code for f in findings] == ["undelivered_tokens"]
    assert findings[0].actual == made.tokens
    assert findings[0].expected["tokens"] == found.tokens
    assert "functions.get_weather:0" in findings[0].expected["rendered"]
    assert f"{made.tokens - found.tokens} more billed than delivered" in findings[0].message


def test_fewer_billed_than_delivered_is_a_mismatch(kimi: Profile) -> None:
    found = delivered(kimi, ASKED, _answer("Hello there!"))
    assert found is not None and found.text == "Hello there!<|im_end|>"
    _, findings = account(kimi, ASKED, _answer("Hello there!", billed=found.tokens - 1))
    assert [f.code for f in findings] == ["completion_tokens_mismatch"]
    _, findings = account(kimi, ASKED, _answer("Hello there!", billed=found.tokens + 1))
    assert [f.code for f in findings] == ["undelivered_tokens"]


@pytest.mark.parametrize(
    ("api", "where", "said"),
    [
        ("chat", "$.choices[0].finish_reason", "finish_reason 'stop'"),
        ("messages", "$.stop_reason", "stop_reason 'end_turn'"),
        ("responses", "$.status", "status 'completed'"),
    ],
)
def test_an_answer_that_stopped_at_its_limit_but_says_it_ended_is_length_not_reported(
    kimi: Profile, api: str, where: str, said: str
) -> None:
    text = "Hello there"
    limit = len(kimi.tokenizer.encode_ordinary(text))
    asked = {**ASKED, "max_tokens": limit}
    answer = dataclasses.replace(_answer(text, billed=limit), api=api)
    found, findings = account(kimi, asked, answer, "non-stream")
    assert [(f.code, f.json_path, f.actual, f.expected) for f in findings] == [
        ("length_not_reported", where, said, {"limit": limit, "tokens": limit + 1})
    ]
    # The bill is accounted as the cut answer's: no billing finding beside it.
    assert found is not None and found.reasons == ("length",)


def test_without_the_limit_s_evidence_a_short_bill_stays_a_mismatch(kimi: Profile) -> None:
    """No limit, a limit the answer fits with its end token, a bill past the limit, a stop
    sequence asked, a prefill continued, two choices: nothing singles out a misreported end.

    The prefill is llama-server's: it delivers the final assistant message it continued with
    the one token it generated, the end of the turn, and says stop.
    """
    text = "Hello there"
    cut = len(kimi.tokenizer.encode_ordinary(text))
    asked = [
        (ASKED, cut),
        ({**ASKED, "max_tokens": cut + 1}, cut),
        ({**ASKED, "max_tokens": cut - 1}, cut),
        ({**ASKED, "max_tokens": cut, "stop": ["###"]}, cut - 4),
        (
            {
                **ASKED,
                "messages": [*ASKED["messages"], {"role": "assistant", "content": text}],
                "max_tokens": 1,
            },
            1,
        ),
    ]
    for request, bill in asked:
        _, findings = account(kimi, request, _answer(text, billed=bill))
        assert [f.code for f in findings] == ["completion_tokens_mismatch"], request
    _, findings = account(kimi, {**ASKED, "max_tokens": cut}, _answer(text, billed=cut, choices=2))
    assert [f.code for f in findings] == ["completion_tokens_mismatch"]


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40))
def test_a_text_answer_is_its_text_s_tokens_and_the_end_token(text: str) -> None:
    kimi = _kimi()
    found = delivered(kimi, ASKED, _answer(text))
    assert found is not None and found.exact
    # Content is ordinary text, whatever it spells: special-token text in it is not special.
    assert found.tokens == len(kimi.tokenizer.encode_ordinary(text)) + 1


def test_a_cut_answer_has_no_end_token_and_the_stated_bound(kimi: Profile) -> None:
    found = delivered(kimi, ASKED, _answer("Hello there", finish="length"))
    assert found is not None and found.reasons == ("length",)
    counted = len(kimi.tokenizer.encode_ordinary("Hello there"))
    low, high = BOUNDS["length"]
    assert (found.tokens, found.low, found.high) == (counted, counted - low, counted + high)


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_an_answer_the_template_cannot_render_is_its_text_and_a_cut_one_keeps_its_bound(
    kimi: Profile, finish: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template that raises after the conversation: the text, counted, and the bounds of
    every reason that applies (SmolLM2's template on a tool-call history, cut at max_tokens,
    bills within both)."""
    from verifier.checks.support import accounting

    monkeypatch.setattr(accounting, "model_output", lambda *args: None)
    found = delivered(kimi, ASKED, _answer("Hello there", finish=finish))
    counted = len(kimi.tokenizer.encode_ordinary("Hello there"))
    reasons = ("untemplated",) if finish == "stop" else ("untemplated", "length")
    low = sum(BOUNDS[r][0] for r in reasons)
    high = sum(BOUNDS[r][1] for r in reasons)
    assert found is not None and found.reasons == reasons
    assert (found.tokens, found.low, found.high) == (counted, counted - low, counted + high)
    assert delivered(kimi, ASKED, _answer("Hi", calls=(_call(0, "Paris"),), finish=finish)) is None


def test_calls_a_template_does_not_write_are_not_accounted(
    kimi: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release without a tool format renders a call-making turn without its calls: no
    evidence of what the model wrote, so no verdict (SmolLM2 served with tools by vLLM)."""
    import dataclasses

    from verifier.checks.support import accounting

    real = accounting.model_output

    def without_calls(*args: Any) -> Any:
        found = real(*args)
        return dataclasses.replace(found, text="<|im_end|>")

    monkeypatch.setattr(accounting, "model_output", without_calls)
    answer = _answer(None, calls=(_call(0, "Paris"),), finish="tool_calls", billed=40)
    assert delivered(kimi, WITH_TOOLS, answer) is None
    assert account(kimi, WITH_TOOLS, answer) == (None, [])
    assert delivered(kimi, ASKED, _answer("Hello there")) is not None


def test_a_stop_sequence_may_be_billed_but_not_delivered(kimi: Profile) -> None:
    request = {**ASKED, "stop": ["\n\nEND"]}
    found = delivered(kimi, request, _answer("Hello there"))
    assert found is not None and found.reasons == ("stop",)
    counted = len(kimi.tokenizer.encode_ordinary("Hello there"))
    stop = len(kimi.tokenizer.encode_ordinary("\n\nEND"))
    assert (found.tokens, found.low, found.high) == (counted, counted, counted + stop)


def test_every_choice_is_billed(kimi: Profile) -> None:
    one = delivered(kimi, ASKED, _answer("Hi."))
    two = delivered(kimi, ASKED, _answer("Hi.", choices=2))
    assert one is not None and two is not None and two.tokens == 2 * one.tokens
    # llama-server bills n=2 as one choice: less billed than delivered.
    _, findings = account(kimi, ASKED, _answer("Hi.", choices=2, billed=one.tokens))
    assert [f.code for f in findings] == ["completion_tokens_mismatch"]
    assert "over 2 choices" in findings[0].message


def test_reasoning_of_a_tool_call_turn_is_the_template_s_own(thinking: Profile) -> None:
    answer = _answer(calls=(_call(0, "Paris", "x"),), reasoning="Call the tool.")
    found = delivered(thinking, WITH_TOOLS, answer)
    assert found is not None and found.exact
    # The vendor's id "x" is not what the model wrote: the contract says functions.NAME:IDX.
    assert found.text.startswith(
        "<think>Call the tool.</think><|tool_calls_section_begin|>"
        "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    )


def test_reasoning_the_template_drops_from_a_final_answer_goes_between_the_tags(
    thinking: Profile,
) -> None:
    # K2 Thinking's template writes a final answer as history: <think></think>, reasoning gone.
    found = delivered(thinking, ASKED, _answer("Sunny.", reasoning="Think first."))
    assert found is not None and found.reasons == ("reasoning",)
    assert found.text == "<think>Think first.</think>Sunny.<|im_end|>"
    assert (found.low, found.high) == (found.tokens - 1, found.tokens + 1)


def test_a_template_that_renders_earlier_turns_otherwise_still_places_the_output(
    thinking: Profile,
) -> None:
    # After a tool loop, a final answer turns the loop's turns into history (reasoning dropped):
    # the conversation with the answer no longer begins with the generation prompt.
    loop: dict[str, Any] = {
        "messages": [
            *ASKED["messages"],
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Look it up.",
                "tool_calls": [
                    {
                        "id": "functions.get_weather:0",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "Sunny"},
        ],
        "tools": TOOLS,
    }
    found = delivered(thinking, loop, _answer("It is sunny.", reasoning="Report it."))
    assert found is not None
    assert found.text == "<think>Report it.</think>It is sunny.<|im_end|>"


def test_no_usage_or_no_choice_is_no_verdict(kimi: Profile) -> None:
    assert account(kimi, ASKED, _answer("Hi."))[1] == []
    assert account(kimi, ASKED, ChatResult(False, 200, usage={"completion_tokens": 3})) == (
        None,
        [],
    )
    metric, findings = account_answers(
        kimi, [(ASKED, _answer("Hi.")), (ASKED, ChatResult(False, 200))]
    )
    assert findings == []
    assert metric == {
        "answers": 2,
        "exact": 0,
        "bounded": 0,
        "unaccounted": 2,
        "billed": 0,
        "delivered": 0,
    }


def test_the_findings_fail_a_passed_case_and_leave_an_ungraded_one_alone() -> None:
    found = [Finding("undelivered_tokens", "more billed than delivered")]
    metric = {"answers": 1}
    failed = with_accounting(Outcome(Status.PASS), metric, found)
    assert (failed.status, failed.code) == (Status.FAIL, "undelivered_tokens")
    assert failed.metrics["accounting"] == metric
    already = Outcome.from_findings([Finding("missing_call", "one call short")])
    both = with_accounting(already, metric, found)
    assert (both.code, [f.code for f in both.findings]) == (
        "missing_call",
        ["missing_call", "undelivered_tokens"],
    )
    skipped = with_accounting(Outcome(Status.UNSUPPORTED, code="x"), metric, found)
    assert skipped.status is Status.UNSUPPORTED and skipped.metrics["accounting"] == metric


def test_a_grammar_may_bill_the_pieces_of_what_it_delivers(kimi: Profile) -> None:
    # A JSON format or a forced call decodes under a grammar, which may refuse a merged token
    # ('{}') and take its pieces ('{', '}'): at most one token per byte of ordinary text.
    request = {**ASKED, "response_format": {"type": "json_object"}}
    found = delivered(kimi, request, _answer("{}"))
    assert found is not None and found.reasons == ("grammar",)
    assert (found.tokens, found.high) == (2, 3)
    assert account(kimi, request, _answer("{}", billed=3))[1] == []
    assert [f.code for f in account(kimi, request, _answer("{}", billed=4))[1]] == [
        "undelivered_tokens"
    ]
    # Without a grammar the same answer is held to its canonical tokens.
    assert [f.code for f in account(kimi, ASKED, _answer("{}", billed=3))[1]] == [
        "undelivered_tokens"
    ]


def test_a_cut_answer_and_unparsed_reasoning_are_rendered_as_generated() -> None:
    from verifier.reference.output import model_output
    from verifier.reference.profiles import load_profile

    profile = load_profile("kimi-k2-thinking")
    request = {"messages": [{"role": "user", "content": "Hi"}]}
    said = {"role": "assistant", "content": "<think>The user greets me</think>Hello!"}
    unparsed = model_output(profile, request, said)
    assert unparsed is not None
    assert unparsed.text == "<think>The user greets me</think>Hello!<|im_end|>"
    thought = {"role": "assistant", "content": "", "reasoning_content": "The user greets"}
    whole = model_output(profile, request, thought)
    assert whole is not None
    cut = whole.cut(["The user greets", ""])
    assert cut is not None and cut.text == "<think>The user greets"
    assert whole.cut(["not in it"]) is None
