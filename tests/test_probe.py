"""Probing before collection: the model, and one clear error when the endpoint is unusable."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from verifier.endpoint.client import EndpointClient
from verifier.endpoint.probe import Capabilities, choose_model, probe
from verifier.endpoint.transcript import Transcript
from verifier.errors import ConfigError, EndpointError
from verifier.protocol.logprobs import LogprobsSupport, ReferenceEndpoint
from verifier.protocol.tokenize import TokenizerEndpoints
from verifier.simulator.rules import MODEL_ID
from verifier.simulator.server import SimulatorServer


def test_choose_model() -> None:
    assert choose_model(None, ("a",), "U") == "a"
    assert choose_model("b", None, "U") == "b"
    with pytest.raises(
        ConfigError, match=r"U serves several models \(a, b\): choose one with --model"
    ):
        choose_model(None, ("a", "b"), "U")
    with pytest.raises(ConfigError, match=r"model 'c' is not served by U; it serves: a, b"):
        choose_model("c", ("a", "b"), "U")
    with pytest.raises(ConfigError, match="does not list its models"):
        choose_model(None, None, "U")


def test_probe_finds_the_model_and_server(local_simulator: Callable[..., SimulatorServer]) -> None:
    server = local_simulator()
    capabilities = probe(EndpointClient(server.base_url, api_key=None), None)
    assert capabilities.model == MODEL_ID
    assert capabilities.served_model == MODEL_ID
    assert capabilities.server["server"].startswith("verifier-simulator")
    assert capabilities.to_dict()["models"] == [MODEL_ID]


def test_probe_rejects_an_unknown_model(local_simulator: Callable[..., SimulatorServer]) -> None:
    server = local_simulator()
    with pytest.raises(
        ConfigError, match=f"model 'gpt-9' is not served by .*; it serves: {MODEL_ID}"
    ):
        probe(EndpointClient(server.base_url, api_key=None), "gpt-9")


def test_probe_of_a_non_api_url(local_simulator: Callable[..., SimulatorServer]) -> None:
    server = local_simulator()
    url = server.base_url.removesuffix("/v1") + "/elsewhere"
    with pytest.raises(ConfigError, match="does not list its models"):
        probe(EndpointClient(url, api_key=None), None)


def test_the_feature_probes_go_out_with_the_chat_probe(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    server = local_simulator(latency=0.2)
    client = EndpointClient(server.base_url, api_key=None)
    client.transcript = Transcript(tmp_path / "t.jsonl", client.redactor)
    capabilities = probe(client, None, vision=True, tokenizer=True)
    client.transcript.close()
    assert capabilities.vision is True
    assert capabilities.tokenizer_endpoints is not None
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    start = {r["label"]: datetime.fromisoformat(r["time"]).timestamp() for r in records}
    chat = next(r for r in records if r["label"] == "probe/chat")
    chat_answered = start["probe/chat"] + chat["latency_ms"] / 1000
    # Sent while the chat probe waited for its answer, not after it.
    assert start["probe/vision"] < chat_answered
    assert start["probe/tokenize-messages"] < chat_answered


def test_a_failing_chat_probe_stops_the_probe(
    local_simulator: Callable[..., SimulatorServer],
) -> None:
    # Every chat request fails; the vision probe sent beside it would only say "unknown".
    server = local_simulator("fault-500:1")
    client = EndpointClient(server.base_url, api_key=None, max_retries=0)
    with pytest.raises(EndpointError, match="answered HTTP 500 to all 1 attempts"):
        probe(client, None, vision=True, tokenizer=True)


def test_the_logprobs_probe_steps_down_until_a_value_is_taken(
    local_simulator: Callable[..., SimulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulated vendor lists at most 20 alternatives, as OpenAI's API does: 21 is
    refused with a 400 and the next value is tried; a vendor that ignores logprobs has none."""
    from verifier.endpoint import probe as probing

    monkeypatch.setattr(probing, "TOP_LOGPROBS", (21, 5))
    client = EndpointClient(local_simulator().base_url, api_key=None)
    assert probing.probe_logprobs(client, MODEL_ID) == LogprobsSupport(5)
    deaf = EndpointClient(local_simulator("logprobs-unavailable").base_url, api_key=None)
    assert probing.probe_logprobs(deaf, MODEL_ID) == LogprobsSupport(
        None, "the answer to logprobs: true has no logprobs"
    )


def test_capabilities_cross_processes_as_plain_data_and_come_back_typed() -> None:
    """What the controller sends its workers and writes in the journal header."""
    caps = Capabilities(
        model="m",
        models=("m",),
        tokenizer_endpoints=TokenizerEndpoints(tokenize="content", apply_template=True),
        logprobs=LogprobsSupport(5),
        reference=ReferenceEndpoint("r", LogprobsSupport(None, "refused")),
    )
    data = json.loads(json.dumps(caps.to_dict()))
    assert data["tokenizer_endpoints"]["method"] == "apply_template_tokenize"
    # The scorecard's JSON keeps the shape it had before these were typed.
    assert data["logprobs"] == {"top": 5}
    assert data["reference"] == {"model": "r", "logprobs": {"top": None, "why": "refused"}}
    assert Capabilities.from_dict(data) == caps
    assert Capabilities.from_dict(Capabilities(model="m").to_dict()).tokenizer_endpoints is None


def test_by_default_the_probe_finds_every_api_and_whether_each_shapes_output(
    local_simulator: Callable[..., SimulatorServer],
) -> None:
    server = local_simulator()
    client = EndpointClient(server.base_url, api_key=None)
    found = probe(client, None, apis=None, formats=True)
    assert (found.apis, found.formats) == (("chat", "messages", "responses"), {})
    # --api chat asks nothing of the others.
    assert probe(client, None).apis == ("chat",)


def test_an_api_the_endpoint_does_not_serve_is_left_out_or_stops_the_run_when_named(
    local_simulator: Callable[..., SimulatorServer],
) -> None:
    # A vendor that serves chat completions only: the other routes answer 404.
    server = local_simulator(chat_only=True)
    client = EndpointClient(server.base_url, api_key=None)
    assert probe(client, None, apis=None).apis == ("chat",)
    with pytest.raises(
        ConfigError,
        match=r"does not serve the Anthropic Messages API \(POST /messages answered 404\): "
        r"leave messages out of --api",
    ):
        probe(client, None, apis=("chat", "messages"))


def test_an_api_that_ignores_its_output_format_serves_no_structured_output(
    local_simulator: Callable[..., SimulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifier.simulator import server as simulated

    # A translation that drops the schema: the model answers the prose it was asked for.
    translate = simulated.chat_request

    def dropping(api: str, body: Any, *, counting: bool = False, quirks: Any = None) -> Any:
        request = translate(api, body, counting=counting, quirks=quirks)
        if isinstance(request, dict):
            request.pop("response_format", None)
        return request

    monkeypatch.setattr(simulated, "chat_request", dropping)
    server = local_simulator()
    found = probe(EndpointClient(server.base_url, api_key=None), None, apis=None, formats=True)
    assert set(found.formats) == {"messages", "responses"}
    assert found.formats["messages"].startswith(
        "a request with output_config.format was answered with free text: "
    )
    assert found.formats["responses"].startswith(
        "a request with text.format was answered with free text: "
    )


class _Answering:
    """A client whose every chat request gets one fixed answer (status and body)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, body

    def chat(self, request: dict[str, Any], **options: Any) -> Any:
        from verifier.protocol.messages import parse_answer

        return parse_answer(self.status, json.dumps(self.body).encode(), {})


def _message(text: str) -> dict[str, Any]:
    usage = {"input_tokens": 5, "output_tokens": 3}
    content = [{"type": "text", "text": text}]
    head = {"id": "m", "type": "message", "role": "assistant", "model": "m"}
    return {**head, "content": content, "stop_reason": "end_turn", "stop_sequence": None} | {
        "usage": usage
    }


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (200, _message('{"colour": "blue"}'), None),
        # JSON that breaks the schema is structured output done wrong: the cases grade it.
        (200, _message('{"sky": 1}'), None),
        (200, _message("The sky is blue."), "answered with free text: 'The sky is blue.'"),
        (
            400,
            {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}},
            "refused with HTTP 400: no",
        ),
        # A server error, or an answer that cannot be read, says nothing of what is served.
        (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}, None),
        (200, {"type": "message"}, None),
    ],
)
def test_only_a_refusal_or_prose_says_an_api_serves_no_structured_output(
    status: int, body: dict[str, Any], why: str | None
) -> None:
    from verifier.endpoint.probe import probe_format

    found = probe_format(_Answering(status, body), "m", "messages")  # type: ignore[arg-type]
    if why is None:
        assert found is None
    else:
        assert found == f"a request with output_config.format was {why}"
