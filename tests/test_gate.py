"""The day-0 gate: thresholds loaded and checked, and the exit status it decides."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KIMI_PROFILE, VerifierRun
from verifier import resources
from verifier.config import FAMILY_NAMES
from verifier.errors import ConfigError
from verifier.scorecard.gate import DEFAULTS, evaluate, family_gate, load_thresholds

Run = Callable[..., VerifierRun]
Start = Callable[..., str]


def entry(
    passed: int = 20,
    failed: int = 0,
    errors: int = 0,
    unsupported: int = 0,
    verdict: str | None = None,
    **metrics: Any,
) -> dict[str, Any]:
    graded = passed + failed
    if verdict is None:
        verdict = "fail" if failed else "pass"
    return {
        "verdict": verdict,
        "counts": {"pass": passed, "fail": failed, "error": errors, "unsupported": unsupported},
        "score": passed / graded if graded else None,
        "metrics": metrics,
    }


def missed(family: dict[str, Any] | None, **limits: Any) -> list[str]:
    return [m["threshold"] for m in family_gate(family, limits)["missed"]]


def test_a_clean_family_meets_the_defaults() -> None:
    assert missed(entry(), **DEFAULTS) == []


def test_each_threshold_can_be_missed() -> None:
    assert missed(entry(19, 1), min_score=1.0) == ["min_score"]
    assert missed(entry(19, 1), min_score=0.95) == []
    assert missed(entry(20, errors=2), max_error_rate=0.05) == ["max_error_rate"]
    assert missed(entry(5), min_graded=10) == ["min_graded"]
    silent = [{"keyword": "maxItems", "cases": 3}]
    assert missed(entry(silent_acceptance=silent), max_silent_acceptance=2) == [
        "max_silent_acceptance"
    ]
    assert missed(entry(silent_acceptance=silent), max_silent_acceptance=3) == []
    assert missed(entry(pass_k={"rate": 0.5}), min_pass_k=0.9) == ["min_pass_k"]
    # A pass^k threshold on a family that has none is missed, not ignored.
    assert missed(entry(), min_pass_k=0.9) == ["min_pass_k"]


def test_a_failed_ruling_is_missed_and_a_required_family_must_have_compared() -> None:
    ruled = entry()
    ruled["rulings"] = [{"name": "distribution", "outcome": "different", "verdict": "fail"}]
    assert missed(ruled, **DEFAULTS) == ["ruling distribution"]
    ruled["rulings"] = [{"name": "distribution", "outcome": "same", "verdict": "pass"}]
    assert missed(ruled, require=True) == []
    recorded = {**entry(0, unsupported=24, verdict="recorded"), "rulings": []}
    assert family_gate(recorded, DEFAULTS) == {
        "gated": False,
        "passed": True,
        "missed": [],
        "why": "recorded: nothing compared",
    }
    assert family_gate(recorded, {"require": True})["missed"] == [
        {"threshold": "require", "limit": True, "actual": "recorded: nothing compared"}
    ]


def ruled(outcome: str, prompts: int) -> dict[str, Any]:
    """A parity entry after its sequential test stopped at `prompts`, both rulings `outcome`."""
    verdict = {"same": "pass", "different": "fail", "undecided": "inconclusive"}[outcome]
    family = entry(prompts, verdict="pass" if verdict == "pass" else verdict)
    family["rulings"] = [
        {"name": name, "outcome": outcome, "verdict": verdict} for name in ("distribution", "kv")
    ]
    return family


def test_a_sequential_test_that_decided_same_meets_the_gate_on_its_own_evidence() -> None:
    """Parity's sign test may say "same" after 8 prompts and stop: the rulings, not the
    default min_graded of 10 cases, say whether it saw enough."""
    assert family_gate(ruled("same", 8), DEFAULTS) == {"gated": True, "passed": True, "missed": []}
    assert missed(ruled("undecided", 24), **DEFAULTS) == ["conclusive"]
    assert missed(ruled("different", 12), **DEFAULTS) == [
        "ruling distribution",
        "ruling kv",
    ]
    # A family without rulings still needs its cases.
    assert missed(entry(8), **DEFAULTS) == ["min_graded"]


def test_inconclusive_never_passes() -> None:
    flaky = entry(10, errors=10, verdict="inconclusive")
    assert "conclusive" in missed(flaky, min_score=0.0, max_error_rate=1.0)


def test_unsupported_is_not_gated_unless_required() -> None:
    nothing = entry(0, unsupported=30, verdict="unsupported")
    assert family_gate(nothing, DEFAULTS) == {
        "gated": False,
        "passed": True,
        "missed": [],
        "why": "unsupported",
    }
    assert missed(nothing, require=True) == ["require"]
    assert missed(None, require=True) == ["require"]


def test_evaluate_gates_the_families_that_ran_and_the_required_ones() -> None:
    card = {
        "settings": {"families": ["wire", "tokenizer"]},
        "families": {"wire": entry(), "tokenizer": entry(18, 2)},
    }
    thresholds = {name: dict(DEFAULTS) for name in FAMILY_NAMES}
    thresholds["vision"]["require"] = True
    gate = evaluate(card, thresholds, "defaults")
    assert set(gate["families"]) == {"wire", "tokenizer", "vision"}
    assert gate["passed"] is False
    assert [m["threshold"] for m in gate["families"]["tokenizer"]["missed"]] == ["min_score"]
    assert gate["families"]["vision"]["missed"][0]["actual"] == "not run"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_thresholds_layer_defaults_profile_then_file(tmp_path: Path) -> None:
    profile = {"default": {"min_score": 0.9}, "wire": {"min_graded": 3}}
    file = write(tmp_path / "gate.toml", "[wire]\nmin_score = 0.5\n")
    thresholds, source = load_thresholds(file, profile, FAMILY_NAMES)
    assert source == f"file {file}"
    assert thresholds["wire"] == {"min_score": 0.5, "max_error_rate": 0.05, "min_graded": 3}
    assert thresholds["tokenizer"]["min_score"] == 0.9
    assert thresholds["structured_output"]["max_silent_acceptance"] == 0
    assert load_thresholds(None, None, FAMILY_NAMES)[1] == "defaults"
    assert load_thresholds(None, profile, FAMILY_NAMES)[1] == "profile"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool_caling]\nmin_score = 1\n", "unknown family [tool_caling] (did you mean"),
        ("[wire]\nmin_scor = 1\n", "min_scor: unknown threshold (did you mean min_score?)"),
        ("[wire]\nmin_score = 2\n", "min_score = 2 is a share: 0 to 1"),
        ("[wire]\nmin_graded = -1\n", "must be >= 0"),
        ("[wire]\nrequire = 1\n", "require = 1 has the wrong type"),
        ("[wire]\nmin_graded = true\n", "min_graded = True has the wrong type"),
        ("wire = 1\n", "[wire] must be a table of thresholds"),
        ("[wire]\nchat = 1\n", "[wire.chat] must be a table of thresholds"),
        ("[wire.chat]\nrequire = true\n", "[wire.chat] require: not set per API"),
        ("[wire.chat]\nmin_scor = 1\n", "[wire.chat] min_scor: unknown threshold (did you"),
        ("[wire.chat]\nmin_score = 2\n", "[wire.chat] min_score = 2 is a share"),
        ("[wire\n", "is not TOML"),
    ],
)
def test_a_bad_thresholds_file_is_one_line_naming_it(
    tmp_path: Path, text: str, message: str
) -> None:
    file = write(tmp_path / "gate.toml", text)
    with pytest.raises(ConfigError) as error:
        load_thresholds(file, None, FAMILY_NAMES)
    assert message in str(error.value)
    assert "gate.toml" in str(error.value) and "\n" not in str(error.value)


def test_an_api_s_table_adds_to_the_lower_layers_and_names_the_api(tmp_path: Path) -> None:
    profile = {"wire": {"messages": {"min_score": 0.9, "min_graded": 3}}}
    file = write(tmp_path / "gate.toml", "[default.messages]\nmin_score = 0.8\n")
    thresholds, _ = load_thresholds(file, profile, FAMILY_NAMES)
    # The file's [default.messages] comes after the profile's [wire.messages]: it wins where
    # both say, and the profile's other threshold stays.
    assert thresholds["wire"]["messages"] == {"min_score": 0.8, "min_graded": 3}
    assert thresholds["tokenizer"]["messages"] == {"min_score": 0.8}


def over_apis(**apis: dict[str, Any]) -> dict[str, Any]:
    """A family entry over several APIs (the counts and score of their union)."""
    passed = sum(e["counts"]["pass"] for e in apis.values())
    failed = sum(e["counts"]["fail"] for e in apis.values())
    family = entry(passed, failed)
    family["apis"] = apis
    return family


def test_thresholds_that_name_an_api_gate_each_api_s_cases() -> None:
    family = over_apis(chat=entry(20), messages=entry(18, 2))
    # Without an API's table the family's entry over all APIs is held to the thresholds.
    assert missed(family, **DEFAULTS) == ["min_score"]
    # With one, each API is held to the case thresholds, that API to its own table.
    loose = {**DEFAULTS, "messages": {"min_score": 0.9}}
    assert family_gate(family, loose)["passed"] is True
    assert set(family_gate(family, loose)["apis"]) == {"chat", "messages"}
    strict = {**DEFAULTS, "messages": {"min_score": 0.95}, "chat": {"min_graded": 30}}
    gate = family_gate(family, strict)
    assert [(m["threshold"], m["limit"], m["actual"]) for m in gate["missed"]] == [
        ("chat min_graded", 30, 20),
        ("messages min_score", 0.95, 0.9),
    ]
    # The family's own entry keeps what is not per API: its rulings across APIs among them.
    family["rulings"] = [
        {"name": "cross_api tool", "outcome": "different", "verdict": "fail", "across": []}
    ]
    assert missed(family, **loose) == ["ruling cross_api tool"]
    # An API the family did not run over is not gated, and says so.
    once = family_gate({**entry(20), "api": "messages"}, {**DEFAULTS, "responses": {}})
    assert once["passed"] is True
    assert once["apis"]["responses"]["why"] == "not run over this API"
    assert once["apis"]["messages"]["gated"] is True


def test_a_missing_thresholds_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_thresholds(tmp_path / "nope.toml", None, FAMILY_NAMES)


# End to end: the exit status a CI job sees.

FAMILIES = ("--families", "structured_output,wire", "--repeats", "1")


def gated(run: VerifierRun) -> dict[str, Any]:
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run.scorecard["gate"]


@pytest.mark.slow
def test_the_gate_passes_the_clean_vendor_and_fails_the_defective_one(
    simulator: Start, run_verifier: Run
) -> None:
    clean = run_verifier(simulator(), *FAMILIES, "--gate")
    assert clean.returncode == 0, clean.stdout[-2000:]
    assert gated(clean)["passed"] is True
    assert "gate (defaults): PASS" in clean.stdout
    defective = run_verifier(simulator("--defect", "ignore-keyword:maxItems"), *FAMILIES, "--gate")
    assert defective.returncode == 1
    gate = gated(defective)
    assert gate["passed"] is False
    structured = gate["families"]["structured_output"]["missed"]
    assert {m["threshold"] for m in structured} == {"min_score", "max_silent_acceptance"}
    assert gate["families"]["wire"]["passed"] is True
    assert "gate (defaults): FAIL" in defective.stdout
    assert "structured_output: max_silent_acceptance 0 missed (actual 3)" in defective.stdout
    summary = (defective.out / "scorecard.md").read_text()
    assert "## Gate: FAIL" in summary
    assert "- structured_output: `max_silent_acceptance` 0 missed, actual 3" in summary


@pytest.mark.slow
def test_looser_thresholds_pass_a_run_with_failures(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    loose = write(
        tmp_path / "gate.toml", "[structured_output]\nmin_score = 0.9\nmax_silent_acceptance = 3\n"
    )
    url = simulator("--defect", "ignore-keyword:maxItems")
    run = run_verifier(url, *FAMILIES, "--gate-thresholds", str(loose))
    assert run.family()["counts"]["fail"] == 3
    assert run.returncode == 0, "the gate, not the failed cases, decides the exit status"
    assert gated(run)["source"] == f"file {loose}"
    without = run_verifier(url, *FAMILIES)
    assert without.returncode == 1 and "gate" not in without.scorecard


@pytest.mark.slow
def test_the_gate_names_the_api_whose_cases_miss_its_thresholds(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    """Over Responses an answer cut at its limit says it completed: with a table per API, the
    gate says the Responses cases missed min_score, and the chat cases met it."""
    per_api = write(tmp_path / "gate.toml", "[wire.chat]\n[wire.responses]\nmin_graded = 5\n")
    url = simulator("--profile", KIMI_PROFILE, "--defect", "responses-cut-as-completed")
    # The corpus's own cases (the generated ones' plain control requests are cut too).
    run = run_verifier(
        url,
        *("--families", "wire", "--api", "chat,responses", "--profile", KIMI_PROFILE),
        *("--gate-thresholds", str(per_api), "--negative", "0"),
    )
    assert run.returncode == 1
    wire = gated(run)["families"]["wire"]
    assert {api: g["passed"] for api, g in wire["apis"].items()} == {
        "chat": True,
        "responses": False,
    }
    assert [m["threshold"] for m in wire["missed"]] == ["responses min_score"]
    assert gated(run)["thresholds"]["wire"]["responses"] == {"min_graded": 5}
    assert "  wire: responses min_score 1.0 missed (actual 0.657" in run.stdout


@pytest.mark.slow
def test_an_inconclusive_family_fails_even_the_loosest_gate(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    loosest = write(tmp_path / "gate.toml", "[default]\nmin_score = 0.0\nmax_error_rate = 1.0\n")
    url = simulator("--defect", "http-500-every-3rd", fresh=True)
    run = run_verifier(
        url, "--families", "wire", "--max-retries", "0", "--gate-thresholds", str(loosest)
    )
    assert run.family("wire")["verdict"] == "inconclusive"
    assert run.returncode == 1
    assert [m["threshold"] for m in gated(run)["families"]["wire"]["missed"]] == ["conclusive"]


@pytest.mark.slow
def test_the_profile_s_thresholds_apply(
    simulator: Start, run_verifier: Run, small_profile_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "profile"
    shutil.copytree(small_profile_dir, folder)
    settings = json.loads((folder / "verifier-profile.json").read_text())
    settings["gate"] = {"structured_output": {"min_score": 0.9, "max_silent_acceptance": 3}}
    (folder / "verifier-profile.json").write_text(json.dumps(settings))
    url = simulator("--profile", str(small_profile_dir), "--defect", "ignore-keyword:maxItems")
    run = run_verifier(url, *FAMILIES, "--profile", str(folder), "--gate")
    assert gated(run)["source"] == "profile"
    assert run.returncode == 0


@pytest.mark.slow
def test_a_bad_thresholds_file_stops_the_run_before_any_request(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    bad = write(tmp_path / "gate.toml", "[wire]\nmin_score = 7\n")
    run = run_verifier(simulator(), *FAMILIES, "--gate-thresholds", str(bad))
    assert run.returncode == 4
    assert "min_score = 7 is a share" in run.stderr
    assert not (run.out / "transcript.jsonl").exists()
