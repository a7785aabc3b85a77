"""Benchmark what a run costs before its first case: collection and the time to the first request.

For the corpus the options give (default: every family, with the Kimi K2 test profile) and
for the same corpus grown ``--scale`` times by generated structured-output cases
(``--generated``, one JSON-Schema keyword family each; they are the only kind of case that
can be added in bulk), against the simulated vendor at zero latency:

- ``collect-only``: ``pytest --endpoint URL --collect-only`` from process start to exit
  (interpreter and imports, the corpus loaded and every case checked, the profile loaded,
  the probe, collection) and that process's CPU time;
- ``first request``: a real run, from process start to the start of its first request
  (the probe's ``GET /models``: everything before it is local work);
- ``first case request``: the same run, to the start of its first case's request (the probe
  and collection done); the run is stopped there.

The request times are read from the transcript shards the run writes as it goes
(``--out``/transcript.d/), polled every few milliseconds.

It prints a table, then, as its last line, one JSON object for machines.

Run from the repository root, in the project's virtualenv::

    python bench/collection.py                      # the corpus and 10x the corpus
    python bench/collection.py --scale 4 --repeat 3
    python bench/collection.py --families structured_output,wire --scale 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    Simulator,
    add_suite_options,
    child_env,
    collected,
    emit,
    parse_attempt,
    run_verifier,
    suite_args,
    table,
    verifier_command,
    workdir,
)

from verifier.run.outdir import OutDir

POLL = 0.005
STRUCTURED = "structured_output"


def first_requests(
    url: str, args: Sequence[str], work: Path, timeout: float
) -> tuple[float, float]:
    """Seconds from a run's start to its first request, and to its first case request.

    The run is stopped (SIGTERM) as soon as its first case request is in its transcript.
    """
    out = Path(tempfile.mkdtemp(prefix="out-", dir=work))
    shards = OutDir(out).shards
    log = (work / "first-requests.log").open("w")
    started = time.time()
    process = subprocess.Popen(
        verifier_command(url, out, args),
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=child_env(),
    )
    first: float | None = None
    first_case: float | None = None
    try:
        while first_case is None:
            if process.poll() is not None or time.time() - started > timeout:
                log.flush()
                raise RuntimeError(
                    "the run ended or timed out before its first case request:\n"
                    + (work / "first-requests.log").read_text()[-2000:]
                )
            for shard in shards.glob("*.jsonl") if shards.is_dir() else ():
                # A line is written whole and flushed at once; a torn last line waits.
                for line in shard.read_text(encoding="utf-8").splitlines():
                    try:
                        attempt = parse_attempt(json.loads(line))
                    except json.JSONDecodeError:
                        continue
                    first = attempt.start if first is None else min(first, attempt.start)
                    if not attempt.is_probe:
                        first_case = (
                            attempt.start if first_case is None else min(first_case, attempt.start)
                        )
            time.sleep(POLL)
    finally:
        process.terminate()
        process.wait()
        log.close()
    assert first is not None, "a case request is never the first"
    return first - started, first_case - started


def measure(url: str, args: list[str], work: Path, repeat: int, timeout: float) -> dict[str, Any]:
    """The best of `repeat` collect-only runs and of `repeat` runs to their first case request."""
    runs = [
        run_verifier(url, [*args, "--collect-only", "-q"], work, timeout).check()
        for _ in range(repeat)
    ]
    best = min(runs, key=lambda run: run.wall)
    firsts = [first_requests(url, args, work, timeout) for _ in range(repeat)]
    return {
        "cases": collected(best.stdout),
        "collect_only_s": round(best.wall, 3),
        "collect_only_cpu_s": round(best.cpu, 3),
        "first_request_s": round(min(f[0] for f in firsts), 3),
        "first_case_request_s": round(min(f[1] for f in firsts), 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_suite_options(parser)
    parser.add_argument(
        "--scale",
        type=int,
        default=10,
        help="grow the corpus this many times with generated structured-output cases "
        "(default 10; 1 measures the corpus alone)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure; the best counts")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per run")
    args = parser.parse_args(argv)
    if args.scale < 1 or args.repeat < 1:
        parser.error("--scale and --repeat must be positive")
    if args.scale > 1 and args.families and STRUCTURED not in args.families.split(","):
        parser.error(f"--scale adds {STRUCTURED} cases: --families must include it")

    base = suite_args(args)
    results: list[dict[str, Any]] = []
    with Simulator("--profile", args.profile) as vendor, workdir() as work:
        corpus = measure(vendor.url, base, work, args.repeat, args.timeout)
        results.append({"scale": 1, "generated": 0, **corpus})
        if args.scale > 1:
            generated = (args.scale - 1) * corpus["cases"]
            grown = [*base, "--generated", str(generated)]
            results.append(
                {
                    "scale": args.scale,
                    "generated": generated,
                    **measure(vendor.url, grown, work, args.repeat, args.timeout),
                }
            )

    if len(results) > 1:
        small, large = results
        added = large["cases"] - small["cases"]
        for key in ("collect_only", "first_case_request"):
            large[f"{key}_ms_per_added_case"] = round(
                (large[f"{key}_s"] - small[f"{key}_s"]) / added * 1000, 3
            )
    print(
        f"collection: {args.families or 'all families'} with the profile, simulated vendor "
        f"at zero latency; seconds from process start, best of {args.repeat}"
    )
    table(
        (
            "corpus",
            "cases",
            "generated",
            "collect-only s",
            "its CPU s",
            "first request s",
            "first case request s",
        ),
        [
            (
                f"{r['scale']}x",
                r["cases"],
                r["generated"],
                r["collect_only_s"],
                r["collect_only_cpu_s"],
                r["first_request_s"],
                r["first_case_request_s"],
            )
            for r in results
        ],
    )
    emit({"bench": "collection", "families": args.families or "all", "runs": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
