"""Speed and spend as pure functions: quantile intervals, the performance section from
transcript records, the load curve, the speed thresholds of the gate, the simulated pace."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.compare.speed import performance_view
from verifier.compare.tables import Standing, State
from verifier.config import levels, prices
from verifier.protocol.labels import Label
from verifier.render.gate_text import summary_lines
from verifier.render.performance_section import performance_line, performance_markdown
from verifier.scorecard.gate import family_gate
from verifier.scorecard.provenance import endpoint_records
from verifier.scorecard.request_figures import cost, delivered_texts, measure, read
from verifier.simulator.pace import Pace, tokens_in
from verifier.stats import quantile_interval

VALUES = st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=300)


@given(VALUES, st.sampled_from([0.5, 0.9, 0.99]))
@settings(max_examples=50)
def test_a_quantile_lies_within_its_interval_and_the_values(values: list[float], q: float) -> None:
    found = quantile_interval(values, q)
    assert found is not None
    point, low, high = found
    assert min(values) <= point <= max(values)
    assert low is None or low <= point
    assert high is None or point <= high


def test_too_few_values_leave_a_quantile_unbounded() -> None:
    assert quantile_interval([], 0.5) is None
    assert quantile_interval([5.0], 0.5) == (5.0, None, None)
    point, low, high = quantile_interval([float(i) for i in range(1, 51)], 0.99) or ()
    assert (point, high) == (50.0, None) and low is not None
    assert quantile_interval([float(i) for i in range(1, 1001)], 0.5) == (500.0, 469.0, 532.0)


def chunk(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta}]}


def streamed(label: str, arrivals: list[float], usage: dict[str, Any], **extra: Any) -> bytes:
    """A streamed attempt's record: a role chunk at arrivals[0], a token chunk at each next."""
    chunks = [chunk(role="assistant", content="")]
    chunks += [chunk(content="x") for _ in arrivals[1:]]
    chunks.append({"choices": [], "usage": usage})
    return json.dumps(
        {
            "time": "2026-12-03T10:00:00.000+00:00",
            "label": label,
            "stream": True,
            "status": 200,
            "latency_ms": arrivals[-1] + 5,
            "response": chunks,
            "timing": {"first_byte_ms": 1.0, "tokens_ms": arrivals[1:]},
            "fault": None,
            "retry": False,
            **extra,
        }
    ).encode()


USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 5,
    "prompt_tokens_details": {"cached_tokens": 40},
}


def test_ttft_gaps_and_the_decode_rate_come_from_the_token_chunks() -> None:
    # Tokens at 300, 320, 340, 360, 380 ms: a role chunk first carries none.
    line = streamed("wire/a#stream", [0.0, 300.0, 320.0, 340.0, 360.0, 380.0], USAGE)
    section = measure(endpoint_records([line]), ["wire"], concurrency=1)
    wire = section["families"]["wire"]
    assert wire["ttft_ms"]["p50"]["value"] == 300.0
    assert wire["inter_token_ms"]["p50"]["value"] == 20.0
    # (5 - 1) tokens over the 80 ms from the first to the last.
    assert wire["output_tokens_per_second"]["p50"]["value"] == 50.0
    assert wire["tokens"] == {"prompt": 100, "cached": 40, "completion": 5, "reasoning": 0}
    assert section["overall"]["requests"] == 1 and "load" not in section


def test_delivered_tokens_are_counted_per_whole_text_a_stream_s_pieces_joined() -> None:
    tool = {"index": 0, "function": {"name": "get_", "arguments": '{"a"'}}
    more = {"index": 0, "function": {"arguments": ": 1}"}}
    record = json.loads(streamed("tool_calling/t#1", [0.0, 1.0], USAGE))
    record["response"] = [
        chunk(role="assistant", reasoning_content="Let me "),
        chunk(reasoning_content="think."),
        chunk(content="Hel"),
        chunk(content="lo"),
        chunk(tool_calls=[tool]),
        chunk(tool_calls=[more]),
        {"choices": [], "usage": USAGE},
    ]
    assert sorted(delivered_texts(read(record))) == sorted(
        ["Let me think.", "Hello", 'get_{"a": 1}']
    )
    body = {
        "choices": [
            {"index": 0, "message": {"content": "Hi there", "reasoning_content": None}},
            {"index": 1, "message": {"content": "Bye"}},
        ]
    }
    assert delivered_texts(read({"status": 200, "response": body})) == ["Hi there", "Bye"]
    failed = {"label": "wire/f#1", "status": 500, "fault": "http_5xx", "retry": False}
    lines = [json.dumps(record).encode(), json.dumps({**failed, "response": body}).encode()]
    words = ("words", lambda text: len(text.split()))
    section = measure(endpoint_records(lines), ["tool_calling"], concurrency=1, tokenizer=words)
    # A failed answer delivered nothing; usage's figures stay as they were.
    tokens = section["overall"]["tokens"]
    assert (tokens["delivered"], tokens["completion"]) == (3 + 1 + 2, 5)
    assert section["delivered_counted_with"] == "words"
    assert (
        "delivered" not in measure(endpoint_records(lines), [], concurrency=1)["overall"]["tokens"]
    )


def test_faults_retries_the_reference_and_garbage_lines_are_counted_as_they_are() -> None:
    ok = streamed("wire/a#stream", [0.0, 10.0, 20.0], USAGE)
    retried = json.dumps(
        {"label": "wire/b#1", "status": 500, "fault": "http_5xx", "retry": True, "latency_ms": 3}
    ).encode()
    gave_up = json.dumps(
        {"label": "wire/b#1", "status": 500, "fault": "http_5xx", "retry": False, "latency_ms": 3}
    ).encode()
    reference = streamed("parity/p#reference-first", [0.0, 5.0], USAGE, target="reference")
    wire = measure(
        endpoint_records([ok, retried, gave_up, reference, b"{torn"]),
        ["wire", "parity"],
        concurrency=2,
    )
    figures = wire["families"]["wire"]
    assert (figures["requests"], figures["error_rate"]["successes"]) == (2, 1)
    assert (figures["retry_rate"]["successes"], figures["retry_rate"]["trials"]) == (1, 3)
    assert set(wire["families"]) == {"wire"}


def test_cost_charges_cached_prompt_tokens_at_their_price_when_one_is_given() -> None:
    tokens = {"prompt": 1_000_000, "cached": 400_000, "completion": 100_000, "reasoning": 0}
    assert cost(tokens, {"input": 1.0, "output": 2.0}) == 1.2
    assert cost(tokens, {"input": 1.0, "output": 2.0, "cached": 0.25}) == 0.9
    section = measure(
        endpoint_records([streamed("wire/a#s", [0.0, 1.0], USAGE)]),
        ["wire"],
        concurrency=1,
        prices={"input": 1.0, "output": 2.0},
    )
    assert section["overall"]["cost_usd"] == 0.00011
    assert section["prices_usd_per_mtok"] == {"input": 1.0, "output": 2.0}


def test_the_load_curve_has_a_row_per_level_and_a_knee_where_ttft_doubles() -> None:
    lines = [
        streamed(f"load/c{level}#{n}", [0.0, ttft, ttft + 20], USAGE)
        for level, ttft in ((1, 100.0), (8, 150.0), (32, 450.0))
        for n in range(3)
    ]
    load = measure(endpoint_records(lines), ["wire"], concurrency=1)["load"]
    assert [r["concurrency"] for r in load["levels"]] == [1, 8, 32]
    assert [r["ttft_ms"]["p50"]["value"] for r in load["levels"]] == [100.0, 150.0, 450.0]
    assert load["knee"] == 32
    assert all(r["throughput_tokens_per_second"] for r in load["levels"])
    markdown = "\n".join(
        performance_markdown(measure(endpoint_records(lines), ["wire"], concurrency=1))
    )
    assert "### Load probe" in markdown and "Knee: concurrency 32" in markdown


SPEED = {
    "n": 40,
    "p50": {"value": 50.0, "interval": [45.0, 55.0]},
    "p90": {"value": 80.0, "interval": [70.0, 90.0]},
    "p99": {"value": 95.0, "interval": [85.0, None]},
}
FAMILY = {"verdict": "pass", "counts": {"pass": 10, "fail": 0, "error": 0, "unsupported": 0}}


@pytest.mark.parametrize(
    ("limits", "missed"),
    [
        # Met only where the whole interval meets it.
        ({"max_ttft_p90_ms": 100}, []),
        ({"max_ttft_p90_ms": 85}, ["max_ttft_p90_ms"]),
        ({"min_output_tps_p50": 40}, []),
        ({"min_output_tps_p50": 48}, ["min_output_tps_p50"]),
    ],
)
def test_speed_thresholds_are_met_by_their_intervals(
    limits: dict[str, float], missed: list[str]
) -> None:
    speed = {"ttft_ms": SPEED, "output_tokens_per_second": SPEED}
    family = {**FAMILY, "score": 1.0, "metrics": {}}
    result = family_gate(family, limits, speed)
    assert [m["threshold"] for m in result["missed"]] == missed


def test_an_unmeasured_or_unbounded_speed_misses_its_threshold_and_says_why() -> None:
    family = {**FAMILY, "score": 1.0, "metrics": {}}
    none = family_gate(family, {"max_ttft_p90_ms": 1000}, {"ttft_ms": None})
    assert none["missed"] == [
        {"threshold": "max_ttft_p90_ms", "limit": 1000, "actual": "no streamed answer"}
    ]
    few = {**SPEED, "p90": {"value": 80.0, "interval": [70.0, None]}}
    unbounded = family_gate(family, {"max_ttft_p90_ms": 1000}, {"ttft_ms": few})
    gate = {"passed": False, "source": "gate.toml", "families": {"wire": unbounded}}
    assert summary_lines(gate)[1] == (
        "  wire: max_ttft_p90_ms 1000 missed (actual 80.0, 95% interval [70.0, unbounded] over 40)"
    )


def test_price_and_load_options_parse_or_say_what_to_fix() -> None:
    assert prices("input=0.6,output=2.5,cached=0.1") == {"input": 0.6, "output": 2.5, "cached": 0.1}
    assert levels("32,1,8,8") == (1, 8, 32)
    for bad, message in (
        ("input=0.6", "give the output price too"),
        ("in=1,output=2", "is not NAME=USD_PER_MTOK"),
        ("input=-1,output=2", "a number >= 0"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            prices(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        levels("0,4")


def test_the_terminal_line_names_speed_tokens_cost_and_knee() -> None:
    lines = [streamed("load/c1#1", [0.0, 100.0, 120.0], USAGE)]
    lines.append(streamed("wire/a#s", [0.0, 300.0, 320.0], USAGE))
    line = performance_line(
        measure(endpoint_records(lines), ["wire"], concurrency=4, prices={"input": 1, "output": 1})
    )
    assert line == (
        "performance at concurrency 4: TTFT p50 300 ms, 200.0 tok/s p50, 100 prompt + 5 "
        "completion tokens ($0.0001); load knee: none"
    )


def test_the_pace_waits_its_ttft_then_a_token_time_each_jittered_by_seed() -> None:
    pace = Pace(ttft=0.3, per_token=0.02)
    assert pace.waits(1, 3) == [0.3, 0.02, 0.02] and pace.waits(1, 0) == []
    jittered = Pace(ttft=0.3, per_token=0.02, jitter=0.1, seed=5)
    assert jittered.waits(2, 3) == jittered.waits(2, 3) != jittered.waits(3, 3)
    assert all(0.27 <= w <= 0.33 for w in jittered.waits(2, 1))
    with pytest.raises(ValueError, match="timing-jitter"):
        Pace(jitter=1.0)
    event = b"data: " + json.dumps(chunk(content=" the sea")).encode()
    assert tokens_in(event) == 2 and tokens_in(b"data: [DONE]") == 0


def card(verdict: str, ttft: float, concurrency: int = 4) -> dict[str, Any]:
    quantiles = {
        "n": 40,
        **{q: {"value": ttft, "interval": [ttft - 1, ttft + 1]} for q in ("p50", "p90", "p99")},
    }
    figures = {
        "requests": 40,
        "streamed": 40,
        "ttft_ms": quantiles,
        "inter_token_ms": quantiles,
        "output_tokens_per_second": quantiles,
        "e2e_ms": quantiles,
        "error_rate": {"rate": 0.0, "interval": [0.0, 0.09], "successes": 0, "trials": 40},
        "retry_rate": {"rate": 0.0, "interval": [0.0, 0.09], "successes": 0, "trials": 40},
        "tokens": {"prompt": 1000, "cached": 0, "completion": 200, "reasoning": 0},
        "cost_usd": 0.001,
    }
    section = {"concurrency": concurrency, "overall": figures, "families": {"wire": figures}}
    return {"verdict": verdict, "performance": section}


def test_a_faster_vendor_that_is_wrong_is_shown_but_never_ranked_above_a_correct_one() -> None:
    view = performance_view([card("fail", 100.0), card("pass", 300.0), card("pass", 310.0)])
    assert view is not None and view.comparable
    fast, slow, slower = view.headline.cells
    assert fast.state is State.INFO and fast.text.endswith("(verdict fail: not ranked)")
    assert slow.standing is Standing.NONE and slower.standing is Standing.CLEARLY_WORSE
    spend = next(t for t in view.tables if t.title == "Spend")
    assert spend.rows[0].cells[0].text == "1,000 prompt + 200 completion, $0.0010"


def test_speed_at_other_concurrencies_is_not_comparable_and_no_section_is_no_view() -> None:
    view = performance_view([card("pass", 100.0, 1), card("pass", 100.0, 32)])
    assert view is not None and not view.comparable
    assert view.differences[0].values == ("1", "32")
    assert performance_view([{"verdict": "pass"}]) is None


@given(
    st.text(alphabet=st.characters(blacklist_characters="/#"), min_size=1),
    st.text(alphabet=st.characters(blacklist_characters="#"), min_size=1),
    st.none() | st.text(min_size=1),
)
def test_a_transcript_label_reads_back_as_written(
    group: str, item: str, request: str | None
) -> None:
    label = Label(group, item, request)
    assert Label.parse(str(label)) == label


def test_load_labels_name_their_level_and_others_none() -> None:
    assert str(Label.load(32, 7)) == "load/c32#7"
    assert Label.parse("load/c32#7").load_level == 32
    assert Label.parse("wire/n-2#stream").load_level is None
    assert Label.parse("probe/chat") == Label("probe", "chat")


def test_the_other_apis_answers_are_counted_by_their_own_usage() -> None:
    """Messages counts cache reads apart from input_tokens; Responses says them in details."""
    messages = {
        "label": "context/cache-hot[messages]#hot",
        "url": "http://127.0.0.1:1/v1/messages",
        "status": 200,
        "stream": False,
        "latency_ms": 5.0,
        "response": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 2,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 990,
            },
        },
    }
    responses = {
        "label": "context/cache-hot[responses]#hot",
        "url": "http://127.0.0.1:1/v1/responses",
        "status": 200,
        "stream": False,
        "latency_ms": 5.0,
        "response": {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "m",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
                }
            ],
            "usage": {
                "input_tokens": 1000,
                "input_tokens_details": {"cached_tokens": 990},
                "output_tokens": 2,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 1002,
            },
        },
    }
    lines = [json.dumps(r).encode() for r in (messages, responses)]
    section = measure(endpoint_records(lines), ["context"], concurrency=1)
    tokens = section["families"]["context"]["tokens"]
    assert (tokens["prompt"], tokens["cached"], tokens["completion"]) == (2000, 1980, 4)
