"""The scorecard's performance section for people: a table, the load curve as bars, one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .markdown import escape, table

BAR = 24


def _figure(quantiles: Mapping[str, Any] | None, name: str = "p50", digits: int = 1) -> str:
    if not quantiles:
        return "—"
    return f"{quantiles[name]['value']:.{digits}f}"


def _spread(quantiles: Mapping[str, Any] | None) -> str:
    """``p50 / p90 / p99`` of a figure, or a dash."""
    if not quantiles:
        return "—"
    return " / ".join(_figure(quantiles, name, 0) for name in ("p50", "p90", "p99"))


def _rate(rate: Mapping[str, Any]) -> str:
    if not rate.get("trials"):
        return "—"
    return f"{rate['successes']}/{rate['trials']}"


def _row(name: str, figures: Mapping[str, Any]) -> list[str]:
    tokens = figures["tokens"]
    cost = figures.get("cost_usd")
    return [
        escape(name),
        str(figures["requests"]),
        str(figures.get("streamed", 0)),
        _spread(figures["ttft_ms"]),
        _figure(figures["inter_token_ms"]),
        _figure(figures["output_tokens_per_second"]),
        _figure(figures["e2e_ms"], digits=0),
        _rate(figures["error_rate"]),
        _rate(figures["retry_rate"]),
        f"{tokens['prompt']:,} / {tokens['completion']:,} / {tokens['reasoning']:,}",
        f"{tokens['delivered']:,}" if "delivered" in tokens else "—",
        "—" if cost is None else f"${cost:.4f}",
    ]


HEADERS = [
    "Requests of",
    "Requests",
    "Streamed",
    "TTFT ms p50 / p90 / p99",
    "Inter-token ms p50",
    "Output tok/s p50",
    "End-to-end ms p50",
    "Errors",
    "Retries",
    "Tokens prompt / completion / reasoning",
    "Delivered (profile tokenizer)",
    "Cost",
]


def _bars(rows: Sequence[Mapping[str, Any]], key: str, unit: str) -> list[str]:
    values = [row.get(key) for row in rows]
    top = max((v for v in values if isinstance(v, int | float)), default=0) or 1
    lines = []
    for row, value in zip(rows, values, strict=True):
        bar = "█" * round(BAR * value / top) if isinstance(value, int | float) else ""
        shown = "—" if value is None else f"{value:,.1f} {unit}"
        lines.append(f"c{row['concurrency']:<4} {bar:<{BAR}} {shown}")
    return lines


def performance_markdown(section: Mapping[str, Any] | None) -> list[str]:
    """The ``## Performance`` section of ``scorecard.md`` (nothing without figures)."""
    if not section:
        return []
    lines = [
        "## Performance",
        "",
        f"Measured at concurrency {section['concurrency']} per process: comparable "
        f"{escape(section['comparable'])}. TTFT and decode rates come from streamed answers; "
        '"all" counts the probe\'s requests too.',
        "",
        table(
            HEADERS,
            [
                _row("all", section["overall"]),
                *(_row(name, f) for name, f in section["families"].items()),
            ],
        ),
        "",
    ]
    lines += _at_length(section.get("at_length"))
    load = section.get("load")
    if load:
        levels = load["levels"]
        ttft = [
            {**r, "ttft": r["ttft_ms"]["p50"]["value"] if r["ttft_ms"] else None} for r in levels
        ]
        knee = load["knee"]
        lines += [
            "### Load probe",
            "",
            table(
                ["Concurrency", *HEADERS[1:-2], "Throughput tok/s"],
                [[str(r["concurrency"]), *_row("", r)[1:-2], _number(r)] for r in levels],
            ),
            "",
            "```text",
            "TTFT p50",
            *_bars(ttft, "ttft", "ms"),
            "throughput",
            *_bars(levels, "throughput_tokens_per_second", "tok/s"),
            "```",
            "",
            f"Knee: {'none within these levels' if knee is None else f'concurrency {knee}'} "
            f"({escape(load['knee_rule'])}).",
            "",
        ]
    return lines


def _seconds(value: Any) -> str:
    return "—" if not isinstance(value, int | float) else f"{value:.3f} s"


def _at_length(length: Mapping[str, Any] | None) -> list[str]:
    """The speed at length (the context family's figures), or nothing where it did not run."""
    if not length:
        return []
    prefill = length["prefill"]
    until = length["ttft_linear_until"]
    cache = length["cache"]
    lines = ["### At length", ""]
    if prefill:
        lines += [
            table(
                ["Prompt tokens", "First token (cold)", "Prefill tok/s"],
                [
                    [f"{int(tokens):,}", _seconds(row["ttft"]), f"{row['prefill_rate']:,.0f}"]
                    for tokens, row in prefill.items()
                ],
            ),
            "",
            "First token in time linear in the prompt up to: "
            + ("— (too few timed rungs)" if until is None else f"{until:,} tokens")
            + ".",
            "",
        ]
    if cache:
        served = cache["cached_tokens"]
        lines += [
            f"The same {cache['tokens']:,}-token prompt twice: first token "
            f"{_seconds(cache['ttft_cold'])} cold, {_seconds(cache['ttft_hot'])} hot; cached "
            f"tokens reported: {'none' if served is None else f'{served:,}'}.",
            "",
        ]
    return lines


def _number(row: Mapping[str, Any]) -> str:
    value = row.get("throughput_tokens_per_second")
    return "—" if value is None else f"{value:,.1f}"


def performance_line(section: Mapping[str, Any] | None) -> str | None:
    """One terminal line: TTFT, decode rate and tokens overall, or None without figures."""
    if not section:
        return None
    overall = section["overall"]
    tokens = overall["tokens"]
    parts = [f"performance at concurrency {section['concurrency']}:"]
    if overall["ttft_ms"]:
        parts.append(f"TTFT p50 {_figure(overall['ttft_ms'], digits=0)} ms,")
    if overall["output_tokens_per_second"]:
        parts.append(f"{_figure(overall['output_tokens_per_second'])} tok/s p50,")
    parts.append(f"{tokens['prompt']:,} prompt + {tokens['completion']:,} completion tokens")
    if "cost_usd" in overall:
        parts.append(f"(${overall['cost_usd']:.4f})")
    line = " ".join(parts)
    load = section.get("load")
    if load:
        knee = load["knee"]
        line += f"; load knee: {'none' if knee is None else f'concurrency {knee}'}"
    return line
