"""Twins of the cases that vary what is shown or spelled: images, tokenizer texts."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from typing import Any

from .wording import reworded

# A digit's words, as the vision family's expectations spell them.
_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def vision_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A vision semantic case's twin: other colours and digits drawn, expectations with them.

    Colours are exchanged among the colours the corpus draws, digits among the ten, each by
    one permutation for the case, so images that were alike stay alike and those that
    differed still differ; the question gets other words around it. Only the cases that
    expect an answer vary (semantic, stale cache, transport): the others' answers are not
    graded.
    """
    if "expect" not in data:
        return None
    twin: dict[str, Any] = json.loads(json.dumps(data))
    palette = sorted({image["color"] for image in twin["images"] if "color" in image} | _COLOURS)
    colours = dict(zip(palette, _deranged(palette, rng), strict=True))
    digits = dict(zip(range(10), _deranged(list(range(10)), rng), strict=True))
    for position, image in enumerate(twin["images"]):
        if "color" in image:
            image["color"] = colours[image["color"]]
            twin["expect"][position] = [image["color"]]
        if "digit" in image:
            image["digit"] = digits[image["digit"]]
            twin["expect"][position] = [str(image["digit"]), _DIGITS[image["digit"]]]
    twin["question"] = reworded(twin["question"], rng)
    return twin


# The colours the vision corpus draws (each one a word the expectations use).
_COLOURS = frozenset({"red", "green", "blue", "yellow", "purple", "orange"})


def _deranged(values: list[Any], rng: random.Random) -> list[Any]:
    """`values` in an order where none keeps its place."""
    while True:
        shuffled = list(values)
        rng.shuffle(shuffled)
        if all(a != b for a, b in zip(values, shuffled, strict=True)):
            return shuffled


def tokenizer_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A tokenizer text's twin: its ASCII digits drawn anew, each run as long as it was.

    A run keeps its length and a leading zero (the pre-tokeniser splits digits by position
    and length, so the twin tests what the case tests); the expected ids are the profile's
    for the twin's text, as for any case. Digits inside special-token markup
    (``<|reserved_token_163700|>``) stay: they name the token the case spells. A text
    without another digit does not vary: its characters are what it tests.
    """
    text = data["text"]

    def drawn(match: re.Match[str]) -> str:
        run = match.group()
        first = "0" if run[0] == "0" else rng.choice("123456789")
        return first + "".join(rng.choice("0123456789") for _ in run[1:])

    pieces = re.split(r"(<\|[^|]*\|>)", text)
    for _ in range(8):
        new = "".join(
            piece if n % 2 else re.sub(r"[0-9]+", drawn, piece) for n, piece in enumerate(pieces)
        )
        if new != text:
            return {**json.loads(json.dumps(data)), "text": new}
    return None
