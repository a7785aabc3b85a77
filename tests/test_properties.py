"""Whatever bytes arrive, the readers of untrusted input end in a graded result or one of the
package's own errors with a one-line message: never another exception.

The readers: the SSE accumulator (a streamed answer), the response parser (a non-stream
answer) and `verifier verify` (an envelope, a key and a transcript from someone else).
Inputs are arbitrary bytes, arbitrary JSON, and JSON shaped like the real thing whose every
field may be of the wrong type, so that generation reaches past the first type check.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from verifier.cli import main as verifier_main
from verifier.errors import VerifierError
from verifier.protocol.answers import ChatResult, parse_body, parse_completion
from verifier.protocol.stream import accumulate
from verifier.scorecard import signing

# Python refuses these although they are valid JSON syntax: an integer of more than 4300
# digits, and nesting deeper than the recursion limit.
HUGE_INT = b"9" * 5000
DEEP = b"[" * 100_000 + b"]" * 100_000


def json_of(floats: st.SearchStrategy[float]) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values, with words the readers look for among the strings."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | floats
        | st.text(max_size=12)
        | st.sampled_from(["", "[DONE]", "assistant", "function", "stop", "tool_calls", "length"])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )


# Endpoints may send NaN and Infinity (Python's json reads them); a signed statement may not.
json_values = json_of(st.floats())
finite_json_values = json_of(st.floats(allow_nan=False, allow_infinity=False))


def mostly(typed: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`typed` three times in four, else any JSON value (hypothesis favours small draws)."""
    return st.integers(0, 3).flatmap(lambda n: json_values if n == 3 else typed)


def shaped(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with all or some of `fields`, each mostly of its own type, else any JSON.

    Mostly right is what reaches the checks after the first ones.
    """
    values = {k: mostly(v) for k, v in fields.items()}
    return st.fixed_dictionaries(values) | st.fixed_dictionaries({}, optional=values)


usage = shaped({"prompt_tokens": st.integers(0, 9), "completion_tokens": st.integers(0, 9)})
function = shaped({"name": st.sampled_from(["f", "g", ""]), "arguments": st.text(max_size=6)})
tool_call = shaped(
    {
        "index": st.integers(-1, 2),
        "id": st.sampled_from(["call_1", "call_2"]),
        "type": st.just("function"),
        "function": function,
    }
)
message_fields = {
    "role": st.just("assistant"),
    "content": st.text(max_size=6) | st.lists(shaped({"text": st.text(max_size=4)}), max_size=2),
    "reasoning_content": st.text(max_size=6),
    "tool_calls": st.lists(tool_call, max_size=3),
}
logprobs = shaped({"content": st.lists(json_values, max_size=2)})
finish_reason = st.sampled_from(["stop", "tool_calls", "length"])
stream_chunk = shaped(
    {
        "id": st.sampled_from(["c1", "c2"]),
        "model": st.text(max_size=4),
        "usage": usage,
        "choices": st.lists(
            shaped(
                {
                    "index": st.integers(0, 2),
                    "delta": shaped(message_fields),
                    "finish_reason": finish_reason,
                    "logprobs": logprobs,
                    "usage": usage,
                }
            ),
            max_size=3,
        ),
    }
)
completion = shaped(
    {
        "id": st.text(max_size=4),
        "model": st.text(max_size=4),
        "usage": usage,
        "choices": st.lists(
            shaped(
                {
                    "index": st.integers(0, 2),
                    "message": shaped(message_fields),
                    "finish_reason": finish_reason,
                    "logprobs": logprobs,
                }
            ),
            max_size=3,
        ),
    }
)


def sse_event(data: str, newline: str) -> bytes:
    return f"data: {data}{newline}{newline}".encode()


sse_events = st.one_of(
    # Twice: the shape that reaches furthest into the accumulator is drawn most.
    st.builds(json.dumps, stream_chunk),
    st.builds(json.dumps, stream_chunk),
    st.builds(json.dumps, json_values),
    st.builds(lambda error: json.dumps({"error": error}), shaped({"message": st.text(max_size=6)})),
    st.just("[DONE]"),
    st.text(max_size=20),
)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def stream(pieces: list[bytes]) -> ChatResult:
    return accumulate(pieces, ChatResult(stream=True, status=200))


def assert_graded(result: ChatResult) -> None:
    """Problems are well formed, and a stream without [DONE] is never taken as complete."""
    for problem in result.problems:
        assert isinstance(problem.code, str) and isinstance(problem.message, str)
    if result.stream and not result.done:
        assert "done_missing" in [p.code for p in result.problems]
    for choice in result.choices:
        assert choice.content is None or isinstance(choice.content, str)
        for call in choice.tool_calls:
            assert call.arguments is None or isinstance(call.arguments, str)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 500), max_size=8))
def test_the_accumulator_grades_arbitrary_bytes(data: bytes, cuts: list[int]) -> None:
    assert_graded(stream(split(data, cuts)))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(sse_events, max_size=6),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.lists(st.integers(0, 2000), max_size=6),
)
def test_the_accumulator_grades_arbitrary_chunks(
    events: list[str], newline: str, cuts: list[int]
) -> None:
    body = b"".join(sse_event(data, newline) for data in events)
    assert_graded(stream(split(body, cuts)))


@pytest.mark.parametrize("data", [HUGE_INT, DEEP], ids=["huge-int", "deep-nesting"])
def test_the_accumulator_grades_json_python_refuses(data: bytes) -> None:
    result = stream([b"data: " + data + b"\n\ndata: [DONE]\n\n"])
    assert [p.code for p in result.problems][:1] == ["chunk_not_json"]


@settings(max_examples=300, deadline=None)
@given(st.integers(100, 599), st.binary(max_size=300))
@example(200, HUGE_INT)
@example(200, DEEP)
@example(500, DEEP)
def test_the_parser_grades_arbitrary_bytes(status: int, data: bytes) -> None:
    for parse in (parse_body, parse_completion):
        result = parse(status, data, {})
        assert_graded(result)
        try:
            json.loads(data)
        except (ValueError, RecursionError):
            assert [p.code for p in result.problems] == ["body_not_json"]


@settings(max_examples=300, deadline=None)
@given(st.integers(100, 599), completion | json_values)
def test_the_parser_grades_arbitrary_json(status: int, body: Any) -> None:
    result = parse_completion(status, json.dumps(body).encode(), {})
    assert_graded(result)
    well_formed = isinstance(body, dict) and isinstance(body.get("choices"), list)
    if 200 <= status < 300 and not well_formed:
        assert [p.code for p in result.problems] == ["not_a_completion"]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("keys")
    private_path, public_path = signing.generate_key(folder / "signer.key")
    return {
        "folder": folder,
        "private": signing.load_private_key(private_path),
        "public": signing.load_public_key(public_path),
        "public_path": public_path,
    }


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


statements = shaped(
    {
        "_type": st.just(signing.STATEMENT_TYPE),
        "predicateType": st.just(signing.PREDICATE_TYPE),
        "predicate": st.dictionaries(st.text(max_size=6), json_values, max_size=4),
        "subject": st.permutations(
            [
                {"name": signing.TRANSCRIPT_SUBJECT, "digest": {"sha256": "0" * 64}},
                {"name": signing.CORPUS_SUBJECT, "digest": {"sha256": "1" * 64}},
            ]
        )
        | st.lists(
            shaped(
                {
                    "name": st.sampled_from([signing.TRANSCRIPT_SUBJECT, signing.CORPUS_SUBJECT]),
                    "digest": shaped({"sha256": st.just("0" * 64)}),
                }
            ),
            max_size=3,
        ),
    }
)
signature = shaped({"keyid": st.text(max_size=8), "sig": st.builds(b64, st.binary(max_size=70))})
envelopes = shaped(
    {
        "payload": st.builds(lambda s: b64(json.dumps(s).encode()), statements)
        | st.builds(b64, st.binary(max_size=40)),
        "payloadType": st.just(signing.PAYLOAD_TYPE),
        "signatures": st.lists(signature, min_size=1, max_size=1) | st.lists(signature, max_size=3),
    }
)


def canonical(value: Any) -> bytes:
    """JSON in the envelope file's own form, so that the strict checks let it further."""
    return (json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n").encode()


def refused_or_read(read: Callable[[], object]) -> None:
    """`read` returns, or raises the package's own error with a one-line message."""
    try:
        read()
    except VerifierError as exc:
        assert str(exc) and "\n" not in str(exc)


ENVELOPE_INPUTS = st.binary(max_size=300) | st.builds(canonical, envelopes | json_values)


@settings(max_examples=300, deadline=None)
@given(ENVELOPE_INPUTS)
@example(HUGE_INT)
@example(DEEP)
def test_envelope_readers_raise_only_signing_errors(keys: dict[str, Any], data: bytes) -> None:
    refused_or_read(lambda: signing.read_statement(data))
    # Nothing drawn here was signed with the key: verifying it must always be refused.
    for transcript in (None, data):
        with pytest.raises(VerifierError) as refused:
            signing.verify_envelope(data, keys["public"], transcript=transcript)
        assert str(refused.value) and "\n" not in str(refused.value)


@settings(max_examples=150, deadline=None)
@given(statements)
def test_a_signed_arbitrary_statement_verifies_or_is_refused(
    keys: dict[str, Any], signed: dict[str, Any]
) -> None:
    try:
        verified = signing.verify_envelope(
            signing.sign_statement(signed, keys["private"]), keys["public"]
        )
    except VerifierError as exc:
        message = str(exc)
        assert message and "\n" not in message
        # What was signed here is refused only for its content, never for its envelope.
        assert not any(
            word in message for word in ("signature", "signed with", "canonical", "payloadType")
        ), message
    else:
        assert verified == signed


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=200)
    | st.builds(
        lambda label, body: f"-----BEGIN {label}-----\n".encode() + body + b"\n-----END-----\n",
        st.sampled_from(["PUBLIC KEY", "PRIVATE KEY", "RSA PRIVATE KEY", "EC PARAMETERS"]),
        st.binary(max_size=120) | st.builds(base64.encodebytes, st.binary(max_size=90)),
    )
)
def test_key_readers_raise_only_signing_errors(keys: dict[str, Any], data: bytes) -> None:
    path = keys["folder"] / "arbitrary.key"
    path.write_bytes(data)
    refused_or_read(lambda: signing.load_public_key(path))
    refused_or_read(lambda: signing.load_private_key(path))


def run_cli(*args: str | Path) -> tuple[int, str, str]:
    """`verifier ...` in this process: exit status, stdout, stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = verifier_main([str(a) for a in args])
    return status, stdout.getvalue(), stderr.getvalue()


def one_line(text: str) -> str:
    assert text.endswith("\n") and text.count("\n") == 1, text
    return text


@settings(max_examples=100, deadline=None)
@given(ENVELOPE_INPUTS)
def test_verify_on_an_arbitrary_envelope_is_invalid_in_one_line(
    keys: dict[str, Any], data: bytes
) -> None:
    envelope = keys["folder"] / "arbitrary.dsse.json"
    envelope.write_bytes(data)
    status, out, err = run_cli("verify", envelope, "--key", keys["public_path"])
    assert (status, out) == (1, "")
    assert one_line(err).startswith(f"verifier verify: invalid: {envelope}: ")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_verify_with_an_arbitrary_key_file_is_an_error_in_one_line(
    keys: dict[str, Any], data: bytes
) -> None:
    key = keys["folder"] / "arbitrary.pub"
    key.write_bytes(data)
    envelope = keys["folder"] / "any.dsse.json"
    envelope.write_bytes(b"{}\n")
    status, out, err = run_cli("verify", envelope, "--key", key)
    assert (status, out) == (2, "")
    assert one_line(err).startswith("verifier verify: error: ")


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8), finite_json_values, max_size=5), st.binary(max_size=100)
)
def test_verify_of_a_signed_arbitrary_scorecard_is_one_line_either_way(
    keys: dict[str, Any], predicate: dict[str, Any], transcript: bytes
) -> None:
    statement = signing.statement(predicate, transcript_sha256="0" * 64, corpus_sha256="1" * 64)
    envelope = keys["folder"] / "signed.dsse.json"
    envelope.write_bytes(signing.sign_statement(statement, keys["private"]))
    status, out, err = run_cli("verify", envelope, "--key", keys["public_path"])
    refuses = any(
        isinstance(predicate.get(section), dict) and field in predicate[section]
        for section, field in (("corpus", "digest"), ("transcript", "sha256"))
    )
    if refuses:
        assert status == 1 and out == "" and one_line(err)
    else:
        assert status == 0 and err == "" and one_line(out).startswith("valid: signed by ")
    transcript_file = keys["folder"] / "transcript.jsonl"
    transcript_file.write_bytes(transcript)
    status, out, err = run_cli(
        "verify", envelope, "--key", keys["public_path"], "--transcript", transcript_file
    )
    assert (status, out) == (1, "")
    assert one_line(err).startswith(f"verifier verify: invalid: {envelope}: ")
