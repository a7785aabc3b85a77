"""How close a run comes to waiting for the endpoint and nothing else, three ways in one run.

1. The whole default suite at ``--concurrency C`` against a simulated vendor that takes
   ``--latency-ms L`` an answer, beside a bare openai-SDK loop sending the same requests as
   many at once (``efficiency.py``'s comparison): the process wall time and CPU of each, and
   their ratios (verifier / bare).
2. Tool calling alone at the same concurrency: its share of the floor, ``floor / span``
   (``floor = delayed chat requests x L / C``; the span from the first request to the last
   answer) and ``floor / process``. Its five repeats a case are independent requests.
3. The generated bad requests alone (``--negative N``, one case at a time), against the same
   vendor clean and against one that answers every invalid request HTTP 500
   (``invalid-request-500``): seconds per case, and for the failing vendor each case's time
   without its shrink steps (the smaller requests that look for the smallest failing one),
   against the clean vendor's median case. A 500 the request caused gets one immediate retry,
   not the backoff ladder, once the endpoint has answered steadily.

It prints three tables, then, as its last line, one JSON object for machines.

Run from the repository root, in the project's virtualenv::

    python bench/floor.py                           # C=32, L=200 ms, 40 generated cases
    python bench/floor.py --negative 232            # the whole default generated set
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    KIMI_PROFILE,
    Attempt,
    Run,
    Simulator,
    emit,
    run_bare_loop,
    run_verifier,
    table,
    workdir,
)
from efficiency import analyse, beside_bare

# The generated set's own requests, by their name in the transcript label (``#bad``, ...).
SHRINK = "#shrink-"


def whole_suite(
    url: str, work: Path, latency: float, concurrency: int, cpu: Any, families: list[str]
) -> dict[str, Any]:
    """The default suite (or `families`), and the bare SDK loop on the same requests."""
    before = cpu()
    args = ["--profile", KIMI_PROFILE, *families, "--concurrency", str(concurrency)]
    run = run_verifier(url, args, work).check()
    result = analyse(run, latency, concurrency, None if before is None else cpu() - before)
    bare = run_bare_loop(url, run, concurrency, work)
    return {**result, **beside_bare(result, bare), "wall_ratio": run.wall / bare.wall}


def tool_calling(url: str, work: Path, latency: float, concurrency: int) -> dict[str, Any]:
    """Tool calling alone: its share of the floor."""
    args = ["--profile", KIMI_PROFILE, "--families", "tool_calling"]
    run = run_verifier(url, [*args, "--concurrency", str(concurrency)], work).check()
    result = analyse(run, latency, concurrency, None)
    keys = ("requests", "delayed_requests", "floor_s", "span_s", "span_ratio", "process_wall_s")
    return {key: result[key] for key in (*keys, "process_ratio")}


def per_case(run: Run) -> dict[str, dict[str, float]]:
    """Each generated case's seconds, with and without its shrink steps."""
    attempts: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in run.transcript():
        if not attempt.is_probe:
            attempts[attempt.case].append(attempt)
    cases = {}
    for case, sent in attempts.items():
        whole = max(a.end for a in sent) - min(a.start for a in sent)
        shrinking = sum(a.latency for a in sent if SHRINK in a.label)
        cases[case] = {"s": whole, "without_shrink_s": whole - shrinking}
    return cases


def generated(url: str, failing_url: str, work: Path, count: int) -> dict[str, Any]:
    """The generated set one case at a time, against a clean and a failing vendor."""
    args = ["--families", "wire", "--negative", str(count), "-k", "negative and not invalid"]
    args += ["--concurrency", "1"]
    clean = per_case(run_verifier(url, args, work).check())
    # The failing vendor's 500s are findings: the run exits 1.
    failing = per_case(run_verifier(failing_url, args, work).check(1))
    typical = statistics.median(c["s"] for c in clean.values())
    ratios = sorted(c["without_shrink_s"] / typical for c in failing.values())
    return {
        "cases": len(clean),
        "clean_s_per_case": round(sum(c["s"] for c in clean.values()) / len(clean), 3),
        "clean_median_s": round(typical, 3),
        "failing_s_per_case": round(sum(c["s"] for c in failing.values()) / len(failing), 3),
        "failing_without_shrink_s_per_case": round(
            sum(c["without_shrink_s"] for c in failing.values()) / len(failing), 3
        ),
        "failing_over_clean_median": round(statistics.median(ratios), 3),
        "failing_over_clean_max": round(ratios[-1], 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (32)")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="the vendor's wait (200)")
    parser.add_argument("--negative", type=int, default=40, help="generated cases (default 40)")
    parser.add_argument("--families", help="the first part's families (default: the suite)")
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed run that warms the vendor"
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.latency_ms <= 0 or args.negative < 1:
        parser.error("--concurrency, --latency-ms and --negative must be positive")
    latency, wait = args.latency_ms / 1000, ("--latency-ms", f"{args.latency_ms:g}")
    with (
        Simulator(*wait, "--profile", KIMI_PROFILE) as vendor,
        Simulator(*wait, "--defect", "invalid-request-500") as failing,
        workdir() as work,
    ):
        families = ["--families", args.families] if args.families else []
        if not args.no_warmup:
            # Warm the vendor: its first answers of each kind import and compile its code.
            warm = ["--profile", KIMI_PROFILE, *families, "--concurrency", "32"]
            run_verifier(vendor.url, warm, work).check()
        suite = whole_suite(vendor.url, work, latency, args.concurrency, vendor.cpu, families)
        tools = tool_calling(vendor.url, work, latency, args.concurrency)
        bad = generated(vendor.url, failing.url, work, args.negative)

    suite_name = args.families or "the whole suite"
    print(f"{suite_name} at concurrency {args.concurrency}, vendor latency {args.latency_ms:g} ms")
    table(
        ("figure", "verifier", "bare SDK loop", "verifier / bare"),
        [
            ("process s", suite["process_wall_s"], suite["bare_wall_s"], suite["wall_ratio"]),
            ("CPU s", suite["verifier_cpu_s"], suite["bare_cpu_s"], suite["cpu_ratio"]),
            ("start-up s (to the session)", suite["startup_s"], "", ""),
        ],
    )
    print(f"\ntool calling alone at concurrency {args.concurrency}")
    table(
        ("requests", "delayed", "floor s", "span s", "floor / span", "process s", "floor / proc"),
        [
            (
                tools["requests"],
                tools["delayed_requests"],
                tools["floor_s"],
                tools["span_s"],
                tools["span_ratio"],
                tools["process_wall_s"],
                tools["process_ratio"],
            )
        ],
    )
    print(f"\n{bad['cases']} generated cases, one at a time")
    table(
        ("vendor", "s per case", "without shrink steps", "/ clean median: median", "max"),
        [
            ("clean", bad["clean_s_per_case"], bad["clean_s_per_case"], 1.0, ""),
            (
                "answers 500",
                bad["failing_s_per_case"],
                bad["failing_without_shrink_s_per_case"],
                bad["failing_over_clean_median"],
                bad["failing_over_clean_max"],
            ),
        ],
    )
    emit(
        {
            "bench": "floor",
            "concurrency": args.concurrency,
            "latency_ms": args.latency_ms,
            "suite": suite,
            "tool_calling": tools,
            "generated": bad,
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
