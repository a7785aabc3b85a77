"""The context family's pure parts: windows as engines state them, haystacks, grading.

The family is driven with recorded answers (no server) to prove each code from the answer that
shows it; tests/test_context_e2e.py runs it against the simulated vendor, and
tests/test_defect_codes_context.py holds each context defect to exactly its code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import Case, ChatResult, Outcome, RunContext, Status
from verifier.cases.corpus import load_corpus
from verifier.checks import FAMILIES
from verifier.checks.context import (
    RUNS,
    Window,
    cache_findings,
    linear_until,
    window_findings,
)
from verifier.checks.support import agent_loop, haystack
from verifier.outcome import CaseRecord
from verifier.protocol import window
from verifier.protocol.answers import parse_completion
from verifier.protocol.requests import Chat, Get, Request, drive
from verifier.protocol.window import StatedWindow
from verifier.reference.profiles import Profile, load_profile

KIMI = load_profile("kimi-k2")
CASES = {case.id: case for case in load_corpus(["context"]).cases}


# -- what engines state ---------------------------------------------------------------------


def test_the_window_is_read_where_each_engine_states_it() -> None:
    vllm = {"data": [{"id": "m", "max_model_len": 4096}]}
    assert window.from_models(vllm, "m") == StatedWindow(4096, "GET /v1/models max_model_len")
    llama = {"data": [{"id": "/x.gguf", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}}]}
    assert window.from_models(llama, "/x.gguf") == StatedWindow(2048, "GET /v1/models meta.n_ctx")
    router = {"data": [{"id": "a", "context_length": 9}, {"id": "b", "context_length": 262144}]}
    assert window.from_models(router, "b") == StatedWindow(262144, "GET /v1/models context_length")
    # Several models, none of them the one asked for: no window is read.
    assert window.from_models(router, "c") is None
    assert window.from_models({"data": [{"id": "m"}]}, "m") is None
    assert window.from_models({"data": [{"id": "m", "max_model_len": True}]}, "m") is None
    assert window.from_models("not json", "m") is None
    props = {"default_generation_settings": {"n_ctx": 2048}}
    assert window.from_props(props) == StatedWindow(
        2048, "GET /props default_generation_settings.n_ctx"
    )
    assert window.from_props({}) is None


@pytest.mark.parametrize(
    ("error", "tokens"),
    [
        # vLLM's and OpenAI's wording.
        ({"message": "This model's maximum context length is 4096 tokens. However, ..."}, 4096),
        # llama-server's, with its own field.
        (
            {
                "message": "request (2727 tokens) exceeds the available context size (2048 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_ctx": 2048,
            },
            2048,
        ),
        # Anthropic's.
        ({"message": "prompt is too long: 208656 tokens > 200000 maximum"}, 200000),
        ({"message": "prompt is too long"}, None),
        (None, None),
    ],
)
def test_a_refusal_names_its_window(error: dict[str, Any] | None, tokens: int | None) -> None:
    assert window.from_refusal(error) == tokens
    assert window.says_length(error) is (error is not None)


def test_a_refusal_for_another_reason_does_not_say_length() -> None:
    assert not window.says_length({"message": "messages: field required", "type": "bad"})


def test_the_stated_window_is_held_to_the_release() -> None:
    assert window_findings(Window(StatedWindow(131072, "x"), 131072)) == []
    assert window_findings(Window(None, 131072)) == []
    (below,) = window_findings(Window(StatedWindow(2048, "GET /v1/models meta.n_ctx"), 8192))
    assert below.code == "window_below_release"
    assert "2,048" in below.message and "8,192" in below.message
    (above,) = window_findings(Window(StatedWindow(16384, "x"), 8192))
    assert above.code == "window_above_release"


# -- the release's window ---------------------------------------------------------------------


def test_the_release_states_its_window_and_rope_scaling() -> None:
    assert KIMI.window == 131072
    assert KIMI.rope_scaling == {"type": "yarn", "factor": 32.0, "original_context_tokens": 4096}
    assert load_profile("kimi-k2-thinking").window == 262144


def test_a_folder_reads_the_window_from_its_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("tiktoken.model", "tokenizer_config.json", "chat_template.jinja"):
        (folder / name).write_bytes((KIMI.root / name).read_bytes())
    config = {
        "max_position_embeddings": 32768,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    profile = load_profile(f"kimi-k2:{folder}")
    assert profile.window == 32768
    assert profile.rope_scaling == {"type": "yarn", "factor": 4.0, "original_context_tokens": 8192}


# -- haystacks --------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(600, 40_000), seed=st.integers(0, 2**32))
def test_a_haystack_is_as_long_as_asked_and_counted_exactly(tokens: int, seed: int) -> None:
    needles = haystack.needles(seed)
    hay, length = haystack.build(KIMI, tokens, seed, needles, needles[0].question)
    assert tokens - 40 <= length <= tokens
    assert length == haystack.count(KIMI, hay, needles[0].question)
    text = hay.conversation(needles[0].question).messages[0]["content"]
    # Each needle once, in depth order, and the filler has no digit to be mistaken for a code.
    places = [text.index(n.sentence) for n in needles]
    assert places == sorted(places)
    assert all(text.count(n.sentence) == 1 for n in needles)
    assert re.sub("|".join(n.sentence for n in needles), "", text).isascii()
    assert not re.search(r"\d", re.sub("|".join(n.sentence for n in needles), "", text))
    assert haystack.asked(text) == needles[0].name
    assert haystack.stated(text, needles[0].name) == needles[0].code


def test_needles_and_filler_come_from_the_seed() -> None:
    assert haystack.needles(1) == haystack.needles(1)
    assert haystack.needles(1) != haystack.needles(2)
    one, _ = haystack.build(KIMI, 2000, 1)
    two, _ = haystack.build(KIMI, 2000, 2)
    assert one.text != two.text


def test_a_million_tokens_are_counted() -> None:
    # The figure (about half a second for the build, a tenth for the count) is in bench/;
    # here only that the count is exact at that length.
    hay, length = haystack.build(KIMI, 1_048_576, 7)
    assert 1_048_576 - 40 <= length <= 1_048_576


def test_a_code_is_found_as_a_number_of_its_own() -> None:
    needle = haystack.Needle("amber heron", "4821", 0.5)
    assert needle.found_in("The code is 4821.")
    assert needle.found_in("4821")
    assert not needle.found_in("14821")
    assert not needle.found_in("48210")
    assert not needle.found_in(None)


# -- the family, driven with recorded answers -------------------------------------------------

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 8192}]}


def _json(status: int, body: Any) -> ChatResult:
    return parse_completion(status, json.dumps(body).encode(), {})


def _answer(content: str, prompt: int, completion: int = 3, finish: str = "stop") -> ChatResult:
    return _json(
        200,
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        },
    )


Vendor = Callable[[Chat, int], ChatResult]


def _run(case_id: str, vendor: Vendor, profile: Profile = KIMI, **ctx: Any) -> Outcome:
    """The case against a vendor stating an 8,192-token window, answering by `vendor`.

    `vendor` gets each chat request and its prompt's exact local count.
    """

    def send(request: Request) -> ChatResult:
        if isinstance(request, Get):
            if request.api:
                return _json(200, MODELS)
            return _json(404, {"error": {"message": "not found"}})
        assert isinstance(request, Chat)
        messages = request.body["messages"]
        local = len(profile.prompt_ids(messages, request.body.get("tools")))
        return vendor(request, local)

    context = RunContext(model="m", seed=3, profile=profile, **ctx)
    outcome: Outcome = drive(FAMILIES["context"].run(CASES[case_id], context), send)
    return outcome


def _codes(outcome: Outcome) -> set[str]:
    return {f.code for f in outcome.findings}


def _retriever(request: Chat, local: int) -> ChatResult:
    """A correct vendor and a model that retrieves: it reads the code from the prompt."""
    text = request.body["messages"][-1]["content"]
    name = haystack.asked(text)
    answer = (haystack.stated(text, name) if name else None) or "I do not know."
    return _answer(answer, local)


def test_a_correct_vendor_passes_every_rung_within_its_window() -> None:
    for case_id in ("needles-1k", "needles-4k", "needles-window"):
        outcome = _run(case_id, _retriever)
        assert outcome.status is Status.PASS, (case_id, outcome.message)
        assert [n["found"] for n in outcome.metrics["needles"]] == [True, True, True]
    assert "do not fit the window of 8,192" in _run("needles-8k", _retriever).message


def test_max_context_caps_every_long_prompt() -> None:
    assert "past --max-context 2,048" in _run("needles-4k", _retriever, max_context=2048).message
    assert "below the window" in _run("needles-window", _retriever, max_context=2048).message
    assert "past --max-context" in _run("over-window", _retriever, max_context=2048).message
    assert _run("needles-2k", _retriever, max_context=2048).status is Status.PASS


def test_retrieval_is_accuracy_not_a_rung_failure() -> None:
    def forgetful(request: Chat, local: int) -> ChatResult:
        if local > 2000:
            return _answer("I do not know.", local)
        return _retriever(request, local)

    # Lost with length, found in the short prompt: recorded, graded exactly, not failed.
    outcome = _run("needles-4k", forgetful)
    assert outcome.status is Status.PASS
    assert [n["found"] for n in outcome.metrics["needles"]] == [False, False, False]
    assert [n["short"] for n in outcome.metrics["needles"]] == [True, True, True]
    # Missed in the short prompt too: the model's limit, left out of the table.
    never = _run("needles-4k", lambda request, local: _answer("No idea.", local))
    assert never.status is Status.PASS
    assert [n["found"] for n in never.metrics["needles"]] == [None, None, None]


def test_counts_are_judged_by_difference_from_the_short_prompt() -> None:
    def skewed(request: Chat, local: int) -> ChatResult:
        return _answer(_retriever(request, local).choice.content or "", local + 7)

    assert _run("needles-2k", skewed).status is Status.PASS

    def counted_short(request: Chat, local: int) -> ChatResult:
        kept = min(local, 1500)
        return _answer(_retriever(request, local).choice.content or "", kept)

    # Fewer tokens, every needle read: the counts disagree, and no more is known.
    assert _codes(_run("needles-2k", counted_short)) == {"prompt_tokens_mismatch"}

    def dropping(request: Chat, local: int) -> ChatResult:
        # The front of a long prompt dropped: the first needle with it, the others read.
        text = request.body["messages"][-1]["content"]
        if local <= 1000:
            return _retriever(request, local)
        kept = text[len(text) // 4 :]
        name = haystack.asked(kept)
        answer = (haystack.stated(kept, name) if name else None) or "I do not know."
        return _answer(answer, local * 3 // 4)

    assert _codes(_run("needles-2k", dropping)) == {"prompt_truncated"}

    def padding(request: Chat, local: int) -> ChatResult:
        extra = 5 if local > 1000 else 0
        return _answer(_retriever(request, local).choice.content or "", local + extra)

    assert _codes(_run("needles-2k", padding)) == {"prompt_tokens_mismatch"}


def test_a_rung_refused_within_the_stated_window() -> None:
    def small(request: Chat, local: int) -> ChatResult:
        if local > 4096:
            message = "This model's maximum context length is 4096 tokens."
            return _json(400, {"error": {"message": message}})
        return _retriever(request, local)

    outcome = _run("needles-window", small)
    assert _codes(outcome) == {"window_smaller_than_stated"}
    assert "4,096" in outcome.message and "8,192" in outcome.message


def _refusal(status: int, message: str) -> ChatResult:
    return _json(status, {"error": {"message": message, "type": "invalid_request_error"}})


@pytest.mark.parametrize(
    ("answer", "codes"),
    [
        (_refusal(400, "This model's maximum context length is 8192 tokens."), set()),
        (_refusal(400, "messages: invalid"), {"over_window_refusal_unclear"}),
        (
            _refusal(400, "This model's maximum context length is 4096 tokens."),
            {"window_smaller_than_stated"},
        ),
        (_refusal(500, "CUDA out of memory"), {"over_window_server_error"}),
    ],
)
def test_a_prompt_past_the_window_must_be_refused_saying_so(
    answer: ChatResult, codes: set[str]
) -> None:
    outcome = _run("over-window", lambda request, local: answer)
    assert _codes(outcome) == codes
    assert outcome.metrics["tokens"] > 8192


def test_a_prompt_past_the_window_answered() -> None:
    truncated = _run("over-window", lambda request, local: _answer("ok", 8192 - 16))
    assert _codes(truncated) == {"prompt_truncated"}
    whole = _run("over-window", lambda request, local: _answer("ok", local))
    assert _codes(whole) == {"over_window_accepted"}
    # A choiceless answer is malformed, whatever it was answered to.
    bare = _json(
        200, {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
    )
    assert _codes(_run("over-window", lambda request, local: bare)) == {"malformed_response"}


def _text_of(tokens: int) -> str:
    """A text of exactly `tokens` tokens under the release's tokenizer."""
    text = KIMI.tokenizer.decode(KIMI.tokenizer.encode_ordinary(" x") * tokens)
    assert len(KIMI.tokenizer.encode_ordinary(text)) == tokens
    return text


def test_an_answer_must_stop_at_the_window() -> None:
    def cut(request: Chat, local: int) -> ChatResult:
        return _answer(_text_of(8192 - local), local, 8192 - local, "length")

    assert _run("output-past-window", cut).status is Status.PASS

    def shifted(request: Chat, local: int) -> ChatResult:
        return _answer(_text_of(256), local, 256, "length")

    outcome = _run("output-past-window", shifted)
    assert _codes(outcome) == {"answer_past_window"}
    assert outcome.findings[0].actual == outcome.metrics["tokens"] + 256

    # The bill is output accounting's: a doubled completion_tokens runs nothing past the window.
    def billed_twice(request: Chat, local: int) -> ChatResult:
        return _answer(_text_of(8192 - local), local, 2 * (8192 - local), "length")

    assert _run("output-past-window", billed_twice).status is Status.PASS

    # A prompt_tokens 3 over the release's count (a skewed bill) is not an overrun either.
    def skewed(request: Chat, local: int) -> ChatResult:
        return _answer(_text_of(8192 - local), local + 3, 8192 - local, "length")

    assert _run("output-past-window", skewed).status is Status.PASS

    refused = _refusal(
        400,
        "This model's maximum context length is 8192 tokens. However, you "
        "requested 8400 tokens (8144 in the messages, 256 in the completion).",
    )
    assert _run("output-past-window", lambda request, local: refused).status is Status.PASS

    def short(request: Chat, local: int) -> ChatResult:
        return _answer("1", local, 2, "stop")

    assert "ended by itself" in _run("output-past-window", short).message

    # Stopped at the window mid-count, and said to have ended on its own.
    def unsaid(request: Chat, local: int) -> ChatResult:
        return _answer(_text_of(8192 - local), local, 8192 - local, "stop")

    outcome = _run("output-past-window", unsaid)
    assert _codes(outcome) == {"length_not_reported"}
    assert "its count broken off at" in outcome.message


def test_without_a_window_or_a_profile_nothing_is_graded(small_profile: Profile) -> None:
    def send(request: Request) -> ChatResult:
        return _json(404, {"error": {"message": "not found"}})

    for case in CASES.values():
        context = RunContext(model="m", seed=3, profile=small_profile)
        outcome = drive(FAMILIES["context"].run(case, context), send)
        assert outcome.status is Status.UNSUPPORTED, case.id
        assert "states a window" in outcome.message, outcome.message
    bare = drive(FAMILIES["context"].run(CASES["window"], RunContext(model="m", seed=3)), send)
    assert "no profile" in bare.message


def test_the_summary_tabulates_retrieval_by_length_and_depth() -> None:
    records = [
        CaseRecord(f"context/{case_id}", "context", _run(case_id, _retriever))
        for case_id in ("needles-1k", "needles-2k", "window")
    ]
    summary = FAMILIES["context"].summarize(records, None)  # type: ignore[misc]
    assert summary["window"] == {
        "window": 8192,
        "stated": 8192,
        "stated_by": "GET /v1/models max_model_len",
        "release": 131072,
        "release_original": 4096,
    }
    lengths = list(summary["retrieval"])
    assert [int(n) for n in lengths] == sorted(int(n) for n in lengths)
    first = summary["retrieval"][lengths[0]]
    assert first["found"] == first["graded"] == 3
    assert first["by_depth"] == {"10%": True, "50%": True, "90%": True}
    assert first["interval"][1] == 1.0
    assert summary["retrieval_by_depth"]["10%"]["rate"] == 1.0


def test_every_case_names_a_check_the_family_has() -> None:
    # And every check has a case.
    assert {c.data["check"] for c in CASES.values()} == set(RUNS)
    assert isinstance(CASES["needles-1k"], Case)


def test_the_report_shows_the_window_and_retrieval_by_length_and_depth() -> None:
    from verifier.compare.families import VIEWS

    records = [
        CaseRecord(f"context/{case_id}", "context", _run(case_id, _retriever))
        for case_id in ("needles-1k", "needles-2k", "window")
    ]
    metrics = FAMILIES["context"].summarize(records, None)  # type: ignore[misc]
    key, tables = VIEWS["context"]([{"metrics": metrics}, None])
    cells = {row.label: row.cells[0].text for row in key}
    assert cells["window"] == "8,192 (GET /v1/models max_model_len); release 131,072"
    assert cells["retrieval"].startswith("1.000") and "(6/6)" in cells["retrieval"]
    by_length = {table.title: table for table in tables}["Retrieval by length"]
    assert [row.label for row in by_length.rows] == ["1,014 tokens", "2,044 tokens"]
    by_depth = {table.title: table for table in tables}["Retrieval by depth"]
    assert [row.label for row in by_depth.rows] == ["10%", "50%", "90%"]


def _timed(answer: ChatResult, first_token: float | None) -> ChatResult:
    answer.token_arrivals = [] if first_token is None else [first_token]
    return answer


def _cached(answer: ChatResult, tokens: int | None) -> ChatResult:
    if tokens is not None:
        assert answer.usage is not None
        answer.usage["prompt_tokens_details"] = {"cached_tokens": tokens}
    return answer


def test_a_repeat_served_from_the_cache_must_say_so_and_answer_alike() -> None:
    cold = _timed(_answer("7453", 8000), 0.9)
    hot = _cached(_timed(_answer("7453", 8000), 0.02), 7984)
    findings, metrics = cache_findings(cold, hot, True)
    assert findings == [] and metrics["quicker"] and metrics["cached_tokens"] == 7984
    # Quicker, and silent about it.
    findings, _ = cache_findings(cold, _timed(_answer("7453", 8000), 0.02), True)
    assert [f.code for f in findings] == ["cached_tokens_unreported"]
    # No usage at all: nothing said either way (wire's usage_missing).
    bare = _timed(_answer("7453", 8000), 0.02)
    bare.usage = None
    assert cache_findings(cold, bare, True)[0] == []
    # Another answer the second time.
    findings, _ = cache_findings(cold, _cached(_timed(_answer("7454", 8000), 0.02), 7984), True)
    assert [f.code for f in findings] == ["cache_changes_answer"]
    # Under a contract that pins sampling, answers are samples: the text is not compared.
    assert cache_findings(cold, _cached(_timed(_answer("x", 8000), 0.02), 16), False)[0] == []


@pytest.mark.parametrize(
    ("cold", "hot"),
    [
        # A third of the time but not 50 ms sooner, 50 ms sooner but not a third: noise.
        (0.06, 0.015),
        (0.5, 0.2),
        # No first token measured.
        (None, 0.01),
    ],
)
def test_a_repeat_barely_quicker_is_no_evidence_of_a_cache(
    cold: float | None, hot: float | None
) -> None:
    findings, metrics = cache_findings(
        _timed(_answer("1", 9), cold), _timed(_answer("1", 9), hot), True
    )
    assert findings == [] and metrics["quicker"] is False


def test_the_cache_check_without_a_cache_is_unsupported_and_with_one_passes() -> None:
    def plain(request: Chat, local: int) -> ChatResult:
        return _timed(_retriever(request, local), 0.01)

    outcome = _run("cache-hot", plain)
    assert outcome.status is Status.UNSUPPORTED
    assert "no sign of a prefix cache" in outcome.message
    # The prompt fills what the window allows, begun with a nonce of its own every time.
    assert outcome.metrics["tokens"] <= 8192 - 64
    seen: list[str] = []

    def caching(request: Chat, local: int) -> ChatResult:
        text = request.body["messages"][-1]["content"]
        hit = text in seen
        seen.append(text)
        return _cached(
            _timed(_retriever(request, local), 0.01 if hit else 0.5), local - 1 if hit else 0
        )

    assert _run("cache-hot", caching).status is Status.PASS
    first, second = seen[0], seen[-1]

    def silent(request: Chat, local: int) -> ChatResult:
        answer = caching(request, local)
        answer.usage = None
        return answer

    # Quicker, the same answer, no usage at all: what the cache served is unread, no pass.
    bare = _run("cache-hot", silent)
    assert bare.status is Status.UNSUPPORTED and "no usage" in bare.message
    assert _run("cache-hot", caching).status is Status.PASS
    assert seen[-1] != first and first == second


def test_a_quicker_repeat_is_a_silent_cache_only_when_another_cold_prompt_is_as_slow() -> None:
    seen: list[str] = []

    def silent(request: Chat, local: int) -> ChatResult:
        # Caches each prompt, and says nothing of it.
        text = request.body["messages"][-1]["content"]
        hit = text in seen
        seen.append(text)
        return _timed(_retriever(request, local), 0.01 if hit else 0.5)

    outcome = _run("cache-hot", silent)
    assert _codes(outcome) == {"cached_tokens_unreported"}
    # The third prompt, as long with a nonce of its own, was as slow as the first.
    assert len(seen) == 3 and len(set(seen)) == 2
    assert outcome.metrics["ttft_control"] == 0.5
    calls: list[int] = []

    def slow_once(request: Chat, local: int) -> ChatResult:
        # No cache: the first answer only came in a slow moment.
        calls.append(local)
        return _timed(_retriever(request, local), 0.5 if len(calls) == 1 else 0.01)

    once = _run("cache-hot", slow_once)
    assert once.status is Status.UNSUPPORTED and "no sign of a prefix cache" in once.message
    assert once.metrics["quicker"] is False and once.metrics["ttft_control"] == 0.01


def _prefix_caching(stale: bool = False, collide: bool = False) -> Vendor:
    """A vendor with a prefix cache: a prompt it has seen the start of comes quicker, saying so.

    `stale`: a cached prefix is no longer attended to (the answer reads only the question).
    `collide`: a prompt beginning as the latest one did is served that one's KV, whole.
    """
    seen: list[str] = []

    def answer(request: Chat, local: int) -> ChatResult:
        text = request.body["messages"][-1]["content"]
        earlier = [t for t in seen if t[:200] == text[:200]]
        seen.append(text)
        if not earlier:
            return _cached(_timed(_retriever(request, local), 0.5), 0)
        if stale:
            reply = _answer("I cannot find it.", local)
        elif collide and earlier[-1] != text:
            reply = _retriever(Chat({"messages": [{"content": earlier[-1]}]}, "x"), local)
        else:
            reply = _retriever(request, local)
        return _cached(_timed(reply, 0.01), local - 64)

    return answer


def test_a_prompt_answers_alike_after_a_sibling_sharing_its_prefix() -> None:
    outcome = _run("shared-prefix", _prefix_caching())
    assert outcome.status is Status.PASS, outcome.message
    # Six answers, each after the first of its order from the cache.
    cached = outcome.metrics["cached_tokens"]
    assert [bool(n) for n in cached] == [False, True, True] * 2
    assert outcome.metrics["tokens"] <= 8192 - 64
    # A cache keyed by too short a prefix answers each prompt with its sibling's question.
    collided = _run("shared-prefix", _prefix_caching(collide=True))
    assert _codes(collided) == {"cache_changes_answer"}
    assert len(collided.findings) == 2
    assert "sent again after the one asking for the" in collided.findings[0].message
    # A cache that forgets what it served: the repeat cannot read the needle.
    assert _codes(_run("shared-prefix", _prefix_caching(stale=True))) == {"cache_changes_answer"}


def test_the_shared_prefix_check_needs_a_cache_and_greedy_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def plain(request: Chat, local: int) -> ChatResult:
        return _timed(_retriever(request, local), 0.01)

    outcome = _run("shared-prefix", plain)
    assert outcome.status is Status.UNSUPPORTED and "no sign of a prefix cache" in outcome.message
    capped = _run("shared-prefix", _prefix_caching(), max_context=2048)
    assert capped.status is Status.PASS and capped.metrics["tokens"] <= 2048
    # A contract that pins temperature above 0 makes answers samples.
    monkeypatch.setattr(Profile, "sampled", property(lambda self: True))
    sampled = _run("shared-prefix", _prefix_caching())
    assert sampled.status is Status.UNSUPPORTED and "greedy" in sampled.message


def test_the_agent_loop_counts_every_turn_as_the_whole_history() -> None:
    sent: list[Chat] = []

    def exact(request: Chat, local: int) -> ChatResult:
        sent.append(request)
        return _cached(_timed(_answer("Reading.", local), 0.01), max(local - 2000, 0))

    outcome = _run("agent-loop", exact)
    assert outcome.status is Status.PASS, outcome.message
    # Seven turns, one after another, the last within the 8,192-token window and an answer.
    assert [r.name for r in sent] == [f"turn-{n}" for n in range(1, 8)]
    assert outcome.metrics["prompt_tokens"] == outcome.metrics["tokens"]
    assert 8192 - 64 - 240 <= outcome.metrics["tokens"][-1] <= 8192 - 64
    assert all(r.body["tools"] == [agent_loop.TOOL] for r in sent)

    def compacting(request: Chat, local: int) -> ChatResult:
        results = sum(1 for m in request.body["messages"] if m["role"] == "tool")
        return _answer("Reading.", local if results < 4 else local - 900 * (results - 3))

    assert _codes(_run("agent-loop", compacting)) == {"history_compacted"}

    def uncounted(request: Chat, local: int) -> ChatResult:
        answer = _answer("Reading.", local)
        answer.usage = None
        return answer

    assert _run("agent-loop", uncounted).status is Status.UNSUPPORTED


@pytest.mark.parametrize(
    ("ttft", "until"),
    [
        # A fixed overhead, then time in proportion: linear throughout.
        ({1024: 0.05, 2048: 0.06, 4096: 0.1, 8192: 0.2}, 8192),
        # From 8,192 the time per token doubles and more (attention's square takes over).
        ({1024: 0.05, 2048: 0.06, 4096: 0.1, 8192: 0.45, 16384: 1.9}, 4096),
        ({1024: 0.05}, None),
        ({}, None),
        # Answered in milliseconds: the request's overhead and jitter, not the prompt's time.
        ({1024: 0.002, 2048: 0.009, 4096: 0.003, 8192: 0.06, 16384: 0.12}, 16384),
        ({1024: 0.002, 2048: 0.003}, None),
    ],
)
def test_the_first_token_stops_growing_in_proportion(
    ttft: dict[int, float], until: int | None
) -> None:
    assert linear_until(ttft) == until


def test_each_rung_times_its_first_question_cold_and_the_report_shows_it() -> None:
    from verifier.compare.families import VIEWS

    sent: list[Chat] = []

    def timed(request: Chat, local: int) -> ChatResult:
        sent.append(request)
        first = request.body["messages"][-1]["content"] not in [
            r.body["messages"][-1]["content"] for r in sent[:-1]
        ]
        # 100 microseconds a token cold; hot, a millisecond.
        return _timed(_retriever(request, local), local * 1e-4 if first else 0.001)

    records = [
        CaseRecord(f"context/{case_id}", "context", _run(case_id, timed))
        for case_id in ("needles-1k", "needles-2k", "needles-4k")
    ]
    # The first question of a rung is streamed and begins with a nonce of its own.
    streamed = [r for r in sent if r.stream]
    assert len(streamed) == 3
    assert len({r.body["messages"][-1]["content"][:120] for r in streamed}) == 3
    metrics = FAMILIES["context"].summarize(records, None)  # type: ignore[misc]
    rates = [row["prefill_rate"] for row in metrics["speed"].values()]
    assert rates == pytest.approx([10_000] * 3)
    assert metrics["ttft_linear_until"] == int(max(metrics["speed"], key=int))
    key, tables = VIEWS["context"]([{"metrics": metrics}])
    speed = {table.title: table for table in tables}["Speed at length"]
    assert len(speed.rows) == 3 and "10,000 tokens/s" in speed.rows[0].cells[0].text
    cells = {row.label: row.cells[0].text for row in key}
    assert cells["first token linear in the prompt up to"].endswith("tokens")
