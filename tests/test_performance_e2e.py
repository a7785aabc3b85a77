"""Speed and spend against the simulated vendor over loopback: the wiring, not the accuracy.

How close the measured figures come to what the vendor was told is a benchmark
(bench/performance.py), never a timed assertion; here the figures must exist, be ordered,
reach the scorecard, scorecard.md, the terminal and the gate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import KIMI_PROFILE, VerifierRun
from verifier import resources

pytestmark = pytest.mark.slow

PACE = ("--ttft-ms", "40", "--tokens-per-second", "200", "--timing-jitter", "0.1")


def test_a_paced_vendor_gets_a_performance_section_a_load_curve_and_a_speed_gate(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun], tmp_path: Path
) -> None:
    thresholds = tmp_path / "gate.toml"
    thresholds.write_text("[wire]\nmax_ttft_p90_ms = 5\nmin_output_tps_p50 = 1\n")
    run = run_verifier(
        simulator(*PACE, "--fault-seed", "3", "--profile", KIMI_PROFILE),
        *("--families", "wire", "--load", "1,4", "--price", "input=0.5,output=2"),
        *("--profile", KIMI_PROFILE),
        *("--gate-thresholds", str(thresholds)),
    )
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    performance = run.scorecard["performance"]
    wire = performance["families"]["wire"]
    assert performance["concurrency"] == 1 and wire["streamed"] > 0
    for figure in ("ttft_ms", "inter_token_ms", "output_tokens_per_second", "e2e_ms"):
        spread = [wire[figure][q]["value"] for q in ("p50", "p90", "p99")]
        assert 0 < spread[0] <= spread[1] <= spread[2], figure
    assert wire["ttft_ms"]["p50"]["value"] >= 40 * 0.9
    assert wire["tokens"]["prompt"] > 0 and wire["cost_usd"] > 0
    # What the answers carried, counted with the profile's tokenizer beside usage's count.
    assert performance["delivered_counted_with"] == "tiktoken.model"
    assert wire["tokens"]["delivered"] > 0
    assert [r["concurrency"] for r in performance["load"]["levels"]] == [1, 4]
    assert [r["requests"] for r in performance["load"]["levels"]] == [8, 8]
    # The load probe's requests are its own: in no family, not overall.
    # The probe's three: the model list, a chat request, an image (the generated set has images).
    assert performance["overall"]["requests"] == wire["requests"] + 3
    # The gate: a TTFT under 5 ms is missed, a decode rate over 1 token/s met.
    missed = run.scorecard["gate"]["families"]["wire"]["missed"]
    assert [m["threshold"] for m in missed] == ["max_ttft_p90_ms"]
    assert run.returncode == 1
    assert "wire: max_ttft_p90_ms 5 missed (actual" in run.stdout
    assert "performance at concurrency 1: TTFT p50" in run.stdout
    markdown = (run.out / "scorecard.md").read_text()
    assert "## Performance" in markdown and "### Load probe" in markdown
    # Every streamed answer in the transcript says when each of its token chunks arrived.
    records = [json.loads(line) for line in (run.out / "transcript.jsonl").open()]
    streams = [r for r in records if r.get("stream") and r.get("status") == 200]

    def tokens(chunks: list[dict[str, object]]) -> int:
        fields = ("content", "reasoning_content", "tool_calls")
        return sum(
            any(any((c.get("delta") or {}).get(f) for f in fields) for c in k.get("choices", []))
            for k in chunks
        )

    assert streams and all(len(r["timing"]["tokens_ms"]) == tokens(r["response"]) for r in streams)
