"""Seeded transport faults of the simulated vendor, and how the verifier weathers them.

Fast tests speak HTTP to an in-process vendor and check each fault, its rate and its
seed; the client tests check that every fault is retried and recorded by kind. The
end-to-end tests (slow) run the verifier against a faulty vendor and check that no
fault changes a graded outcome.
"""

from __future__ import annotations

import http.client
import json
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VerifierRun, fake_key, verify
from verifier import resources
from verifier.cases.corpus import load_corpus
from verifier.checks.structured_output import output_findings
from verifier.endpoint.client import (
    FAULT_KINDS,
    STEADY_AFTER,
    EndpointClient,
    Steadiness,
    answer_fault,
)
from verifier.endpoint.transcript import Transcript
from verifier.errors import (
    EndpointError,
    EndpointProtocolError,
    EndpointStatusError,
    EndpointTimeout,
)
from verifier.protocol.answers import parse_completion
from verifier.protocol.requests import Retry
from verifier.render.report import summary_lines
from verifier.scorecard.provenance import endpoint_records, seen_in_transcript
from verifier.simulator import defects as defects_module
from verifier.simulator.defects import (
    CATALOGUE,
    DEFECT_UNDER_CONCURRENCY,
    FAULT_429,
    FAULT_TIMEOUT,
    FAULT_TRUNCATED_STREAM,
    IGNORE_KEYWORD,
    IGNORE_RESPONSE_FORMAT,
    RATE_FAULTS,
    STREAM_NO_DONE,
    STREAM_NO_ROLE,
    Defect,
    parse_defects,
)
from verifier.simulator.faults import choose_fault, fires
from verifier.simulator.process import SimulatorProcess
from verifier.simulator.rules import MODEL_ID
from verifier.simulator.server import SimulatorServer

Vendor = Callable[..., SimulatorServer]
Run = Callable[..., VerifierRun]
Start = Callable[..., str]

REQUEST = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hello there"}]}
STRUCTURED = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "Give a JSON object with a=1"}],
    "response_format": {
        "type": "json_schema",
        "json_schema": {
            "name": "a",
            "schema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "required": ["a"],
            },
        },
    },
}
KEY = fake_key("fault-test")


@pytest.fixture
def vendor(local_simulator: Vendor) -> Vendor:
    """Simulated vendors in threads of this process (``seed=`` chooses the faulted requests)."""
    return local_simulator


def connect(server: SimulatorServer, timeout: float = 5.0) -> http.client.HTTPConnection:
    host, port = server.server_address[:2]
    return http.client.HTTPConnection(str(host), port, timeout=timeout)


def exchange(server: SimulatorServer, body: dict[str, Any], timeout: float = 5.0) -> str:
    """Send one chat request on a new connection; name what came back.

    ``ok`` for a complete, correct answer; else ``429``, ``500``, ``garbage``,
    ``timeout``, ``reset`` or ``truncated``.
    """
    conn = connect(server, timeout)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(body),
            {"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        data = response.read()
    except TimeoutError:
        return "timeout"
    except ConnectionResetError:
        return "reset"
    except http.client.IncompleteRead:
        return "truncated"
    finally:
        conn.close()
    if response.status == 429:
        assert response.getheader("Retry-After") == "0"
        return "429"
    if response.status == 500:
        return "500"
    assert response.status == 200
    if body.get("stream"):
        assert data.endswith(b"data: [DONE]\n\n")
        return "ok"
    try:
        json.loads(data)
    except json.JSONDecodeError:
        assert response.getheader("Content-Type") == "application/json"
        return "garbage"
    return "ok"


# -- the catalogue -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fault-429", "defect 'fault-429' needs a RATE: fault-429:RATE"),
        ("fault-500:1.5", "defect 'fault-500': RATE must be in (0, 1], given '1.5'"),
        ("fault-reset:0", "defect 'fault-reset': RATE must be in (0, 1], given '0'"),
        ("fault-garbage:often", "RATE must be a number in (0, 1], given 'often'"),
        ("fault-timout:0.3", "unknown defect 'fault-timout'; did you mean 'fault-timeout'?"),
        ("fault-slow-stream:1", "defect 'fault-slow-stream' takes no parameter, given '1'"),
        ("defect-under-concurrency:1", "N must be a whole number of requests, 2 or more"),
    ],
)
def test_bad_fault_parameters_are_one_clear_line(value: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_defects([value])
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert value.split(":")[0] in text


def test_a_simulator_process_that_does_not_start_says_why() -> None:
    with pytest.raises(RuntimeError, match="did not start.*unknown defect 'fault-timout'"):
        SimulatorProcess(["--defect", "fault-timout:0.3"])


def test_defaults_and_valid_parameters_parse() -> None:
    defects = parse_defects(["fault-429:0.3", "fault-timeout:1", "defect-under-concurrency"])
    assert defects.rates() == [(FAULT_429, 0.3), (FAULT_TIMEOUT, 1.0)]
    assert defects.param(DEFECT_UNDER_CONCURRENCY) == "2"


def test_every_catalogue_entry_is_the_constant_named_after_it() -> None:
    for name, defect in CATALOGUE.items():
        assert defect.name == name
        assert getattr(defects_module, name.upper().replace("-", "_")) is defect


def test_defects_are_asked_by_constant_and_a_name_string_is_refused() -> None:
    defects = parse_defects(["stream-no-role", "ignore-keyword:maxItems"])
    assert defects.has(STREAM_NO_ROLE) and not defects.has(STREAM_NO_DONE)
    assert defects.param(IGNORE_KEYWORD) == "maxItems" and defects.param(FAULT_429) is None
    assert defects.names() == ["stream-no-role", "ignore-keyword:maxItems"]
    with pytest.raises(TypeError):
        defects.has("stream-no-role")  # type: ignore[arg-type]


def test_defect_under_concurrency_switches_on_from_its_nth_request_in_flight() -> None:
    defects = parse_defects(["defect-under-concurrency:3"])
    assert defects.at_position(2) is defects
    assert defects.at_position(3).has(IGNORE_RESPONSE_FORMAT)
    assert not defects.at_position(3).has(STREAM_NO_ROLE)
    clean = parse_defects([])
    assert clean.at_position(100) is clean


@pytest.mark.parametrize("fault", RATE_FAULTS, ids=lambda fault: fault.name)
def test_a_fault_fires_at_its_rate_reproducibly_and_by_seed(fault: Defect) -> None:
    numbers = range(1, 4001)
    hit = {n for n in numbers if fires(0, fault, n, 0.3)}
    assert 0.27 < len(hit) / len(numbers) < 0.33
    assert hit == {n for n in numbers if fires(0, fault, n, 0.3)}
    assert hit != {n for n in numbers if fires(1, fault, n, 0.3)}
    assert all(fires(5, fault, n, 1.0) for n in numbers)


def test_at_most_one_fault_per_request_the_first_in_order() -> None:
    every = parse_defects([f"{fault.name}:1" for fault in RATE_FAULTS])
    assert choose_fault(every, 0, 1, stream=True) == RATE_FAULTS[0]
    truncating = parse_defects(["fault-truncated-stream:1"])
    assert choose_fault(truncating, 0, 1, stream=True) == FAULT_TRUNCATED_STREAM
    assert choose_fault(truncating, 0, 1, stream=False) is None


# -- each fault over HTTP ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "seen", "stream"),
    [
        ("fault-429", "429", False),
        ("fault-500", "500", True),
        ("fault-garbage", "garbage", False),
        ("fault-reset", "reset", False),
        ("fault-reset", "reset", True),
        ("fault-truncated-stream", "truncated", True),
        ("fault-timeout", "timeout", False),
    ],
)
def test_each_fault_hits_the_requests_its_seed_decides(
    vendor: Vendor, name: str, seen: str, stream: bool
) -> None:
    """Over HTTP, a vendor hits exactly the requests that fires() names for its seed.

    So the same seed hits the same requests on any vendor, and another seed other ones.
    """
    # Each held request costs the client's whole timeout: fewer of them (their rate is
    # shown by the test above), and a timeout long enough that a loaded machine does not
    # pass for a held request.
    count, timeout = (20, 1.0) if name == "fault-timeout" else (100, 5.0)
    body = {**REQUEST, "stream": True} if stream else REQUEST
    hits = {}
    for seed in (0, 7):
        server = vendor(f"{name}:0.3", seed=seed)
        answers = [exchange(server, body, timeout=timeout) for _ in range(count)]
        assert set(answers) <= {"ok", seen}
        hits[seed] = {n for n, answer in enumerate(answers, 1) if answer == seen}
        assert hits[seed] == {
            n for n in range(1, count + 1) if fires(seed, CATALOGUE[name], n, 0.3)
        }
        assert hits[seed] and len(hits[seed]) < count
        if count == 100:
            assert 0.15 <= len(hits[seed]) / count <= 0.45
    assert hits[0] != hits[7]


def test_truncated_stream_leaves_non_stream_requests_alone(vendor: Vendor) -> None:
    server = vendor("fault-truncated-stream:1")
    assert {exchange(server, REQUEST) for _ in range(5)} == {"ok"}


def test_faults_hit_chat_completions_only(vendor: Vendor) -> None:
    server = vendor(*(f"{fault.name}:1" for fault in RATE_FAULTS))
    conn = connect(server)
    try:
        conn.request("GET", "/v1/models")
        listing = conn.getresponse()
        assert listing.status == 200 and json.loads(listing.read())["data"][0]["id"] == MODEL_ID
        conn.request("POST", "/tokenize", json.dumps({"prompt": "x"}))
        assert conn.getresponse().status == 404  # served as usual: this vendor has no tokenizer
    finally:
        conn.close()
    assert exchange(server, REQUEST) == "429"


def in_flight(server: SimulatorServer, count: int) -> bool:
    """Whether the vendor comes to hold `count` chat requests within 5 s."""
    deadline = time.monotonic() + 5
    while server.in_flight.count != count and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.in_flight.count == count


def hold(server: SimulatorServer) -> http.client.HTTPConnection:
    """A connection whose chat request the vendor (fault-timeout:1) holds unanswered."""
    held = connect(server, timeout=5)
    held.request("POST", "/v1/chat/completions", json.dumps(REQUEST), {"Content-Type": "json"})
    assert in_flight(server, 1)
    return held


def test_a_held_request_blocks_nothing_and_lets_go_when_the_client_does(
    vendor: Vendor,
) -> None:
    server = vendor("fault-timeout:1")
    held = hold(server)
    other = connect(server, timeout=5)
    other.request("GET", "/v1/models")
    assert other.getresponse().status == 200
    assert server.in_flight.count == 1, "answered while the other request is still held"
    other.close()
    held.close()
    assert in_flight(server, 0)


def test_closing_the_vendor_releases_held_requests(vendor: Vendor) -> None:
    server = vendor("fault-timeout:1")
    held = hold(server)
    server.shutdown()
    server.server_close()
    # Held, it would outlast the client's 5 s timeout (a socket timeout, not this).
    with pytest.raises(http.client.RemoteDisconnected):
        held.getresponse()
    held.close()


def test_defect_under_concurrency_bites_only_requests_that_overlap(vendor: Vendor) -> None:
    server = vendor("defect-under-concurrency:2", latency=0.5)
    client = EndpointClient(server.base_url, api_key=None, max_retries=0)
    answers: list[str | None] = []

    def ask() -> None:
        result = client.chat(STRUCTURED)
        answers.append(result.choice.content if result.choice else None)

    together = [threading.Thread(target=ask) for _ in range(2)]
    for thread in together:
        thread.start()
    for thread in together:
        thread.join()
    free_text = "Hello! I am a tiny deterministic model. You said: Give a JSON object with a=1"
    assert sorted(map(str, answers)) == sorted([free_text, '{"a": 0}'])
    # A handler counts its request until it has written the answer and returned: on a busy
    # machine the client can have its answer first. Alone means once both are counted out.
    deadline = time.monotonic() + 5
    while server.in_flight.count and time.monotonic() < deadline:
        time.sleep(0.01)
    ask()
    assert answers[-1] == '{"a": 0}'
    client.close()


# -- the client ----------------------------------------------------------------------


def faulty_client(server: SimulatorServer, tmp_path: Path, **kwargs: Any) -> EndpointClient:
    """A client with the key, two retries and no waiting, recording to tmp_path/t.jsonl."""
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("sleep", lambda _: None)
    client = EndpointClient(server.base_url, api_key=KEY, **kwargs)
    client.transcript = Transcript(tmp_path / "t.jsonl", client.redactor)
    return client


def transcript(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("defect", "stream", "kind", "error"),
    [
        ("fault-429:1", False, "http_429", EndpointStatusError),
        ("fault-500:1", True, "http_5xx", EndpointStatusError),
        ("fault-timeout:1", False, "timeout", EndpointTimeout),
        ("fault-reset:1", False, "reset", EndpointProtocolError),
        ("fault-reset:1", True, "reset", EndpointProtocolError),
        ("fault-truncated-stream:1", True, "truncated_stream", EndpointProtocolError),
    ],
)
def test_a_fault_that_outlives_the_retries_is_an_endpoint_error_recorded_by_kind(
    vendor: Vendor,
    tmp_path: Path,
    defect: str,
    stream: bool,
    kind: str,
    error: type[EndpointError],
) -> None:
    server = vendor(defect, api_key=KEY)
    client = faulty_client(server, tmp_path, timeout=1.0)
    with pytest.raises(error) as raised:
        client.chat(REQUEST, stream=stream, label="case#1")
    assert raised.value.attempts == 3
    records = transcript(tmp_path)
    assert [(r["attempt"], r["fault"], r["retry"]) for r in records] == [
        (1, kind, True),
        (2, kind, True),
        (3, kind, False),
    ]
    if kind == "truncated_stream":
        # What came before the break is kept as evidence, with the status that came.
        assert records[0]["status"] == 200 and records[0]["response"]
    assert KEY not in (tmp_path / "t.jsonl").read_text()
    faults = seen_in_transcript(endpoint_records((tmp_path / "t.jsonl").read_bytes().splitlines()))[
        "faults"
    ]
    assert (faults[kind], faults["retried"], faults["gave_up"]) == (3, 2, 1)
    client.close()


def test_faults_at_a_rate_are_retried_into_the_clean_answer(vendor: Vendor, tmp_path: Path) -> None:
    clean = faulty_client(vendor(), tmp_path / "clean")
    expected = [clean.chat(REQUEST, stream=n % 2 == 1) for n in range(20)]
    # Together they hit about two requests in five: eight retries nearly always do.
    everything = [f"{fault.name}:0.1" for fault in RATE_FAULTS]
    client = faulty_client(vendor(*everything, seed=3), tmp_path, timeout=1.0, max_retries=8)
    for n, want in enumerate(expected):
        got = client.chat(REQUEST, stream=n % 2 == 1)
        assert got.choice and want.choice and got.choice.content == want.choice.content
        assert got.usage == want.usage and not got.problems
    faults = seen_in_transcript(endpoint_records((tmp_path / "t.jsonl").read_bytes().splitlines()))[
        "faults"
    ]
    assert sum(faults[name] > 0 for name in FAULT_KINDS) >= 3
    assert faults["retried"] > 0 and faults["gave_up"] == 0


def test_a_non_json_body_is_retried_then_graded_as_non_json_body(
    vendor: Vendor, tmp_path: Path
) -> None:
    case = next(c for c in load_corpus(["structured_output"]).cases if c.id == "basic-object")
    client = faulty_client(vendor("fault-garbage:1"), tmp_path)
    request = {"model": MODEL_ID, **{k: case.data[k] for k in ("messages", "response_format")}}
    result = client.chat(request, label=f"{case.key}#non-stream")
    assert result.status == 200 and result.attempts == 3
    assert [r["fault"] for r in transcript(tmp_path)] == ["non_json_body"] * 3
    findings = list(output_findings(case, result, "non-stream"))
    assert [f.code for f in findings] == ["non_json_body"]
    client.close()


def test_only_a_chat_answer_whose_body_is_not_json_is_a_fault() -> None:
    garbage = parse_completion(200, b"<html>502</html>", {})
    not_a_completion = parse_completion(200, b'{"object": "list"}', {})
    assert answer_fault(garbage, non_json=True) == "non_json_body"
    assert answer_fault(garbage, non_json=False) is None
    assert answer_fault(not_a_completion, non_json=True) is None
    assert answer_fault(parse_completion(503, b"", {}), non_json=True) == "http_5xx"
    assert answer_fault(parse_completion(400, b"{}", {}), non_json=True) is None


def test_a_slow_answer_is_read_exactly_as_a_fast_one(
    vendor: Vendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The vendor's socket writes, by size: the fault must really send one byte at a time.
    writes: list[int] = []
    write = socketserver._SocketWriter.write  # type: ignore[attr-defined]
    monkeypatch.setattr(
        socketserver._SocketWriter,  # type: ignore[attr-defined]
        "write",
        lambda self, data: writes.append(len(data)) or write(self, data),
    )
    fast = faulty_client(vendor(), tmp_path / "fast")
    slow = faulty_client(vendor("fault-slow-stream"), tmp_path)
    for stream in (False, True):
        want = fast.chat(STRUCTURED, stream=stream)
        fast_writes, writes[:] = len(writes), []
        got = slow.chat(STRUCTURED, stream=stream)
        assert writes.count(1) > 10 * fast_writes, (fast_writes, writes.count(1))
        writes.clear()
        assert got.choice and want.choice and got.choice.content == want.choice.content
        assert got.usage == want.usage and got.done == want.done and not got.problems
        assert len(got.chunks) == len(want.chunks)
    assert all(r["fault"] is None for r in transcript(tmp_path))


def test_the_summary_names_the_faults_met() -> None:
    faults = dict.fromkeys(("http_429", "reset", "timeout", "gave_up"), 0)
    card: dict[str, Any] = {"families": {}, "verdict": "pass", "transcript": {"faults": faults}}
    assert summary_lines(card) == ["overall: PASS"]
    faults.update(timeout=3, reset=1, retried=4)
    assert summary_lines(card)[0] == "transport faults: timeout x3, reset x1; 4 retried, 0 gave up"


# -- end to end ----------------------------------------------------------------------

# The wire family sends stream and non-stream requests, valid and invalid; the vendor's
# streams lack [DONE] (a wire defect, graded done_missing), so that a truncated stream is
# seen to stay a transport fault and never turns into, or hides, that failure.
E2E_DEFECT = ("--defect", "stream-no-done")
E2E_ARGS = ("--families", "wire", "--max-retries", "8")
TRANSPORT_CODES = {"timeout", "protocol", "http_status", "unreachable"}


def checked(run: VerifierRun) -> VerifierRun:
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    return run


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory, simulator: Start) -> VerifierRun:
    """The verifier's run against the vendor without faults: what every faulty run must match."""
    out = tmp_path_factory.mktemp("fault-free") / "out"
    run = checked(verify(simulator(*E2E_DEFECT), out, *E2E_ARGS))
    assert {o["code"] for o in run.outcomes().values() if o["status"] == "fail"} == {"done_missing"}
    assert not any(run.scorecard["transcript"]["faults"].values())
    return run


def graded(run: VerifierRun) -> dict[str, tuple[str, str | None]]:
    return {
        case: (outcome["status"], outcome.get("code"))
        for case, outcome in run.outcomes().items()
        if outcome["status"] != "error"
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("defect", "kind", "extra"),
    [
        ("fault-429:0.3", "http_429", ()),
        ("fault-500:0.3", "http_5xx", ()),
        # Every held request costs the whole timeout: half the cases, streams among them.
        ("fault-timeout:0.3", "timeout", ("--timeout", "0.5", "-k", "stream or parity")),
        ("fault-reset:0.3", "reset", ()),
        ("fault-truncated-stream:0.3", "truncated_stream", ()),
        ("fault-garbage:0.3", "non_json_body", ()),
    ],
)
def test_faults_never_change_a_graded_outcome(
    simulator: Start,
    run_verifier: Run,
    fault_free: VerifierRun,
    defect: str,
    kind: str,
    extra: tuple[str, ...],
) -> None:
    run = checked(run_verifier(simulator(*E2E_DEFECT, "--defect", defect), *E2E_ARGS, *extra))
    clean = graded(fault_free)
    outcomes = run.outcomes()
    assert outcomes.keys() <= fault_free.outcomes().keys() and len(outcomes) >= 15
    assert graded(run) == {case: clean[case] for case in graded(run)}
    # A fault that outlives eight retries is an error, never a fail; at this rate and
    # seed it is rare, so nearly every case is graded.
    errors = [o for o in outcomes.values() if o["status"] == "error"]
    assert all(o["code"] in TRANSPORT_CODES for o in errors), errors
    assert len(errors) <= len(outcomes) // 20, errors
    faults = run.scorecard["transcript"]["faults"]
    assert faults[kind] > 0 and faults["retried"] > 0
    assert "transport faults: " in run.stdout and f"{kind} x{faults[kind]}" in run.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("defect", "seed", "status", "code", "extra"),
    [
        # Each seed leaves chat request 1, the probe's, alone; half of the rest are hit.
        ("fault-429:0.5", "0", "error", "http_status", ()),
        ("fault-500:0.5", "2", "error", "http_status", ()),
        ("fault-reset:0.5", "0", "error", "protocol", ()),
        ("fault-truncated-stream:0.5", "1", "error", "protocol", ("-k", "stream")),
        ("fault-timeout:0.5", "1", "error", "timeout", ("--timeout", "0.5", "-k", "stream")),
        # A 200 whose body is never JSON is the vendor's failure, not a transport error.
        ("fault-garbage:0.5", "0", "fail", "non_json_body", ()),
    ],
)
def test_a_fault_that_outlives_the_retries_has_its_own_code(
    simulator: Start,
    run_verifier: Run,
    defect: str,
    seed: str,
    status: str,
    code: str,
    extra: tuple[str, ...],
) -> None:
    url = simulator("--defect", defect, "--fault-seed", seed)
    # Without the generated set: its image requests make the probe ask one request more (which
    # these seeds' faults would hit), and its pathological requests, which this vendor answers,
    # keep a server error as their finding, as every request that must not get one does.
    wire = ("--families", "wire", "--negative", "0")
    run = checked(run_verifier(url, *wire, "--max-retries", "0", *extra))
    hit = [o for o in run.outcomes().values() if o["status"] == status and o.get("code") == code]
    others = [o for o in run.outcomes().values() if o["status"] in ("error", "fail")]
    assert hit, run.stdout[-2000:]
    assert others == hit, others


@pytest.mark.slow
def test_a_slow_vendor_is_graded_as_a_fast_one(
    simulator: Start, run_verifier: Run, fault_free: VerifierRun
) -> None:
    run = checked(run_verifier(simulator(*E2E_DEFECT, "--defect", "fault-slow-stream"), *E2E_ARGS))
    assert graded(run) == graded(fault_free)
    assert not any(run.scorecard["transcript"]["faults"].values())


@pytest.mark.slow
def test_structured_output_breaks_only_under_concurrent_load(
    simulator: Start, run_verifier: Run
) -> None:
    url = simulator("--defect", "defect-under-concurrency:2", "--latency-ms", "50")
    selection = ("--families", "structured_output", "-k", "type or enum or const or required")
    alone = checked(run_verifier(url, *selection, "-n", "0"))
    assert alone.returncode == 0, alone.stdout[-2000:]
    for concurrent in (("-n", "4"), ("--concurrency", "4")):
        together = checked(run_verifier(url, *selection, *concurrent))
        family = together.family("structured_output")
        assert family["counts"]["fail"] > 0 and family["counts"]["error"] == 0, concurrent
        assert set(family["codes"]) <= {"not_json", "schema_mismatch"}


# A request built to be bad: no messages.
BAD = json.dumps({"model": MODEL_ID, "max_tokens": 4}).encode()


def test_steadiness_needs_enough_answers_and_is_lost_at_the_first_fault() -> None:
    steadiness = Steadiness()
    for _ in range(STEADY_AFTER - 1):
        steadiness.record(None)
    assert not steadiness.steady
    steadiness.record(None)
    assert steadiness.steady
    steadiness.record("timeout")
    steadiness.record(None)
    assert not steadiness.steady


@pytest.mark.parametrize(
    ("answered", "retry", "attempts", "waits"),
    [
        # Steady: the bad request's own server error, one immediate retry.
        (STEADY_AFTER, "quick", 2, 0),
        # Not yet steady: the whole ladder, with its waits.
        (STEADY_AFTER - 1, "quick", 3, 2),
        (STEADY_AFTER, "ladder", 3, 2),
        (STEADY_AFTER, "none", 1, 0),
    ],
)
def test_a_bad_requests_server_error_gets_one_quick_retry_once_the_endpoint_is_steady(
    vendor: Vendor, tmp_path: Path, answered: int, retry: Retry, attempts: int, waits: int
) -> None:
    waited: list[float] = []
    server = vendor("invalid-request-500", api_key=KEY)
    client = faulty_client(server, tmp_path, sleep=waited.append)
    for _ in range(answered):
        assert client.chat(REQUEST).ok
    result = client.post_raw(BAD, content_type="application/json", retry=retry)
    assert (result.status, result.attempts, len(waited)) == (500, attempts, waits)
    client.close()


def test_a_fault_on_a_request_that_must_be_answered_brings_back_the_ladder(
    vendor: Vendor, tmp_path: Path
) -> None:
    waited: list[float] = []
    server = vendor("invalid-request-500", "http-500-every-3rd", api_key=KEY)
    client = faulty_client(server, tmp_path, sleep=waited.append)
    for _ in range(STEADY_AFTER):
        assert client.chat(REQUEST).ok
    assert waited and not client.steadiness.steady
    waited.clear()
    result = client.post_raw(BAD, content_type="application/json", retry="quick")
    assert result.status == 500 and result.attempts == 3 and len(waited) == 2
    client.close()
