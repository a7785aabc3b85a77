"""defaults_not_applied: the decision rule, its error rates, and the check as an exchange.

The rule (verifier/checks/support/defaults.py) reads four seeds, each asked with the model's
generation defaults stated twice and left out once, in an order drawn from the seed. Its
error rates are computed here exactly, by walking every sequence of seed kinds through
:func:`decide` itself, and checked against the figures the README states; the wire check is
then driven with simulated servers (one that applies the defaults, one that ignores them,
one whose replicas answer differently in turn) to show the exchange follows the rule.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_exchange import REFUSED, corpus_case, replay, said
from verifier import ChatResult, RunContext, Status
from verifier.checks.support.defaults import (
    AGAIN,
    OMITTED,
    SEEDS,
    STATED,
    Kind,
    Trial,
    decide,
    defaults_findings,
    order,
)
from verifier.protocol.requests import Chat, Request

# The small profile's defaults (tests/small_tokenizer.py), and what an engine uses instead.
DEFAULTS = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
ENGINE = {"temperature": 1.0, "top_p": 1.0, "top_k": -1}
# The rates the README states.
FALSE_ALARM_INDEPENDENT = (1 / 4) ** SEEDS  # 0.39%
FALSE_ALARM_EXCHANGEABLE = (1 / 3) ** SEEDS  # 1.2%


def miss_rate(c: float) -> float:
    """At least SEEDS - 1 of SEEDS seeds coincide, each with probability c."""
    return SEEDS * c ** (SEEDS - 1) * (1 - c) + c**SEEDS


def ruling_odds(kinds: Mapping[Kind, float]) -> dict[str, float]:
    """Each ruling's probability when every seed is of each kind with the given probability,
    independently: every sequence walked through decide(), stopping where it stops."""
    odds: dict[str, float] = defaultdict(float)

    def walk(asked: list[Kind], probability: float) -> None:
        ruling = decide(asked)
        if ruling is not None:
            odds[ruling] += probability
            return
        for kind, p in kinds.items():
            if p > 0:
                walk([*asked, kind], probability * p)

    walk([], 1.0)
    return dict(odds)


def independent_noise(answers: Sequence[float]) -> dict[Kind, float]:
    """Seed kinds of a server that applies the defaults and gives each answer with the given
    probabilities, independently for each request."""
    total = sum(answers)
    p = [a / total for a in answers]
    same = sum(x * x for x in p)
    differs = sum(x * x * (1 - x) for x in p)
    return {"same": same, "differs": differs, "noisy": max(0.0, 1 - same - differs)}


# The rule, seed by seed.


@pytest.mark.parametrize(
    ("kinds", "ruling"),
    [
        ([], None),
        (["differs"] * 3, None),
        (["differs"] * 4, "not_applied"),
        (["same"] * 3, "applied"),
        (["differs", "same", "same", "same"], "applied"),
        (["noisy", "same", "same", "same"], "applied"),
        (["differs", "same"], None),
        (["differs", "differs", "same"], "undecided"),
        (["noisy", "noisy"], "undecided"),
        (["differs", "differs", "differs", "noisy"], "undecided"),
        (["same", "same", "differs", "noisy"], "undecided"),
    ],
)
def test_the_rule_seed_by_seed(kinds: list[Kind], ruling: str | None) -> None:
    assert decide(kinds) == ruling


@given(st.lists(st.sampled_from(["same", "differs", "noisy"]), min_size=SEEDS, max_size=SEEDS))
def test_stopping_early_never_changes_the_ruling(kinds: list[Kind]) -> None:
    """The ruling where the check stops is the one all four seeds would give."""
    stops = next(n for n in range(SEEDS + 1) if decide(kinds[:n]) is not None)
    full = decide(kinds)
    assert full is not None
    assert decide(kinds[:stops]) == full


def test_a_seed_is_same_differs_or_noisy() -> None:
    otter, lynx, heron = said("Otter."), said("Lynx."), said("Heron.")
    assert Trial(1, otter, lynx, otter).kind == "same"
    assert Trial(1, otter, otter, lynx).kind == "differs"
    assert Trial(1, otter, heron, lynx).kind == "noisy"


def test_each_seed_asks_its_three_requests_in_an_order_of_its_own() -> None:
    orders = {tuple(order(seed)) for seed in range(60)}
    assert all(sorted(o) == sorted((STATED, AGAIN, OMITTED)) for o in orders)
    assert len(orders) == 6
    assert order(7) == order(7)


# The error rates.


@given(st.floats(0, 1))
def test_the_miss_rate_is_three_coincidences_in_four_seeds(c: float) -> None:
    """A server that ignores the defaults and reproduces its samples: each seed is the same
    by coincidence (probability c) or differs."""
    odds = ruling_odds({"same": c, "differs": 1 - c})
    assert odds.get("applied", 0) == pytest.approx(miss_rate(c), abs=1e-12)
    assert odds.get("not_applied", 0) == pytest.approx((1 - c) ** SEEDS, abs=1e-12)


def test_the_miss_rate_the_readme_states() -> None:
    """Below 0.1% while one seed's coincidence stays under 6% (0 of 50 were measured)."""
    assert miss_rate(0.06) < 0.001


@given(st.lists(st.floats(0.001, 1), min_size=1, max_size=6))
def test_false_alarms_of_a_server_whose_answers_are_independent_draws(
    answers: list[float],
) -> None:
    """Whatever the spread of its answers, at most (1/4)^4 = 0.39%."""
    odds = ruling_odds(independent_noise(answers))
    assert odds.get("not_applied", 0) <= FALSE_ALARM_INDEPENDENT + 1e-12


def test_two_equally_likely_answers_are_the_worst_independent_noise() -> None:
    odds = ruling_odds(independent_noise([1, 1]))
    assert odds["not_applied"] == pytest.approx(FALSE_ALARM_INDEPENDENT)
    assert FALSE_ALARM_INDEPENDENT < 0.004


@given(st.floats(0, 1), st.floats(0, 1))
def test_false_alarms_of_a_server_whose_noise_follows_the_order_of_requests(
    split: float, distinct: float
) -> None:
    """Noise that does not read the request: a seed's three answers split two to one with
    probability `split` (the odd one any of the three positions, the order random), are all
    different with probability `distinct` of the rest, else all agree."""
    rest = 1 - split
    kinds: dict[Kind, float] = {
        "differs": split / 3,
        "same": split / 3 + rest * (1 - distinct),
        "noisy": split / 3 + rest * distinct,
    }
    odds = ruling_odds(kinds)
    assert odds.get("not_applied", 0) <= FALSE_ALARM_EXCHANGEABLE + 1e-12
    assert FALSE_ALARM_EXCHANGEABLE < 0.013


# The check as an exchange, against simulated servers.

Answer = Callable[[Request], ChatResult]


def server(
    applies: bool = True, coincide: Iterable[int] = (), replicas: int = 1, refuse: str = ""
) -> Answer:
    """A seeded server whose sample is a function of the seed, the values in effect and, with
    `replicas`, the replica that answers (round robin, each sampling differently).

    Args:
        applies: where a request leaves a default out, the server uses it (else its own).
        coincide: seeds where the engine's values happen to give the model's sample.
        replicas: replicas answering in turn.
        refuse: a request name the server refuses (400).
    """
    turn = itertools.count()
    coincidences = set(coincide)

    def answer(request: Request) -> ChatResult:
        assert isinstance(request, Chat)
        if refuse and request.name == refuse:
            return REFUSED
        body = request.body
        fallback = DEFAULTS if applies else ENGINE
        values = {k: body.get(k, fallback[k]) for k in DEFAULTS}
        seed = body["seed"]
        setting = "model" if values == DEFAULTS or seed in coincidences else repr(values)
        return said(f"Sample {seed} {setting} {next(turn) % replicas}.")

    return answer


def check(answer: Answer, seed: int = 7, small_profile: Any = None) -> tuple[Any, list[Request]]:
    return replay(
        corpus_case("wire", "generation-defaults"),
        answer,
        RunContext(model="m", seed=seed, profile=small_profile),
    )


def test_a_server_that_applies_the_defaults_passes_after_three_seeds(small_profile: Any) -> None:
    outcome, asked = check(server(), small_profile=small_profile)
    assert outcome.status is Status.PASS
    assert outcome.metrics["seeds"] == ["same"] * 3
    assert outcome.metrics["requests"] == len(asked) == 9
    bodies = {r.name: r.body for r in asked if isinstance(r, Chat)}
    assert {k: bodies["seed-7-stated"][k] for k in (*DEFAULTS, "seed")} == {**DEFAULTS, "seed": 7}
    assert not {*DEFAULTS} & set(bodies["seed-7-omitted"])
    assert bodies["seed-9-again"] == bodies["seed-9-stated"]
    assert [r.name for r in asked[:3]] == [f"seed-7-{name}" for name in order(7)]


def test_a_server_that_ignores_the_defaults_is_found_and_the_values_named(
    small_profile: Any,
) -> None:
    """Every seed differs; then each default left out alone on two seeds (six requests)."""
    outcome, asked = check(server(applies=False), small_profile=small_profile)
    assert [f.code for f in outcome.findings] == ["defaults_not_applied"]
    assert outcome.metrics["seeds"] == ["differs"] * SEEDS
    assert outcome.metrics["requests"] == len(asked) == 3 * SEEDS + 2 * len(DEFAULTS)
    assert "on each of 4 seeds" in outcome.message
    assert (
        "leaving out temperature or top_k or top_p alone changes it too on 2 of 2 seeds"
        in outcome.message
    )
    assert outcome.findings[0].attempt == "seed-7-omitted"


def test_one_value_is_named_only_where_leaving_it_out_changes_both_seeds(
    small_profile: Any,
) -> None:
    base = server(applies=False)

    def answer(request: Request) -> ChatResult:
        # Leaving out top_k or top_p alone keeps the stated sample on one seed of the two.
        if request.name in ("seed-7-without-top_k", "seed-8-without-top_p"):
            assert isinstance(request, Chat)
            return said(f"Sample {request.body['seed']} model 0.")
        return base(request)

    outcome, _ = check(answer, small_profile=small_profile)
    assert "leaving out temperature alone changes it too on 2 of 2 seeds: temperature=0.6 is " in (
        outcome.message
    )


def test_a_refused_blame_request_names_nothing(small_profile: Any) -> None:
    outcome, _ = check(
        server(applies=False, refuse="seed-8-without-temperature"), small_profile=small_profile
    )
    assert "leaving out top_k or top_p alone" in outcome.message


def test_one_coincidence_is_no_pass_and_no_failure(small_profile: Any) -> None:
    """The engine's values happen to give the model's sample on the first seed: one sample
    would have passed this server (main's rule); four seeds leave it undecided."""
    outcome, asked = check(server(applies=False, coincide=[7]), small_profile=small_profile)
    assert outcome.status is Status.UNSUPPORTED
    assert "kept the sample on 1 of 3 seeds and changed it on 2: too few" in outcome.message
    assert outcome.metrics["seeds"] == ["same", "differs", "differs"]
    assert outcome.metrics["requests"] == len(asked) == 9


def test_three_coincidences_pass_which_is_the_miss_the_rate_bounds(small_profile: Any) -> None:
    outcome, _ = check(server(applies=False, coincide=[7, 8, 9]), small_profile=small_profile)
    assert outcome.status is Status.PASS


def test_a_server_that_does_not_reproduce_its_samples_is_undecided(small_profile: Any) -> None:
    turn = itertools.count()
    outcome, asked = check(lambda _: said(f"Sample {next(turn)}."), small_profile=small_profile)
    assert outcome.status is Status.UNSUPPORTED
    assert "cannot show which values the server applied" in outcome.message
    assert outcome.metrics["seeds"] == ["noisy", "noisy"]
    assert outcome.metrics["requests"] == len(asked) == 6


def test_one_answer_in_three_perturbed_by_its_position_is_no_failure(small_profile: Any) -> None:
    """Every third answer comes out otherwise (a replica in turn): asked stated, stated,
    omitted in that order, as main did, every seed would look as if the defaults were not
    applied. In an order drawn per seed, a failure needs the omitted one third four times."""
    turn = itertools.count()
    base = server()

    def answer(request: Request) -> ChatResult:
        result = base(request)
        return said("Perturbed.") if next(turn) % 3 == 2 else result

    outcome, _ = check(answer, small_profile=small_profile)
    assert outcome.status is not Status.FAIL


def test_replicas_in_turn_give_false_alarms_at_the_stated_rate(small_profile: Any) -> None:
    """Two replicas answering in turn, each applying the defaults and sampling otherwise: a
    seed's answers always split two to one, so a failure is the omitted request odd one out
    four times, (1/3)^4. Over 1,500 runs (seeds 0, 4, 8, ...): within four standard errors."""
    runs = 1500
    statuses: Counter[Status] = Counter()
    for run in range(runs):
        outcome, _ = check(server(replicas=2), seed=run * SEEDS, small_profile=small_profile)
        statuses[outcome.status] += 1
    rate = statuses[Status.FAIL] / runs
    error = (FALSE_ALARM_EXCHANGEABLE * (1 - FALSE_ALARM_EXCHANGEABLE) / runs) ** 0.5
    assert abs(rate - FALSE_ALARM_EXCHANGEABLE) < 4 * error, statuses
    assert statuses[Status.PASS] + statuses[Status.UNSUPPORTED] + statuses[Status.FAIL] == runs


def test_an_empty_answer_shows_no_sample(small_profile: Any) -> None:
    outcome, _ = check(lambda _: said(""), small_profile=small_profile)
    assert outcome.status is Status.UNSUPPORTED
    assert "has no text, reasoning or call: it shows no sample" in outcome.message


def test_a_refused_request_is_unsupported_in_the_servers_words(small_profile: Any) -> None:
    outcome, asked = check(lambda _: REFUSED, small_profile=small_profile)
    assert (outcome.status, outcome.code) == (Status.UNSUPPORTED, "rejected")
    assert len(asked) == 1


def test_without_defaults_in_the_contract_nothing_is_asked() -> None:
    outcome, asked = check(server())
    assert outcome.status is Status.UNSUPPORTED
    assert asked == []


def test_no_finding_unless_every_seed_differs() -> None:
    otter, lynx = said("Otter."), said("Lynx.")
    differs = [Trial(s, otter, otter, lynx) for s in range(SEEDS)]
    assert [f.code for f in defaults_findings(DEFAULTS, differs, {})] == ["defaults_not_applied"]
    assert defaults_findings(DEFAULTS, differs[:3], {}) == []
    same = [*differs[:3], Trial(3, otter, otter, otter)]
    assert defaults_findings(DEFAULTS, same, {}) == []
    message = defaults_findings(DEFAULTS, differs, {})[0].message
    assert "no one value left out alone changes it on 2 of 2 seeds" in message
