"""The structured-output family end to end on the simulated vendor: the per-keyword matrix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.conftest import VerifierRun
from tests.test_structured_corpus import JSON_SCHEMA, STRUCTURAL, TAGS, schema_of, uses
from verifier import resources
from verifier.cases.corpus import load_corpus
from verifier.simulator.rules import natural_json

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
CASES = load_corpus(["structured_output"]).cases
BY_ID = {c.id: c for c in CASES}
MALFORMED = sum(c.data.get("kind") == "malformed" for c in CASES)
TRUNCATION = sum(c.data.get("kind") == "truncation" for c in CASES)


def natural_violations(case_id: str) -> set[str]:
    """The keywords the case's natural answer breaks, as jsonschema names them (nested ones too)."""
    case = BY_ID[case_id]
    schema = schema_of(case)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    found: set[str] = set()
    pending = list(validator.iter_errors(natural_json({"messages": case.data["messages"]})))
    while pending:
        error = pending.pop()
        found.add(str(error.validator))
        pending.extend(error.context)
    return found


def so_run(run_verifier: Run, url: str, *args: str) -> VerifierRun:
    run = run_verifier(url, "--families", "structured_output", *args)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


def failing(run: VerifierRun) -> dict[str, dict[str, Any]]:
    return {k.split("/", 1)[1]: v for k, v in run.outcomes().items() if v["status"] == "fail"}


def test_clean_vendor_enforces_every_keyword(simulator: Start, run_verifier: Run) -> None:
    run = so_run(run_verifier, simulator())
    family = run.family()
    assert run.returncode == 0, run.stdout[-3000:]
    assert family["counts"] == {"pass": len(CASES), "fail": 0, "error": 0, "unsupported": 0}
    metrics = family["metrics"]
    assert metrics["silent_acceptance"] == [] and metrics["violated_keywords"] == {}
    assert set(metrics["keywords"]) >= set(TAGS)
    for tag, row in metrics["keywords"].items():
        assert (
            row["declared_coverage"]["rate"] == 1.0 and row["empirical_coverage"]["rate"] == 1.0
        ), tag
    assert set(metrics["modes"]) == {"strict", "non_strict", "json_object"}
    assert metrics["malformed"]["rejected_4xx"] == MALFORMED
    assert metrics["truncation"]["passed"] == TRUNCATION


@pytest.mark.parametrize("keyword", TAGS)
def test_an_ignored_keyword_shows_silent_acceptance_for_exactly_that_keyword(
    simulator: Start, run_verifier: Run, keyword: str
) -> None:
    """Ignoring K breaks every case tagged K and no case that does not depend on K.

    A case depends on K when it is tagged K, when its natural answer breaks K somewhere (a
    nested-object case whose inner value has the wrong type depends on `type`), or when K is a
    structural keyword its schema uses (ignoring `properties` leaves everything below it
    unchecked). For a keyword that holds no subschema, the violated keywords the scorecard
    reports are exactly {K}.
    """
    run = so_run(run_verifier, simulator("--defect", f"ignore-keyword:{keyword}"))
    metrics = run.family()["metrics"]
    tagged = [c.id for c in JSON_SCHEMA if c.data["keyword"] == keyword]
    row = metrics["keywords"][keyword]
    assert row["silent"] == row["accepted"] == len(tagged)
    assert metrics["silent_acceptance"][0]["keyword"] == keyword or keyword in STRUCTURAL
    for case_id, outcome in failing(run).items():
        assert outcome["code"] == "schema_mismatch", (case_id, outcome["message"])
        case = BY_ID[case_id]
        depends = (
            case.data["keyword"] == keyword
            or keyword in natural_violations(case_id)
            or (keyword in STRUCTURAL and uses(schema_of(case), keyword))
        )
        assert depends, f"{case_id} ({case.data['keyword']}) failed when only {keyword} was ignored"
    if keyword not in STRUCTURAL:
        assert set(metrics["violated_keywords"]) == {keyword}


def test_strict_accepted_but_not_enforced(simulator: Start, run_verifier: Run) -> None:
    run = so_run(run_verifier, simulator("--defect", "strict-accepted-not-enforced"))
    modes = run.family()["metrics"]["modes"]
    assert modes["strict"]["silent"] == modes["strict"]["accepted"] > 0
    assert modes["non_strict"]["silent"] == 0 and modes["json_object"]["silent"] == 0


def test_malformed_format_giving_500_is_its_own_failure(
    simulator: Start, run_verifier: Run
) -> None:
    run = so_run(
        run_verifier, simulator("--defect", "bad-response-format-500"), "--max-retries", "1"
    )
    family = run.family()
    assert family["codes"] == {"malformed_format_5xx": MALFORMED}
    assert family["metrics"]["malformed"]["server_error"] == MALFORMED
    assert family["counts"]["error"] == 0, (
        "a persistent 5xx to an invalid request is a finding, not an error"
    )


def test_truncated_json_must_say_length(simulator: Start, run_verifier: Run) -> None:
    run = so_run(run_verifier, simulator("--defect", "truncated-json-finish-stop"))
    family = run.family()
    assert family["codes"] == {"truncated_without_length": TRUNCATION}


def test_generated_cases_join_the_run_reproducibly(simulator: Start, run_verifier: Run) -> None:
    first = so_run(
        run_verifier, simulator(), "--generated", "25", "--generated-seed", "11", "-k", "generated"
    )
    again = so_run(
        run_verifier, simulator(), "--generated", "25", "--generated-seed", "11", "-k", "generated"
    )
    family = first.family()
    assert family["counts"]["pass"] == 25 and family["cases"] == 25
    assert first.scorecard["settings"]["generated"] == {"cases": 25, "seed": 11}
    assert first.scorecard["corpus"] == again.scorecard["corpus"]
    assert "structured_output/generated" in first.scorecard["corpus"]["families"]
    ignored = so_run(
        run_verifier,
        simulator("--defect", "ignore-response-format"),
        "--generated",
        "25",
        "--generated-seed",
        "11",
        "-k",
        "generated",
    )
    assert ignored.family()["codes"] == {"not_json": 25}
