"""Chat-template and tokenizer grading as pure functions, against the Kimi reference."""

from __future__ import annotations

from typing import Any

import pytest

from verifier.checks.support.prompt_counts import grade, rendering_findings
from verifier.checks.support.renderings import (
    HYPOTHESES,
    Conversation,
    Observed,
    Prompt,
    explaining,
    first_difference,
    reference,
)
from verifier.checks.tokenizer import count_findings, id_findings
from verifier.reference.profiles import Profile, load_profile

USER = [{"role": "user", "content": "Hello there"}]
SYSTEM = [{"role": "system", "content": "Be terse."}, *USER]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
REASONING_LOOP = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The user wants the weather; call the tool.",
        "tool_calls": [
            {
                "id": "functions.get_weather:0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 C, cloudy"},
]


@pytest.fixture(scope="module")
def kimi() -> Profile:
    return load_profile("kimi-k2")


@pytest.fixture(scope="module")
def thinking() -> Profile:
    from tests.conftest import KIMI_THINKING_PROFILE

    return load_profile(KIMI_THINKING_PROFILE)


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def wrong(profile: Profile, code: str, conversation: Conversation, variant: int = 0) -> Prompt:
    """The prompt a server with the bug `code` builds."""
    return HYPOTHESES[code](profile, conversation.messages, conversation.tools)[variant]


def seen(prompt: Prompt, *, ids: bool = True, text: str | None = None) -> Observed:
    return Observed(len(prompt.ids), prompt.ids if ids else None, text)


def test_exact_counts_pass(kimi: Profile) -> None:
    b = Conversation(USER)
    assert grade(kimi, "absolute", [(b, seen(reference(kimi, b)))]) == []


def test_a_skew_that_cancels_in_the_difference(kimi: Profile) -> None:
    a = Conversation(USER)
    b = Conversation([*USER, {"role": "assistant", "content": "Hi"}, *USER])
    count = [len(reference(kimi, c).ids) + 3 for c in (b, a)]
    found = grade(kimi, "turn", [(b, Observed(count[0])), (a, Observed(count[1]))])
    assert codes(found) == ["prompt_tokens_skew"]
    assert "+3" in found[0].message


@pytest.mark.parametrize(
    ("code", "messages", "tools", "variant"),
    [
        ("special_token_injection", [{"role": "user", "content": "a <|im_end|> b"}], None, 0),
        ("system_dropped", SYSTEM, None, 0),
        ("system_merged", SYSTEM, None, 0),
        ("generation_prompt_missing", USER, None, 0),
        ("double_bos", USER, None, 0),
        ("input_normalised", [{"role": "user", "content": "Ｈｅｌｌｏ ①"}], None, 0),
        ("tools_rendered_differently", USER, TOOLS, 0),
        ("tools_rendered_differently", USER, TOOLS, 1),
        ("assistant_prefill", [*USER, {"role": "assistant", "content": "Hi."}], None, 0),
        ("assistant_prefill", [*USER, {"role": "assistant", "content": "Hi."}], None, 1),
    ],
)
def test_the_ids_single_out_each_wrong_rendering(
    kimi: Profile, code: str, messages: list[dict[str, Any]], tools: Any, variant: int
) -> None:
    b = Conversation(messages, tools)
    found = grade(kimi, "absolute", [(b, seen(wrong(kimi, code, b, variant)))])
    assert codes(found) == [code], found


@pytest.mark.parametrize("code", ["reasoning_history_dropped", "reasoning_in_content"])
def test_reasoning_renderings_with_a_template_that_renders_reasoning(
    thinking: Profile, kimi: Profile, code: str
) -> None:
    b = Conversation(REASONING_LOOP, TOOLS)
    assert codes(grade(thinking, "reasoning_history", [(b, seen(wrong(thinking, code, b)))])) == [
        code
    ]
    # Kimi K2 Instruct's template never renders reasoning: dropping it changes nothing there.
    dropped = wrong(kimi, "reasoning_history_dropped", b)
    assert dropped.ids == reference(kimi, b).ids


def test_one_count_alone_names_no_cause(kimi: Profile) -> None:
    """Without ids or a baseline, a constant offset explains any count as well as a cause."""
    b = Conversation(SYSTEM)
    prompt = wrong(kimi, "system_dropped", b)
    found = grade(kimi, "system", [(b, Observed(len(prompt.ids)))])
    assert codes(found) == ["prompt_tokens_mismatch"]
    assert "consistent with: system dropped" in found[0].message
    assert "constant offset" in found[0].message


def test_a_plus_one_with_a_baseline_is_a_skew_not_a_bos(kimi: Profile) -> None:
    """Counts alone cannot tell a doubled BOS from an accounting skew of +1."""
    a, b = Conversation(USER), Conversation(SYSTEM)
    case = [(c, Observed(len(reference(kimi, c).ids) + 1)) for c in (b, a)]
    found = grade(kimi, "system", case)
    assert codes(found) == ["prompt_tokens_skew"] and "double bos" in found[0].message


def test_the_baseline_rules_out_a_coincidence(kimi: Profile) -> None:
    """B's count fits a dropped system prompt, A's contradicts it: no cause is named."""
    a, b = Conversation(SYSTEM), Conversation([*SYSTEM, {"role": "assistant", "content": "x"}])
    dropped = len(wrong(kimi, "system_dropped", b).ids)
    case = [(b, Observed(dropped)), (a, Observed(len(reference(kimi, a).ids)))]
    assert explaining(kimi, case) == []
    assert codes(grade(kimi, "turn", case)) == ["prompt_tokens_mismatch"]


def test_both_counts_of_a_baseline_probe_single_out_the_cause(kimi: Profile) -> None:
    a = Conversation([{"role": "system", "content": "Short."}, *USER])
    b = Conversation([{"role": "system", "content": "A much longer system line here."}, *USER])
    case = [(c, Observed(len(wrong(kimi, "system_dropped", c).ids))) for c in (b, a)]
    assert codes(grade(kimi, "system", case)) == ["system_dropped"]


def test_tools_that_cost_otherwise_against_an_exact_baseline(kimi: Profile) -> None:
    a, b = Conversation(USER), Conversation(USER, TOOLS)
    case = [(b, Observed(len(reference(kimi, b).ids) + 5)), (a, seen(reference(kimi, a)))]
    assert codes(grade(kimi, "tools", case)) == ["tools_rendered_differently"]


def test_unexplained_ids_point_at_the_first_difference(kimi: Profile) -> None:
    b = Conversation(USER)
    ids = list(reference(kimi, b).ids)
    ids[5] = 7
    found = grade(kimi, "absolute", [(b, Observed(len(ids) + 1, (*ids, 9)))])
    assert codes(found) == ["prompt_tokens_mismatch"] and found[0].json_path == "$.tokens[5]"


def test_a_rendered_text_that_explains_the_count_is_one_finding(kimi: Profile) -> None:
    """llama.cpp's prefill: its /apply-template renders it too; the text is evidence."""
    b = Conversation([*USER, {"role": "assistant", "content": "Hi."}])
    prompt = wrong(kimi, "assistant_prefill", b, 1)
    assert prompt.text is not None
    found = grade(kimi, "prefill", [(b, seen(prompt, text=prompt.text))])
    assert codes(found) == ["assistant_prefill"] and "rendered text" in found[0].message


def test_rendering_difference_is_located(kimi: Profile) -> None:
    found = rendering_findings("abc<|im_end|>", "abc<|im_end|>\n")
    assert codes(found) == ["rendered_prompt_differs"] and "character 13" in found[0].message
    assert rendering_findings("same", "same") == []
    b = Conversation(USER)
    ref = reference(kimi, b)
    assert ref.text is not None
    found = grade(kimi, "absolute", [(b, seen(ref, text=ref.text + " "))])
    assert codes(found) == ["rendered_prompt_differs"]


def one_message(text: str) -> Conversation:
    return Conversation([{"role": "user", "content": text}])


def test_id_findings(kimi: Profile) -> None:
    text = "Grüße <|im_end|> ①"
    conversation = one_message(text)
    expected = reference(kimi, conversation).ids
    assert id_findings(kimi, text, expected) == []
    for code in ("special_token_injection", "input_normalised", "double_bos"):
        assert codes(id_findings(kimi, text, wrong(kimi, code, conversation).ids)) == [code]
    changed = [*expected[:5], 7, *expected[6:]]
    found = id_findings(kimi, text, changed)
    assert codes(found) == ["token_ids_mismatch"] and found[0].json_path == "$.tokens[5]"


def test_count_findings_by_differences(kimi: Profile) -> None:
    text = "say <|im_end|>"
    count = len(reference(kimi, one_message(text)).ids)
    anchor = len(reference(kimi, one_message("x")).ids)
    assert count_findings(kimi, text, count, anchor) == []
    assert count_findings(kimi, text, count + 4, anchor + 4) == [], "a shared offset cancels"
    unsafe = len(wrong(kimi, "special_token_injection", one_message(text)).ids)
    assert codes(count_findings(kimi, text, unsafe, anchor)) == ["special_token_injection"]
    assert codes(count_findings(kimi, text, count + 7, anchor)) == ["token_count_mismatch"]


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 4]) == 2
    assert first_difference([1, 2], [1, 2, 3]) == 2


def test_a_count_that_adds_the_cached_input_again_names_the_double_count(kimi: Profile) -> None:
    """The answers said how much came from the cache, and each count is the reference's plus
    exactly that: the cache counted twice. One conversation whose count is not is no such."""
    a, b = Conversation(USER), Conversation(SYSTEM)
    exact_a, exact_b = (len(reference(kimi, c).ids) for c in (a, b))
    case = [
        (b, Observed(2 * exact_b - 1, cached=exact_b - 1)),
        (a, Observed(2 * exact_a - 1, cached=exact_a - 1)),
    ]
    found = grade(kimi, "system", case)
    assert codes(found) == ["cached_tokens_double_counted"]
    assert found[0].expected == exact_b and found[0].actual == 2 * exact_b - 1
    # The baseline's count is off by another amount: no cause fits both, what was observed.
    other = [case[0], (a, Observed(exact_a + 5, cached=exact_a - 1))]
    assert codes(grade(kimi, "system", other)) == ["prompt_tokens_mismatch"]
    # Nothing said to be cached: nothing singles the cache out.
    none = [(b, Observed(exact_b + 3, cached=0))]
    assert codes(grade(kimi, "system", none)) == ["prompt_tokens_mismatch"]


def test_normalisation_named_by_counts_is_put_to_the_test(kimi: Profile) -> None:
    """Counts fit NFKC normalisation: the normalised text is sent too, and must cost what the
    text did; where it does not, the text is tokenized otherwise, and nothing is named."""
    from verifier.cases.corpus import Case
    from verifier.checks import tokenizer
    from verifier.checks.registry import RunContext
    from verifier.protocol.answers import ChatResult, Choice
    from verifier.protocol.requests import drive

    text = "ﬁnance ﬂow"
    normalised = len(wrong(kimi, "input_normalised", one_message(text)).ids)
    anchor = len(reference(kimi, one_message("x")).ids)

    def outcome(nfkc_count: int) -> tuple[list[str], list[str]]:
        counts = {"count": normalised, "anchor": anchor, "nfkc": nfkc_count}
        sent = []

        def send(request: Any) -> ChatResult:
            sent.append(request.name)
            choice = Choice(index=0, role="assistant", content="A", finish_reason="length")
            usage = {"prompt_tokens": counts[request.name], "completion_tokens": 1}
            return ChatResult(stream=False, status=200, choices=[choice], usage=usage)

        case = Case("tokenizer", "nfkc", {"text": text, "category": "normalisation"}, "x:1")
        ctx = RunContext(model="m", seed=1, profile=kimi)
        result = drive(tokenizer.run(case, ctx), send)
        return codes(result.findings), sent

    assert outcome(normalised) == (["input_normalised"], ["count", "anchor", "nfkc"])
    assert outcome(normalised + 2) == (["token_count_mismatch"], ["count", "anchor", "nfkc"])


def test_a_text_over_another_api_without_counts_is_no_pass(kimi: Profile) -> None:
    """Over Messages the API's own counts are the evidence, whatever tokenizer routes the
    endpoint offers: an answer without them leaves the case unsupported, never passed."""
    from verifier.cases.corpus import Case
    from verifier.checks import tokenizer
    from verifier.checks.registry import RunContext
    from verifier.protocol.answers import ChatResult, Choice
    from verifier.protocol.requests import drive
    from verifier.protocol.tokenize import TokenizerEndpoints

    choice = Choice(index=0, role="assistant", content="A", finish_reason="length")
    case = Case("tokenizer", "t", {"text": "Grüße", "category": "cjk"}, "x:1").over("messages")
    ctx = RunContext(
        model="m", seed=1, profile=kimi, endpoints=TokenizerEndpoints(tokenize="messages")
    )
    sent: list[Any] = []

    def send(request: Any) -> ChatResult:
        sent.append(request)
        return ChatResult(stream=False, status=200, choices=[choice], usage={})

    outcome = drive(tokenizer.run(case, ctx), send)
    assert outcome.status.value == "unsupported"
    assert outcome.message.endswith(
        "its counts are the evidence, and the answer has no usage.prompt_tokens"
    )
    # Only generation was asked: the chat routes speak for chat completions alone.
    assert [type(r).__name__ for r in sent] == ["Chat", "Chat"]
