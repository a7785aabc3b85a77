"""What the run-start probes say: the published words, or words drawn from ``--rotate``'s secret.

Every run starts with the same few small requests (a greeting, a picture, a format question).
Published, they would tell a vendor that a verification has begun; under ``--rotate`` their
words come from the secret, so the first requests of a run carry no fixed fingerprint either.
"""

from __future__ import annotations

import dataclasses
import random

# Short openings any chat model answers: the chat, API, logprobs and tokenizer probes say one.
_GREETINGS = (
    "Hi",
    "Hi there",
    "Hey",
    "Good morning",
    "Good evening",
    "Hello there",
    "Greetings",
    "Howdy",
    "Hi, how are you?",
    "Morning!",
)
# Each list leaves out the published words (the defaults below).
# A plain colour of the picture the vision probe shows (any answer to it will do).
_COLOURS = ("green", "blue", "yellow", "purple", "orange")
_SIDES = (12, 16, 20, 24, 32)
_PICTURE_QUESTIONS = (
    "Which colour do you see?",
    "Describe this picture in one word.",
    "What is shown here?",
)
# The format probe asks in prose for what its schema's one property names.
_FORMAT_QUESTIONS = (
    ("colour", "In one short sentence: what colour is fresh grass?"),
    ("color", "In a few words: what color is a ripe banana?"),
    ("shade", "In one sentence: what shade is snow?"),
    ("animal", "In one short sentence: which animal barks?"),
    ("city", "In a few words: which city is the capital of France?"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeWords:
    """The words of the run-start probes.

    Args:
        greeting: the user message of the chat, API, logprobs and tokenizer probes.
        max_tokens: the chat and API probes' cap.
        colour: the vision probe's picture, a plain square of this colour.
        side: that square's side in pixels.
        question: what the vision probe asks of it.
        field: the format probe's one property.
        format_question: the format probe's question, asked in prose.
    """

    greeting: str = "Hello"
    max_tokens: int = 4
    colour: str = "red"
    side: int = 16
    question: str = "What colour is this image?"
    field: str = "colour"
    format_question: str = "In one short sentence: what colour is the sky?"

    @classmethod
    def drawn(cls, rng: random.Random) -> ProbeWords:
        """Words drawn with `rng` (the rotation's): the same secret, the same words."""
        field, format_question = rng.choice(_FORMAT_QUESTIONS)
        return cls(
            greeting=rng.choice(_GREETINGS),
            max_tokens=rng.randint(3, 8),
            colour=rng.choice(_COLOURS),
            side=rng.choice(_SIDES),
            question=rng.choice(_PICTURE_QUESTIONS),
            field=field,
            format_question=format_question,
        )


PUBLISHED = ProbeWords()
