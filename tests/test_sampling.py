"""The simulated model's sampled picks: greedy at temperature 0, seeded, within top_k."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from verifier.simulator.sampling import ENGINE_DEFAULTS, PICKS, WORDS, effective, pick
from verifier.simulator.validation import Policy, with_declared_tools

ASKED = "Write a sentence about an animal chosen at random."


def test_only_a_pick_at_random_is_sampled() -> None:
    assert pick("Say hello.", {"seed": 1}, {}) is None
    assert pick(ASKED, {"seed": 1, "temperature": 0}, {}) == ", ".join([WORDS[0]] * PICKS)


@given(seed=st.integers(), top_k=st.integers(1, len(WORDS)))
def test_a_pick_is_seeded_and_within_top_k(seed: int, top_k: int) -> None:
    request = {"seed": seed, "temperature": 0.7, "top_k": top_k}
    assert pick(ASKED, request, {}) == pick(ASKED, request, {})
    picked = pick(ASKED, request, {})
    assert picked is not None
    assert set(picked.split(", ")) <= set(WORDS[:top_k])


def test_omitted_values_come_from_the_model_then_the_engine() -> None:
    defaults = {"temperature": 0.6, "top_k": 20}
    assert effective({"top_k": 5}, defaults) == {**ENGINE_DEFAULTS, "temperature": 0.6, "top_k": 5}


def test_tools_declared_in_a_system_message_join_the_others_where_the_contract_has_them() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    user = {"role": "user", "content": "hi"}
    request = {"messages": [{"role": "system", "tools": [tool]}, user]}
    assert with_declared_tools(request, Policy(dynamic_tools=True)) == {
        "messages": [user],
        "tools": [tool],
    }
    assert with_declared_tools(request, Policy()) == {"messages": [{"role": "system"}, user]}
