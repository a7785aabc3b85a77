"""`verifier demo`: three simulated vendors verified, signed and compared in one command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import child_env
from verifier.scorecard import signing

pytestmark = pytest.mark.slow


def test_the_demo_verifies_signs_and_compares_simulated_vendors(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "SIMULATED" in done.stdout.splitlines()[0]
    assert f"comparison: {out / 'comparison.html'}" in done.stdout
    public = signing.load_public_key(out / "demo-signing.key.pub")
    verdicts = {}
    for name in ("clean", "json-and-tools", "stream-and-vision"):
        envelope = (out / name / "run" / "scorecard.dsse.json").read_bytes()
        transcript = (out / name / "run" / "transcript.jsonl").read_bytes()
        card = signing.verify_envelope(envelope, public, transcript=transcript)["predicate"]
        verdicts[name] = {f: v["verdict"] for f, v in card["families"].items()}
    # Kimi K2 Instruct does not reason: its contract states no thinking dialect.
    assert verdicts["clean"] == {
        **dict.fromkeys(verdicts["clean"], "pass"),
        "reasoning": "unsupported",
    }
    failing = {name: {f for f, v in fams.items() if v == "fail"} for name, fams in verdicts.items()}
    assert failing["json-and-tools"] == {"tool_calling", "structured_output"}
    assert failing["stream-and-vision"] == {"wire", "vision"}
    table = (out / "comparison.md").read_text()
    families = table.split("## Families", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0]: line for line in families.splitlines() if line.startswith("| ")}
    assert "▼" not in rows["| simulated clean"]
    assert rows["| simulated json-and-tools"].count("▼") >= 2
    assert rows["| simulated stream-and-vision"].count("▼") >= 2
    assert "signed, verified" in table
    assert (out / "comparison.html").read_text().startswith("<!DOCTYPE html>")
