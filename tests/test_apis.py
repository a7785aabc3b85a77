"""The API layer's plumbing: --api, cases over each API, records and scorecard entries per API."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_scorecard import HEADER, record
from verifier.cases.corpus import Case, Corpus
from verifier.checks.chat_template import count_route_findings
from verifier.checks.registry import FAMILIES, RunContext
from verifier.config import RunConfig, api_list
from verifier.outcome import CaseRecord, Status
from verifier.protocol.answers import ChatResult
from verifier.protocol.apis import API_NAMES, COUNT_ROUTES, NotExpressible, protocol_of
from verifier.protocol.requests import Chat, Exchange
from verifier.run.executor import run_case
from verifier.scorecard.build import TranscriptSummary, build_scorecard
from verifier.scorecard.validate import scorecard_json


@given(st.lists(st.sampled_from(API_NAMES), min_size=1))
def test_api_list_keeps_the_documented_order_once_each(names: list[str]) -> None:
    chosen = api_list(" , ".join(names))
    assert chosen == tuple(a for a in API_NAMES if a in names)


@pytest.mark.parametrize("value", ["", ",", "chat,grpc", "Messages"])
def test_api_list_refuses_what_is_no_api(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="chat,messages,responses"):
        api_list(value)


def _corpus() -> Corpus:
    cases = [
        Case("tool_calling", "t1", {"id": "t1"}, "f:1"),
        Case("wire", "w1", {"id": "w1"}, "f:2"),
        Case("tool_calling", "t2", {"id": "t2"}, "f:3"),
    ]
    return Corpus(tuple(cases), {"tool_calling": "1" * 64, "wire": "2" * 64})


def test_twins_follow_the_chat_cases_api_by_api_and_keep_the_digests() -> None:
    corpus = _corpus()
    apis = {"tool_calling": ("chat", "messages", "responses"), "wire": ("chat",)}
    over = corpus.over_apis(lambda case: apis[case.family])
    assert [(c.id, c.api) for c in over.cases] == [
        ("t1", "chat"),
        ("w1", "chat"),
        ("t2", "chat"),
        ("t1[messages]", "messages"),
        ("t2[messages]", "messages"),
        ("t1[responses]", "responses"),
        ("t2[responses]", "responses"),
    ]
    assert over.digests == corpus.digests
    assert {c.data["id"] for c in over.by_family("tool_calling")} == {"t1", "t2"}
    assert over.cases[3].key == "tool_calling/t1[messages]"


def test_chat_alone_is_the_corpus_unchanged() -> None:
    corpus = _corpus()
    assert corpus.over_apis(lambda case: ("chat",)) == corpus


def test_without_chat_only_the_twins_run() -> None:
    apis = {"tool_calling": ("messages",), "wire": ()}
    over = _corpus().over_apis(lambda case: apis[case.family])
    assert [c.id for c in over.cases] == ["t1[messages]", "t2[messages]"]


def test_each_family_runs_over_the_apis_it_speaks(run_config: RunConfig) -> None:
    found = FAMILIES.apis(run_config, ("chat", "responses"))
    assert found(Case("tool_calling", "t", {}, "f:1")) == ("chat", "responses")
    assert found(Case("structured_output", "s", {}, "f:1")) == ("chat", "responses")
    assert found(Case("parity", "p", {}, "f:1")) == ("chat",)


@pytest.fixture
def run_config(tmp_path: Path) -> RunConfig:
    return RunConfig(
        endpoint="http://127.0.0.1:1/v1",
        model=None,
        api_key_env="OPENAI_API_KEY",
        families=("tool_calling", "structured_output", "parity"),
        repeats=None,
        seed=1,
        timeout=1.0,
        max_retries=0,
        retry_backoff=0.1,
        out_dir=tmp_path,
        resume=False,
    )


def test_a_record_without_an_api_is_chats() -> None:
    assert CaseRecord.from_dict(record("s/a", "pass")).api == "chat"
    assert CaseRecord.from_dict({**record("s/a[messages]", "pass"), "api": "messages"}).api == (
        "messages"
    )


def test_the_scorecard_gives_each_api_its_own_entry_beside_the_familys() -> None:
    records = [
        record("structured_output/a", "pass"),
        {**record("structured_output/a[messages]", "fail", "not_json"), "api": "messages"},
        {**record("structured_output/a[responses]", "pass"), "api": "responses"},
    ]
    card = build_scorecard(
        HEADER,
        {r["case"]: r for r in records},
        finished="2026-01-01T00:01:00.000+00:00",
        transcript=TranscriptSummary("2" * 64, 3),
    )
    family = card["families"]["structured_output"]
    assert family["counts"] == {"pass": 2, "fail": 1, "error": 0, "unsupported": 0}
    assert {api: entry["verdict"] for api, entry in family["apis"].items()} == {
        "chat": "pass",
        "messages": "fail",
        "responses": "pass",
    }
    assert family["apis"]["messages"]["codes"] == {"not_json": 1}
    assert family["verdict"] == "fail" and card["verdict"] == "fail"
    assert json.loads(scorecard_json(card)) == card


def test_a_chat_only_scorecard_has_no_api_entries() -> None:
    card = build_scorecard(
        HEADER,
        {"structured_output/a": record("structured_output/a", "pass")},
        finished="2026-01-01T00:01:00.000+00:00",
        transcript=TranscriptSummary("2" * 64, 1),
    )
    assert "apis" not in card["families"]["structured_output"]
    assert card["endpoint"]["apis"] == ["chat"]


def test_the_chat_protocol_reads_what_the_chat_parsers_read() -> None:
    chat = protocol_of("chat")
    body = {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    result = chat.parse_answer(200, json.dumps(body).encode(), {})
    assert (result.api, result.choices[0].content) == ("chat", "hi")
    with pytest.raises(ValueError, match="no API named"):
        protocol_of("grpc")


class _Refusing:
    """A client whose API cannot say the request (what the protocol module raises)."""

    def send(self, request: Any, label: str, api: str = "chat") -> ChatResult:
        raise NotExpressible(api, "the Messages API has no logprobs")


def test_a_case_its_api_cannot_say_is_unsupported_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def exchange(case: Case, ctx: RunContext) -> Exchange:
        yield Chat({"model": "m", "messages": []}, "only")
        raise AssertionError("never answered")

    # The family's exchange replaced for this test alone: one request, never answered.
    family = dataclasses.replace(FAMILIES["tool_calling"], run=exchange)
    monkeypatch.setitem(FAMILIES._families, "tool_calling", family)
    case = Case("tool_calling", "t1[messages]", {"id": "t1"}, "f:1", api="messages")
    outcome = run_case(case, RunContext(model="m", seed=1), _Refusing())  # type: ignore[arg-type]
    assert outcome.status is Status.UNSUPPORTED
    assert outcome.code == "not_expressible"
    assert outcome.message == (
        "unsupported: the case cannot be sent through Anthropic Messages: "
        "the Messages API has no logprobs"
    )


def test_a_structured_case_not_sent_is_no_silent_acceptance() -> None:
    """A case its API has no words for, or sent to an API serving no structured output, was
    never accepted: the gate's silent-acceptance count leaves it out."""
    from verifier.checks.structured_output import summarize

    sent = {**record("structured_output/a", "pass"), "api": "chat"}
    sent["outcome"]["metrics"] = {"keyword": "enum", "kind": "constrained", "accepted": True}
    unsent = {**record("structured_output/a[messages]", "unsupported", "not_expressible")}
    unsent["outcome"]["metrics"] = {}
    summary = summarize([CaseRecord.from_dict(r) for r in (sent, unsent)], None)
    assert summary["silent_acceptance"] == []
    assert summary["keywords"]["enum"]["cases"] == 1


def _counted(status: int, body: Any) -> ChatResult:
    return ChatResult(stream=False, status=status, body=body)


@given(st.integers(0, 10_000), st.integers(-3, 3))
def test_a_counting_route_must_say_what_the_answer_billed(billed: int, off: int) -> None:
    said = max(billed + off, 0)
    findings = count_route_findings(_counted(200, {"input_tokens": said}), billed)
    if said == billed:
        assert findings == []
    else:
        assert [(f.code, f.expected, f.actual) for f in findings] == [
            ("count_tokens_disagrees", billed, said)
        ]


@pytest.mark.parametrize(
    ("status", "body", "actual", "said"),
    [
        (500, {"error": {"message": "boom"}}, 500, "answered HTTP 500 (boom)"),
        (400, "not json", 400, "answered HTTP 400;"),
        (200, {"object": "response.input_tokens"}, None, "answered with no input_tokens count"),
        (200, {"input_tokens": True}, True, "answered with no input_tokens count"),
    ],
)
def test_a_counting_route_that_gives_no_count_disagrees_with_the_bill(
    status: int, body: Any, actual: Any, said: str
) -> None:
    (finding,) = count_route_findings(_counted(status, body), 12)
    assert (finding.code, finding.expected, finding.actual) == (
        "count_tokens_disagrees",
        12,
        actual,
    )
    assert said in finding.message


@pytest.mark.parametrize("api", sorted(COUNT_ROUTES))
def test_a_counting_routes_body_is_the_requests_prompt_and_nothing_else(api: str) -> None:
    chat = {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": "auto",
        "max_tokens": 1,
        "temperature": 0,
    }
    protocol = protocol_of(api)
    assert protocol.count_body is not None
    request = protocol.request_body(chat, stream=False)
    counted = protocol.count_body(request)
    prompt = {"messages": ("model", "system", "messages", "tools", "tool_choice")}.get(
        api, ("model", "instructions", "input", "tools", "tool_choice")
    )
    assert set(counted) == {key for key in prompt if key in request}
    assert {key: request[key] for key in counted} == counted
    assert protocol_of("chat").count_body is None
