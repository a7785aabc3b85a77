"""Bad requests generated from the request schema, and valid edge ones (verifier/cases/negative.py).

The generator's contract is checked on its own (every base and edge request valid, every bad
one not, every field of the schema touched, the same seed the same cases) and against the
simulated vendor, which refuses what the schema refuses: clean, it passes every generated
case; each defect below gives exactly its code.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import KIMI_PROFILE, VerifierRun
from verifier import resources
from verifier.cases.negative import (
    API_BASES,
    BASES,
    BEYOND_SCHEMA,
    MODEL,
    bad_requests,
    chosen,
    edge_requests,
    field_name,
    narrowed,
    negative_cases,
    rejected_by_schema,
    schema_fields,
    smaller,
    with_model,
)
from verifier.checks.registry import RunContext
from verifier.checks.support.bad_requests import (
    SHRINK_SENDS,
    _next_user,
    _shrink,
    degradation,
    param_findings,
    slowed,
)
from verifier.errors import (
    EndpointError,
    EndpointProtocolError,
    EndpointStatusError,
    EndpointTimeout,
    EndpointUnreachable,
)
from verifier.protocol.answers import ChatResult, parse_completion
from verifier.protocol.apis import API_NAMES
from verifier.protocol.requests import Chat, Raw
from verifier.simulator.validation import Policy, request_problem

ALL = len(bad_requests()) + len(edge_requests())
OTHER_APIS = ("messages", "responses")
CASE_ID = re.compile(resources.schema("common")["$defs"]["case_id"]["pattern"])


@pytest.mark.parametrize("api", API_NAMES)
def test_every_base_and_edge_request_is_valid_and_every_bad_one_is_not(api: str) -> None:
    for name, base in API_BASES[api].items():
        assert rejected_by_schema(base, api) is None, name
    for edge in edge_requests(api):
        assert edge.get("api", "chat") == api
        assert rejected_by_schema(edge["request"], api) is None, edge["id"]
    for bad in bad_requests(api):
        assert bad.get("api", "chat") == api
        if bad["mutation"] in BEYOND_SCHEMA:
            # Well-formed: an image that cannot be had, a JSON Schema hard or impossible to meet.
            assert rejected_by_schema(bad["request"], api) is None, bad["id"]
            continue
        if "request" in bad:
            assert rejected_by_schema(bad["request"], api) == bad["why"], bad["id"]
            continue
        # Made on the bytes: not UTF-8, not JSON at all, or JSON whose reading is invalid.
        raw = bad["raw_body"].encode(bad.get("encoding", "utf-8"))
        try:
            body = json.loads(raw, parse_constant=_refuse)
        except ValueError:
            continue
        assert rejected_by_schema(body, api) is not None, bad["id"]


def _refuse(constant: str) -> object:
    raise ValueError(constant)


def test_every_field_of_the_schema_is_mutated_and_ids_are_unique_case_ids() -> None:
    every = [*bad_requests(), *edge_requests()]
    assert set(schema_fields()) - {case["field"] for case in every} == set()
    assert len(schema_fields()) >= 50
    # The other APIs': each field of their schemas their bases hold is mutated; their ids are
    # their own.
    for api in OTHER_APIS:
        fields = {case["field"] for case in bad_requests(api)}
        held = {field_name(path) for base in API_BASES[api].values() for path in _held(base)}
        assert held & set(schema_fields(api)) - fields == set(), api
        every += [*bad_requests(api), *edge_requests(api)]
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
    expected = {c.data["expect"] for c in negative_cases(ALL, 7)[0]}
    assert expected == {"accept", "reject", "bounded"}


def test_the_simulated_vendor_refuses_every_bad_request_and_takes_every_edge() -> None:
    policy = Policy(model="m")
    for bad in bad_requests():
        if "request" in bad and bad["expect"] == "reject":
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
    """The wire family with `count` generated cases per API, against a vendor with the Kimi
    profile, over every API."""
    wire = ("--profile", KIMI_PROFILE, "--families", "wire", "--negative", str(count))
    wire += ("--api", ",".join(API_NAMES))
    return run_verifier(url, *wire, *options)


@pytest.mark.slow
def test_a_clean_vendor_passes_every_generated_case_and_the_coverage_is_in_the_scorecard(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun]
) -> None:
    url = simulator("--profile", KIMI_PROFILE)
    # ALL per API: every case of each API's set (the others have fewer).
    run = _negative_run(run_verifier, url, ALL, "--concurrency", "8")
    assert _wire_codes(run) == set() and run.returncode == 0, run.stdout[-3000:]
    wire = run.scorecard["families"]["wire"]
    every = wire["metrics"]["negative"]["apis"]
    assert every["chat"] == wire["apis"]["chat"]["metrics"]["negative"]
    negative = every["chat"]
    assert negative["covered"] == negative["schema_fields"] == len(schema_fields())
    assert sum(f["cases"] for f in negative["fields"].values()) == ALL
    for api in OTHER_APIS:
        made = [*bad_requests(api), *edge_requests(api)]
        fields = {case["field"] for case in made} & set(schema_fields(api))
        assert every[api]["covered"] == len(fields) and every[api]["schema_fields"] == len(
            schema_fields(api)
        )
        assert sum(f["cases"] for f in every[api]["fields"].values()) == len(made)
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
    # Twelve generated cases per API alone (the hand-written invalid ones are not selected).
    url = simulator("--profile", KIMI_PROFILE, "--defect", defect)
    selected = ("-k", "negative and not invalid", "--concurrency", "12")
    run = _negative_run(run_verifier, url, 12, *selected, *options)
    assert _wire_codes(run) == {code}, run.stdout[-3000:]
    wire = run.scorecard["families"]["wire"]
    seed = run.scorecard["settings"]["seed"]
    for api in API_NAMES:
        made = negative_cases(12, seed, (api,))[0]
        rejects = sum(c.data["expect"] == "reject" for c in made)
        assert wire["apis"][api]["counts"]["fail"] == rejects, api


def _bad(case_id: str) -> dict[str, Any]:
    return next(case for case in bad_requests() if case["id"] == case_id)


@pytest.mark.parametrize(
    "case",
    [c for api in API_NAMES for c in bad_requests(api) if "path" in c],
    ids=lambda c: c["id"],
)
def test_every_smaller_request_is_still_bad_only_by_the_change(case: dict[str, Any]) -> None:
    api = case.get("api", "chat")
    original = case["request"]
    size = len(json.dumps(original))
    for candidate, path in itertools.islice(smaller(case, original, case["path"]), 6):
        assert len(json.dumps(candidate)) < size
        assert field_name(tuple(path)) == case["field"]
        if case["mutation"] in BEYOND_SCHEMA:
            assert rejected_by_schema(candidate, api) is None
            continue
        assert rejected_by_schema(candidate, api) is not None
        restored = copy.deepcopy(candidate)
        parent = restored
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = _value_at(API_BASES[api][case["base"]], case["path"])
        assert rejected_by_schema(restored, api) is None


def _held(body: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path below `body` (a tool's and a response's JSON Schema not entered)."""
    found = [path] if path else []
    if path and path[-1] in ("parameters", "schema", "input_schema"):
        return found
    items = (
        body.items()
        if isinstance(body, dict)
        else enumerate(body)
        if isinstance(body, list)
        else ()
    )
    for key, value in items:
        found += _held(value, (*path, key))
    return found


def _value_at(body: Any, path: list[Any]) -> Any:
    for step in path:
        body = body[step]
    return body


def test_the_smallest_request_keeps_what_the_failure_needs() -> None:
    """The search sends smaller requests and keeps the one that fails as the case did.

    Here the endpoint accepts the bad ``n`` only when ``seed`` is there: the search ends
    with the smallest request that still has both, found with the requests it reports.
    """
    case = {**_bad("negative-sampling-n-wrong-type"), "check": "generated"}
    sent: list[dict[str, Any]] = []
    search = _shrink(case, RunContext(model="m", seed=1), {"invalid_request_accepted"})
    request = next(search)
    try:
        while True:
            body = json.loads(request.content)
            sent.append(body)
            status = 200 if "seed" in body else 400
            answer = {"error": {"message": "bad n", "type": "invalid_request_error"}}
            if status == 200:
                answer = {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "hi"},
                            "finish_reason": "stop",
                        }
                    ],
                }
            result = parse_completion(
                status, json.dumps(answer).encode(), {"content-type": "application/json"}
            )
            request = search.send(result)
    except StopIteration as done:
        shrunk, sends = done.value
    assert shrunk == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_completion_tokens": 8,
        "n": "1",
        "seed": 7,
    }
    assert sends == len(sent) <= SHRINK_SENDS
    assert all(body["model"] == "m" and body["n"] == "1" for body in sent)


def test_the_new_kinds_are_made_as_documented() -> None:
    kinds = {(c["field"], c["mutation"]): c for c in bad_requests()}
    url = "messages[].content[].image_url.url"
    for kind in ("file_url", "not_image_data_url", "urlsafe_base64", "unreachable_url"):
        assert kinds[(url, kind)]["expect"] == "reject"
    assert kinds[(url, "urlsafe_base64")]["request"]["messages"][0]["content"][1]["image_url"][
        "url"
    ].startswith("data:image/png;base64,")
    latin = kinds[("(body)", "not_utf8")]
    raw = latin["raw_body"].encode(latin["encoding"])
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    schema = "response_format.json_schema.schema"
    assert kinds[(schema, "unsatisfiable_schema")]["expect"] == "reject"
    bounded = {key for key, case in kinds.items() if case["expect"] == "bounded"}
    assert bounded == {
        (field, kind)
        for field in ("tools[].function.parameters", schema)
        for kind in ("recursive_schema", "deep_nesting", "huge_enum", "unsatisfiable_schema")
    } - {(schema, "unsatisfiable_schema")}


@pytest.mark.parametrize(
    ("param", "field", "named"),
    [
        ("temperature", "temperature", True),
        ("messages.0.content", "messages[].content", True),
        ("body/messages/2/tool_call_id", "messages[].tool_call_id", True),
        ("messages", "messages[].content[].image_url.url", True),
        ("prompt", "temperature", False),
        ("max_tokens", "messages[].content", False),
        (None, "temperature", True),
        ("", "temperature", True),
    ],
)
def test_an_error_param_must_name_a_part_of_the_field_where_one_is_given(
    param: str | None, field: str, named: bool
) -> None:
    codes = [f.code for f in param_findings(param, field)]
    assert codes == ([] if named else ["error_param_wrong"])


@given(
    baseline=st.floats(min_value=0.001, max_value=60), after=st.floats(min_value=0, max_value=600)
)
def test_a_request_is_slowed_only_past_five_times_its_baseline_and_two_seconds(
    baseline: float, after: float
) -> None:
    assert slowed(baseline, after) == (after > 5 * baseline and after > baseline + 2)


def _answer(status: int = 200, attempts: int = 1, latency: float = 0.1) -> ChatResult:
    return ChatResult(stream=False, status=status, attempts=attempts, latency=latency)


@pytest.mark.parametrize(
    ("control", "after", "seen"),
    [
        (_answer(), _answer(latency=0.2), None),
        (_answer(), EndpointStatusError("500 x4", status=500, attempts=4), "no answer"),
        (_answer(), _answer(status=400), "HTTP 400"),
        (_answer(), _answer(latency=3.0), "took 3.00 s"),
        # A failure or a wait that a flaky network explains as well: nothing said.
        (_answer(), EndpointStatusError("500", status=500, attempts=1), None),
        (_answer(), _answer(attempts=2, latency=3.0), None),
        # No control to compare with: the endpoint failed without any bad request.
        (_answer(attempts=2), _answer(status=400), None),
        (_answer(status=503), _answer(status=400), None),
        (EndpointTimeout("no answer", attempts=4), _answer(status=400), None),
    ],
)
def test_a_degradation_is_named_only_against_a_control_answered_at_once(
    control: ChatResult | EndpointError, after: ChatResult | EndpointError, seen: str | None
) -> None:
    said = degradation(control, after)
    assert (said is None) == (seen is None) and (seen is None or seen in str(said))


def test_a_profile_narrows_every_sampling_value_but_the_changed_one() -> None:
    sampling = {"temperature": {"fixed": 0.6}, "top_p": {"min": 0.5, "max": 0.95}}
    body = {**BASES["sampling"], "top_p": "0.5"}
    # The changed field stays as the case made it; the others move inside the policy.
    assert narrowed(body, sampling, "top_p") == {**body, "temperature": 0.6}
    assert narrowed({**body, "top_p": 0.99}, sampling, "temperature")["top_p"] == 0.95
    assert narrowed({**body, "top_p": 0.1}, sampling, None) == {
        **body,
        "temperature": 0.6,
        "top_p": 0.5,
    }
    assert narrowed(body, {}, None) == body


def test_a_server_that_drops_the_bad_request_and_then_refuses_is_degraded_at_once() -> None:
    """No second round for a server that went down: the bad request's dropped connection and
    the refusals right after it are the evidence."""
    plain = Chat({**BASES["plain"], "model": "m"}, "before")
    bad = Raw(b"{}", "application/json", "bad-2")
    dropped = EndpointProtocolError("connection closed without an answer")
    check = _next_user(plain, _answer(), bad, [], {}, dropped)
    assert next(check).name == "after"
    with pytest.raises(StopIteration) as done:
        check.throw(EndpointUnreachable("connection refused", attempts=4))
    findings, requests = done.value.value
    assert [f.code for f in findings] == ["server_degraded"] and requests == 3
    assert "connection closed without an answer" in findings[0].message
    # Dropped, but the server answers the next request at once: the case's own error.
    check = _next_user(plain, _answer(), bad, [], {}, dropped)
    next(check)
    with pytest.raises(EndpointProtocolError):
        check.send(_answer())


def test_a_smaller_request_keeps_its_token_limit() -> None:
    """Without it a real model writes until its context ends: more work, not less."""
    for case in bad_requests():
        if "path" not in case or case["path"][0] in ("max_tokens", "max_completion_tokens"):
            continue
        limit = {"max_tokens", "max_completion_tokens"} & set(case["request"])
        for candidate, _ in itertools.islice(smaller(case, case["request"], case["path"]), 3):
            assert limit <= set(candidate), case["id"]
