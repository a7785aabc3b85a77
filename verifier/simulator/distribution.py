"""The simulated model's per-token distributions, as ``logprobs`` reports them (pure).

The toy model's text is fixed by rules (:mod:`~verifier.simulator.rules`); this module gives
each of its tokens a plausible distribution. At every position a seeded table gives logits:
the emitted token's is 0, 19 alternatives (word-like tokens from :data:`VOCABULARY`) lie
between -8 and -1, and the rest of the vocabulary is lumped into one logit between -4 and -1
that is never reported. Logprobs are the log-softmax over the 21.

The table's seed is a hash of the prompt (the request's messages and tools), the position
and the token, so the same request always gets the same numbers. A :class:`Perturbation`
moves them as real serving does: converted weights (deterministic per prompt), a warm
prefix cache (deterministic, only on a repeated prompt) and batch-dependent kernels (noise
that differs from request to request). None of them changes which token is emitted.

A one-token answer at a temperature above 0 is the exception: its token is drawn from the
first position's distribution, perturbations included (:func:`sample`), which is what a
client that cannot see logprobs compares vendors by.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import threading
from collections.abc import Mapping
from typing import Any

# How many alternatives each position has: with the emitted token, the 20 top_logprobs
# OpenAI's API allows at most.
ALTERNATIVES = 19
MAX_TOP_LOGPROBS = ALTERNATIVES + 1
# The standard deviation of the shift a warm prefix cache gives the logits (kv-cache-divergence).
WARM_SIGMA = 0.05
# How far below the emitted token's logit a perturbed alternative is held.
CLAMP_GAP = 1e-3
# Logprobs are reported rounded to this many decimals (far finer than CLAMP_GAP, so rounding
# never ties an alternative with the emitted token).
DECIMALS = 6

# Word-like tokens the alternatives are drawn from: short, each with its leading space.
VOCABULARY: tuple[str, ...] = tuple(
    " " + word
    for word in (
        "the a an and or but if then so as of to in on at by for with from into over under "
        "about after before between through during without within along across behind "
        "beyond near is are was were be been being has have had do does did can could "
        "will would shall should may might must not no yes this that these those it its "
        "he she they we you I me him her them us my your our their who what which when "
        "where why how all any some many much more most few less least each every other "
        "such only also just very still even here there now well up down out off again "
        "model token answer question word text name time day year way thing world life "
        "hand part place case point group number fact idea water house city story work "
        "data value result system order state line set list field type call tool file "
        "code test run step end start first last next new old good great small large "
        "long short high low right left same different simple clear true false open "
        "close make take give find tell ask use know think see look want need try help "
        "show play move live hold bring write read say said one two three four five"
    ).split()
)


@dataclasses.dataclass(frozen=True, slots=True)
class Logits:
    """One position's logits.

    Args:
        token: the token the model emits here.
        chosen: the emitted token's logit.
        alternatives: the other reportable tokens with their logits.
        rest: the rest of the vocabulary lumped into one logit (never reported).
    """

    token: str
    chosen: float
    alternatives: tuple[tuple[str, float], ...]
    rest: float


@dataclasses.dataclass(frozen=True, slots=True)
class Perturbation:
    """How one request's distributions move from the model's own (the default: not at all).

    Args:
        weights: the standard deviation of converted weights' shift of every logit; the
            same prompt is always shifted alike.
        warm: answered from a warm prefix cache: a fixed shift of :data:`WARM_SIGMA`.
        noise: the standard deviation of batch-dependent kernel noise on every logit,
            drawn anew for every request.
        seed: the vendor's seed, with `number` the noise's seed.
        number: the request's number (1, 2, ... as requests arrive).
    """

    weights: float = 0.0
    warm: bool = False
    noise: float = 0.0
    seed: int = 0
    number: int = 0


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_digest(request: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of the request's prompt: canonical JSON of its messages and tools."""
    prompt: dict[str, Any] = {"messages": request.get("messages")}
    if request.get("tools"):
        prompt["tools"] = request["tools"]
    return _sha256(_canonical(prompt))


def position_key(digest: str, position: int, token: str) -> str:
    """The seed of one position's table: a hash of the prompt's digest, position and token."""
    return _sha256(_canonical([digest, position, token]))


def model_logits(key: str, token: str) -> Logits:
    """The model's own logits at the position whose table `key` seeds, emitting `token`."""
    rng = random.Random(key)
    words = rng.sample([w for w in VOCABULARY if w != token], ALTERNATIVES)
    alternatives = tuple((word, -rng.uniform(1.0, 8.0)) for word in words)
    return Logits(token, 0.0, alternatives, -rng.uniform(1.0, 4.0))


def shifted(logits: Logits, rng: random.Random, sigma: float) -> Logits:
    """`logits` with N(0, `sigma`) added to every one, drawn from `rng` in a fixed order."""
    return Logits(
        logits.token,
        logits.chosen + rng.gauss(0.0, sigma),
        tuple((word, value + rng.gauss(0.0, sigma)) for word, value in logits.alternatives),
        logits.rest + rng.gauss(0.0, sigma),
    )


def greedy(logits: Logits) -> Logits:
    """`logits` with every alternative held below the emitted token's.

    The toy's text is fixed, so a perturbation may move probabilities but never the greedy
    choice: an alternative that would reach the emitted token is held just below it.
    """
    ceiling = logits.chosen - CLAMP_GAP
    return dataclasses.replace(
        logits,
        alternatives=tuple((word, min(value, ceiling)) for word, value in logits.alternatives),
    )


def distribution(
    digest: str, position: int, token: str, perturbation: Perturbation | None = None
) -> Logits:
    """The logits at `position` of an answer to the prompt `digest`, emitting `token`.

    The perturbations apply in a fixed order (weights, warm cache, noise), each from its own
    seed; the emitted token stays the most likely.
    """
    perturbation = perturbation or Perturbation()
    key = position_key(digest, position, token)
    logits = model_logits(key, token)
    if perturbation.weights:
        logits = shifted(logits, random.Random(key + "weights"), perturbation.weights)
    if perturbation.warm:
        logits = shifted(logits, random.Random(key + "warm"), WARM_SIGMA)
    if perturbation.noise:
        seed = f"logit-noise:{perturbation.seed}:{perturbation.number}:{position}"
        logits = shifted(logits, random.Random(seed), perturbation.noise)
    return greedy(logits)


def sample(logits: Logits, temperature: float, seed: str) -> str:
    """A token drawn from `logits` at `temperature`, seeded by `seed`.

    Drawing the lumped rest of the vocabulary gives a word that is not among the alternatives.
    """
    draw = random.Random(f"sample:{seed}")
    named = [(logits.token, logits.chosen), *logits.alternatives]
    values = [value for _, value in named] + [logits.rest]
    peak = max(values)
    weights = [math.exp((value - peak) / temperature) for value in values]
    picked = draw.choices(range(len(values)), weights=weights)[0]
    if picked < len(named):
        return named[picked][0]
    listed = {token for token, _ in named}
    return draw.choice([word for word in VOCABULARY if word not in listed])


def best_swapped(logits: Logits) -> Logits:
    """`logits` with the emitted token's and the best alternative's values exchanged."""
    best = max(range(len(logits.alternatives)), key=lambda i: logits.alternatives[i][1])
    word, value = logits.alternatives[best]
    alternatives = list(logits.alternatives)
    alternatives[best] = (word, logits.chosen)
    return dataclasses.replace(logits, chosen=value, alternatives=tuple(alternatives))


def logprobs(logits: Logits) -> dict[str, float]:
    """The log-softmax of the emitted token and its alternatives (the rest's mass included)."""
    values = [logits.chosen, *(value for _, value in logits.alternatives), logits.rest]
    peak = max(values)
    total = peak + math.log(sum(math.exp(value - peak) for value in values))
    found = {word: value - total for word, value in logits.alternatives}
    found[logits.token] = logits.chosen - total
    return found


def _item(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": round(logprob, DECIMALS), "bytes": list(token.encode())}


def entry(logits: Logits, top: int) -> dict[str, Any]:
    """The ``logprobs.content`` entry of a position, with its `top` most likely tokens.

    `top_logprobs` lists them most likely first (ties by token); every logprob is rounded to
    :data:`DECIMALS` decimals.
    """
    found = logprobs(logits)
    ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
    return {
        **_item(logits.token, found[logits.token]),
        "top_logprobs": [_item(token, logprob) for token, logprob in ranked[:top]],
    }


class PromptMemory:
    """The prompts a vendor process has answered, by digest (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[str] = set()

    def answered_before(self, digest: str) -> bool:
        """Whether the prompt `digest` was answered before; it counts as answered from now."""
        with self._lock:
            seen = digest in self._seen
            self._seen.add(digest)
            return seen
