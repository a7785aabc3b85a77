"""The benchmark scripts run end to end with their smallest options and report sane figures.

Timings depend on the machine, so nothing here bounds a time: the checks are that the last
line is the script's JSON record and that its counts and sums hold together.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, child_env

pytestmark = pytest.mark.slow


def bench(name: str, *args: str) -> dict[str, Any]:
    """Run ``python bench/<name>.py args`` from the repository root; its last line, parsed."""
    completed = subprocess.run(
        [sys.executable, f"bench/{name}.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env=child_env(),
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    record = json.loads(completed.stdout.splitlines()[-1])
    assert record["bench"] == name
    return record


def test_overhead() -> None:
    record = bench("overhead", "--requests", "10", "--concurrency", "1,2", "--warmup", "1")
    cells = record["cells"]
    assert {(c["client"], c["mode"], c["concurrency"]) for c in cells} == {
        (client, mode, threads)
        for client in ("verifier", "openai-sdk")
        for mode in ("non-stream", "stream")
        for threads in (1, 2)
    }
    for cell in cells:
        assert cell["requests"] == 10
        assert cell["wall_ms_per_request"] > 0 and cell["rps"] > 0
        assert cell["cpu_ms_per_request"] >= 0 and cell["mean_latency_ms"] > 0
    assert record["cold_wall_ms"] > 0


def test_efficiency() -> None:
    record = bench(
        "efficiency",
        "--concurrency",
        "4",
        "--runs",
        "2",
        "--latency-ms",
        "20",
        "--families",
        "wire",
        "--no-warmup",
    )
    first, second = record["runs"]
    [medians] = record["medians"]
    assert medians["concurrency_total"] == 4 and medians["runs"] == 2
    for key in ("span_ratio", "process_ratio", "bare_process_ratio", "cpu_ratio"):
        low, high = sorted((first[key], second[key]))
        assert medians[key] == {
            "median": pytest.approx((low + high) / 2, abs=0.001),
            "min": low,
            "max": high,
        }
    for run in record["runs"]:
        assert run["concurrency"] == run["concurrency_total"] == 4
        assert set(run["families"]) == {"wire"}
        assert 0 < run["delayed_requests"] <= run["chat_requests"] <= run["requests"]
        assert run["floor_s"] == pytest.approx(run["delayed_requests"] * 0.020 / 4, abs=0.001)
        # The bare SDK loop sent every request the run did; the wire cases' invalid requests
        # are the SDK errors it counts.
        assert run["bare_requests"] == run["requests"]
        assert 0 < run["bare_errors"] < run["requests"]
        assert run["cpu_ratio"] == pytest.approx(
            run["verifier_cpu_s"] / run["bare_cpu_s"], abs=0.01
        )
        assert run["process_ratio"] > 0 and run["span_ratio"] >= run["process_ratio"]
        # The parts are a partition of the process's wall time (each rounded to 1 ms).
        parts = (
            "startup_s",
            "session_to_first_request_s",
            "probe_s",
            "collection_s",
            "cases_floor_s",
            "inflation_s",
            "idle_inside_cases_s",
            "idle_between_cases_s",
            "catch_up_s",
            "scorecard_s",
            "exit_s",
        )
        assert sum(run[key] for key in parts) == pytest.approx(run["process_wall_s"], abs=0.02)
        assert run["verifier_cpu_s"] > 0


def test_collection() -> None:
    record = bench("collection", "--families", "structured_output", "--scale", "2")
    corpus, grown = record["runs"]
    assert corpus["scale"] == 1 and grown["scale"] == 2
    assert grown["generated"] == corpus["cases"] > 0
    assert grown["cases"] == 2 * corpus["cases"]
    for run in (corpus, grown):
        assert 0 < run["first_request_s"] <= run["first_case_request_s"]
        assert run["collect_only_s"] > 0


def test_spend() -> None:
    record = bench(
        "spend", "--families", "structured_output", "--defect", "ignore-keyword:maxItems"
    )
    clean_full = record["clean_full"]
    assert clean_full["requests"] == sum(f["requests"] for f in clean_full["families"].values())
    assert clean_full["families"]["structured_output"]["prompt_tokens"] > 0
    clean, defective = record["vendors"]
    assert clean["vendor"] == "clean" and defective["vendor"] == "ignore-keyword:maxItems"
    assert clean["verdicts_match"] and defective["verdicts_match"]
    assert clean["requests_saved"] == 0 and clean["full"]["gate_passed"]
    assert defective["full"]["verdicts"]["structured_output"] == "fail"
    assert 0 < defective["auto"]["requests"] < defective["full"]["requests"]
    sent, cases = defective["auto_cases_sent"]["structured_output"]
    assert sent < cases


def test_parity() -> None:
    record = bench("parity", "--eps", "0,0.1", "--repetitions", "2")
    rows = {row["eps"]: row for row in record["rows"]}
    assert set(rows) == {0.0, 0.1}
    for row in rows.values():
        assert row["different"] + row["same"] + row["undecided"] == pytest.approx(1.0)
        assert 1 <= row["prompts_median"] <= record["prompts"]
    assert rows[0.1]["divergence_mean"] > rows[0.0]["divergence_mean"]


def test_parity_sampling() -> None:
    record = bench("parity_sampling", "--eps", "0,2", "--repetitions", "1")
    rows = {row["eps"]: row for row in record["rows"]}
    assert set(rows) == {0.0, 2.0}
    assert rows[0.0]["true_tv_mean"] == 0 < rows[2.0]["true_tv_mean"]
    for row in rows.values():
        assert row["different"] + row["same"] + row["undecided"] == pytest.approx(1.0)
        assert row["requests"] == record["prompts"] * 40


def test_performance() -> None:
    record = bench(
        "performance", "--ttft-ms", "20", "--tokens-per-second", "400", "--levels", "1,2"
    )
    assert record["told"] == {"ttft_ms": 20.0, "tokens_per_second": 400.0}
    assert [level["concurrency"] for level in record["levels"]] == [1, 2]
    assert record["wire"]["streamed"] > 0


@pytest.mark.parametrize(
    ("server", "status", "kind"),
    [
        ("simulator", "pass", "same"),
        ("simulator-ignoring", "fail", "differs"),
    ],
)
def test_generation_defaults(smollm2_model: Any, server: str, status: str, kind: str) -> None:
    """The simulated vendor only: the real servers' runs take minutes (bench/README.md)."""
    record = bench("generation_defaults", "--server", server, "--runs", "2")
    assert record["server"] == server and record["runs"] == 2
    assert record["statuses"] == {status: 2} and record["wrong_rulings"] == 0
    assert set(record["seed_kinds"]) == {kind}


def test_parity_engines_report(tmp_path: Path) -> None:
    """The real engines' figures from answers already collected (--report-only: no server):
    a candidate off by float noise is a false alarm under the floor alone and "same" under
    the tolerance; one off by more than the tolerance is "different" under both."""
    from bench.parity_engines import prompts
    from verifier.checks.parity import TOLERANCE
    from verifier.checks.support.distributions import trace_of

    def answer(shift: float) -> dict[str, Any]:
        top = [("Hi", -0.1 - shift), ("Hello", -2.5 + shift)]
        entries = [
            {
                "token": "Hi",
                "logprob": top[0][1],
                "bytes": list(b"Hi"),
                "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top],
            }
        ]
        trace = trace_of(entries)
        assert trace is not None
        return trace.to_json()

    ids = [p["id"] for p in prompts(16)]
    for name, shift in (("q4_1", 0.0), ("q4_1-threads-2", TOLERANCE / 10), ("q8_0", 0.1)):
        answers = [
            {"id": i, "first": answer(shift), "again": answer(shift), "prompt_tokens": 9}
            for i in ids
        ]
        (tmp_path / f"{name}.json").write_text(json.dumps({"answers": answers}))
    record = bench("parity_engines", "--report-only", "--out", str(tmp_path), "--prompts", "16")
    rows = {row["candidate"]: row for row in record["rows"]}
    assert set(rows) == {"q4_1-threads-2", "q8_0"}
    noise, requantised = rows["q4_1-threads-2"], rows["q8_0"]
    floor, tolerance = "floor only", f"tolerance {TOLERANCE:g}"
    assert noise[floor]["distribution"]["exceeded"] == 16
    assert noise[floor]["distribution"]["different"] == 1
    assert noise[tolerance]["distribution"]["exceeded"] == 0
    assert noise[tolerance]["distribution"]["same"] == 1
    for rule in (floor, tolerance):
        assert requantised[rule]["distribution"]["different"] == 1
        assert requantised[rule]["kv_cache"]["same"] == 1


def test_floor() -> None:
    record = bench(
        "floor",
        *("--concurrency", "4", "--latency-ms", "20", "--negative", "3"),
        *("--families", "vision", "--no-warmup"),
    )
    suite, tools, bad = record["suite"], record["tool_calling"], record["generated"]
    assert suite["bare_requests"] == suite["requests"] and suite["cpu_ratio"] > 0
    assert tools["floor_s"] == pytest.approx(tools["delayed_requests"] * 0.020 / 4, abs=0.001)
    assert 0 < tools["span_ratio"] and tools["delayed_requests"] > 0
    assert bad["cases"] == 3 and bad["clean_s_per_case"] > 0
    assert 0 < bad["failing_without_shrink_s_per_case"] <= bad["failing_s_per_case"]


def test_rotation() -> None:
    record = bench("rotation", "--secrets", "1", "--trials", "20")
    assert record["clean"] == {"secrets": 1, "family_runs": 7, "alarms": 0}
    assert len(record["rule"]) == 12
    assert all(0 <= row["fired"] <= 1 and row["trials"] == 20 for row in record["rule"])


def test_context() -> None:
    record = bench("context", "--max", "4096", "--runs", "1")
    assert [row["tokens"] for row in record["counting"]] == [1024, 2048, 4096]
    for row in record["counting"]:
        assert row["tokens"] - 40 <= row["counted"] <= row["tokens"]
        assert row["seconds"] > 0
    run = record["run"]
    assert run["counts"]["fail"] == run["counts"]["error"] == 0
    assert run["counts"]["pass"] == 15 and run["counts"]["unsupported"] == 3
    assert run["prompt_tokens"] > 262_144
