"""The context family end to end on the simulated vendor: clean, a smaller window, the cap.

Each context defect's exact codes are asserted by tests/test_defect_codes_context.py; the real
servers' behaviour at and past their windows by tests/test_smollm2.py and
tests/test_realserver.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import VerifierRun
from verifier import resources
from verifier.reference.profiles import load_profile

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
# Kimi K2 Instruct's release: 131,072 tokens; the ladder's rungs that fit it with an answer.
FITS = {f"needles-{n}k" for n in (1, 2, 4, 8, 16, 32, 64)} | {"needles-window"}


def context_run(run_verifier: Run, url: str, *args: str) -> VerifierRun:
    run = run_verifier(url, "--profile", "kimi-k2", "--families", "context", *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


def by_id(run: VerifierRun) -> dict[str, dict[str, object]]:
    return {key.split("/", 1)[1]: o for key, o in run.outcomes().items()}


def test_clean_vendor_passes_every_case_its_window_holds(
    simulator: Start, run_verifier: Run
) -> None:
    run = context_run(run_verifier, simulator("--profile", "kimi-k2"))
    assert run.returncode == 0, run.stdout[-3000:]
    found = by_id(run)
    passed = {k for k, o in found.items() if o["status"] == "pass"}
    assert passed == {
        "window",
        "over-window",
        "output-past-window",
        "cache-hot",
        "shared-prefix",
        "agent-loop",
        *FITS,
    }
    for case_id in set(found) - passed:
        assert "do not fit the window of 131,072" in str(found[case_id]["message"]), case_id
    metrics = run.family("context")["metrics"]
    assert metrics["window"] == {
        "window": 131072,
        "stated": 131072,
        "stated_by": "GET /v1/models max_model_len",
        "release": 131072,
        "release_original": 4096,
    }
    retrieval = metrics["retrieval"]
    assert len(retrieval) == len(FITS)
    assert all(row["found"] == row["graded"] == 3 for row in retrieval.values())
    assert max(int(n) for n in retrieval) > 130_000
    # Every rung's first question timed; the vendor computes 2 microseconds a token cold.
    assert set(metrics["speed"]) == set(retrieval)
    # Where the time stops growing in proportion is a reading of timings (tests/test_context.py
    # holds the rule to fixed ones): here only that it names a rung.
    assert metrics["ttft_linear_until"] in {int(n) for n in retrieval}
    cache = found["cache-hot"]["metrics"]
    # Whole blocks of 16, the last token computed again.
    served = cache["tokens"] - 1
    assert cache["quicker"] and cache["cached_tokens"] == served - served % 16
    # The speed at length is in the performance section too, and in scorecard.md's.
    at_length = run.scorecard["performance"]["at_length"]
    assert at_length["prefill"] == metrics["speed"]
    assert at_length["ttft_linear_until"] == metrics["ttft_linear_until"]
    assert at_length["cache"]["cached_tokens"] == cache["cached_tokens"]
    markdown = (run.out / "scorecard.md").read_text()
    section = markdown[markdown.index("### At length") : markdown.index("## Worst failures")]
    assert section.count("\n| ") == len(retrieval) + 2
    assert f"cached tokens reported: {cache['cached_tokens']:,}." in section


def test_a_window_below_the_release_is_said_with_both_figures(
    simulator: Start, run_verifier: Run
) -> None:
    run = context_run(run_verifier, simulator("--profile", "kimi-k2", "--window", "4096"))
    family = run.family("context")
    assert set(family["codes"]) == {"window_below_release"}
    found = by_id(run)
    assert "states a window of 4,096 tokens; the release's is 131,072" in str(
        found["window"]["message"]
    )
    passed = {k for k, o in found.items() if o["status"] == "pass"}
    assert passed == {
        "over-window",
        "output-past-window",
        "agent-loop",
        "needles-1k",
        "needles-2k",
        "needles-window",
    }
    # Its prefix cache keeps prompts of 4,096 tokens or more: none fits this window.
    for case_id in ("cache-hot", "shared-prefix"):
        assert "no sign of a prefix cache" in str(found[case_id]["message"])


def test_max_context_caps_every_long_prompt_and_says_so(
    simulator: Start, run_verifier: Run
) -> None:
    run = context_run(run_verifier, simulator("--profile", "kimi-k2"), "--max-context", "8192")
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.scorecard["settings"]["max_context"] == 8192
    found = by_id(run)
    passed = {k for k, o in found.items() if o["status"] == "pass"}
    assert passed == {
        "window",
        "cache-hot",
        "shared-prefix",
        "agent-loop",
        "needles-1k",
        "needles-2k",
        "needles-4k",
        "needles-8k",
    }
    messages = {k: str(o["message"]) for k, o in found.items() if k not in passed}
    assert "past --max-context 8,192" in messages["needles-16k"]
    assert "past --max-context 8,192" in messages["over-window"]
    assert "below the window" in messages["needles-window"]
    # The cache check's prompt is shortened to the cap.
    assert found["cache-hot"]["metrics"]["tokens"] <= 8192
    assert found["shared-prefix"]["metrics"]["tokens"] <= 8192
    # No prompt sent is longer than the cap, counted with the release's template and tokenizer.
    kimi = load_profile("kimi-k2")
    sent = [json.loads(line) for line in (run.out / "transcript.jsonl").read_text().splitlines()]
    lengths = [len(kimi.prompt_ids(r["request"]["messages"])) for r in sent if r["request"]]
    assert len(lengths) > 20 and max(lengths) <= 8192


def test_bad_window_options_are_one_line_errors(run_verifier: Run, simulator: Start) -> None:
    run = run_verifier(simulator("--profile", "kimi-k2"), "--max-context", "0")
    assert run.returncode == 4
    assert "--max-context" in run.stderr and "a whole number >= 1" in run.stderr


def test_what_each_api_says_for_itself_is_checked_through_it(
    simulator: Start, run_verifier: Run
) -> None:
    """The refusal, the answer cut at the window, the cache's field and the tool history go
    through every API; the ladder, the window and the shared prefix once, over chat."""
    run = context_run(
        run_verifier, simulator("--profile", "kimi-k2"), "--api", "chat,messages,responses"
    )
    assert run.returncode == 0, run.stdout[-3000:]
    twins = {key.split("/", 1)[1]: o for key, o in run.outcomes().items() if key.endswith("]")}
    every = ("over-window", "output-past-window", "cache-hot", "agent-loop")
    assert set(twins) == {f"{c}[{api}]" for c in every for api in ("messages", "responses")}
    assert {o["status"] for o in twins.values()} == {"pass"}
    # Each API refuses in its own words, and each is read as a refusal for length.
    assert "tokens > 131072 maximum" in str(twins["over-window[messages]"]["metrics"]["refusal"])
    assert "exceeds the context window" in str(
        twins["over-window[responses]"]["metrics"]["refusal"]
    )
    # Messages says its cache reads apart (cache_read_input_tokens), Responses in
    # input_tokens_details: the same figure as chat's.
    chat = by_id(run)["cache-hot"]["metrics"]["cached_tokens"]
    for api in ("messages", "responses"):
        assert twins[f"cache-hot[{api}]"]["metrics"]["cached_tokens"] == chat
        loop = twins[f"agent-loop[{api}]"]["metrics"]
        assert loop["prompt_tokens"] == loop["tokens"]
