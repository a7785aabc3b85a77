"""Bad requests generated from the request schema, and valid edge ones (verifier/cases/negative.py).

The generator's contract is checked on its own (every base and edge request valid, every bad
one not, every field of the schema touched, the same seed the same cases) and against the
simulated vendor, which refuses what the schema refuses: clean, it passes every generated
case; each defect below gives exactly its code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from tests.conftest import KIMI_PROFILE, VerifierRun
from verifier import resources
from verifier.cases.negative import (
    BASES,
    bad_requests,
    chosen,
    edge_requests,
    negative_cases,
    rejected_by_schema,
    schema_fields,
    with_model,
)
from verifier.simulator.validation import Policy, request_problem

ALL = len(bad_requests()) + len(edge_requests())
CASE_ID = re.compile(resources.schema("common")["$defs"]["case_id"]["pattern"])


def test_every_base_and_edge_request_is_valid_and_every_bad_one_is_not() -> None:
    for name, base in BASES.items():
        assert rejected_by_schema(base) is None, name
    for edge in edge_requests():
        assert rejected_by_schema(edge["request"]) is None, edge["id"]
    for bad in bad_requests():
        if "request" in bad:
            assert rejected_by_schema(bad["request"]) == bad["why"], bad["id"]
            continue
        # Made on the bytes: not JSON at all, or JSON whose reading is invalid.
        try:
            body = json.loads(bad["raw_body"], parse_constant=_refuse)
        except ValueError:
            continue
        assert rejected_by_schema(body) is not None, bad["id"]


def _refuse(constant: str) -> object:
    raise ValueError(constant)


def test_every_field_of_the_schema_is_mutated_and_ids_are_unique_case_ids() -> None:
    every = [*bad_requests(), *edge_requests()]
    assert set(schema_fields()) - {case["field"] for case in every} == set()
    assert len(schema_fields()) >= 50
    ids = [case["id"] for case in every]
    assert len(set(ids)) == len(ids)
    assert all(CASE_ID.fullmatch(case_id) for case_id in ids)


def test_a_seed_gives_the_same_cases_and_any_count_spreads_over_the_fields() -> None:
    fields = {case["field"] for case in [*bad_requests(), *edge_requests()]}
    first = chosen(len(fields), 7)
    assert first == chosen(len(fields), 7) and first != chosen(len(fields), 8)
    # As many cases as fields: every field once.
    assert sorted(case["field"] for case in first) == sorted(fields)
    assert len(chosen(10_000, 7)) == ALL
    cases, digest = negative_cases(12, 7)
    assert [c.id for c in cases] == [c["id"] for c in chosen(12, 7)]
    assert digest == negative_cases(12, 7)[1] != negative_cases(12, 8)[1]
    assert {c.data["expect"] for c in negative_cases(ALL, 7)[0]} == {"accept", "reject"}


def test_the_simulated_vendor_refuses_every_bad_request_and_takes_every_edge() -> None:
    policy = Policy(model="m")
    for bad in bad_requests():
        if "request" in bad:
            body = with_model(bad["request"], "m")
            assert request_problem(body, policy) is not None, bad["id"]
    for edge in edge_requests():
        assert request_problem(with_model(edge["request"], "m"), policy) is None, edge["id"]


def _wire_codes(run: VerifierRun) -> set[str]:
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    wire = run.scorecard["families"]["wire"]
    assert wire["counts"]["error"] == 0, run.stdout[-3000:]
    return set(wire["codes"])


def _negative_run(
    run_verifier: Callable[..., VerifierRun], url: str, count: int, *options: str
) -> VerifierRun:
    """The wire family with `count` generated cases, against a vendor with the Kimi profile."""
    wire = ("--profile", KIMI_PROFILE, "--families", "wire", "--negative", str(count))
    return run_verifier(url, *wire, *options)


@pytest.mark.slow
def test_a_clean_vendor_passes_every_generated_case_and_the_coverage_is_in_the_scorecard(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun]
) -> None:
    url = simulator("--profile", KIMI_PROFILE)
    run = _negative_run(run_verifier, url, ALL, "--concurrency", "8")
    assert _wire_codes(run) == set() and run.returncode == 0, run.stdout[-3000:]
    negative = run.scorecard["families"]["wire"]["metrics"]["negative"]
    assert negative["covered"] == negative["schema_fields"] == len(schema_fields())
    assert sum(f["cases"] for f in negative["fields"].values()) == ALL
    settings = run.scorecard["settings"]
    assert settings["negative"] == {"cases": ALL, "seed": settings["seed"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("defect", "code", "options"),
    [
        ("invalid-request-200", "invalid_request_accepted", ()),
        ("invalid-request-500", "invalid_request_5xx", ()),
        ("invalid-request-hang", "invalid_request_hang", ("--timeout", "2", "--max-retries", "0")),
    ],
)
def test_a_vendor_that_mishandles_bad_requests_fails_the_generated_ones_with_one_code(
    simulator: Callable[..., str],
    run_verifier: Callable[..., VerifierRun],
    defect: str,
    code: str,
    options: tuple[str, ...],
) -> None:
    # Twelve generated cases alone (the hand-written invalid ones are not selected).
    url = simulator("--profile", KIMI_PROFILE, "--defect", defect)
    selected = ("-k", "negative and not invalid", "--concurrency", "12")
    run = _negative_run(run_verifier, url, 12, *selected, *options)
    assert _wire_codes(run) == {code}, run.stdout[-3000:]
    failed = run.scorecard["families"]["wire"]["counts"]["fail"]
    seed = run.scorecard["settings"]["seed"]
    rejects = sum(c.data["expect"] == "reject" for c in negative_cases(12, seed)[0])
    assert failed == rejects
