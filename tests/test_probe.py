"""Probing before collection: the model, and one clear error when the endpoint is unusable."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from verifier.endpoint.client import EndpointClient
from verifier.endpoint.probe import choose_model, probe
from verifier.errors import ConfigError
from verifier.simulator.model import MODEL_ID
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
