"""Secret rotations: twins derived exactly, differing wherever they can; the paired comparison."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import resources
from verifier.cases.corpus import Case, load_corpus
from verifier.cases.negative import default_count, negative_cases
from verifier.cases.rotation import (
    MIN_SECRET,
    NAMES_ELSEWHERE,
    SUFFIX,
    Rotation,
    chat_case,
    from_environment,
    is_twin,
    reasoning_case,
    structured_case,
    tokenizer_case,
    tool_case,
    vision_case,
    wire_case,
)
from verifier.checks.structured_output import check_case as check_structured
from verifier.compare.origins import cases_text, provenance_cells
from verifier.endpoint.probe_words import PUBLISHED, ProbeWords
from verifier.errors import ConfigError
from verifier.outcome import CaseRecord, Outcome, Status
from verifier.protocol.apis import API_NAMES
from verifier.scorecard.build import summarize_family
from verifier.scorecard.rotated import ALPHA, CODE, comparison
from verifier.stats import binomial_upper_tail

SECRET = "unit-test-rotation-secret"
ROTATION = Rotation(SECRET.encode(), "ROTATION_SECRET")
CASES = load_corpus(["tool_calling"]).cases
VALIDATOR = resources.validator("tool_calling.case")


def twin(case: Case, rotation: Rotation = ROTATION) -> dict[str, Any]:
    made = rotation.twin(case, tool_case)
    assert made is not None
    assert made.id == case.id + SUFFIX and is_twin(made.id)
    return dict(made.data)


def names(data: Any) -> list[str]:
    return [tool["function"]["name"] for tool in data["tools"]]


def names_of(tool: Any) -> str:
    return str(tool["function"]["name"])


def origin(case: Case, renamed: Any) -> str:
    """The name a twin's tool had in its case (its name, in either letter case, before a tag)."""
    stem = names_of(renamed).rsplit("_", 1)[0]
    for tool in case.data["tools"]:
        head, *rest = names_of(tool).split("_")
        if stem in (names_of(tool), head + "".join(p[:1].upper() + p[1:] for p in rest)):
            return names_of(tool)
    raise AssertionError(f"{names_of(renamed)} has no origin in {case.id}")


def last_user(data: Any) -> str:
    return [m for m in data["messages"] if m["role"] == "user"][-1]["content"]


def test_the_same_secret_gives_the_same_twins_and_another_secret_others() -> None:
    again = Rotation(SECRET.encode(), "ANOTHER_NAME")
    other = Rotation(b"another-rotation-secret", "ROTATION_SECRET")
    assert [twin(c) for c in CASES] == [twin(c, again) for c in CASES]
    differ = sum(twin(c) != twin(c, other) for c in CASES)
    assert differ == len(CASES)


@settings(max_examples=8, deadline=None)
@given(st.text(min_size=MIN_SECRET, max_size=40))
def test_every_twin_is_a_case_whose_expectations_name_its_own_tools(secret: str) -> None:
    rotation = Rotation(secret.encode(), "S")
    for case in CASES:
        data = twin(case, rotation)
        assert list(VALIDATOR.iter_errors(data)) == [], case.id
        offered = set(names(data))
        assert len(offered) == len(data["tools"])
        for call in data.get("expected", {}).get("calls", []):
            assert call["name"] in offered
            schema = next(
                t["function"]["parameters"]
                for t in data["tools"]
                if t["function"]["name"] == call["name"]
            )
            assert set(call["arguments"]) <= set(schema.get("properties", {})), case.id
        choice = data.get("tool_choice")
        if isinstance(choice, dict):
            assert choice["function"]["name"] in offered
        for message in data["messages"]:
            for made in message.get("tool_calls") or ():
                assert made["function"]["name"] in offered


def test_twins_differ_from_their_cases_wherever_they_can() -> None:
    for case in CASES:
        data = twin(case)
        old = names(case.data)
        assert set(names(data)).isdisjoint(old), case.id
        assert last_user(data) != last_user(case.data), case.id
        for after in data["tools"]:
            before = next(t for t in case.data["tools"] if names_of(t) == origin(case, after))
            keys = before["function"]["parameters"].get("properties", {})
            renamed = after["function"]["parameters"].get("properties", {})
            if keys and not NAMES_ELSEWHERE & set(before["function"]["parameters"]):
                assert set(keys).isdisjoint(renamed), case.id
        # Descriptions that named a tool name it anew.
        text = json.dumps(data["tools"])
        assert not any(re.search(rf"\b{re.escape(name)}\b", text) for name in old), case.id
    multi = [c for c in CASES if len(c.data["tools"]) > 2]
    reordered = [c for c in multi if [origin(c, t) for t in twin(c)["tools"]] != names(c.data)]
    assert len(reordered) > len(multi) // 2


def test_a_number_the_prompt_states_moves_with_the_expected_argument() -> None:
    case = next(c for c in CASES if c.id == "single-currency-eur-jpy")
    data = twin(case)
    (before,) = re.findall(r"\d+", last_user(case.data))
    (after,) = re.findall(r"\d+", last_user(data))
    assert int(after) in range(int(before) + 1, int(before) + 4)
    (call,) = data["expected"]["calls"]
    assert [int(after)] in call["arguments"].values()


def test_a_number_an_earlier_turn_states_too_stays() -> None:
    moved = 0
    for case in CASES:
        data = twin(case)
        if re.findall(r"\d+", last_user(case.data)) != re.findall(r"\d+", last_user(data)):
            moved += 1
            rest = json.dumps(case.data["messages"][:-1])
            for number in set(re.findall(r"\d+", last_user(case.data))):
                if f" {number}" in rest:
                    assert number in last_user(data), case.id
    assert moved >= 10


def test_an_earlier_call_keeps_its_arguments_under_the_new_names() -> None:
    case = next(c for c in CASES if c.id == "multi_turn-city-id-then-weather")
    data = twin(case)
    (call,) = data["messages"][1]["tool_calls"]
    search = next(t for t in data["tools"] if t["function"]["name"] == call["function"]["name"])
    (key,) = search["function"]["parameters"]["properties"]
    assert json.loads(call["function"]["arguments"]) == {key: "Porto"}


def test_the_commitment_is_an_hmac_of_the_secret_and_holds_no_secret() -> None:
    expected = hmac.new(
        SECRET.encode(), b"llm-endpoint-verifier rotation commitment v1", hashlib.sha256
    ).hexdigest()
    assert ROTATION.commitment == f"hmac-sha256:{expected}"
    assert SECRET not in ROTATION.commitment and SECRET not in repr(ROTATION)
    assert Rotation(b"another-rotation-secret").commitment != ROTATION.commitment


def test_the_seed_comes_from_the_secret() -> None:
    seeds = {Rotation(f"seed-secret-number-{n}".encode()).seed for n in range(20)}
    assert len(seeds) == 20 and all(0 <= s < 2**31 for s in seeds)
    assert ROTATION.seed == Rotation(SECRET.encode()).seed


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({}, "--rotate ROTATION_SECRET: the environment variable ROTATION_SECRET is not set"),
        ({"ROTATION_SECRET": ""}, "is not set"),
        ({"ROTATION_SECRET": "short"}, "the secret is 5 characters; use at least 16"),
    ],
)
def test_a_secret_must_be_set_and_long_enough(environ: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        from_environment("ROTATION_SECRET", environ)


def test_cases_and_twins_are_interleaved_each_once_in_the_secrets_order() -> None:
    mixed = ROTATION.interleaved(CASES, {"tool_calling": tool_case})
    ids = [c.id for c in mixed]
    assert sorted(ids) == sorted([c.id for c in CASES] + [c.id + SUFFIX for c in CASES])
    where = {case_id: n for n, case_id in enumerate(ids)}
    assert all(abs(where[c.id] - where[c.id + SUFFIX]) == 1 for c in CASES)
    assert ids[: len(CASES)] != [c.id for c in CASES]
    assert [c.id for c in ROTATION.interleaved(CASES, {})] != [c.id for c in CASES]


STRUCTURED = load_corpus(["structured_output"]).cases
STRUCTURED_VALIDATOR = resources.validator("structured_output.case")


def spelled(data: Any) -> Any:
    """The JSON the last user message spells out (the answer it asks for), or None."""
    text = last_user(data)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except json.JSONDecodeError:
            continue
    return None


def keys_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


@settings(max_examples=8, deadline=None)
@given(st.text(min_size=MIN_SECRET, max_size=40))
def test_every_structured_twin_is_a_valid_case(secret: str) -> None:
    rotation = Rotation(secret.encode(), "S")
    for case in STRUCTURED:
        made = rotation.twin(case, structured_case)
        assert made is not None
        assert list(STRUCTURED_VALIDATOR.iter_errors(made.data)) == [], case.id
        check_structured(made)


def test_structured_twins_rename_the_schema_and_the_json_the_prompt_asks_for() -> None:
    renamed = 0
    for case in STRUCTURED:
        data = twin_of(case)
        assert last_user(data) != last_user(case.data), case.id
        before, after = case.data["response_format"], data["response_format"]
        if case.data.get("kind") == "malformed":
            assert after == before, case.id
            continue
        if before["type"] == "json_object":
            assert keys_of(spelled(data)).isdisjoint(keys_of(spelled(case.data))), case.id
            continue
        assert after["json_schema"]["name"] != before["json_schema"]["name"]
        schema = before["json_schema"]["schema"]
        if schema.get("properties") and not NAMES_ELSEWHERE & set(schema):
            renamed += 1
            new = after["json_schema"]["schema"]
            assert set(new["properties"]).isdisjoint(schema["properties"]), case.id
            assert set(new.get("required", ())) <= set(new["properties"]), case.id
            # The prompt's JSON asks for the same answer in the new names.
            asked = set(spelled(data)) if isinstance(spelled(data), dict) else set()
            before_asked = (
                set(spelled(case.data)) if isinstance(spelled(case.data), dict) else set()
            )
            assert len(asked & set(new["properties"])) == len(
                before_asked & set(schema["properties"])
            ), case.id
    assert renamed >= 80


def test_a_vendor_that_answers_what_the_prompt_spells_out_is_right_on_both() -> None:
    from jsonschema import Draft202012Validator

    for case in STRUCTURED:
        data = twin_of(case)
        if case.data.get("kind") == "malformed" or data["response_format"]["type"] != "json_schema":
            continue
        ours = Draft202012Validator(case.data["response_format"]["json_schema"]["schema"])
        theirs = Draft202012Validator(data["response_format"]["json_schema"]["schema"])
        # A case whose spelled-out answer is valid has a twin whose spelled-out answer is.
        if ours.is_valid(spelled(case.data)):
            assert theirs.is_valid(spelled(data)), case.id


def twin_of(case: Case) -> dict[str, Any]:
    made = ROTATION.twin(case, structured_case)
    assert made is not None
    return dict(made.data)


@pytest.mark.parametrize(
    ("family", "rotate"),
    [
        ("chat_template", chat_case),
        ("vision", vision_case),
        ("tokenizer", tokenizer_case),
        ("wire", wire_case),
        ("reasoning", reasoning_case),
    ],
)
def test_the_other_rotated_families_give_valid_cases(family: str, rotate: Any) -> None:
    validator = resources.validator(f"{family}.case")
    for secret in ("first-rotation-secret", "second-rotation-secret"):
        rotation = Rotation(secret.encode())
        for case in load_corpus([family]).cases:
            made = rotation.twin(case, rotate)
            if made is not None:
                assert list(validator.iter_errors(made.data)) == [], case.id
                assert made.data != case.data, case.id


def test_chat_template_twins_reword_every_user_turn_alike_and_rename_tools() -> None:
    for case in load_corpus(["chat_template"]).cases:
        made = ROTATION.twin(case, chat_case)
        assert made is not None
        data = made.data
        for conversation, before in [
            (data, case.data),
            (data.get("baseline"), case.data.get("baseline")),
        ]:
            if conversation is None:
                continue
            for ours, theirs in zip(before["messages"], conversation["messages"], strict=True):
                if ours["role"] == "user":
                    assert theirs["content"] != ours["content"], case.id
            old = {t["function"]["name"] for t in before.get("tools") or ()}
            assert old.isdisjoint(t["function"]["name"] for t in conversation.get("tools") or ())
            calls = [c for m in conversation["messages"] for c in m.get("tool_calls") or ()]
            assert old.isdisjoint(c["function"]["name"] for c in calls), case.id


def test_vision_twins_draw_other_colours_and_digits_and_expect_them() -> None:
    varied = 0
    for case in load_corpus(["vision"]).cases:
        made = ROTATION.twin(case, vision_case)
        if "expect" not in case.data:
            assert made is None
            continue
        assert made is not None
        varied += 1
        images, expect = made.data["images"], made.data["expect"]
        for before, after, words in zip(case.data["images"], images, expect, strict=True):
            if "color" in before:
                assert after["color"] != before["color"] and words == [after["color"]]
            if "digit" in before:
                assert after["digit"] != before["digit"] and words[0] == str(after["digit"])
        # Images alike stay alike, those that differed still differ.
        key = [json.dumps(i, sort_keys=True) for i in case.data["images"]]
        new = [json.dumps(i, sort_keys=True) for i in images]
        assert [a == b for a in key for b in key] == [a == b for a in new for b in new]
    assert varied >= 25


def test_tokenizer_twins_draw_digits_anew_in_runs_as_long() -> None:
    for case in load_corpus(["tokenizer"]).cases:
        made = ROTATION.twin(case, tokenizer_case)
        text = case.data["text"]
        marked = re.findall(r"<\|[^|]*\|>", text)
        if not re.search(r"[1-9]", re.sub(r"<\|[^|]*\|>", "", text)):
            assert made is None, case.id
            continue
        assert made is not None, case.id
        new = made.data["text"]
        assert re.sub(r"[0-9]", "0", new) == re.sub(r"[0-9]", "0", text) and new != text
        # Special-token markup keeps its digits: they name the token.
        assert re.findall(r"<\|[^|]*\|>", new) == marked


# The paired comparison.


def record(case_id: str, right: bool | None, api: str = "chat") -> CaseRecord:
    """A graded record: right, wrong (inaccurate), or None for unsupported."""
    key = case_id if api == "chat" else f"{case_id}[{api}]"
    if right is None:
        outcome = Outcome(Status.UNSUPPORTED, code="x")
    else:
        outcome = Outcome(Status.PASS, metrics={"accurate": right})
    return CaseRecord(f"tool_calling/{key}", "tool_calling", outcome, api)


def pairs(public: list[bool | None], rotated: list[bool | None]) -> list[CaseRecord]:
    return [record(f"c{n}", p) for n, p in enumerate(public)] + [
        record(f"c{n}{SUFFIX}", r) for n, r in enumerate(rotated)
    ]


def test_no_twin_no_comparison() -> None:
    assert comparison([record("c1", True), record("c2", False)]) == {}


@pytest.mark.parametrize(("lost", "special"), [(6, False), (7, True), (20, True)])
def test_right_only_as_published_beyond_the_false_alarm_rate_is_special_casing(
    lost: int, special: bool
) -> None:
    found = comparison(pairs([True] * (lost + 3), [False] * lost + [True] * 3))
    (ruling,) = found["rulings"]
    assert (ruling["code"], ruling["verdict"]) == ((CODE, "fail") if special else (None, "pass"))
    assert found["rotation"]["p_value"] == pytest.approx(0.5**lost)
    assert (found["rotation"]["lost"], found["rotation"]["gained"]) == (lost, 0)
    assert [d["twin"] for d in found["rotation"]["differing"]] == [
        f"c{n}{SUFFIX}" for n in sorted(range(lost), key=str)
    ]


def test_as_often_wrong_either_way_is_alike() -> None:
    found = comparison(pairs([True] * 10 + [False] * 10, [False] * 10 + [True] * 10))
    (ruling,) = found["rulings"]
    assert ruling["verdict"] == "pass" and ruling["outcome"] == "alike"
    assert found["rotation"]["public"]["rate"] == found["rotation"]["rotated"]["rate"] == 0.5


def test_pairs_not_graded_on_both_sides_decide_nothing() -> None:
    found = comparison(pairs([True] * 8 + [None], [None] * 8 + [False]))
    assert found["rotation"]["pairs"] == 0 and found["rulings"] == []


def test_twins_pair_over_their_own_api() -> None:
    records = [
        record("c1", True, "messages"),
        record(f"c1{SUFFIX}", False, "messages"),
        record(f"c1{SUFFIX}", True),
        record("c1", True),
    ]
    found = comparison(records)
    assert (found["rotation"]["pairs"], found["rotation"]["lost"]) == (2, 1)
    (differs,) = found["rotation"]["differing"]
    assert differs["api"] == "messages" and differs["twin"] == f"c1{SUFFIX}[messages]"


def test_the_ruling_fails_the_family_and_names_its_code() -> None:
    entry = summarize_family(pairs([True] * 12, [False] * 12))
    assert entry["verdict"] == "fail" and entry["codes"] == {CODE: 1}
    assert entry["counts"]["fail"] == 0
    assert entry["rulings"][0]["twins"] == "rotated"


@given(st.integers(0, 60), st.integers(0, 60))
def test_the_one_sided_tail_is_the_binomial_sum(successes: int, extra: int) -> None:
    trials = successes + extra
    tail = binomial_upper_tail(successes, trials)
    exact = sum(math.comb(trials, k) for k in range(successes, trials + 1)) / 2**trials
    assert tail == pytest.approx(exact)
    assert binomial_upper_tail(0, trials) == 1.0
    if successes:
        assert tail <= binomial_upper_tail(successes - 1, trials)
    assert ALPHA == 0.01


@pytest.mark.parametrize(
    ("corpus", "said"),
    [
        ({"digest": "0" * 64, "rotation": None}, "published cases only: no --rotate"),
        ({"digest": "0" * 64}, "published cases only: no --rotate"),
        (
            {"rotation": {"commitment": "hmac-sha256:" + "ab" * 32, "twins": 3, "families": []}},
            "published cases and 3 rotated twins (secret's commitment ababababab",
        ),
        (
            {"packs": [{"name": "p"}], "public": False, "rotation": None},
            "private packs only",
        ),
        (
            {"packs": [{"name": "p"}], "public": True, "rotation": None},
            "published cases only: no --rotate, and 1 private pack(s)",
        ),
    ],
)
def test_the_provenance_says_which_cases_a_run_sent(corpus: dict[str, Any], said: str) -> None:
    card = {"corpus": corpus, "run": {}, "verifier": {}, "settings": {}, "transcript": {}}
    assert said in provenance_cells(card)[3]
    assert cases_text(corpus).startswith(said)


def test_the_simulated_vendor_told_a_secret_knows_each_twins_own_calls() -> None:
    """Two twins may word their prompt and name their tools alike, their parameters not."""
    from verifier.simulator.oracle import canonical_call, natural_calls

    for number in range(20):
        rotation = Rotation(f"bench-rotation-secret-{number:04d}".encode())
        for case in CASES:
            data = twin(case, rotation)
            if "expected" not in data or data.get("tool_choice") == "none":
                continue
            request = {"messages": data["messages"], "tools": data["tools"]}
            expected = [canonical_call(call) for call in data["expected"]["calls"]]
            assert natural_calls(request, rotation) == expected, (number, case.id)


def test_the_simulated_vendor_told_a_secret_knows_each_reasoning_twins_plan() -> None:
    """An agent loop's twin is worded otherwise: its plan is known from the secret alone."""
    from verifier.simulator.oracle import planned_calls

    loops = [c for c in load_corpus(["reasoning"]).cases if "calls" in c.data]
    assert loops
    for case in loops:
        made = ROTATION.twin(case, reasoning_case)
        assert made is not None
        request = {"messages": made.data["messages"], "tools": made.data.get("tools", [])}
        assert planned_calls(request) == [], case.id
        assert planned_calls(request, ROTATION) == [case.data["calls"][0]], case.id


def system_prompts(data: Any) -> list[str]:
    """Every system prompt of a case: its messages', its request's, a baseline's."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("role") in ("system", "developer") and isinstance(
                value.get("content"), str
            ):
                found.append(value["content"])
            for key in ("system", "instructions"):
                if isinstance(value.get(key), str):
                    found.append(value[key])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(data)
    return found


ROTATORS = {
    "tool_calling": tool_case,
    "structured_output": structured_case,
    "chat_template": chat_case,
    "wire": wire_case,
    "reasoning": reasoning_case,
}


@pytest.mark.parametrize("family", sorted(ROTATORS))
def test_no_twin_carries_a_published_system_prompt(family: str) -> None:
    cases = load_corpus([family]).cases
    published = {text for case in cases for text in system_prompts(case.data)}
    carried = 0
    for secret in ("first-rotation-secret", "second-rotation-secret"):
        for case in cases:
            made = Rotation(secret.encode()).twin(case, ROTATORS[family])
            if made is None:
                continue
            said = system_prompts(made.data)
            assert len(said) == len(system_prompts(case.data)), case.id
            assert published.isdisjoint(said), (case.id, said)
            carried += len(said)
    assert carried > 0 or not published
    # Alike in a chat-template probe and its baseline: the probe still differs by what it probes.
    if family == "chat_template":
        for case in cases:
            made = ROTATION.twin(case, chat_case)
            if made is not None and "baseline" in case.data:
                before = system_prompts(case.data["baseline"]), system_prompts(case.data)
                after = system_prompts(made.data["baseline"]), system_prompts(made.data)
                assert (before[0] == before[1][: len(before[0])]) == (
                    after[0] == after[1][: len(after[0])]
                ), case.id


def test_wire_and_reasoning_twins_reword_the_prompt_and_keep_the_rest() -> None:
    for family, rotate in (("wire", wire_case), ("reasoning", reasoning_case)):
        for case in load_corpus([family]).cases:
            made = ROTATION.twin(case, rotate)
            if made is None:
                # Nothing to reword: no text in a last user message or the request's input.
                request = case.data.get("request", case.data)
                messages = request.get("messages") if isinstance(request, dict) else None
                texts = [
                    m for m in messages or () if isinstance(m, dict) and m.get("role") == "user"
                ]
                assert not texts or not isinstance(texts[-1].get("content"), str), case.id
                continue
            before, after = case.data, made.data
            request = "request" if family == "wire" else None
            old = before[request] if request else before
            new = after[request] if request else after
            # Only words change: every field but the texts is the case's.
            assert set(new) == set(old), case.id
            for key in set(old) - {"messages", "input", "system", "instructions", "prompts"}:
                assert new[key] == old[key], (case.id, key)
            if "prompts" in old:
                assert all(
                    a != b and b in a for a, b in zip(new["prompts"], old["prompts"], strict=True)
                )
            elif isinstance(old.get("messages"), list):
                assert last_user(new) != last_user(old) and last_user(old) in last_user(new)
                roles = [m.get("role") for m in old["messages"]]
                assert [m.get("role") for m in new["messages"]] == roles, case.id


def test_the_generated_set_varies_by_the_seed_not_by_twins() -> None:
    cases, _ = negative_cases(default_count(), ROTATION.seed, API_NAMES)
    assert cases and all(ROTATION.twin(case, wire_case) is None for case in cases)


def test_the_probes_say_the_secrets_words() -> None:
    drawn = [
        ProbeWords.drawn(Rotation(f"probe-secret-number-{n}".encode()).random("probe", "words"))
        for n in range(20)
    ]
    for words in drawn:
        published = (PUBLISHED.greeting, PUBLISHED.question, PUBLISHED.format_question)
        assert published != (words.greeting, words.question, words.format_question)
        assert not {words.greeting, words.question, words.format_question} & set(published)
        assert words.colour != PUBLISHED.colour
    assert len({words.greeting for words in drawn}) > 5
    assert len({(w.greeting, w.max_tokens, w.colour, w.side) for w in drawn}) == 20
    again = ProbeWords.drawn(Rotation(b"probe-secret-number-0").random("probe", "words"))
    assert again == drawn[0]
