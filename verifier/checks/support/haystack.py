"""Long prompts of an exact length, with needles a question only one of them answers (pure).

A haystack is filler prose drawn from the run's seed (so a vendor cannot recognise it from one
run to the next), with needles at chosen depths: each needle is one sentence giving a vault's
access code, and its question asks for that vault's code alone. The filler has no digits, so
an answer holding the code read it from the needle. The prompt's length is counted with the
profile's own template and tokenizer, never estimated: what the endpoint must bill is that
count.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .renderings import Conversation, reference

if TYPE_CHECKING:
    from ...reference.profiles import Profile
    from ...reference.tokenizer_backends import Tokenizer

# Where the needles sit, as a share of the haystack before them.
DEPTHS = (0.1, 0.5, 0.9)
_INTRO = "Below are notes from an archive. A question about them follows the notes.\n\n"
_NEEDLE = "The access code of the {name} vault is {code}."
_QUESTION = "What is the access code of the {name} vault? Answer with the code alone."
# The question asked of a prompt past the window, which must never be answered.
SUMMARY_QUESTION = "Summarise the notes above in one sentence."
# A request for more text than the window has room for (the answer runs to its cap), and its
# last line: an answer that ends otherwise was cut.
COUNT_END = "5000"
COUNT_QUESTION = (
    f"Write every whole number from 1 to {COUNT_END} in order, one per line, and nothing else."
)
# How a reader finds the question and its needle (the simulated vendor reads them so).
_ASKED = re.compile(r"What is the access code of the (?P<name>[a-z]+ [a-z]+) vault\?")
_POOL = 256
_ADJECTIVES = (
    "quiet old narrow bright wooden distant silver heavy gentle crowded empty golden broken "
    "patient humble northern open careful hidden early"
).split()
_NOUNS = (
    "river lamp garden window market bridge letter harbour orchard library road tower field "
    "kitchen meadow lantern village forest station workshop"
).split()
_VERBS = (
    "faces crosses follows shelters overlooks circles joins reaches borders passes touches "
    "outlasts guards lights frames"
).split()
_PLACES = "at dawn,in winter,after the rain,by evening,in the spring,on market days".split(",")
_COLOURS = "amber cobalt crimson olive ivory scarlet indigo coral jade violet umber teal".split()
_ANIMALS = "heron otter falcon badger lynx marten plover ibex wren stoat crane vole".split()


@dataclasses.dataclass(frozen=True, slots=True)
class Needle:
    """One fact hidden in a haystack, and the question only it answers."""

    name: str
    code: str
    depth: float

    @property
    def sentence(self) -> str:
        """The needle as it stands in the haystack."""
        return _NEEDLE.format(name=self.name, code=self.code)

    @property
    def question(self) -> str:
        """What only this needle answers."""
        return _QUESTION.format(name=self.name)

    def found_in(self, answer: str | None) -> bool:
        """The answer gives the needle's code, as a number of its own (graded exactly)."""
        return bool(answer) and re.search(rf"(?<!\d){self.code}(?!\d)", answer or "") is not None


@dataclasses.dataclass(frozen=True, slots=True)
class Haystack:
    """A haystack's text (filler with its needles) and the needles in it."""

    text: str
    needles: tuple[Needle, ...]

    def conversation(self, question: str) -> Conversation:
        """The one-message conversation asking `question` about the haystack."""
        return Conversation(({"role": "user", "content": f"{_INTRO}{self.text}\n\n{question}"},))

    def messages(self, question: str) -> list[dict[str, Any]]:
        """The request's messages asking `question`."""
        return [dict(m) for m in self.conversation(question).messages]


def asked(text: str) -> str | None:
    """The vault a question in `text` asks about (the last one asked), or None."""
    found = _ASKED.findall(text)
    return found[-1] if found else None


def stated(text: str, name: str) -> str | None:
    """The code `text` gives for the vault `name`, or None where no needle gives it."""
    found = re.search(re.escape(_NEEDLE.format(name=name, code="@")).replace("@", r"(\d+)"), text)
    return found.group(1) if found else None


def needles(seed: int, depths: Sequence[float] = DEPTHS) -> tuple[Needle, ...]:
    """Needles at `depths`, each with its own vault and a four-digit code, drawn from `seed`."""
    rng = random.Random(f"needles:{seed}")
    names = rng.sample([f"{c} {a}" for c in _COLOURS for a in _ANIMALS], len(depths))
    codes = rng.sample(range(1000, 10000), len(depths))
    return tuple(Needle(n, str(c), d) for n, c, d in zip(names, codes, depths, strict=True))


@functools.lru_cache(maxsize=8)
def _pool(seed: int) -> tuple[str, ...]:
    """The run's filler sentences (the haystack draws from them in the seed's order)."""
    rng = random.Random(f"filler:{seed}")
    sentences: set[str] = set()
    while len(sentences) < _POOL:
        adjective, other = rng.sample(_ADJECTIVES, 2)
        noun, place = rng.sample(_NOUNS, 2)
        sentences.add(
            f"The {adjective} {noun} {rng.choice(_VERBS)} the {other} {place} "
            f"{rng.choice(_PLACES)}."
        )
    return tuple(sorted(sentences))


def _sentence_tokens(tokenizer: Tokenizer, seed: int) -> tuple[int, ...]:
    """Each pool sentence's tokens as it stands in running text (after a space; a millisecond)."""
    encode = tokenizer.encode_ordinary
    return tuple(len(encode(f" {s}")) for s in _pool(seed))


def _filler(profile: Profile, seed: int, budget: int, part: str = "") -> list[str]:
    """Filler sentences whose tokens add up to about `budget` (within one sentence).

    Each `part` draws its own order from the pool.
    """
    pool, sizes = _pool(seed), _sentence_tokens(profile.tokenizer, seed)
    rng = random.Random(f"order:{seed}{part}")
    chosen: list[str] = []
    total = 0
    while total < budget:
        at = rng.randrange(len(pool))
        chosen.append(pool[at])
        total += sizes[at]
    return chosen


def prose(profile: Profile, seed: int, tokens: int, part: str) -> str:
    """Filler text of about `tokens` tokens (within a sentence), in `part`'s own order."""
    return " ".join(_filler(profile, seed, tokens, f":{part}"))


def _text(sentences: Sequence[str], placed: Sequence[Needle], lead: str = "") -> str:
    """The sentences with each needle inserted at its depth, after `lead`."""
    out = list(sentences)
    for needle in sorted(placed, key=lambda n: n.depth, reverse=True):
        out.insert(round(needle.depth * len(sentences)), needle.sentence)
    return " ".join([lead, *out] if lead else out)


def build(
    profile: Profile,
    tokens: int,
    seed: int,
    placed: Sequence[Needle] = (),
    question: str = SUMMARY_QUESTION,
    lead: str = "",
) -> tuple[Haystack, int]:
    """The haystack whose prompt (asking `question`) is at most `tokens` long, and its length.

    Its length is the profile's exact count of the rendered prompt: within a sentence or two
    of `tokens` (a filler sentence is a dozen tokens), never over. The other questions of
    the same needles differ from `question` by a few tokens; each prompt is counted anew.
    `lead` opens the haystack (a nonce that makes its prefix one no cache has seen).
    """
    bare = Haystack(_text([], placed, lead), tuple(placed))
    overhead = count(profile, bare, question)
    sentences = _filler(profile, seed, max(tokens - overhead, 0))
    while True:
        hay = Haystack(_text(sentences, placed, lead), tuple(placed))
        length = count(profile, hay, question)
        if length <= tokens or not sentences:
            return hay, length
        # Counted apart, the sentences fell short of the whole by a token here and there.
        over = length - tokens
        sentences = sentences[: len(sentences) - max(1, over // 16)]


def count(profile: Profile, hay: Haystack, question: str) -> int:
    """The prompt's length under the profile's template and tokenizer."""
    return len(reference(profile, hay.conversation(question)).ids)
