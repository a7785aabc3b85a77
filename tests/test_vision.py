"""Vision grading as pure functions, and the simulated vendor's eyes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.checks.vision import answer_findings, content_parts, words
from verifier.reference.images import COLOURS, image_part
from verifier.simulator.defects import parse_defects
from verifier.simulator.sight import Eyes, answer, without_images

RED_BLUE = [["red"], ["blue"]]


def codes(content: str | None, expect: list[list[str]]) -> list[str]:
    return [f.code for f in answer_findings(content, expect)]


@pytest.mark.parametrize(
    "content",
    [
        "Red.",
        "The image is RED",
        "It's red!",
        "I'd say the colour is red, a warm red.",
    ],
)
def test_phrasing_is_tolerated(content: str) -> None:
    assert codes(content, [["red"]]) == []


def test_digits_match_as_figures_or_words() -> None:
    expect = [["7", "seven"]]
    assert codes("Seven.", expect) == []
    assert codes("The digit is 7", expect) == []
    assert codes("The digit is 17", expect) == ["answer_mismatch"]


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("The first image is red, the second is blue.", None),
        ("red, then blue (and the first was red)", None),
        ("The first image is blue, the second is red.", "image_order_swapped"),
        ("Both images are red: red and red.", "only_first_image_used"),
        ("The first image is red.", "answer_mismatch"),
        ("I cannot see any image.", "answer_mismatch"),
        ("", "answer_mismatch"),
        (None, "answer_mismatch"),
    ],
)
def test_two_images_are_graded_by_order(content: str | None, code: str | None) -> None:
    assert codes(content, RED_BLUE) == ([code] if code else [])


def test_a_mismatch_names_the_missing_images() -> None:
    [finding] = answer_findings("green and blue", [["red"], ["blue"], ["yellow"]])
    assert finding.message.startswith("image(s) [1, 3] not named")


@given(st.permutations(sorted(COLOURS)))
def test_every_order_of_distinct_answers_grades_as_order(order: list[str]) -> None:
    expect = [[c] for c in order]
    assert codes(" ".join(order), expect) == []
    assert codes(" ".join(reversed(order)), expect) == ["image_order_swapped"]


def test_digit_words_become_digits() -> None:
    assert words("Seven, then 3; NINE.") == ["7", "then", "3", "9"]


def test_content_parts_put_text_before_between_and_after() -> None:
    a, b, c = ({"type": "image_url", "image_url": {"url": f"data:{i}"}} for i in "abc")
    case = {"before": "Look.", "between": ["Then:", "Last:"], "question": "Which?"}
    assert content_parts(case, [a, b, c]) == [
        {"type": "text", "text": "Look."},
        a,
        {"type": "text", "text": "Then:"},
        b,
        {"type": "text", "text": "Last:"},
        c,
        {"type": "text", "text": "Which?"},
    ]
    assert content_parts({"question": "Which?"}, [a]) == [a, {"type": "text", "text": "Which?"}]


def request_with(*specs: dict[str, Any], text: str = "Which colours?") -> dict[str, Any]:
    parts = [image_part(s) for s in specs] + [{"type": "text", "text": text}]
    return {"messages": [{"role": "user", "content": parts}]}


RED = {"kind": "solid", "color": "red", "size": [64, 64]}
BLUE = {"kind": "solid", "color": "blue", "size": [64, 64]}


def look(*defects: str, request: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    return Eyes(parse_defects(defects)).look(request or request_with(RED, BLUE))


def test_the_simulated_vendor_sees_images_in_order() -> None:
    assert look() == [{"colour": "red", "digit": None}, {"colour": "blue", "digit": None}]
    assert look(request={"messages": [{"role": "user", "content": "hi"}]}) is None
    assert answer(look() or []) == "The first image is red. The second image is blue."


@pytest.mark.parametrize(
    ("defect", "colours"),
    [
        ("vision-images-ignored", []),
        ("vision-first-image-only", ["red", "red"]),
        ("vision-order-swapped", ["blue", "red"]),
    ],
)
def test_vision_defects_bend_what_is_seen(defect: str, colours: list[str]) -> None:
    assert [s["colour"] for s in look(defect) or []] == colours


def test_a_stale_cache_answers_by_text_alone() -> None:
    eyes = Eyes(parse_defects(["vision-stale-cache"]))
    assert eyes.look(request_with(RED))[0]["colour"] == "red"  # type: ignore[index]
    assert eyes.look(request_with(BLUE))[0]["colour"] == "red"  # type: ignore[index]
    assert eyes.look(request_with(BLUE, text="Other?"))[0]["colour"] == "blue"  # type: ignore[index]
    fresh = Eyes(parse_defects([]))
    fresh.look(request_with(RED))
    assert fresh.look(request_with(BLUE))[0]["colour"] == "blue"  # type: ignore[index]


def test_webp_is_blank_to_a_vendor_without_webp() -> None:
    webp = {**RED, "format": "webp"}
    assert look("vision-webp-unsupported-silently", request=request_with(webp)) == [{}]
    assert look("vision-webp-unsupported-silently", request=request_with(RED)) == [
        {"colour": "red", "digit": None}
    ]
    assert "nothing I can make out" in answer([{}])


def test_images_cost_their_rule_and_large_ones_double_with_the_defect() -> None:
    rule = {"rule": "kimi-k25", "patch_size": 8, "merge": 2, "min_tokens": 4, "max_tokens": 256}
    large = {**RED, "size": [640, 480]}
    request = request_with(RED, large)
    assert Eyes(parse_defects([]), rule).prompt_tokens(request) == 18 + 236
    miscount = Eyes(parse_defects(["vision-token-miscount-large"]), rule)
    assert miscount.prompt_tokens(request) == 18 + 2 * 236
    # Without a profile: 32-pixel tiles plus the two markers.
    assert Eyes(parse_defects([])).prompt_tokens(request_with(large)) == 20 * 15 + 2


def test_images_are_taken_out_before_the_text_is_rendered() -> None:
    request = request_with(RED, BLUE, text="Which?")
    assert without_images(request)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Which?"}]}
    ]
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert without_images(plain) == plain
