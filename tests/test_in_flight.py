"""Requests a family announces go out together, within --concurrency, and grade as if alone.

A simulated vendor with ``defect-under-concurrency:N`` ignores ``response_format`` on any
request that arrives while N-1 others are in flight: it shows whether repeats overlapped,
and whether more than the limit were ever in flight at once.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from verifier.cases.corpus import Case, load_corpus
from verifier.checks.registry import RunContext
from verifier.endpoint.client import EndpointClient
from verifier.outcome import Outcome, Status
from verifier.protocol.requests import Chat, together
from verifier.run.executor import run_case
from verifier.run.in_flight import InFlight
from verifier.simulator.rules import MODEL_ID
from verifier.simulator.server import SimulatorServer

REPEATS = 4
# Long enough that requests started together are in flight together.
LATENCY = 0.2


def structured_case() -> Case:
    corpus = load_corpus(["structured_output"])
    return next(c for c in corpus.cases if c.id == "json-object-weather")


def graded(url: str, in_flight: InFlight | None) -> Outcome:
    context = RunContext(model=MODEL_ID, seed=1, repeats={"structured_output": REPEATS})
    client = EndpointClient(url, api_key=None)
    try:
        return run_case(structured_case(), context, client, in_flight=in_flight)
    finally:
        if in_flight is not None:
            in_flight.close()
        client.close()


def test_at_onceannounces_the_rest_on_the_first_unless_they_may_stop() -> None:
    asked = [Chat({"n": n}, f"r-{n}") for n in range(3)]
    first, *rest = together(asked)
    assert first.then == tuple(asked[1:]) and rest == asked[1:]
    assert together(asked, independent=False) == asked
    assert together(asked[:1]) == asked[:1]


def test_repeats_go_out_at_oncewhen_more_than_one_may_be_in_flight(
    local_simulator: Callable[..., SimulatorServer],
) -> None:
    vendor = local_simulator("defect-under-concurrency:2", latency=LATENCY)
    alone = graded(vendor.base_url, InFlight(1))
    at_once = graded(vendor.base_url, InFlight(REPEATS))
    assert alone.status is Status.PASS
    # Overlapping repeats met the defect: they were in flight at once.
    assert at_once.status is Status.FAIL
    assert at_once.metrics["requests"] == REPEATS


@pytest.mark.parametrize("limit", [2, 3])
def test_never_more_in_flight_than_the_limit_and_the_outcome_is_the_one_alone(
    local_simulator: Callable[..., SimulatorServer], limit: int
) -> None:
    vendor = local_simulator(f"defect-under-concurrency:{limit + 1}", latency=LATENCY)
    alone = graded(vendor.base_url, None)
    assert graded(vendor.base_url, InFlight(limit)) == alone
    assert alone.status is Status.PASS and alone.metrics["requests"] == REPEATS
