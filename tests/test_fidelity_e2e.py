"""Chat-template fidelity and tokenizer parity end to end on the simulated vendor with a profile."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from verifier import resources
from verifier.cases.corpus import load_corpus

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
KIMI = "kimi-k2"
TEMPLATE_CASES = len(load_corpus(["chat_template"]).cases)
# Kimi K2 Instruct's contract documents no partial mode: the partial probe does not apply.
PARTIAL = sum(c.data["probe"] == "partial" for c in load_corpus(["chat_template"]).cases)
TOKENIZER = load_corpus(["tokenizer"]).cases
ROUND_TRIPS = sum(c.data.get("check") == "detokenize" for c in TOKENIZER)


def fidelity_run(run_verifier: Run, url: str, profile: str | None, *args: str) -> VerifierRun:
    extra = ("--profile", profile) if profile else ()
    run = run_verifier(url, "--families", "chat_template,tokenizer", *extra, *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


@pytest.mark.parametrize("api", ["vllm", "llamacpp", "none"])
def test_clean_vendor_agrees_token_for_token(simulator: Start, run_verifier: Run, api: str) -> None:
    run = fidelity_run(run_verifier, simulator("--profile", KIMI, "--tokenizer-api", api), KIMI)
    assert run.returncode == 0, run.stdout[-3000:]
    template, tokenizer = run.family("chat_template"), run.family("tokenizer")
    assert template["counts"] == {
        "pass": TEMPLATE_CASES - PARTIAL,
        "fail": 0,
        "error": 0,
        "unsupported": PARTIAL,
    }
    assert template["metrics"]["constant_offset"] == 0
    unsupported = ROUND_TRIPS if api == "none" else 0
    assert tokenizer["counts"] == {
        "pass": len(TOKENIZER) - unsupported,
        "fail": 0,
        "error": 0,
        "unsupported": unsupported,
    }
    method = {
        "vllm": "tokenize_messages",
        "llamacpp": "apply_template_tokenize",
        "none": "prompt_tokens",
    }[api]
    assert set(tokenizer["metrics"]["methods"]) == {method}
    assert run.scorecard["profile"]["name"] == "kimi-k2"
    assert run.scorecard["endpoint"]["tokenizer_endpoints"]["method"] == method


def test_clean_vendor_with_the_small_trained_tokenizer(
    simulator: Start, run_verifier: Run, small_profile_dir: Path
) -> None:
    url = simulator("--profile", str(small_profile_dir))
    run = fidelity_run(run_verifier, url, str(small_profile_dir))
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.family("chat_template")["counts"]["fail"] == 0
    assert run.family("tokenizer")["counts"]["fail"] == 0


@pytest.mark.parametrize(
    ("defect", "offset"), [("prompt-tokens-skew:+3", 3), ("template-double-bos", 1)]
)
def test_a_constant_offset_is_measured(
    simulator: Start, run_verifier: Run, defect: str, offset: int
) -> None:
    """The codes each defect gives are in tests/defect_table.py; here, the offset metric."""
    url = simulator("--profile", KIMI, "--defect", defect)
    run = run_verifier(url, "--families", "chat_template", "--profile", KIMI)
    assert run.family("chat_template")["metrics"]["constant_offset"] == offset


def test_without_a_profile_nothing_passes_that_needs_one(
    simulator: Start, run_verifier: Run
) -> None:
    run = fidelity_run(run_verifier, simulator(), None, "-rs")
    template = run.family("chat_template")
    assert (
        template["counts"]["unsupported"] == TEMPLATE_CASES and template["verdict"] == "unsupported"
    )
    tokenizer = run.family("tokenizer")
    assert tokenizer["counts"]["unsupported"] == len(TOKENIZER)
    assert tokenizer["verdict"] == "unsupported"
    assert "unsupported: needs a reference profile (--profile)" in run.stdout


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("/no/such/folder", "ERROR: --profile: '/no/such/folder' is not a folder"),
        ("kimi-k2:/no/such/folder", "ERROR: --profile: '/no/such/folder' is not a folder"),
    ],
)
def test_bad_profile_is_one_line(
    simulator: Start, run_verifier: Run, profile: str, message: str
) -> None:
    run = run_verifier(simulator(), "--profile", profile)
    assert run.returncode == 4
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), run.stderr


def test_over_messages_and_responses_the_same_counts_and_the_counting_routes_agree(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    """Each probe's twins bill the reference's count, and each counting route says the same.

    The twins a translation cannot say are unsupported with the reason: Messages continues a
    final assistant message (the prefill probes) and needs a thinking block's signature,
    and Responses gives reasoning back as its own items (the reasoning-history probes).
    """
    url = simulator("--profile", KIMI)
    run = run_verifier(
        url, "--families", "chat_template", "--profile", KIMI, "--api", "chat,messages,responses"
    )
    assert run.returncode == 0, run.stdout[-3000:]
    records = [r for r in run.journal() if r["type"] == "outcome" and r.get("api")]
    assert {r["api"] for r in records} == {"messages", "responses"}
    routed = [r for r in records if "count_route" in r["outcome"]["metrics"]]
    assert routed, "no twin asked its counting route"
    for record in routed:
        metrics = record["outcome"]["metrics"]
        assert metrics["count_route"] == metrics["actual"] == metrics["expected"], record["case"]
    unsent = {r["case"] for r in records if r["outcome"]["status"] == "unsupported"}
    assert {r["case"] for r in records} - unsent == {r["case"] for r in routed}
    assert len(routed) == 2 * TEMPLATE_CASES - len(unsent)
    per_api = run.family("chat_template")["apis"]
    assert {api: entry["verdict"] for api, entry in per_api.items()} == {
        "chat": "pass",
        "messages": "pass",
        "responses": "pass",
    }
