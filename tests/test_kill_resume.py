"""SIGKILL at seeded points of a run, then --resume: same outcomes, nothing twice, nothing lost."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun, child_env, verifier_command
from verifier.cases.corpus import load_corpus

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
FAMILY = ("--families", "structured_output")
N_CASES = len(load_corpus(["structured_output"]).cases)
# Seeds; even ones kill a run without xdist, odd ones a run with four workers.
KILL_POINTS = 20
# A vendor slow enough that a kill lands mid-run, with a defect so that fails are resumed too.
VENDOR = ("--latency-ms", "15", "--defect", "json-in-markdown-fence")
REFERENCE: dict[str, dict[str, tuple[str, str | None]]] = {}


def graded(run: VerifierRun) -> dict[str, tuple[str, str | None]]:
    return {key: (o["status"], o.get("code")) for key, o in run.outcomes().items()}


def journaled(journal: Path) -> int:
    """Outcome lines in the journal so far (a torn last line is not one)."""
    try:
        return journal.read_bytes().count(b'"type": "outcome"')
    except FileNotFoundError:
        return 0


def kill_at(url: str, out: Path, workers: str, seed: int) -> tuple[int, bool, int]:
    """Run the verifier and SIGKILL its process group at the seed's point.

    Returns the outcomes journaled by then, whether the journal was started, and the
    seed's point (0: at the start; N_CASES: after the last case; else mid-run).
    """
    rng = random.Random(seed)
    # Most kills land mid-run; some right at the start (no journal yet), some after the
    # last case (the scorecard not written yet).
    target = rng.choice([0, N_CASES, *[rng.randrange(1, N_CASES)] * 6])
    args = (*FAMILY, "-n", workers, "--concurrency", str(rng.choice([1, 4])))
    process = subprocess.Popen(
        verifier_command(url, out, *args),
        cwd=out.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=child_env(),
    )
    journal = out / "journal.jsonl"
    if target == 0:
        time.sleep(rng.uniform(0.0, 1.5))
    else:
        deadline = time.monotonic() + 120
        while journaled(journal) < target and time.monotonic() < deadline:
            if process.poll() is not None:
                break
            time.sleep(0.005)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    seen = journaled(journal)
    if rng.random() < 0.3 and journal.exists():
        # A kill in the middle of a write: the last line is cut short.
        with journal.open("ab") as handle:
            handle.write(b'{"type": "outcome", "case": "structured_output/torn", "outc')
    return seen, journal.exists(), target


@pytest.mark.parametrize("seed", range(KILL_POINTS))
def test_resume_after_a_seeded_kill_gives_the_uninterrupted_outcomes(
    simulator: Start, run_verifier: Run, tmp_path: Path, seed: int
) -> None:
    workers = "0" if seed % 2 == 0 else "4"
    url = simulator(*VENDOR)
    if workers not in REFERENCE:
        reference = run_verifier(url, *FAMILY, "-n", workers)
        assert reference.returncode == 1, reference.stdout[-2000:]
        REFERENCE[workers] = graded(reference)
    out = tmp_path / "killed"
    before, started, target = kill_at(url, out, workers, seed)
    if 0 < target:
        # The kill came once `target` cases were journaled: where it lands after that depends
        # on the machine's load (a busy machine may even finish the run first), so the test
        # takes the point where it landed, and asserts nothing about timing.
        assert started and target <= before, (target, before)
    resumed = run_verifier(url, *FAMILY, "-n", workers, "--resume", out=out)
    assert resumed.returncode == 1, resumed.stdout[-2000:] + resumed.stderr
    assert graded(resumed) == REFERENCE[workers], "same outcomes as the uninterrupted run"
    keys = [r["case"] for r in resumed.journal() if r["type"] == "outcome"]
    assert len(keys) == len(set(keys)) == N_CASES, "nothing journaled twice, nothing lost"
    card = resumed.scorecard
    assert sum(card["families"]["structured_output"]["counts"].values()) == N_CASES
    assert card["run"]["sessions"] == (2 if started else 1)
    if before:
        assert f"verifier resume: {before} cases already graded" in resumed.stdout
    records = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    assert all(isinstance(r.get("label"), str) for r in records), "the merged transcript is whole"
    if started:
        journal = resumed.journal()
        marker = next(i for i, r in enumerate(journal) if r["type"] == "resume")
        graded_before = {r["case"] for r in journal[:marker] if r["type"] == "outcome"}
        resent = {
            r["label"].partition("#")[0]
            for r in records
            if r["time"] >= journal[marker]["started"]
            and r["label"].partition("#")[0] in graded_before
        }
        assert resent == set(), "a case graded before the kill is not sent again"
        sent_before = {
            r["label"].partition("#")[0] for r in records if r["time"] < journal[marker]["started"]
        }
        assert graded_before <= sent_before, "a journaled case's attempts survive the kill"
