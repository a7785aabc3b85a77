"""Generation defaults: the model's own sampling values applied when the client omits them.

A model's ``generation_config.json`` states the sampling values its lab tuned it for (Qwen3:
temperature 0.6, top_p 0.95, top_k 20); a server must use them where a request leaves them
out (vLLM does by default; ``--generation-config vllm`` does not). From outside, with a seed:
a request that omits the values must sample exactly as the same request that states them.

One seed decides nothing: two settings can give the same sample, and a server can fail to
reproduce its own. So each of :data:`SEEDS` seeds gets three requests, in an order drawn from
the seed: the stated values twice and the values left out once. A seed is

- ``same``: the omitted-values sample is the stated one;
- ``differs``: it is not, and the stated sample reproduced (the control);
- ``noisy``: it is not, and the stated sample did not reproduce either.

The rule (:func:`decide`): the defaults are *not applied* when every one of the
:data:`SEEDS` seeds differs; *applied* when at least ``SEEDS - 1`` are the same; anything
else is undecided (the check is unsupported, saying why). It stops asking once the outcome
is fixed: 9 requests for a pass, 12 for a failure (then two more per default, to name the
values whose omission alone changes the sample).

Its error rates, with ``SEEDS`` = 4 (the README gives the measurements behind them):

- false alarm (the server applies the defaults and the rule says it does not): every seed
  must look ``differs`` by chance. Where a server's answers to a repeated request are
  independent draws, a seed does with probability sum(p^2 (1 - p)) over its answers'
  probabilities p, at most 1/4 (two equally likely answers): at most (1/4)^4 = 0.39%. The
  random order makes the omitted request the odd one out of a two-to-one split with
  probability 1/3 whatever the noise, as long as it does not read the request's sampling
  values (round robin between replicas that sample differently, say): at most (1/3)^4 = 1.2%.
  A server that reproduces its samples (vLLM, and llama-server one request at a time, as
  measured) never gives one.
- miss (the server samples with other values and the rule says they are applied): at least
  ``SEEDS - 1`` seeds must give the same sample under both settings. If c is the chance of
  that on one seed, at most 4c^3(1 - c) + c^4 (below 0.1% while c < 6%); the corpus prompt
  asks for a sentence of 32 tokens, where SmolLM2's release values and an engine's own gave
  the same sample in 0 of 120 seeds (llama-server) and 0 of 80 (vLLM).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...outcome import Finding
from ...protocol.answers import ChatResult
from .tool_matching import calls_of, signature

# Seeds asked (k): every one must differ for a failure; all but one must agree for a pass.
SEEDS = 4
# Seeds each default is left out alone on, after a failure: it is named when both change.
BLAME_SEEDS = 2
# The three requests of a seed: the stated values, the same again, the values left out.
STATED, AGAIN, OMITTED = "stated", "again", "omitted"

Kind = Literal["same", "differs", "noisy"]
Ruling = Literal["applied", "not_applied", "undecided"]


def sample_of(result: ChatResult) -> tuple[Any, ...]:
    """What a sampled answer said: its content, its reasoning and its calls (parsed)."""
    choice = result.choice
    if choice is None:
        return (None, None, None)
    return (choice.content, choice.reasoning, signature(calls_of(choice)))


def said_nothing(result: ChatResult) -> bool:
    """The answer has no text, reasoning or call: it shows no sample to compare."""
    content, reasoning, calls = sample_of(result)
    return not content and not reasoning and not calls


def order(seed: int) -> list[str]:
    """The order of a seed's three requests, drawn from the seed (pure).

    A server whose noise follows the order of requests (round robin between replicas)
    cannot make the omitted request the odd one out more often than by chance.
    """
    names = [STATED, AGAIN, OMITTED]
    random.Random(f"generation-defaults:{seed}").shuffle(names)
    return names


@dataclass(frozen=True)
class Trial:
    """One seed's three answers: the stated values twice, the values left out once."""

    seed: int
    stated: ChatResult
    again: ChatResult
    omitted: ChatResult

    @property
    def kind(self) -> Kind:
        """``same``, ``differs`` (the control reproduced) or ``noisy`` (it did not)."""
        stated = sample_of(self.stated)
        if sample_of(self.omitted) == stated:
            return "same"
        return "differs" if sample_of(self.again) == stated else "noisy"


def decide(kinds: Sequence[Kind], seeds: int = SEEDS) -> Ruling | None:
    """The rule over the seeds asked so far; None while another seed could change it (pure).

    Not applied: all `seeds` seeds differ. Applied: at least ``seeds - 1`` are the same.
    Undecided: neither can be reached any more.
    """
    same = kinds.count("same")
    if len(kinds) == seeds and kinds.count("differs") == seeds:
        return "not_applied"
    if same >= seeds - 1:
        return "applied"
    failure_possible = all(k == "differs" for k in kinds) and len(kinds) < seeds
    pass_possible = len(kinds) - same <= 1 and len(kinds) < seeds
    return None if failure_possible or pass_possible else "undecided"


def undecided_reason(trials: Sequence[Trial]) -> str:
    """Why the seeds decide nothing, in one sentence (pure)."""
    kinds = [t.kind for t in trials]
    noisy = [t.seed for t in trials if t.kind == "noisy"]
    if noisy:
        seeds = ", ".join(map(str, noisy))
        return (
            f"the same seed and sampling values gave different samples (seed {seeds}), so a "
            "sample cannot show which values the server applied"
        )
    return (
        f"leaving the model's generation defaults out kept the sample on {kinds.count('same')} "
        f"of {len(kinds)} seeds and changed it on {kinds.count('differs')}: too few either way "
        f"to decide (a pass needs {SEEDS - 1} of {SEEDS} the same, a failure all {SEEDS} changed)"
    )


def defaults_findings(
    defaults: Mapping[str, float],
    trials: Sequence[Trial],
    without: Mapping[str, Sequence[ChatResult]],
) -> list[Finding]:
    """The finding for seeds that all differ; none when the rule says applied (pure).

    Args:
        defaults: the model's generation defaults, stated in the ``stated`` requests and
            left out of the ``omitted`` ones.
        trials: the seeds asked, in order.
        without: for each default, the answers to the first seeds' stated request leaving
            that one alone out (asked only after a failure; a refused or unreadable answer
            is left out of the list).
    """
    if decide([t.kind for t in trials]) != "not_applied":
        return []
    blamed = [
        name
        for name, results in sorted(without.items())
        if len(results) == BLAME_SEEDS
        and all(sample_of(r) != sample_of(t.stated) for r, t in zip(results, trials, strict=False))
    ]
    stated_text = ", ".join(f"{k}={v}" for k, v in sorted(defaults.items()))
    if blamed:
        named = ", ".join(f"{name}={defaults[name]}" for name in blamed)
        verb = "is" if len(blamed) == 1 else "are"
        why = (
            f"leaving out {' or '.join(blamed)} alone changes it too on {BLAME_SEEDS} of "
            f"{BLAME_SEEDS} seeds: {named} {verb} not applied"
        )
    else:
        why = f"no one value left out alone changes it on {BLAME_SEEDS} of {BLAME_SEEDS} seeds"
    first = trials[0]
    return [
        Finding(
            "defaults_not_applied",
            f"on each of {len(trials)} seeds, the request that leaves the model's generation "
            f"defaults out ({stated_text}) samples differently from the one that states them, "
            f"whose sample the same request reproduced; {why}",
            "$.choices[0].message",
            expected=_shown(first.stated),
            actual=_shown(first.omitted),
            attempt=f"seed-{first.seed}-{OMITTED}",
        )
    ]


def _shown(result: ChatResult) -> Any:
    content, reasoning, _ = sample_of(result)
    return content if not reasoning else {"reasoning": reasoning, "content": content}
