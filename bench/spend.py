"""Benchmark what a run spends at the vendor: requests and tokens, per family, with each budget.

A full default run (every family, with the Kimi K2 test profile; the simulated vendor
renders and counts prompts with the same profile) against the clean simulated vendor: per
family the requests sent (every attempt in the transcript, the probe's in its own row) and
the tokens the vendor reported in ``usage`` (prompt and completion; requests without usage,
such as /tokenize, count as requests only).

Then each vendor (clean, and one per ``--defect``) is verified twice with ``--gate``, with
``--budget full`` and with ``--budget auto`` (a family's cases stop once its verdict against
the gate's ``min_score`` is statistically decided; a tool-calling case's repeats stop once it
fails): the requests and tokens each needed for a verdict, and whether the verdicts (per
family, and the gate's) are the same.

The runs send one case at a time (``--concurrency 1``, the default) so that ``--budget auto``
sends the fewest cases it can: it decides whether to send a case when the case starts, so
with N cases in flight up to N - 1 more cases of a decided family are already under way.
A larger ``--concurrency`` shows that cost (and finishes sooner); outcomes do not depend on it.

It prints tables, then, as its last line, one JSON object for machines.

Run from the repository root, in the project's virtualenv::

    python bench/spend.py
    python bench/spend.py --defect ignore-keyword:maxItems --defect tool-args-violate-schema
    python bench/spend.py --families structured_output --defect ignore-keyword:maxItems
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    PROBE,
    Attempt,
    Run,
    Simulator,
    add_suite_options,
    emit,
    run_verifier,
    suite_args,
    table,
    workdir,
)

DEFAULT_DEFECTS = ("tool-args-violate-schema", "ignore-keyword:maxItems")
BUDGETS = ("full", "auto")


def spend(attempts: list[Attempt]) -> dict[str, dict[str, int]]:
    """Requests, prompt and completion tokens per family (``probe`` for the probe's)."""
    families: dict[str, dict[str, int]] = {}
    for attempt in attempts:
        entry = families.setdefault(
            attempt.family, {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        entry["requests"] += 1
        usage = attempt.usage or {}
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            # A vendor's usage is data under test: count only what is a count.
            if isinstance(value, int) and not isinstance(value, bool):
                entry[key] += value
    return families


def total(families: dict[str, dict[str, int]]) -> dict[str, int]:
    """The sums over every family and the probe."""
    keys = ("requests", "prompt_tokens", "completion_tokens")
    return {key: sum(entry[key] for entry in families.values()) for key in keys}


def summary(run: Run) -> dict[str, Any]:
    """A run's spend, verdicts and gate result."""
    card = run.scorecard()
    families = spend(run.transcript())
    return {
        **total(families),
        "families": families,
        "verdicts": {name: family["verdict"] for name, family in card["families"].items()},
        "gate_passed": card["gate"]["passed"],
        "budget": card.get("budget"),
    }


def verify_vendor(defect: str | None, options: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Run the suite against one vendor with each budget; the summaries and their comparison."""
    args = [*suite_args(options), "--gate", "--concurrency", str(options.concurrency), "-q"]
    vendor_args = ["--profile", options.profile, *(["--defect", defect] if defect else [])]
    runs: dict[str, dict[str, Any]] = {}
    with Simulator(*vendor_args) as vendor:
        for budget in BUDGETS:
            # Exit status 1 is the gate's "do not ship": an expected result for a defect.
            run = run_verifier(vendor.url, [*args, "--budget", budget], work).check(0, 1)
            runs[budget] = summary(run)
    full, auto = runs["full"], runs["auto"]
    return {
        "vendor": defect or "clean",
        "full": full,
        "auto": auto,
        "verdicts_match": full["verdicts"] == auto["verdicts"]
        and full["gate_passed"] == auto["gate_passed"],
        "requests_saved": full["requests"] - auto["requests"],
    }


def print_spend(families: dict[str, dict[str, int]]) -> None:
    """The per-family table of one run, the probe and the total last."""
    order = [name for name in families if name != PROBE] + [PROBE]
    rows = [(name, *families[name].values()) for name in order if name in families]
    table(
        ("family", "requests", "prompt tokens", "completion tokens"),
        [*rows, ("total", *total(families).values())],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_suite_options(parser)
    parser.add_argument(
        "--defect",
        action="append",
        help=f"a defective vendor to verify (repeatable; default: {', '.join(DEFAULT_DEFECTS)})",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="cases in flight (default 1)")
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error("--concurrency must be positive")
    defects = args.defect or list(DEFAULT_DEFECTS)

    with workdir() as work:
        vendors = [verify_vendor(defect, args, work) for defect in [None, *defects]]

    clean = vendors[0]["full"]
    print(
        f"spend: {args.families or 'all families'} with the profile, clean simulated vendor, "
        f"--budget full"
    )
    print_spend(clean["families"])
    for vendor in vendors:
        print(f"\nvendor {vendor['vendor']}: requests and verdicts, --budget full vs auto")
        full, auto = vendor["full"], vendor["auto"]
        stopped = auto["budget"]["families"]
        rows: list[tuple[Any, ...]] = [
            (
                name,
                full["families"].get(name, {}).get("requests", 0),
                auto["families"].get(name, {}).get("requests", 0),
                f"{stopped[name]['sent']}/{stopped[name]['cases']}",
                verdict,
                auto["verdicts"][name],
            )
            for name, verdict in full["verdicts"].items()
        ]
        gate = {True: "gate pass", False: "gate fail"}
        rows.append(
            (
                "total, probe included",
                full["requests"],
                auto["requests"],
                "",
                gate[full["gate_passed"]],
                gate[auto["gate_passed"]],
            )
        )
        table(
            (
                "family",
                "full requests",
                "auto requests",
                "auto cases sent",
                "full verdict",
                "auto verdict",
            ),
            rows,
        )
        print(
            f"verdicts match: {vendor['verdicts_match']}; requests saved by auto: "
            f"{vendor['requests_saved']} of {full['requests']}"
        )
    emit(
        {
            "bench": "spend",
            "families": args.families or "all",
            "concurrency": args.concurrency,
            "clean_full": {**total(clean["families"]), "families": clean["families"]},
            "vendors": [
                {
                    "vendor": v["vendor"],
                    "verdicts_match": v["verdicts_match"],
                    "requests_saved": v["requests_saved"],
                    **{
                        budget: {
                            key: v[budget][key]
                            for key in (
                                "requests",
                                "prompt_tokens",
                                "completion_tokens",
                                "gate_passed",
                                "verdicts",
                            )
                        }
                        for budget in BUDGETS
                    },
                    "auto_requests_by_family": {
                        name: entry["requests"] for name, entry in v["auto"]["families"].items()
                    },
                    "auto_cases_sent": {
                        name: [entry["sent"], entry["cases"]]
                        for name, entry in v["auto"]["budget"]["families"].items()
                    },
                }
                for v in vendors
            ],
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
