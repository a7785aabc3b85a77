"""The parity family on real servers: the trimmed prompts, the reference's recording, rulings.

llama-server serving the SmolLM2 GGUF with prompt caching off is the reference: one request at
a time, it gives the same logprobs bit for bit on every request and in a second process (seen),
so its noise floor is 0, and a prompt counts against a candidate when it differs by more than
the family's tolerance (verifier.checks.parity.TOLERANCE): the same weights under other
numerics differ by less on nearly every prompt (bench/parity_engines.py).

The real runs take the first sixteen prompts that are not long passages (chats, code, four
languages, tool-call turns: about 80 to 250 prompt tokens each). A ruling needs eight prompts
to say "same" and twelve when every prompt says "different" (four more leave room for a prompt
that ties), the family stops sending once both rulings are made, and the passages of several
hundred tokens cost seconds of prompt processing each on one thread while proving nothing more
about a serving stack than the shorter prompts do.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.conftest import VerifierRun, verify
from verifier.cases.corpus import load_corpus

KEPT = [c.id for c in load_corpus(["parity"]).cases if c.data["kind"] != "long"][:16]
# A -k expression of the kept prompts (no id is inside another).
SELECTION = " or ".join(KEPT)
# Every request's answer is 32 tokens at most; a loaded machine still answers in seconds.
TIMEOUT = 1800
# llama-server's prompt cache off: the next request recomputes its whole prompt.
NO_CACHE = ["--no-cache-prompt"]


# With logprobs only: a recording run also samples each prompt's first token 20 times (for
# candidates without logprobs), 320 more requests whose prompts are computed cold here.
BY_LOGPROBS = ("--parity-method", "logprobs")
# The sampling fallback on every prompt: samples of one prompt share it, so that with the
# prompt cache on each costs one token (and the long passages their length once).
BY_SAMPLING = ("--parity-method", "sampling")


def record(url: str, out: Path, *args: str, kept: Sequence[str] = KEPT) -> VerifierRun:
    """The reference's run: the `kept` prompts answered with logprobs and recorded
    (parity.json); or every prompt sampled, with `args` BY_SAMPLING."""
    selection = ("-k", " or ".join(kept)) if BY_SAMPLING != args else ()
    options = args or BY_LOGPROBS
    return verify(url, out, "--families", "parity", *options, *selection, timeout=TIMEOUT)


def compare_with(url: str, reference: VerifierRun, out: Path, *args: str) -> VerifierRun:
    """A candidate's run against the reference's recording (--baseline), on the kept prompts
    (those the recording has not answered are unsupported)."""
    baseline = str(reference.out / "scorecard.json")
    selection = ("-k", SELECTION) if BY_SAMPLING != args else ()
    return verify(
        url,
        out,
        *("--families", "parity", "--baseline", baseline, *selection, *args),
        timeout=TIMEOUT,
    )


def rulings(run: VerifierRun) -> dict[str, str]:
    """Each ruling's outcome: ``{"distribution": "same", "kv_cache": "different"}``."""
    family = run.family("parity")
    return {r["name"]: r["outcome"] for r in family.get("rulings", [])}


def ruling(run: VerifierRun, name: str) -> dict[str, Any]:
    """The ruling `name` with its prompts and requests."""
    return next(r for r in run.family("parity")["rulings"] if r["name"] == name)


def recorded_tokens(run: VerifierRun) -> dict[str, list[str]]:
    """Each prompt's first answer's tokens, from the journal (failed prompts' included)."""
    return {
        key.split("/", 1)[1]: outcome["metrics"]["recording"]["first"]["t"]
        for key, outcome in run.outcomes().items()
        if "recording" in outcome.get("metrics", {})
    }


def converted(llama_binary: Path, model: Path, target: Path, kind: str) -> Path:
    """`model` written as `kind` (Q8_0, Q2_K, F32, ...) by llama-quantize to `target` (seconds).

    From the shipped Q4_1 file, F32 holds the dequantised values as they are: exactly the
    float32 values the vLLM folder holds (tests/vllm/files.py dequantises the same file).
    """
    quantize = llama_binary.parent / "llama-quantize"
    done = subprocess.run(
        [str(quantize), "--allow-requantize", str(model), str(target), kind],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return target
