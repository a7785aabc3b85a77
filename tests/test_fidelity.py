"""Chat-template and tokenizer grading as pure functions, against the Kimi reference."""

from __future__ import annotations

import pytest

from verifier.checks.chat_template import grade, rendering_findings
from verifier.checks.tokenizer import count_findings, first_difference, id_findings
from verifier.reference.profiles import Profile, load_profile
from verifier.reference.tokenizer import encode_all_special

USER = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def kimi() -> Profile:
    return load_profile("kimi-k2")


def count(profile: Profile, messages: list[dict[str, object]], **kwargs: object) -> int:
    return len(profile.prompt_ids(messages, **kwargs))  # type: ignore[arg-type]


def codes(findings: list[object]) -> list[str]:
    return [f.code for f in findings]  # type: ignore[attr-defined]


def test_exact_counts_pass(kimi: Profile) -> None:
    assert grade(kimi, "absolute", (USER, None), count(kimi, USER)) == []


def test_a_skew_that_cancels_in_the_difference(kimi: Profile) -> None:
    longer = [*USER, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Again"}]
    found = grade(
        kimi, "turn", (longer, None), count(kimi, longer) + 3, (USER, None), count(kimi, USER) + 3
    )
    assert codes(found) == ["prompt_tokens_skew"]
    assert "+3" in found[0].message


@pytest.mark.parametrize(
    ("probe", "messages", "alternative", "code"),
    [
        (
            "system",
            [{"role": "system", "content": "Be terse."}, *USER],
            lambda p, m: count(p, m[1:]),
            "system_dropped",
        ),
        (
            "special_tokens",
            [{"role": "user", "content": "a <|im_end|> b"}],
            lambda p, m: len(encode_all_special(p.tokenizer, p.render(m).text)),
            "special_token_injection",
        ),
        (
            "generation_prompt",
            USER,
            lambda p, m: count(p, m, add_generation_prompt=False),
            "generation_prompt_missing",
        ),
        ("bos", USER, lambda p, m: count(p, m) + 1, "double_bos"),
    ],
)
def test_a_wrong_rendering_names_the_defect(
    kimi: Profile, probe: str, messages: list[dict[str, object]], alternative: object, code: str
) -> None:
    actual = alternative(kimi, messages)  # type: ignore[operator]
    assert codes(grade(kimi, probe, (messages, None), actual)) == [code]


def test_a_plus_one_elsewhere_is_not_called_a_bos(kimi: Profile) -> None:
    assert codes(grade(kimi, "absolute", (USER, None), count(kimi, USER) + 1)) == [
        "prompt_tokens_mismatch"
    ]


def test_a_final_assistant_message_continued(kimi: Profile) -> None:
    messages = [*USER, {"role": "assistant", "content": "Hi."}]
    assert codes(grade(kimi, "prefill", (messages, None), count(kimi, messages) - 4)) == [
        "assistant_prefill"
    ]


def test_rendering_difference_is_located() -> None:
    found = rendering_findings("abc<|im_end|>", "abc<|im_end|>\n")
    assert codes(found) == ["rendered_prompt_differs"] and "character 13" in found[0].message
    assert rendering_findings("same", "same") == []


def test_id_findings(kimi: Profile) -> None:
    text = "Grüße <|im_end|> ①"
    expected = kimi.prompt_ids([{"role": "user", "content": text}])
    assert id_findings(kimi, text, expected, expected) == []
    unsafe = encode_all_special(
        kimi.tokenizer, kimi.render([{"role": "user", "content": text}]).text
    )
    assert codes(id_findings(kimi, text, expected, unsafe)) == ["special_token_injection"]
    nfkc = kimi.prompt_ids([{"role": "user", "content": "Grüße <|im_end|> 1"}])
    assert codes(id_findings(kimi, text, expected, nfkc)) == ["input_normalised"]
    assert codes(id_findings(kimi, text, expected, [163584, *expected])) == ["double_bos"]
    changed = [*expected[:5], 7, *expected[6:]]
    found = id_findings(kimi, text, expected, changed)
    assert codes(found) == ["token_ids_mismatch"] and found[0].json_path == "$.tokens[5]"


def test_count_findings(kimi: Profile) -> None:
    text = "say <|im_end|>"
    expected = count(kimi, [{"role": "user", "content": text}])
    assert count_findings(kimi, text, expected, expected) == []
    unsafe = len(
        encode_all_special(kimi.tokenizer, kimi.render([{"role": "user", "content": text}]).text)
    )
    assert codes(count_findings(kimi, text, expected, unsafe)) == ["special_token_injection"]
    assert codes(count_findings(kimi, text, expected, expected + 7)) == ["token_count_mismatch"]


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 4]) == 2
    assert first_difference([1, 2], [1, 2, 3]) == 2
