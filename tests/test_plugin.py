"""The plugin end to end: `pytest --endpoint URL` against the simulated vendor, as users run it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import VerifierRun, fake_key
from verifier import resources
from verifier.cases.corpus import load_corpus

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
N_CASES = len(load_corpus(["structured_output"]).cases)
CONSTRAINED = sum(
    c.data.get("kind", "constrained") == "constrained"
    for c in load_corpus(["structured_output"]).cases
)


@pytest.fixture
def run_verifier(run_verifier: Run) -> Run:
    """These tests exercise the frame on one family: structured output."""

    def run(url: str, *args: str, **kwargs: object) -> VerifierRun:
        return run_verifier(url, "--families", "structured_output", *args, **kwargs)

    return run


def assert_valid_scorecard(run: VerifierRun) -> None:
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors


def test_clean_vendor_passes(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(simulator())
    assert run.returncode == 0, run.stdout + run.stderr
    assert_valid_scorecard(run)
    family = run.family()
    assert family["verdict"] == "pass"
    assert family["counts"] == {"pass": N_CASES, "fail": 0, "error": 0, "unsupported": 0}
    assert family["interval"][0] > 0.75
    card = run.scorecard
    assert card["endpoint"]["url"].startswith("http://127.0.0.1:")
    assert card["endpoint"]["model"] == "simulated-tiny"
    assert card["verdict"] == "pass"
    transcript = (run.out / "transcript.jsonl").read_bytes()
    assert card["transcript"]["records"] == transcript.count(b"\n") == N_CASES + 2
    import hashlib

    assert card["transcript"]["sha256"] == hashlib.sha256(transcript).hexdigest()
    assert f"{N_CASES} passed" in run.stdout
    assert "structured_output  PASS" in run.stdout


@pytest.mark.parametrize(
    ("defect", "code"),
    [("ignore-response-format", "not_json"), ("json-in-markdown-fence", "fenced_json")],
)
def test_structured_output_defects_fail_with_their_code(
    simulator: Start, run_verifier: Run, defect: str, code: str
) -> None:
    run = run_verifier(simulator("--defect", defect), "-k", "not malformed and not truncation")
    assert run.returncode == 1
    assert_valid_scorecard(run)
    family = run.family()
    assert family["verdict"] == "fail"
    assert family["codes"] == {code: CONSTRAINED}
    assert family["worst"][0]["code"] == code
    assert f"{code}: " in run.stdout


def test_failure_explains_itself(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(simulator("--defect", "json-in-markdown-fence"), "-k", "max-items")
    assert "fenced_json: the JSON is wrapped in a markdown fence [stream-1]" in run.stdout
    assert 'content: ```json\n{"fruits": ["apple", "banana"]}\n```' in run.stdout
    assert "case: " in run.stdout and "json_schema.jsonl:" in run.stdout


def test_5xx_is_retried_and_graded_as_on_a_clean_vendor(
    simulator: Start, run_verifier: Run
) -> None:
    run = run_verifier(simulator("--defect", "http-500-every-3rd"))
    assert run.returncode == 0, run.stdout
    assert run.family()["counts"]["pass"] == N_CASES
    records = [json.loads(line) for line in (run.out / "transcript.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["status"] == 500]
    assert failed and all(r["retry"] for r in failed)


def test_persistent_fault_is_an_error_never_a_fail(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(
        simulator("--defect", "http-500-every-3rd", fresh=True), "--max-retries", "0"
    )
    family = run.family()
    assert family["counts"]["fail"] == 0
    assert family["counts"]["error"] >= 4
    assert family["errors"] == {"http_status": family["counts"]["error"]}
    assert family["verdict"] == "inconclusive"
    assert run.returncode == 1
    assert "ERROR at setup of structured_output::" in run.stdout
    assert "this is a transport fault, not a verdict" in run.stdout
    statuses = {o["status"] for o in run.outcomes().values()}
    assert statuses == {"pass", "error"}


def test_429_waits_as_retry_after_says(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(simulator("--defect", "http-429-retry-after:1"), "-k", "basic or type-")
    assert run.returncode == 0, run.stdout
    records = [json.loads(line) for line in (run.out / "transcript.jsonl").read_text().splitlines()]
    limited = [r for r in records if r["status"] == 429]
    assert limited
    for record in limited:
        retry = next(
            r
            for r in records
            if r["label"] == record["label"] and r["attempt"] == record["attempt"] + 1
        )
        gap = datetime.fromisoformat(retry["time"]) - datetime.fromisoformat(record["time"])
        assert gap.total_seconds() >= 0.95


@pytest.mark.parametrize("defect", [None, "json-in-markdown-fence"])
def test_xdist_gives_the_same_counts(
    simulator: Start, run_verifier: Run, defect: str | None
) -> None:
    url = simulator(*(["--defect", defect] if defect else []))
    serial = run_verifier(url, "-n", "0")
    parallel = run_verifier(url, "-n", "4")
    assert parallel.returncode == serial.returncode
    assert_valid_scorecard(parallel)
    for key in ("counts", "codes", "verdict"):
        assert parallel.family()[key] == serial.family()[key]
    assert parallel.outcomes().keys() == serial.outcomes().keys()
    assert parallel.scorecard["transcript"]["records"] >= N_CASES


def test_repeats_send_k_requests_per_case(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(simulator(), "--repeats", "3", "-k", "basic-object or max-items")
    assert run.family()["metrics"]["requests"] == 6
    assert run.scorecard["settings"]["repeats"] == 3


def test_repeats_by_family_leave_the_others_at_their_default(
    simulator: Start, run_verifier: Run
) -> None:
    run = run_verifier(
        simulator(),
        *("--families", "tool_calling,structured_output", "--repeats", "tool_calling=3"),
        *("-k", "basic-object or forced-nested-shipment"),
    )
    outcomes = run.outcomes()
    assert outcomes["tool_calling/forced-nested-shipment"]["metrics"]["repeats"] == 3
    assert outcomes["structured_output/basic-object"]["metrics"]["requests"] == 1
    assert run.scorecard["settings"]["repeats"] == {"tool_calling": 3}


def test_marker_and_keyword_selection(simulator: Start, run_verifier: Run) -> None:
    run = run_verifier(simulator(), "-m", "structured_output", "-k", "enum", "--collect-only", "-q")
    assert run.stdout.splitlines()[0] == "structured_output::enum-colour"
    none = run_verifier(simulator(), "-m", "tool_calling")
    assert none.returncode == 5


def test_resume_refuses_a_different_run(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    run_verifier(simulator(), "-k", "enum", out=out)
    other = run_verifier(simulator(), "--repeats", "2", "--resume", out=out)
    assert other.returncode == 4
    assert "ERROR: --resume: the run in" in other.stderr
    assert "repeats: None then, 2 now" in other.stderr


def test_a_new_run_keeps_the_previous_one(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    first = run_verifier(simulator(), "-k", "enum", out=out)
    run_id = first.scorecard["run"]["id"]
    second = run_verifier(simulator(), "-k", "enum", out=out)
    assert second.scorecard["run"]["id"] != run_id
    assert json.loads((out / "previous" / "scorecard.json").read_text())["run"]["id"] == run_id
    assert "previous run's files were moved" in second.stdout


def one_error_line(run: VerifierRun) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_unreachable_endpoint_is_one_line(run_verifier: Run, refused_port: int) -> None:
    port = refused_port
    run = run_verifier(f"http://127.0.0.1:{port}", "--max-retries", "0")
    assert run.returncode == 4
    assert (
        one_error_line(run) == f"ERROR: cannot reach http://127.0.0.1:{port}/v1: connection refused"
    )


RIGHT = fake_key("right")
WRONG = fake_key("wrong")


def test_wrong_key_is_one_line_and_never_printed(simulator: Start, run_verifier: Run) -> None:
    url = simulator("--require-key-env", "SIM_KEY", env={"SIM_KEY": RIGHT})
    run = run_verifier(url, "--api-key-env", "VENDOR_KEY", env={"VENDOR_KEY": WRONG})
    assert run.returncode == 4
    assert one_error_line(run) == "ERROR: the endpoint rejected the key in $VENDOR_KEY (401)"
    # The run never started: --out holds nothing, so the key is in no file.
    assert not any(run.out.rglob("*"))
    assert WRONG not in run.stdout + run.stderr
    good = run_verifier(url, "-k", "enum", env={"OPENAI_API_KEY": RIGHT})
    assert good.returncode == 0, good.stdout + good.stderr
    for path in good.out.rglob("*"):
        if path.is_file():
            assert RIGHT not in path.read_text()
    assert RIGHT not in good.stdout + good.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "gpt-9"], "ERROR: model 'gpt-9' is not served by http://127.0.0.1:"),
        (
            ["--families", "structured"],
            "ERROR: --families: unknown family 'structured' (did you mean 'structured_output'?)",
        ),
        (["--repeats", "0"], "ERROR: --repeats: must be a whole number >= 1, given: '0'"),
        (
            ["--repeats", "tool_call=3"],
            "ERROR: --repeats: unknown family 'tool_call' (did you mean 'tool_calling'?)",
        ),
        (["--timeout", "soon"], "ERROR: --timeout: must be a number of seconds > 0, given: 'soon'"),
        (
            ["--api-key-env", fake_key("option")],
            "it looks like a key",
        ),
    ],
)
def test_bad_options_are_one_clear_line(
    simulator: Start, run_verifier: Run, args: list[str], message: str
) -> None:
    run = run_verifier(simulator(), *args)
    assert run.returncode == 4
    assert message in one_error_line(run)


def test_bad_endpoint_url_is_one_line(run_verifier: Run) -> None:
    run = run_verifier("localhost:8000")
    assert run.returncode == 4
    assert "ERROR: --endpoint: must be an http:// or https:// URL" in one_error_line(run)


def test_without_endpoint_a_project_s_own_tests_run_as_usual(
    pytester: pytest.Pytester, simulator: Start
) -> None:
    pytester.makepyfile("def test_local_only():\n    assert True\n")
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    verified = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--endpoint",
        simulator(),
        "--out",
        str(pytester.path / "o"),
        "-k",
        "enum-colour or local_only",
        "--families",
        "structured_output",
        "--api",
        "chat",
    )
    verified.assert_outcomes(passed=1)
    verified.stdout.fnmatch_lines(["*structured_output*", "*1 passed*"])
    assert "test_local_only" not in verified.stdout.str()
    resumed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--resume")
    assert resumed.ret == 4
    resumed.stderr.fnmatch_lines(["ERROR: --resume needs --endpoint*"])
