"""Benchmark the performance section against ground truth: a vendor told its speed.

The simulated vendor is started with ``--ttft-ms T --tokens-per-second R`` (and
``--timing-jitter``, seeded), and the verifier runs its load probe at each concurrency level
(``--load``), plus the wire family, against it. The measured TTFT p50 and decode rate p50
of every level are printed beside what the vendor was told, with their relative error: the
verifier's own overhead in the figures (HTTP, SSE parsing, threads on a busy machine) shows
as the excess over T and the shortfall from R. Python's ``time.sleep`` overshoots by a
fraction of a millisecond per wait, which the vendor's own figures carry too.

    python bench/performance.py                          # T 300, R 50, levels 1 and 32
    python bench/performance.py --ttft-ms 100 --tokens-per-second 200 --levels 1,8,64

It prints a table, then, as its last line, one JSON object for machines.
"""

from __future__ import annotations

import argparse
from typing import Any

from _harness import Simulator, emit, parse_list, run_verifier, table, workdir


def errors(figures: dict[str, Any], ttft: float, rate: float) -> list[Any]:
    """TTFT p50 and decode rate p50 of `figures`, each with its error against the truth (%)."""
    measured_ttft = figures["ttft_ms"]["p50"]["value"]
    measured_rate = figures["output_tokens_per_second"]["p50"]["value"]
    return [
        measured_ttft,
        100 * (measured_ttft - ttft) / ttft,
        measured_rate,
        100 * (measured_rate - rate) / rate,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttft-ms", type=float, default=300.0)
    parser.add_argument("--tokens-per-second", type=float, default=50.0)
    parser.add_argument("--timing-jitter", type=float, default=0.1)
    parser.add_argument("--levels", type=parse_list, default=[1, 32])
    options = parser.parse_args()
    vendor = Simulator(
        *("--ttft-ms", str(options.ttft_ms), "--tokens-per-second", str(options.tokens_per_second)),
        *("--timing-jitter", str(options.timing_jitter), "--fault-seed", "1"),
    )
    try:
        with workdir() as work:
            levels = ",".join(map(str, options.levels))
            run = run_verifier(
                vendor.url, ["--families", "wire", "--load", levels, "-q"], work
            ).check()
            section = run.scorecard()["performance"]
    finally:
        vendor.stop()
    told = (options.ttft_ms, options.tokens_per_second)
    rows = [
        [f"load c{level['concurrency']}", level["requests"], *errors(level, *told)]
        for level in section["load"]["levels"]
    ]
    wire = section["families"]["wire"]
    rows.append(["wire family, c1", wire["streamed"], *errors(wire, *told)])
    print(
        f"vendor told: TTFT {options.ttft_ms:g} ms, {options.tokens_per_second:g} tokens/s, "
        f"jitter {options.timing_jitter:g}"
    )
    table(
        ["requests of", "streams", "TTFT p50 ms", "error %", "tok/s p50", "error %"],
        rows,
    )
    emit(
        {
            "bench": "performance",
            "told": {"ttft_ms": options.ttft_ms, "tokens_per_second": options.tokens_per_second},
            "levels": section["load"]["levels"],
            "wire": wire,
        }
    )


if __name__ == "__main__":
    main()
