"""The parity family against the simulated vendor over loopback: live, recorded, refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VerifierRun
from verifier import resources
from verifier.cases.corpus import load_corpus

pytestmark = pytest.mark.slow

Start = Callable[..., str]
Run = Callable[..., VerifierRun]
PROMPTS = len(load_corpus(["parity"]).cases)


def valid(run: VerifierRun) -> dict[str, object]:
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run.scorecard


def rulings(run: VerifierRun) -> dict[str, tuple[str, int]]:
    return {r["name"]: (r["outcome"], r["prompts"]) for r in run.family("parity")["rulings"]}


def test_a_clean_vendor_against_itself_is_the_same_and_stops_when_ruled(
    simulator: Start, run_verifier: Run
) -> None:
    reference, vendor = simulator(), simulator("--fault-seed", "1")
    run = run_verifier(
        vendor, "--families", "parity", "--reference-endpoint", reference, "-rs", "--gate"
    )
    card = valid(run)
    assert run.returncode == 0, run.stdout[-3000:]
    assert rulings(run) == {"distribution": ("same", 8), "kv_cache": ("same", 8)}
    # Eight prompts are what the sequential test needed to say "same": the gate counts that,
    # not the ten cases a family without rulings needs.
    assert card["gate"]["families"]["parity"] == {"gated": True, "passed": True, "missed": []}
    family = run.family("parity")
    assert family["verdict"] == "pass" and family["cases"] == 8
    assert f"SKIPPED [{PROMPTS - 8}]" in run.stdout
    assert "parity: decided after 8 prompts (distribution same, kv_cache same)" in run.stdout
    assert card["settings"]["reference"] == {"endpoint": reference, "model": "simulated-tiny"}
    # The reference's requests are in the transcript, marked, and not the endpoint's.
    records = [json.loads(line) for line in (run.out / "transcript.jsonl").open()]
    marked = [r for r in records if r.get("target") == "reference"]
    assert marked and all(r["url"].startswith(reference) for r in marked)
    assert all(r["url"].startswith(vendor) for r in records if r not in marked)
    # The recording beside the scorecard is the one it digests.
    recording = family["metrics"]["recording"]
    data = (run.out / recording["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == recording["sha256"]
    assert len(json.loads(data)["prompts"]) == recording["prompts"] == 8


def test_a_recording_is_a_baseline_and_an_edited_one_is_refused(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    reference = run_verifier(simulator(), "--families", "parity", "-rs", out=tmp_path / "reference")
    assert reference.returncode == 0, reference.stdout[-3000:]
    recorded = reference.family("parity")
    assert recorded["rulings"] == []
    assert recorded["cases"] == recorded["counts"]["unsupported"] == PROMPTS
    # Nothing compared: recorded, not graded and not passed, and the terminal says so.
    assert (recorded["verdict"], recorded["score"], reference.scorecard["verdict"]) == (
        "recorded",
        None,
        "recorded",
    )
    assert f"parity  RECORDED     {PROMPTS} recorded, nothing compared" in reference.stdout
    assert f"SKIPPED [{PROMPTS}] parity::" not in reference.stdout
    assert "recorded: nothing to compare with (no --reference-endpoint or --baseline)" in (
        reference.stdout
    )
    baseline = str(tmp_path / "reference" / "scorecard.json")
    same = run_verifier(simulator(), "--baseline", baseline, "--families", "parity")
    assert rulings(same) == {"distribution": ("same", 8), "kv_cache": ("same", 8)}
    shifted = run_verifier(
        simulator("--defect", "weights-perturbed:0.02"),
        "--baseline",
        baseline,
        "--families",
        "parity",
    )
    assert rulings(shifted)["distribution"] == ("different", 12)
    assert shifted.returncode == 1
    with (tmp_path / "reference" / "parity.json").open("ab") as recording:
        recording.write(b" ")
    edited = run_verifier(simulator(), "--baseline", baseline, "--families", "parity")
    assert edited.returncode == 4
    assert "is not the recording of that run" in edited.stderr


def test_without_a_reference_parity_runs_only_when_named(
    simulator: Start, run_verifier: Run
) -> None:
    run = run_verifier(simulator(), "--families", "wire", "-k", "max-tokens-1")
    assert set(run.scorecard["families"]) == {"wire"}


def test_an_endpoint_without_logprobs_is_unsupported_and_fails_a_gate_that_requires_parity(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    """Unless parity may sample instead (the default): see the next tests."""
    thresholds = tmp_path / "gate.toml"
    thresholds.write_text("[parity]\nrequire = true\n")
    run = run_verifier(
        simulator("--defect", "logprobs-unavailable"),
        *("--families", "parity", "--reference-endpoint", simulator()),
        *("--gate-thresholds", str(thresholds), "--parity-method", "logprobs"),
    )
    assert run.scorecard["settings"]["parity_method"] == "logprobs"
    family = run.family("parity")
    assert family["verdict"] == "unsupported"
    messages = {o["message"] for o in run.outcomes().values()}
    assert messages == {"unsupported: the answer to logprobs: true has no logprobs"}
    assert {o["code"] for o in run.outcomes().values()} == {"logprobs_unavailable"}
    assert run.scorecard["gate"]["passed"] is False
    assert run.returncode == 1


def sampling(run: VerifierRun) -> dict[str, Any]:
    """The one ruling of a run compared by sampling, checked to be that."""
    (ruling,) = run.family("parity")["rulings"]
    assert (ruling["name"], ruling["method"]) == ("distribution", "sampling")
    return ruling


def test_without_logprobs_a_recording_is_compared_by_sampled_first_tokens(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    """The reference's recording holds first tokens sampled with its seeds besides its
    logprobs; a candidate without logprobs is compared with them, by the weaker test."""
    reference = run_verifier(simulator(), "--families", "parity", out=tmp_path / "reference")
    recorded = json.loads((tmp_path / "reference" / "parity.json").read_bytes())["prompts"]
    assert len(recorded) == PROMPTS
    assert all(len(r["samples"]) == 20 and "first" in r for r in recorded.values())
    assert reference.family("parity")["cases"] == PROMPTS
    baseline = ("--baseline", str(tmp_path / "reference" / "scorecard.json"))
    same = run_verifier(
        simulator("--defect", "logprobs-unavailable"), *baseline, "--families", "parity"
    )
    ruling = sampling(same)
    assert (ruling["outcome"], ruling["prompts"], ruling["requests"]) == ("same", PROMPTS, 480)
    assert same.returncode == 0 and same.family("parity")["codes"] == {}
    assert "by sampled first tokens, a weaker test" in same.stdout
    shifted = run_verifier(
        simulator("--defect", "logprobs-unavailable", "--defect", "weights-perturbed:2"),
        *baseline,
        *("--families", "parity"),
    )
    assert sampling(shifted)["outcome"] == "different"
    assert set(shifted.family("parity")["codes"]) == {"distribution_shift"}
    assert shifted.returncode == 1


def test_parity_method_sampling_asks_both_live_sides_for_samples_and_a_gate_can_pass_it(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    thresholds = tmp_path / "gate.toml"
    thresholds.write_text("[parity]\nrequire = true\n")
    reference, vendor = simulator(), simulator("--fault-seed", "1")
    run = run_verifier(
        vendor,
        *("--families", "parity", "--reference-endpoint", reference),
        *("--parity-method", "sampling", "--gate-thresholds", str(thresholds)),
    )
    ruling = sampling(run)
    assert (ruling["outcome"], ruling["requests"]) == ("same", PROMPTS * 40)
    assert ruling["resolution"] <= 0.2 and ruling["test"]["false_alarm_rate"] == 0.01
    assert run.scorecard["gate"]["passed"] is True and run.returncode == 0
    records = [json.loads(line) for line in (run.out / "transcript.jsonl").open()]
    samples = [r for r in records if "sample-" in r["label"]]
    assert len(samples) == PROMPTS * 40
    # Independent sides: no seed is used by both.
    seeds = {
        side: {r["request"]["seed"] for r in samples if (r.get("target") == "reference") == side}
        for side in (True, False)
    }
    assert not seeds[True] & seeds[False]


def test_a_noisy_vendor_against_its_own_noise_is_not_called_different(
    simulator: Start, run_verifier: Run
) -> None:
    """Both sides nondeterministic (as batched kernels are): the floor is not 0, and the
    vendor is no farther from the reference than the reference is from itself."""
    reference = simulator("--logit-noise", "0.2")
    vendor = simulator("--logit-noise", "0.2", "--fault-seed", "7")
    run = run_verifier(vendor, "--families", "parity", "--reference-endpoint", reference)
    metrics = run.family("parity")["metrics"]
    assert metrics["divergence"]["floor_mean"] > 0
    assert run.family("parity")["verdict"] != "fail", run.stdout[-3000:]


def test_an_unreachable_reference_stops_the_run_in_one_line(
    simulator: Start, run_verifier: Run, refused_port: int
) -> None:
    run = run_verifier(
        simulator(),
        *("--families", "parity", "--reference-endpoint", f"http://127.0.0.1:{refused_port}"),
    )
    assert run.returncode == 4
    assert f"cannot reach http://127.0.0.1:{refused_port}/v1" in run.stderr
