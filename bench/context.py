"""What the context family costs the verifier: exact counts of long prompts, and a whole run.

Two measurements:

- **Building and counting a prompt.** A haystack of N tokens (filler drawn from a seed, three
  needles) built and counted with the Kimi K2 profile's own template and tokenizer, at each
  length of the ladder up to ``--max`` (default a million tokens): the median of ``--runs``.
  The issue's goal: a million tokens counted well under a second.
- **The family against the clean simulated vendor** (Kimi K2 Thinking's window of 262,144
  tokens): the wall time of the run and the prompt tokens it sent.

    python bench/context.py
    python bench/context.py --max 65536 --runs 1

The last line is one JSON record.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifier.checks.support import haystack  # noqa: E402
from verifier.reference.profiles import load_profile  # noqa: E402
from verifier.simulator.process import SimulatorProcess, child_env  # noqa: E402

PROFILE = "kimi-k2-thinking"


def counting(top: int, runs: int) -> list[dict[str, Any]]:
    """Seconds to build and count a prompt at each ladder length up to `top`."""
    profile = load_profile(PROFILE)
    needles = haystack.needles(1)
    rows = []
    length = 1024
    while length <= top:
        times = []
        for run in range(runs):
            start = time.perf_counter()
            _, counted = haystack.build(profile, length, run, needles, needles[0].question)
            times.append(time.perf_counter() - start)
        rows.append({"tokens": length, "counted": counted, "seconds": statistics.median(times)})
        length *= 2
    return rows


def family_run() -> dict[str, Any]:
    """The context family against the clean simulated vendor: wall time and tokens sent."""
    vendor = SimulatorProcess(["--profile", PROFILE])
    try:
        with tempfile.TemporaryDirectory() as folder:
            command = [
                *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
                *("--endpoint", vendor.url, "--out", f"{folder}/out", "--api", "chat"),
                *("--families", "context", "--profile", PROFILE),
            ]
            start = time.perf_counter()
            subprocess.run(command, cwd=folder, env=child_env(), capture_output=True, check=False)
            wall = time.perf_counter() - start
            card = json.loads(Path(f"{folder}/out/scorecard.json").read_text())
    finally:
        vendor.stop()
    family = card["families"]["context"]
    tokens = card["performance"]["families"]["context"]["tokens"]
    return {"wall": wall, "counts": family["counts"], "prompt_tokens": tokens["prompt"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=1_048_576, help="the longest prompt counted")
    parser.add_argument("--runs", type=int, default=3, help="runs per length (the median)")
    args = parser.parse_args()
    rows = counting(args.max, args.runs)
    print(f"{'tokens':>10} {'counted':>10} {'seconds':>8}")
    for row in rows:
        print(f"{row['tokens']:>10,} {row['counted']:>10,} {row['seconds']:>8.3f}")
    run = family_run()
    print(
        f"context family against the clean vendor ({PROFILE}): {run['wall']:.1f} s, "
        f"{run['prompt_tokens']:,} prompt tokens, {run['counts']}"
    )
    print(json.dumps({"bench": "context", "counting": rows, "run": run}))


if __name__ == "__main__":
    main()
