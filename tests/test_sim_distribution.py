"""The simulated vendor's per-token distributions, their perturbations and their defects.

Unit tests of the pure functions (verifier/simulator/distribution.py), of the answer's
logprobs under each parity defect (verifier/simulator/wire_answers.py), and over HTTP against
``verifier simulate`` with the openai SDK.
"""

from __future__ import annotations

import json
import math
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.simulator.defects import parse_defects
from verifier.simulator.distribution import (
    ALTERNATIVES,
    CLAMP_GAP,
    MAX_TOP_LOGPROBS,
    VOCABULARY,
    Logits,
    Perturbation,
    PromptMemory,
    best_swapped,
    distribution,
    entry,
    greedy,
    logprobs,
    model_logits,
    position_key,
    prompt_digest,
    sample,
)
from verifier.simulator.process import SimulatorProcess
from verifier.simulator.rules import MODEL_ID, ToyPath, respond, tokenize
from verifier.simulator.validation import Policy, request_problem
from verifier.simulator.wire_answers import (
    completion_body,
    logprobs_of,
    one_token_sampled,
    stream_events,
)

tokens = st.one_of(st.sampled_from(VOCABULARY), st.text(min_size=1, max_size=6))
digests = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
positions = st.integers(min_value=0, max_value=500)
tops = st.integers(min_value=0, max_value=MAX_TOP_LOGPROBS)
sigmas = st.floats(min_value=0.0, max_value=10.0)


def request(text: str = "Say hello.", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL_ID, "messages": [{"role": "user", "content": text}], **extra}


def chosen_is_top(logits: Logits) -> bool:
    return all(value <= logits.chosen - CLAMP_GAP for _, value in logits.alternatives)


def distance(a: Logits, b: Logits) -> float:
    """The largest difference between two positions' logprobs."""
    pa, pb = logprobs(a), logprobs(b)
    return max(abs(pa[token] - pb[token]) for token in pa)


# -- the model's own distribution ---------------------------------------------------------


@given(digests, positions, tokens)
def test_the_table_is_a_function_of_prompt_position_and_token(
    digest: str, position: int, token: str
) -> None:
    logits = distribution(digest, position, token)
    assert logits == distribution(digest, position, token)
    assert logits.token == token and logits.chosen == 0.0
    words = [word for word, _ in logits.alternatives]
    assert len(words) == len(set(words)) == ALTERNATIVES
    assert token not in words and set(words) <= set(VOCABULARY)
    assert all(-8.0 <= value <= -1.0 for _, value in logits.alternatives)
    assert -4.0 <= logits.rest <= -1.0


def test_the_key_depends_on_each_part() -> None:
    digest = prompt_digest(request())
    key = position_key(digest, 0, "Hello")
    assert len({key, position_key(digest, 1, "Hello"), position_key(digest, 0, " Hello")}) == 3
    assert model_logits(key, "Hello") != model_logits(position_key(digest, 1, "Hello"), "Hello")


def test_the_prompt_digest_reads_messages_and_tools_only() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    plain = prompt_digest(request())
    assert prompt_digest(request(temperature=0, logprobs=True, top_logprobs=3)) == plain
    assert prompt_digest(request("Say bye.")) != plain
    assert prompt_digest(request(tools=tools)) != plain
    reordered = {"messages": [{"content": "Say hello.", "role": "user"}], "model": "x"}
    assert prompt_digest(reordered) == plain


@given(digests, positions, tokens, tops)
def test_an_entry_lists_the_top_tokens_with_the_chosen_first(
    digest: str, position: int, token: str, top: int
) -> None:
    found = entry(distribution(digest, position, token), top)
    listed = found["top_logprobs"]
    assert len(listed) == top
    assert found["token"] == token and found["bytes"] == list(token.encode())
    assert found["logprob"] < 0
    if listed:
        assert listed[0]["token"] == token and listed[0]["logprob"] == found["logprob"]
    values = [item["logprob"] for item in listed]
    assert values == sorted(values, reverse=True)
    assert all(item["bytes"] == list(item["token"].encode()) for item in listed)
    assert all(round(item["logprob"], 6) == item["logprob"] for item in listed)
    # The rest of the vocabulary keeps some of the mass: what is listed sums to less than 1.
    assert sum(math.exp(value) for value in values) < 1.0


# -- perturbations ------------------------------------------------------------------------


@given(digests, positions, tokens, sigmas, st.booleans(), sigmas, st.integers(0, 99))
def test_no_perturbation_moves_the_greedy_choice(
    digest: str, position: int, token: str, weights: float, warm: bool, noise: float, number: int
) -> None:
    perturbation = Perturbation(weights=weights, warm=warm, noise=noise, number=number)
    logits = distribution(digest, position, token, perturbation)
    assert chosen_is_top(logits)
    found = entry(logits, MAX_TOP_LOGPROBS)
    assert found["top_logprobs"][0]["token"] == token
    assert found["logprob"] == max(item["logprob"] for item in found["top_logprobs"])
    # Rounded logprobs still sum to at most 1, however large the noise.
    assert sum(math.exp(item["logprob"]) for item in found["top_logprobs"]) <= 1.0 + 1e-5


def test_greedy_holds_an_alternative_just_below_the_chosen_token() -> None:
    logits = Logits("a", -0.5, ((" b", 0.3), (" c", -0.5), (" d", -2.0)), -1.0)
    held = greedy(logits)
    assert held.alternatives == ((" b", -0.501), (" c", -0.501), (" d", -2.0))
    assert held.chosen == -0.5 and held.rest == -1.0


@given(digests, positions, tokens, st.integers(0, 5))
def test_noise_moves_values_per_request_but_not_the_choice(
    digest: str, position: int, token: str, seed: int
) -> None:
    clean = distribution(digest, position, token)
    first = distribution(digest, position, token, Perturbation(noise=0.1, seed=seed, number=1))
    again = distribution(digest, position, token, Perturbation(noise=0.1, seed=seed, number=1))
    second = distribution(digest, position, token, Perturbation(noise=0.1, seed=seed, number=2))
    assert first == again
    assert len({clean, first, second}) == 3
    assert chosen_is_top(first) and chosen_is_top(second)
    assert entry(first, 5)["top_logprobs"][0]["token"] == token


def test_noise_depends_on_the_seed() -> None:
    digest = prompt_digest(request())
    one = distribution(digest, 0, "Hello", Perturbation(noise=0.1, seed=1, number=1))
    two = distribution(digest, 0, "Hello", Perturbation(noise=0.1, seed=2, number=1))
    assert one != two


@given(digests, positions, tokens)
def test_converted_weights_shift_alike_every_time_and_more_with_eps(
    digest: str, position: int, token: str
) -> None:
    clean = distribution(digest, position, token)
    shifts = [
        distance(clean, distribution(digest, position, token, Perturbation(weights=eps)))
        for eps in (0.01, 0.05, 0.2)
    ]
    again = distribution(digest, position, token, Perturbation(weights=0.05, number=7))
    assert distribution(digest, position, token, Perturbation(weights=0.05, number=1)) == again
    assert 0 < shifts[0] < shifts[1] < shifts[2]


@given(digests, positions, tokens)
def test_a_warm_cache_shifts_alike_every_time(digest: str, position: int, token: str) -> None:
    cold = distribution(digest, position, token)
    warm = distribution(digest, position, token, Perturbation(warm=True, number=2))
    assert warm == distribution(digest, position, token, Perturbation(warm=True, number=9))
    assert 0 < distance(cold, warm)


def test_the_prompt_memory_says_warm_only_on_a_repeat() -> None:
    memory = PromptMemory()
    first, second = prompt_digest(request()), prompt_digest(request("Say bye."))
    assert [memory.answered_before(d) for d in (first, second, first, first, second)] == [
        False,
        False,
        True,
        True,
        True,
    ]


@given(digests, positions, tokens)
def test_swapping_puts_the_best_alternative_above_the_chosen_token(
    digest: str, position: int, token: str
) -> None:
    found = entry(best_swapped(distribution(digest, position, token)), 3)
    best = found["top_logprobs"][0]
    assert best["token"] != token
    assert best["logprob"] >= found["logprob"] + CLAMP_GAP - 1e-6
    assert found["top_logprobs"][1]["token"] == token


# -- the answer's logprobs and the parity defects -----------------------------------------


def answer(*defects: str, stream: bool = False, **extra: Any) -> Any:
    """The simulated vendor's answer, non-stream (the body) or streamed (the chunks)."""
    asked = request(**{"logprobs": True, "top_logprobs": 4, **extra})
    active = parse_defects(defects)
    reply = respond(asked, active, 1)
    if not stream:
        return completion_body(asked, reply, 1, active, ToyPath(active))
    events = stream_events(asked, reply, 1, active, ToyPath(active))
    return [json.loads(e[6:]) for e in events if e.startswith(b"data: {")]


def streamed_entries(chunks: list[dict[str, Any]]) -> list[Any]:
    return [
        item
        for chunk in chunks
        for choice in chunk["choices"]
        if (choice.get("logprobs") or {}).get("content") is not None
        for item in choice["logprobs"]["content"]
    ]


def test_a_stream_carries_the_non_stream_entries_one_per_content_chunk() -> None:
    body = answer()
    entries = body["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in entries) == body["choices"][0]["message"]["content"]
    chunks = answer(stream=True)
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert all(len(c["choices"][0]["logprobs"]["content"]) == 1 for c in content)
    assert streamed_entries(chunks) == entries


def test_n_choices_share_the_logprobs() -> None:
    first, second = answer(n=2)["choices"]
    assert first["logprobs"] == second["logprobs"]


def test_logprobs_not_top_choice_reports_the_emitted_token_below_another() -> None:
    for entries in (
        answer("logprobs-not-top-choice")["choices"][0]["logprobs"]["content"],
        streamed_entries(answer("logprobs-not-top-choice", stream=True)),
    ):
        assert entries
        for item in entries:
            assert item["top_logprobs"][0]["token"] != item["token"]
            assert item["top_logprobs"][0]["logprob"] > item["logprob"]


def test_logprobs_unavailable_answers_null_everywhere() -> None:
    body = answer("logprobs-unavailable")
    assert [c["logprobs"] for c in body["choices"]] == [None]
    chunks = answer("logprobs-unavailable", stream=True)
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert content and all(c["choices"][0]["logprobs"] is None for c in content)


def test_logprobs_inconsistent_still_drops_the_last_entry() -> None:
    clean = answer()["choices"][0]["logprobs"]["content"]
    assert answer("logprobs-inconsistent")["choices"][0]["logprobs"]["content"] == clean[:-1]


def test_the_space_stream_content_differs_adds_has_an_entry_of_its_own() -> None:
    entries = streamed_entries(answer("stream-content-differs", stream=True))
    clean = answer()["choices"][0]["logprobs"]["content"]
    assert entries[:-1] == clean
    assert entries[-1]["token"] == " " and len(entries[-1]["top_logprobs"]) == 4


def test_without_logprobs_asked_no_chunk_names_them() -> None:
    asked = request()
    active = parse_defects(["logprobs-unavailable"])
    reply = respond(asked, active, 1)
    assert logprobs_of(asked, reply.tokens, active) is None
    assert b"logprobs" not in b"".join(stream_events(asked, reply, 1, active, ToyPath(active)))


def test_weights_perturbed_takes_a_scale() -> None:
    assert parse_defects(["weights-perturbed"]).names() == ["weights-perturbed:0.05"]
    assert parse_defects(["weights-perturbed:0.2"]).names() == ["weights-perturbed:0.2"]
    for bad in ("x", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match="EPS"):
            parse_defects([f"weights-perturbed:{bad}"])


@pytest.mark.parametrize("top", [20, 21, 100])
def test_top_logprobs_above_20_is_refused(top: int) -> None:
    problem = request_problem(request(logprobs=True, top_logprobs=top))
    if top <= MAX_TOP_LOGPROBS:
        assert problem is None
    else:
        assert problem is not None and problem.status == 400
        assert problem.param == "top_logprobs" and "top_logprobs" in problem.message


# -- over HTTP ----------------------------------------------------------------------------


def ask(client: openai.OpenAI, text: str, *, stream: bool = False) -> tuple[str, list[Any]]:
    """The content and the logprobs entries of a greedy answer with 5 alternatives a token."""
    messages: list[Any] = [{"role": "user", "content": text}]
    options: dict[str, Any] = {"temperature": 0, "logprobs": True, "top_logprobs": 5}
    if stream:
        content, entries = "", []
        for chunk in client.chat.completions.create(
            model=MODEL_ID, messages=messages, stream=True, **options
        ):
            for choice in chunk.choices:
                content += choice.delta.content or ""
                if choice.logprobs and choice.logprobs.content:
                    entries += [e.model_dump() for e in choice.logprobs.content]
        return content, entries
    answered = client.chat.completions.create(model=MODEL_ID, messages=messages, **options)
    choice = answered.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    return choice.message.content or "", [e.model_dump() for e in choice.logprobs.content]


def test_over_http_the_same_request_gets_the_same_distribution() -> None:
    with SimulatorProcess([]) as vendor:
        client = openai.OpenAI(base_url=vendor.url, api_key="x", max_retries=0)
        content, entries = ask(client, "Name a colour.")
        assert content and len(entries) == len(tokenize(content))
        assert all(len(e["top_logprobs"]) == 5 for e in entries)
        assert all(e["top_logprobs"][0]["token"] == e["token"] for e in entries)
        assert ask(client, "Name a colour.") == (content, entries)
        assert ask(client, "Name a colour.", stream=True) == (content, entries)
        with pytest.raises(openai.BadRequestError, match="top_logprobs"):
            client.chat.completions.create(
                model=MODEL_ID,
                messages=[{"role": "user", "content": "hi"}],
                logprobs=True,
                top_logprobs=21,
            )


def clean_entries(text: str) -> list[Any]:
    """The entries a vendor without defects or noise gives `text` (top_logprobs 5)."""
    asked = request(text, logprobs=True, top_logprobs=5)
    clean = parse_defects([])
    found = logprobs_of(asked, respond(asked, clean, 1).tokens, clean)
    assert found is not None
    return list(found["content"])


def test_over_http_a_warm_cache_changes_the_second_answer() -> None:
    with SimulatorProcess(["--defect", "kv-cache-divergence"]) as vendor:
        client = openai.OpenAI(base_url=vendor.url, api_key="x", max_retries=0)
        content, first = ask(client, "Name a colour.")
        assert first == clean_entries("Name a colour.")
        again_content, second = ask(client, "Name a colour.")
        assert again_content == content
        assert [e["token"] for e in second] == [e["token"] for e in first]
        assert second != first
        # Warm from the second time on, alike each time, streamed too; a new prompt is cold.
        assert ask(client, "Name a colour.") == (content, second)
        assert ask(client, "Name a colour.", stream=True) == (content, second)
        assert ask(client, "Name a shape.")[1] == clean_entries("Name a shape.")


def test_over_http_logit_noise_moves_every_request() -> None:
    with SimulatorProcess(["--logit-noise", "0.1", "--fault-seed", "3"]) as vendor:
        client = openai.OpenAI(base_url=vendor.url, api_key="x", max_retries=0)
        content, first = ask(client, "Name a colour.")
        again_content, second = ask(client, "Name a colour.")
        assert again_content == content and second != first
        assert all(e["top_logprobs"][0]["token"] == e["token"] for e in first + second)


def test_a_negative_logit_noise_stops_the_vendor() -> None:
    with pytest.raises(RuntimeError, match="logit-noise"):
        SimulatorProcess(["--logit-noise", "-1"])


@settings(max_examples=25)
@given(st.text(min_size=1, max_size=40))
def test_any_prompt_gets_as_many_entries_as_tokens(text: str) -> None:
    asked = request(text, logprobs=True, top_logprobs=2)
    active = parse_defects([])
    reply = respond(asked, active, 1)
    found = logprobs_of(asked, reply.tokens, active)
    assert found is not None
    assert [e["token"] for e in found["content"]] == reply.tokens


# -- one-token samples --------------------------------------------------------------------


def test_a_sample_follows_the_softmax_at_its_temperature() -> None:
    logits = distribution(prompt_digest(request("Name a colour.")), 0, " Blue")
    probabilities = {token: math.exp(lp) for token, lp in logprobs(logits).items()}
    draws = [sample(logits, 1.0, str(seed)) for seed in range(4000)]
    for token in sorted(probabilities, key=lambda t: -probabilities[t])[:3]:
        assert draws.count(token) / len(draws) == pytest.approx(probabilities[token], abs=0.03)
    # The rest of the vocabulary is drawn too, as a word the table does not list.
    assert set(draws) - set(probabilities)
    # Colder is peakier; the same seed gives the same token.
    cold = [sample(logits, 0.25, str(seed)) for seed in range(400)]
    assert cold.count(" Blue") > draws[:400].count(" Blue")
    assert sample(logits, 1.0, "7") == sample(logits, 1.0, "7")


def one_token(text: str, **fields: Any) -> list[str]:
    asked = request(text, max_tokens=1, **fields)
    clean = parse_defects([])
    reply = one_token_sampled(asked, respond(asked, clean, 5), 5, Perturbation())
    return reply.tokens


def test_only_a_one_token_answer_at_a_temperature_above_0_is_sampled() -> None:
    greedy_token = one_token("Name a colour.", temperature=0)
    assert one_token("Name a colour.", temperature=0, seed=3) == greedy_token
    found = {one_token("Name a colour.", temperature=1.0, seed=seed)[0] for seed in range(40)}
    assert len(found) > 1 and greedy_token[0] in found
    assert one_token("Name a colour.", temperature=1.0, seed=3) == one_token(
        "Name a colour.", temperature=1.0, seed=3
    )
    # Longer answers keep the toy model's fixed text.
    asked = request("Name a colour.", max_tokens=2, temperature=1.0, seed=3)
    reply = respond(asked, parse_defects([]), 5)
    assert one_token_sampled(asked, reply, 5, Perturbation()) == reply


def test_the_defects_that_misreport_logprobs_change_only_what_they_name() -> None:
    clean = answer()["choices"][0]["logprobs"]["content"]

    def entries(defect: str) -> list[Any]:
        return answer(defect)["choices"][0]["logprobs"]["content"]

    assert [e["top_logprobs"] for e in entries("logprobs-alternatives-cut")] == [
        e["top_logprobs"][:1] for e in clean
    ]
    assert all(e["logprob"] == 0.0 and e["top_logprobs"] == [] for e in entries("logprobs-zeroed"))
    for e, c in zip(entries("top-logprobs-duplicated"), clean, strict=True):
        assert e["top_logprobs"] == [*c["top_logprobs"][:-1], c["top_logprobs"][0]]
    for e, c in zip(entries("logprobs-as-probabilities"), clean, strict=True):
        assert e["logprob"] == round(math.exp(c["logprob"]), 6) > 0
    for e, c in zip(entries("chosen-entry-differs"), clean, strict=True):
        own = [a for a in e["top_logprobs"] if a["token"] == e["token"]]
        assert e["logprob"] == c["logprob"] and own[0]["logprob"] == round(c["logprob"] - 0.5, 6)
    streamed = streamed_entries(answer("stream-logprobs-differ", stream=True))
    assert answer("stream-logprobs-differ")["choices"][0]["logprobs"]["content"] == clean
    assert [e["token"] for e in streamed] == [e["token"] for e in clean]
    assert all(
        abs(s["logprob"] - (c["logprob"] - 0.01)) < 1e-9
        for s, c in zip(streamed, clean, strict=True)
    )


def test_top_logprobs_limit_cut_accepts_21_and_lists_20() -> None:
    assert request_problem(request(logprobs=True, top_logprobs=21)) is not None
    cutting = Policy(cuts_top_logprobs=True)
    assert request_problem(request(logprobs=True, top_logprobs=21), cutting) is None
    listed = answer(top_logprobs=21)["choices"][0]["logprobs"]["content"]
    assert {len(e["top_logprobs"]) for e in listed} == {MAX_TOP_LOGPROBS}
