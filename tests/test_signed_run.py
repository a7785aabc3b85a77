"""A run signed with --sign-key, verified, tampered with, and verified by another implementation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from tests.conftest import VerifierRun, child_env
from verifier.scorecard import signing

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
FAMILIES = ("--families", "wire", "--repeats", "1")


def verifier(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *map(str, args)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )


def test_sign_verify_tamper_and_verify_again(
    simulator: Start, run_verifier: Run, sign_key: Path, tmp_path: Path
) -> None:
    run = run_verifier(simulator(), *FAMILIES, "--sign-key", str(sign_key))
    assert run.returncode == 0, run.stdout[-2000:]
    envelope = run.out / "scorecard.dsse.json"
    transcript = run.out / "transcript.jsonl"
    assert f"signed: {envelope}" in run.stdout
    public = f"{sign_key}.pub"
    valid = verifier("verify", envelope, "--key", public, "--transcript", transcript)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("valid: signed by ") and "verdict PASS" in valid.stdout
    # The statement's predicate is the scorecard written beside it, unchanged.
    statement = signing.read_statement(envelope.read_bytes())
    assert statement["predicate"] == run.scorecard
    assert statement["subject"][1]["digest"]["sha256"] == run.scorecard["corpus"]["digest"]

    data = bytearray(transcript.read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(bytes(data))
    changed = verifier("verify", envelope, "--key", public, "--transcript", tampered)
    assert changed.returncode == 1
    assert "transcript's sha256 is" in changed.stderr and changed.stderr.count("\n") == 1

    edited = tmp_path / "edited.dsse.json"
    raw = bytearray(envelope.read_bytes())
    raw[40] ^= 0x04
    edited.write_bytes(bytes(raw))
    assert verifier("verify", edited, "--key", public).returncode == 1

    other, other_public = signing.generate_key(tmp_path / "other.key")
    wrong = verifier("verify", envelope, "--key", other_public)
    assert wrong.returncode == 1 and "signed with key" in wrong.stderr


def test_securesystemslib_verifies_the_envelope_a_run_writes(
    simulator: Start, run_verifier: Run, sign_key: Path
) -> None:
    run = run_verifier(simulator(), *FAMILIES, "--sign-key", str(sign_key))
    public = signing.load_public_key(Path(f"{sign_key}.pub"))
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    sslib = SSlibKey(signing.key_id(public), "ed25519", "ed25519", {"public": raw.hex()})
    envelope = Envelope.from_dict(json.loads((run.out / "scorecard.dsse.json").read_bytes()))
    assert envelope.verify([sslib], 1) == {signing.key_id(public): sslib}
    assert json.loads(envelope.payload)["predicate"]["verdict"] == "pass"


@pytest.mark.parametrize("which", ["missing", "public"])
def test_a_bad_signing_key_stops_the_run_before_any_request(
    simulator: Start, run_verifier: Run, sign_key: Path, which: str
) -> None:
    path = sign_key.parent / "nope.key" if which == "missing" else Path(f"{sign_key}.pub")
    run = run_verifier(simulator(), *FAMILIES, "--sign-key", str(path))
    assert run.returncode == 4
    assert run.stderr.startswith("ERROR: ") and str(path) in run.stderr
    assert not (run.out / "transcript.jsonl").exists()


def test_an_unsigned_rerun_leaves_no_stale_envelope(
    simulator: Start, run_verifier: Run, sign_key: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    url = simulator()
    run_verifier(url, *FAMILIES, "--sign-key", str(sign_key), out=out)
    assert (out / "scorecard.dsse.json").exists()
    resumed = run_verifier(url, *FAMILIES, "--resume", out=out)
    assert resumed.returncode == 0
    assert not (out / "scorecard.dsse.json").exists()
    assert (out / "scorecard.md").read_text().strip()
