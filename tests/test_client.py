"""The one HTTP path: real openai SDK, real loopback HTTP, our retries and transcript."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from verifier.endpoint.client import EndpointClient, retry_after_seconds
from verifier.endpoint.transcript import Transcript
from verifier.errors import (
    EndpointAuthError,
    EndpointStatusError,
    EndpointTimeout,
    EndpointUnreachable,
)
from verifier.simulator.rules import MODEL_ID
from verifier.simulator.server import SimulatorServer

REQUEST = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hello there"}]}


def client_for(
    server: SimulatorServer, tmp_path: Path, sleeps: list[float], **kwargs: object
) -> EndpointClient:
    client = EndpointClient(
        server.base_url, api_key=kwargs.pop("api_key", None), sleep=sleeps.append, **kwargs
    )  # type: ignore[arg-type]
    client.transcript = Transcript(tmp_path / "t.jsonl", client.redactor)
    return client


def records(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]


def test_non_stream_and_stream_give_the_same_message(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    client = client_for(local_simulator(), tmp_path, [])
    plain = client.chat(REQUEST, label="t#1")
    streamed = client.chat(REQUEST, stream=True, label="t#2")
    assert plain.ok and streamed.ok and not plain.problems and not streamed.problems
    assert plain.choice and streamed.choice
    assert plain.choice.content == streamed.choice.content
    assert plain.usage == streamed.usage and streamed.usage_source == "final_chunk"
    logged = records(tmp_path)
    assert [r["label"] for r in logged] == ["t#1", "t#2"]
    assert logged[1]["request"]["stream_options"] == {"include_usage": True}


def test_500_is_retried_with_backoff_and_recorded(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    server = local_simulator("http-500-every-3rd")
    sleeps: list[float] = []
    client = client_for(server, tmp_path, sleeps, backoff=0.5)
    results = [client.chat(REQUEST, label=f"t#{i}") for i in range(3)]
    assert all(r.ok for r in results)
    assert [r.attempts for r in results] == [1, 1, 2]
    assert len(sleeps) == 1 and 0.25 <= sleeps[0] <= 0.5
    logged = records(tmp_path)
    assert [(r["label"], r["attempt"], r["status"], r["retry"]) for r in logged] == [
        ("t#0", 1, 200, False),
        ("t#1", 1, 200, False),
        ("t#2", 1, 500, True),
        ("t#2", 2, 200, False),
    ]


def test_429_honours_retry_after(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    server = local_simulator("http-429-retry-after:7")
    sleeps: list[float] = []
    client = client_for(server, tmp_path, sleeps)
    for _ in range(3):
        assert client.chat(REQUEST).ok
    assert sleeps == [7.0]


def test_a_fault_that_outlives_the_retries_is_an_endpoint_error(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    server = local_simulator("http-500-every-3rd")
    client = client_for(server, tmp_path, [], max_retries=0)
    client.chat(REQUEST)
    client.chat(REQUEST)
    with pytest.raises(EndpointStatusError, match="answered HTTP 500 to all 1 attempts"):
        client.chat(REQUEST)
    assert client.chat(REQUEST).ok


def test_persistent_5xx_can_be_kept_as_a_result(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    client = client_for(local_simulator("http-500-every-3rd"), tmp_path, [], max_retries=0)
    client.chat(REQUEST)
    client.chat(REQUEST)
    result = client.chat(REQUEST, keep_persistent_5xx=True)
    assert result.status == 500 and result.error_object is not None


def test_4xx_is_returned_not_retried(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    sleeps: list[float] = []
    client = client_for(local_simulator(), tmp_path, sleeps)
    result = client.chat({**REQUEST, "messages": []})
    assert result.status == 400 and result.error_object is not None and sleeps == []


def test_connection_refused_is_unreachable_after_retries(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    client = EndpointClient(
        f"http://127.0.0.1:{port}/v1", api_key=None, max_retries=2, sleep=sleeps.append
    )
    with pytest.raises(
        EndpointUnreachable, match=rf"cannot reach http://127.0.0.1:{port}/v1: connection refused"
    ):
        client.chat(REQUEST)
    assert len(sleeps) == 2


def test_timeout_is_an_endpoint_timeout(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    client = client_for(local_simulator(latency=1.0), tmp_path, [], timeout=0.2, max_retries=0)
    with pytest.raises(EndpointTimeout, match="did not answer within 0.2s"):
        client.chat(REQUEST)


def test_wrong_key_is_an_auth_error_and_the_key_is_never_written(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    server = local_simulator(api_key="right-key-123")
    client = client_for(server, tmp_path, [], api_key="wrong-key-456", api_key_env="MY_KEY")
    with pytest.raises(
        EndpointAuthError, match=r"the endpoint rejected the key in \$MY_KEY \(401\)"
    ):
        client.chat(REQUEST)
    assert "wrong-key-456" not in (tmp_path / "t.jsonl").read_text()
    good = client_for(server, tmp_path, [], api_key="right-key-123")
    assert good.chat(REQUEST).ok
    assert "right-key-123" not in (tmp_path / "t.jsonl").read_text()


def test_missing_key_message_says_to_set_it(
    local_simulator: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    client = client_for(local_simulator(api_key="k-123456"), tmp_path, [], api_key_env="VENDOR_KEY")
    with pytest.raises(
        EndpointAuthError, match=r"requires a key \(401\) and \$VENDOR_KEY is not set"
    ):
        client.chat(REQUEST)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected
