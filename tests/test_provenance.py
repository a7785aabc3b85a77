"""What a scorecard records about the run, and its agreement with a baseline run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun, fake_key
from verifier.checks.support.common import agreement
from verifier.endpoint.probe import identifying_headers
from verifier.scorecard.provenance import endpoint_records, seen_in_transcript

Run = Callable[..., VerifierRun]
Start = Callable[..., str]


def line(response: object) -> bytes:
    return json.dumps({"label": "x", "response": response}).encode()


def test_served_models_and_fingerprints_are_counted_over_every_answer() -> None:
    lines = [
        line({"model": "m", "system_fingerprint": "fp_a"}),
        line([{"model": "m", "system_fingerprint": "fp_b"}, {"model": "m"}, "junk"]),
        line({"error": {"message": "no"}}),
        line(None),
        b'{"torn": ',
    ]
    seen = seen_in_transcript(endpoint_records(lines))
    assert seen["served_models"] == {"m": 3}
    assert seen["system_fingerprints"] == {"fp_a": 1, "fp_b": 1}
    assert not any(seen["faults"].values())


def test_identifying_headers_keep_the_server_and_drop_secrets() -> None:
    headers = {
        "server": "vllm/0.11",
        "via": "1.1 gateway",
        "x-powered-by": fake_key("live"),
        "openai-version": "a" * 40,
        "date": "today",
        "authorization": "Bearer x",
    }
    assert identifying_headers(headers) == {"server": "vllm/0.11", "via": "1.1 gateway"}


def test_agreement_lists_what_differs() -> None:
    ours = {"a": 5, "b": 6, "c": 7, "only-ours": 1}
    theirs = {"a": 5, "b": 9, "c": 7, "only-theirs": 2}
    result = agreement(ours, theirs)
    assert result["cases"] == 3
    assert result["agreement"]["successes"] == 2 and result["agreement"]["trials"] == 3
    assert result["differ"] == [{"case": "b", "here": 6, "baseline": 9}]
    assert (result["only_here"], result["only_in_baseline"]) == (1, 1)


@pytest.mark.slow
def test_the_scorecard_records_the_run_s_provenance(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(simulator(), "--families", "wire", "--repeats", "1")
    card = run.scorecard
    endpoint = card["endpoint"]
    assert endpoint["requested_model"] is None and endpoint["model"] == "simulated-tiny"
    assert list(endpoint["served_models"]) == ["simulated-tiny"]
    assert list(endpoint["system_fingerprints"]) == ["fp_simulated"]
    assert endpoint["system_fingerprints"]["fp_simulated"] > 50
    assert endpoint["server"]["server"].startswith("verifier-simulator")
    assert card["settings"]["temperature"] == 0 and card["settings"]["concurrency"] == 1
    lines = (run.out / "transcript.jsonl").read_bytes()
    assert card["transcript"]["records"] == lines.count(b"\n")
    assert card["verifier"]["version"] and card["corpus"]["families"]["wire"]


@pytest.mark.slow
def test_a_baseline_run_is_compared_case_by_case(
    simulator: Start, run_verifier: Run, small_profile_dir: Path, tmp_path: Path
) -> None:
    profile = str(small_profile_dir)
    families = ("--families", "chat_template,vision", "--profile", profile)
    reference = run_verifier(simulator("--profile", profile), *families)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(reference.scorecard))
    same = run_verifier(simulator("--profile", profile), *families, "--baseline", str(baseline))
    for name in ("chat_template", "vision"):
        agreed = same.family(name)["metrics"]["baseline"]
        assert agreed["agreement"]["rate"] == 1.0 and agreed["differ"] == [], name
    other = run_verifier(
        simulator(
            "--profile",
            profile,
            "--defect",
            "prompt-tokens-skew:+2",
            "--defect",
            "vision-order-swapped",
        ),
        *families,
        "--baseline",
        str(baseline),
    )
    tokens = other.family("chat_template")["metrics"]["baseline"]
    assert tokens["agreement"]["successes"] == 0
    first = tokens["differ"][0]
    assert first["here"] == first["baseline"] + 2
    answers = other.family("vision")["metrics"]["baseline"]
    assert {d["case"] for d in answers["differ"]} == {
        "two-images-order",
        "two-images-text-around",
        "three-digits-order",
        "ten-digits-order",
    }
    assert {d["here"] for d in answers["differ"]} == {"image_order_swapped"}
