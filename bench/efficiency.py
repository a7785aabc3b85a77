"""Benchmark how close a whole run comes to the latency floor at a given ``--concurrency``.

The whole default suite (every family, with the Kimi K2 test profile) runs against the
simulated vendor started with ``--latency-ms L`` (it sleeps L before each chat answer it
gives; a request it rejects with a 4xx, and /tokenize-style requests, come back at once).
With R the chat requests it delayed and C the requests in flight at most (``--concurrency``
times the ``-n`` workers), no run can take less than::

    floor = R x L / C

and ``ratio = floor / wall`` says how much of that is reached (1.0: every slot busy waiting
on the vendor all the time). The simulated vendor runs on the same machine and takes its own
time beyond L (its work, its threads); it says how long in a ``Server-Timing`` header, so a
third floor, ``service floor = sum of the vendor's own times / C``, is what the verifier
could reach against that vendor, and ``service floor / span`` is the verifier's own share.
Two wall times, two ratios:

- process: the ``pytest`` process from start to exit (interpreter start, imports, corpus and
  profile load, probe, collection, the cases, scorecard), what a user waits for;
- sending span: from the first request's start to the last answer's end, in the transcript.

Then the run is taken apart, from its transcript, into seconds that add up to the process
wall time: startup (to the first request), probe and collection (to the first case
request), the cases, teardown (after the last answer: shards merged, scorecard written).
The cases' span is split into the floor, latency inflation (attempts took longer than L:
the client's and the vendor's own time, or contention for the CPU), slots idle inside cases
(between a case's own requests: grading, request building) and slots idle between cases
(ramp-up, the tail where the last cases' sequential requests run with free slots beside
them, handing over to the next case). ``schedule floor`` is the span the verifier's way of
scheduling (cases in the order they started, the costliest first, each to the first free
slot, its requests in sequence) would take if only the vendor's latency took time;
``longest case`` (JSON) is the longest chain of one case's requests, a floor for any order.

After each run, the same requests (every attempt in its transcript, in the order they
started) go to the same vendor through a bare openai-SDK loop (``_bare_loop.py``: a thread
pool as wide as the run's requests in flight, the SDK's own answer parsing, nothing else), a
process of its own: its wall time, process ratio and CPU are printed beside the verifier's,
with ``cpu_ratio = verifier CPU / bare loop CPU``. It is what a client that only sends those
requests costs, start-up included; it has no cases to wait on, so its ratio is a ceiling.

The simulated vendor runs in its own process and is warmed up by one untimed run first
(its first answers of each kind import and compile its code: seconds on a cold process).

It prints a table, then, as its last line, one JSON object for machines.

Run from the repository root, in the project's virtualenv::

    python bench/efficiency.py                              # concurrency 8, 32, 128
    python bench/efficiency.py --concurrency 32 --latency-ms 200
    python bench/efficiency.py --concurrency 32 --runs 5     # the median of five runs
    python bench/efficiency.py --concurrency 16 --workers 2  # -n 2: 32 in flight
"""

from __future__ import annotations

import argparse
import heapq
import shutil
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from _harness import (
    Attempt,
    BareRun,
    Run,
    Simulator,
    add_suite_options,
    emit,
    epoch,
    parse_list,
    run_bare_loop,
    run_verifier,
    suite_args,
    table,
    workdir,
)

WHO = ("verifier", "bare")
PARTS = ("median", "min", "max")


def schedule_floor(attempts: list[Attempt], latency: float, slots: int) -> float:
    """The span of the verifier's own scheduling if only the vendor's latency took time.

    Cases are taken in the order they started (the verifier starts the costliest first), each to
    the slot that frees first, each costing its delayed requests times `latency` (its
    requests run in sequence): above the floor by what per-case chains and their order cost.
    """
    cost: dict[str, float] = {}
    for attempt in attempts:
        if not attempt.is_probe:
            cost[attempt.case] = cost.get(attempt.case, 0.0) + (latency if attempt.delayed else 0)
    free = [0.0] * slots
    for seconds in cost.values():
        heapq.heapreplace(free, free[0] + seconds)
    return max(free)


def analyse(run: Run, latency: float, slots: int, vendor_cpu: float | None) -> dict[str, Any]:
    """The figures of one run (seconds unless named otherwise)."""
    attempts = run.transcript()
    cases = [a for a in attempts if not a.is_probe]
    if not cases:
        raise RuntimeError(f"the run sent no case request:\n{run.stdout[-2000:]}")
    journal = run.journal()
    assert journal.header is not None, "a finished run's journal starts with its header"
    # The session's start: after imports, the corpus, the profile; before the first request.
    session = epoch(journal.header["started"])
    last_outcome = max(epoch(r["time"]) for r in journal.records)
    finished = epoch(run.scorecard()["run"]["finished"])
    exited = run.started + run.wall
    delayed = [a for a in attempts if a.delayed]
    floor = len(delayed) * latency / slots
    first, last_end = attempts[0].start, max(a.end for a in attempts)
    probe_end = max((a.end for a in attempts if a.is_probe), default=first)
    span = last_end - first
    case_start = cases[0].start
    case_span = last_end - case_start
    # Slot-seconds: C slots over the cases' span are either waiting on an attempt or idle.
    work = sum(a.latency for a in cases)
    by_case: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in cases:
        by_case[attempt.case].append(attempt)
    inside = sum(
        max(a.end for a in group) - group[0].start - sum(a.latency for a in group)
        for group in by_case.values()
    )
    ideal_work = sum(latency for a in cases if a.delayed)
    idle = slots * case_span - work
    last_case_start = max(group[0].start for group in by_case.values())
    families: dict[str, dict[str, Any]] = {}
    for attempt in cases:
        entry = families.setdefault(
            attempt.family, {"requests": 0, "delayed": 0, "start": attempt.start, "end": 0.0}
        )
        entry["requests"] += 1
        entry["delayed"] += attempt.delayed
        entry["end"] = max(entry["end"], attempt.end)
    delayed_latency = [a.latency for a in delayed if not a.is_probe]
    # The vendor's own time per answer (its Server-Timing header): the latency it was told to
    # wait plus its own work and its own threads' contention; what is left is the client's.
    served = [(a.service, a.is_probe) for a in delayed if a.service is not None]
    service_floor = sum(service for service, _ in served) / slots
    # Of the cases' attempts only, as the inflation it is a part of.
    vendor_extra = sum(service - latency for service, probe in served if not probe) / slots
    best = schedule_floor(attempts, latency, slots)
    longest = max(sum(latency for a in group if a.delayed) for group in by_case.values())
    return {
        "concurrency_total": slots,
        "requests": len(attempts),
        "chat_requests": sum(a.is_chat for a in attempts),
        "delayed_requests": len(delayed),
        "probe_requests": len(attempts) - len(cases),
        "cases": len(by_case),
        "floor_s": round(floor, 3),
        "process_wall_s": round(run.wall, 3),
        "process_ratio": round(floor / run.wall, 3),
        "span_s": round(span, 3),
        "span_ratio": round(floor / span, 3),
        "service_floor_s": round(service_floor, 3) if served else None,
        "service_ratio": round(service_floor / span, 3) if served else None,
        "inflation_vendor_s": round(vendor_extra, 3) if served else None,
        "schedule_floor_s": round(best, 3),
        "schedule_ratio": round(floor / best, 3) if best else None,
        "longest_case_s": round(longest, 3),
        "verifier_cpu_s": round(run.cpu, 3),
        "vendor_cpu_s": None if vendor_cpu is None else round(vendor_cpu, 3),
        "verifier_cpu_ms_per_request": round(run.cpu / len(attempts) * 1000, 3),
        "startup_s": round(session - run.started, 3),
        "session_to_first_request_s": round(first - session, 3),
        "probe_s": round(probe_end - first, 3),
        "collection_s": round(case_start - probe_end, 3),
        "cases_s": round(case_span, 3),
        "cases_floor_s": round(ideal_work / slots, 3),
        "inflation_s": round((work - ideal_work) / slots, 3),
        "idle_inside_cases_s": round(inside / slots, 3),
        "idle_between_cases_s": round((idle - inside) / slots, 3),
        "catch_up_s": round(last_outcome - last_end, 3),
        "scorecard_s": round(finished - last_outcome, 3),
        "exit_s": round(exited - finished, 3),
        "tail_s": round(last_end - last_case_start, 3),
        "mean_in_flight": round(work / case_span, 2),
        "median_latency_ms": round(statistics.median(delayed_latency) * 1000, 1)
        if delayed_latency
        else None,
        "families": {
            name: {
                "requests": entry["requests"],
                "delayed": entry["delayed"],
                "from_s": round(entry["start"] - case_start, 3),
                "to_s": round(entry["end"] - case_start, 3),
            }
            for name, entry in families.items()
        },
    }


def medians(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per concurrency, in the order measured: the runs' span and process ratios (median, range).

    One run is a sample of a noisy figure (the host's load moves it by a few hundredths), so
    the target is judged on the median of several.
    """
    by_level: dict[int, list[dict[str, Any]]] = {}
    for result in results:
        by_level.setdefault(result["concurrency_total"], []).append(result)
    return [
        {
            "concurrency_total": level,
            "runs": len(runs),
            **{
                key: {
                    "median": round(statistics.median(r[key] for r in runs), 3),
                    "min": min(r[key] for r in runs),
                    "max": max(r[key] for r in runs),
                }
                for key in ("span_ratio", "process_ratio", "bare_process_ratio", "cpu_ratio")
            },
        }
        for level, runs in by_level.items()
    ]


def beside_bare(result: dict[str, Any], bare: BareRun) -> dict[str, Any]:
    """The bare SDK loop's figures for the same requests, and the verifier's against them."""
    floor = result["floor_s"]
    return {
        "bare_requests": bare.requests,
        "bare_errors": bare.errors,
        "bare_wall_s": round(bare.wall, 3),
        "bare_process_ratio": round(floor / bare.wall, 3),
        "bare_cpu_s": round(bare.cpu, 3),
        "bare_cpu_ms_per_request": round(bare.cpu / bare.requests * 1000, 3),
        "cpu_ratio": round(result["verifier_cpu_s"] / bare.cpu, 3),
    }


def verifier_args(options: argparse.Namespace, concurrency: int) -> list[str]:
    """The run's options: the suite and profile, the concurrency (and xdist workers)."""
    workers = ["-n", str(options.workers)] if options.workers else []
    return [*suite_args(options), "--concurrency", str(concurrency), "-q", *workers]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency",
        type=parse_list,
        action="extend",
        help="comma-separated cases in flight per process (repeatable; default: 8,32,128)",
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="timed runs per concurrency (default 1; see medians)"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=200.0, help="the vendor's wait (default 200)"
    )
    parser.add_argument("--workers", type=int, default=0, help="pytest-xdist -n (default: none)")
    add_suite_options(parser)
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed run that warms the vendor"
    )
    args = parser.parse_args(argv)
    levels = args.concurrency or [8, 32, 128]
    if args.runs < 1 or args.latency_ms <= 0 or args.workers < 0:
        parser.error("--runs and --latency-ms must be positive, --workers not negative")
    latency = args.latency_ms / 1000

    results: list[dict[str, Any]] = []
    with (
        Simulator("--latency-ms", f"{args.latency_ms:g}", "--profile", args.profile) as vendor,
        workdir() as work,
    ):
        if not args.no_warmup:
            warm = verifier_args(args, max(levels))
            run_verifier(vendor.url, warm, work).check()
        for concurrency in [level for level in levels for _ in range(args.runs)]:
            before = vendor.cpu()
            run = run_verifier(
                vendor.url,
                verifier_args(args, concurrency),
                work,
            ).check()
            after = vendor.cpu()
            used = None if before is None or after is None else after - before
            slots = concurrency * max(args.workers, 1)
            result = analyse(run, latency, slots, used)
            # The same requests at the same number in flight, by the SDK alone.
            bare = run_bare_loop(vendor.url, run, slots, work)
            results.append({"concurrency": concurrency, **result, **beside_bare(result, bare)})
            # Transcripts are large; a run's is read, so its folder can go now.
            shutil.rmtree(run.out)

    workers = f", -n {args.workers}" if args.workers else ""
    print(
        f"efficiency: {args.families or 'all families'}, vendor latency {args.latency_ms:g} ms"
        f"{workers}; floor = delayed chat requests x latency / requests in flight"
    )
    table(
        (
            "concurrency",
            "requests",
            "delayed",
            "floor s",
            "process s",
            "ratio",
            "span s",
            "ratio",
            "schedule floor s",
            "service floor s",
            "ratio",
        ),
        [
            (
                r["concurrency_total"],
                r["requests"],
                r["delayed_requests"],
                r["floor_s"],
                r["process_wall_s"],
                r["process_ratio"],
                r["span_s"],
                r["span_ratio"],
                r["schedule_floor_s"],
                r["service_floor_s"],
                r["service_ratio"],
            )
            for r in results
        ],
    )
    print("\nwhere the process wall time goes (s):")
    parts = (
        ("startup: imports, corpus, profile", "startup_s"),
        ("startup: session to first request", "session_to_first_request_s"),
        ("probe", "probe_s"),
        ("collection", "collection_s"),
        ("cases: floor", "cases_floor_s"),
        ("cases: latency inflation", "inflation_s"),
        ("  of which the vendor's own", "inflation_vendor_s"),
        ("cases: idle inside cases", "idle_inside_cases_s"),
        ("cases: idle between cases", "idle_between_cases_s"),
        ("after last answer: outcomes", "catch_up_s"),
        ("after last answer: scorecard", "scorecard_s"),
        ("after last answer: exit", "exit_s"),
        ("= process wall", "process_wall_s"),
        ("of the cases: tail", "tail_s"),
        ("median attempt latency ms", "median_latency_ms"),
        ("mean requests in flight", "mean_in_flight"),
        ("verifier CPU s", "verifier_cpu_s"),
        ("verifier CPU ms per request", "verifier_cpu_ms_per_request"),
        ("vendor CPU s", "vendor_cpu_s"),
    )
    table(
        ("part", *(f"c={r['concurrency_total']}" for r in results)),
        [(label, *(r[key] for r in results)) for label, key in parts],
    )
    print("\nbeside a bare openai-SDK loop sending the same requests, as many in flight:")
    beside = (
        ("process s", "process_wall_s", "bare_wall_s"),
        ("process ratio", "process_ratio", "bare_process_ratio"),
        ("CPU s", "verifier_cpu_s", "bare_cpu_s"),
        ("CPU ms per request", "verifier_cpu_ms_per_request", "bare_cpu_ms_per_request"),
    )
    table(
        ("figure", *(f"c={r['concurrency_total']} {who}" for r in results for who in WHO)),
        [
            (label, *(value for r in results for value in (r[ours], r[bare])))
            for label, ours, bare in beside
        ],
    )
    print(
        "CPU ratio (verifier / bare):",
        ", ".join(f"c={r['concurrency_total']} {r['cpu_ratio']}" for r in results),
    )
    summary = medians(results)
    if any(row["runs"] > 1 for row in summary):
        print("\nthe ratios of each concurrency's runs (median, min, max):")
        names = ("span_ratio", "process_ratio", "bare_process_ratio", "cpu_ratio")
        table(
            (
                "concurrency",
                "runs",
                *(f"{name.replace('_', ' ')} {part}" for name in names for part in PARTS),
            ),
            [
                (
                    row["concurrency_total"],
                    row["runs"],
                    *(value for name in names for value in row[name].values()),
                )
                for row in summary
            ],
        )
    emit(
        {
            "bench": "efficiency",
            "latency_ms": args.latency_ms,
            "families": args.families or "all",
            "workers": args.workers,
            "runs": results,
            "medians": summary,
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
