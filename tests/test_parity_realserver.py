"""Parity on real servers: SmolLM2 on llama-server, against candidates that compute otherwise.

The reference is llama-server serving the SmolLM2 GGUF (Q4_1) with prompt caching off
(tests/parity_servers.py says why its noise floor is 0). Each candidate is started by the
fixtures and compared with the reference's recording (``--baseline``), on the same sixteen
prompts:

- the same file in a second process, caching off: the same distributions;
- the same file with llama-server's prompt cache on (its default): see
  :func:`test_prompt_cache_changes_what_a_repeated_prompt_computes`;
- the same weights requantised by ``llama-quantize --allow-requantize`` (Q8_0, Q4_0, Q3_K,
  Q2_K): each is detected;
- speculative decoding with a draft model (the same file), and n-gram drafting: see their tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from tests.llama.files import SMOLLM2_ARGS
from tests.llama.server import LlamaServer
from tests.parity_servers import (
    BY_SAMPLING,
    KEPT,
    NO_CACHE,
    compare_with,
    converted,
    record,
    recorded_tokens,
    ruling,
    rulings,
)

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

# llama.cpp's CPU repacking of Q4_1 dies with an illegal instruction here (tests/llama/files.py).
BASE = ["--no-repack", *SMOLLM2_ARGS]
QUANTS = ("Q8_0", "Q4_0", "Q3_K", "Q2_K")
# Speculative decoding is on only with a --spec-type; a draft model alone changes nothing.
DRAFT = ["--spec-type", "draft-simple"]
# n-gram drafting from the prompt and the answer so far: short n-grams, so that it drafts
# within 32 tokens (at its defaults it never drafted in 48, seen).
NGRAM = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3"]
NGRAM += ["--spec-ngram-simple-size-m", "8"]


@pytest.fixture(scope="module")
def model(smollm2_model: Path) -> Path:
    """The SmolLM2 file (tests/conftest.py: a skip without it, a failure in CI)."""
    return smollm2_model


@pytest.fixture(scope="module")
def serve(
    llama_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str, Path, list[str]], LlamaServer]]:
    """Start a llama-server by name (model, extra arguments); all are stopped at the end."""
    logs = tmp_path_factory.mktemp("parity-logs")
    started: list[LlamaServer] = []

    def start(name: str, model: Path, args: list[str]) -> LlamaServer:
        server = LlamaServer(llama_binary, model, [*BASE, *args], logs / f"{name}.log")
        started.append(server)
        server.wait_healthy()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def reference(
    serve: Callable[[str, Path, list[str]], LlamaServer],
    model: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> VerifierRun:
    """The reference's recording of the kept prompts."""
    return recorded("reference", NO_CACHE, serve, model, tmp_path_factory)


def recorded(
    name: str,
    args: list[str],
    serve: Callable[[str, Path, list[str]], LlamaServer],
    model: Path,
    tmp_path_factory: pytest.TempPathFactory,
    *verifier_args: str,
) -> VerifierRun:
    """A reference server `name` started with `args`, and its recording run."""
    server = serve(name, model, args)
    run = record(server.url, tmp_path_factory.mktemp(name) / "out", *verifier_args)
    assert run.returncode == 0, run.stdout[-3000:]
    return run


def candidate(
    name: str,
    model: Path,
    args: list[str],
    serve: Callable[[str, Path, list[str]], LlamaServer],
    reference: VerifierRun,
    tmp_path_factory: pytest.TempPathFactory,
    *verifier_args: str,
) -> VerifierRun:
    server = serve(name, model, args)
    out = tmp_path_factory.mktemp(f"parity-{name}") / "out"
    return compare_with(server.url, reference, out, *verifier_args)


def requantised(
    quant: str, llama_binary: Path, model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The model requantised to `quant` by llama-quantize (seconds)."""
    target = tmp_path_factory.mktemp("quants") / f"smollm2-{quant}.gguf"
    return converted(llama_binary, model, target, quant)


def test_the_reference_records_every_kept_prompt(reference: VerifierRun) -> None:
    family = reference.family("parity")
    # Nothing compared: recorded, neither graded nor passed.
    assert family["verdict"] == "recorded" and family["rulings"] == []
    assert family["cases"] == family["counts"]["unsupported"] == len(KEPT)
    assert (reference.out / "parity.json").is_file()


def test_the_same_file_in_a_second_process_is_the_same(
    serve: Callable[[str, Path, list[str]], LlamaServer],
    model: Path,
    reference: VerifierRun,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Bit for bit: every prompt ties with the reference, and both rulings say "same" as soon
    as they may (eight prompts)."""
    run = candidate("same-file", model, NO_CACHE, serve, reference, tmp_path_factory)
    assert run.returncode == 0, run.stdout[-3000:]
    assert rulings(run) == {"distribution": "same", "kv_cache": "same"}
    assert ruling(run, "distribution")["prompts"] == 8
    metrics = run.family("parity")["metrics"]
    assert metrics["divergence"]["mean"] == 0.0
    assert metrics["continuation_agreement"]["rate"] == 1.0


def test_prompt_cache_changes_what_a_repeated_prompt_computes(
    serve: Callable[[str, Path, list[str]], LlamaServer],
    model: Path,
    reference: VerifierRun,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A real finding: with its prompt cache on (llama-server's default), a prompt sent again
    is answered with other logprobs than the first time.

    Cause: the repeat reuses the cached KV of all but the last prompt token and computes that
    token alone, where the first request computed the whole prompt as one batch; llama.cpp's
    CPU kernels take another path for a batch of one than for a long batch, and the sums
    come out differently (from about 69 prompt tokens on: every kept prompt is longer). The
    first answers, computed as the reference computes them, are the same as the reference's.
    """
    run = candidate("prompt-cache", model, [], serve, reference, tmp_path_factory)
    assert rulings(run) == {"distribution": "same", "kv_cache": "different"}
    assert run.family("parity")["codes"] == {"kv_cache_divergence": 1}
    assert run.returncode == 1


@pytest.mark.parametrize("quant", QUANTS)
def test_requantised_weights_are_detected(
    quant: str,
    serve: Callable[[str, Path, list[str]], LlamaServer],
    llama_binary: Path,
    model: Path,
    reference: VerifierRun,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each requantisation shifts the distributions at every prompt: "different" after
    twelve prompts, the fewest the test allows."""
    target = requantised(quant, llama_binary, model, tmp_path_factory)
    run = candidate(quant, target, NO_CACHE, serve, reference, tmp_path_factory)
    distribution = ruling(run, "distribution")
    assert distribution["outcome"] == "different", run.stdout[-3000:]
    assert distribution["code"] == "distribution_shift"
    assert distribution["prompts"] == 12
    assert run.returncode == 1


@pytest.mark.parametrize("drafting", ["draft-model", "ngram"])
def test_speculative_decoding_keeps_the_greedy_text_and_loses_the_drafted_logprobs(
    drafting: str,
    serve: Callable[[str, Path, list[str]], LlamaServer],
    model: Path,
    reference: VerifierRun,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A real finding: with speculative decoding on (a draft model, the same file; or n-gram
    drafting from the text so far), the greedy answers are the reference's, token for token,
    but every token a draft proposed and the model accepted comes back with ``logprob: 0.0``
    and no alternatives: llama.cpp gives no distribution for an accepted draft token. A
    prompt with such a token is ``logprobs_incomplete``, and the family stops once eight
    prompts have failed (which prompts draw a draft depends on the drafting)."""
    args = ["-md", str(model), *DRAFT] if drafting == "draft-model" else NGRAM
    run = candidate(drafting, model, [*args, *NO_CACHE], serve, reference, tmp_path_factory)
    family = run.family("parity")
    assert set(family["codes"]) == {"logprobs_incomplete"}, run.stdout[-3000:]
    assert family["counts"]["fail"] == 8
    tokens, expected = recorded_tokens(run), recorded_tokens(reference)
    assert tokens and all(tokens[c] == expected[c] for c in tokens)
    assert run.returncode == 1


@pytest.fixture(scope="module")
def sampling_reference(
    serve: Callable[[str, Path, list[str]], LlamaServer],
    model: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> VerifierRun:
    """The reference's first tokens, sampled on every prompt (its prompt cache on)."""
    return recorded("sampling-reference", [], serve, model, tmp_path_factory, *BY_SAMPLING)


@pytest.mark.parametrize(("quant", "outcome"), [(None, "same"), ("Q2_K", "different")])
def test_sampled_first_tokens_without_logprobs(
    quant: str | None,
    outcome: str,
    serve: Callable[[str, Path, list[str]], LlamaServer],
    llama_binary: Path,
    model: Path,
    sampling_reference: VerifierRun,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The sampling fallback, compared as a vendor without logprobs is: the same file is
    the same within the test's resolution, and Q2_K, the coarsest requantisation, moves the
    first token's distribution far enough to be found."""
    target = model if quant is None else requantised(quant, llama_binary, model, tmp_path_factory)
    name = f"sampling-{quant or 'same-file'}"
    run = candidate(name, target, [], serve, sampling_reference, tmp_path_factory, *BY_SAMPLING)
    distribution = ruling(run, "distribution")
    assert (distribution["method"], distribution["outcome"]) == ("sampling", outcome)
    assert distribution["prompts"] == 24 and distribution["requests"] == 480
    assert set(run.family("parity")["codes"]) == ({"distribution_shift"} if quant else set())
