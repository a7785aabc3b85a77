"""The generated requests against an oracle the request schema did not write: the SDK's types.

``schemas/chat_request.schema.json`` makes the bad requests (verifier/cases/negative.py) and
the simulated vendor refuses what it refuses, so nothing there can say the schema is wrong.
The openai SDK's request types are generated from OpenAI's API specification
(tests/request_oracle.py makes a strict JSON validator of them). Every valid request the
generator makes must be valid for them; every bad one invalid for them at the field it
changed, unless the disagreement is listed below with what settles it; and every other member
the types offer where a valid request has one (another literal, another kind of message, part
or tool) is taken by the schema, or listed. A new disagreement, either way, fails.
"""

from __future__ import annotations

import pytest

from tests.request_oracle import (
    Unreadable,
    alternatives,
    complaints,
    names_field,
    sdk_fields,
    untyped_fields,
)
from verifier.cases.negative import (
    BASES,
    BEYOND_SCHEMA,
    _replaced,
    bad_requests,
    edge_requests,
    field_name,
    rejected_by_schema,
    schema_fields,
    with_model,
)

SPEC = "OpenAI's API specification (openapi.yaml) states it; a TypedDict cannot"
RANGE = f"a range: {SPEC}"
# What the API answers (its error messages, as clients quote them), where the specification
# is silent.
API_MIN_1 = "OpenAI answers 400 `integer below minimum value. Expected a value >= 1`"
NAME = (
    "a name is `^[a-zA-Z0-9_-]{1,64}$`: the specification and the SDK's docstring say so in "
    "words (`Must be a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length "
    "of 64`), which a TypedDict cannot hold"
)
URL = (
    "the specification has `format: uri` (`Either a URL of the image or the base64 encoded "
    "image data`); the schema takes the two the API reads, an http(s) URL and a base64 data "
    "URL of an image: an empty or bare word is no URI, a server must not read `file:` or fetch "
    "`ftp:` for a caller, and a data URL that is not base64 image data is no image"
)
# The bad requests the SDK's types take, by field and mutation, and why the schema refuses them.
STRICTER: dict[tuple[str, str], str] = {
    ("model", "empty"): (
        "an empty model names none (`minLength: 1`); the specification gives no length, and "
        "OpenAI answers a request without a model with 400 `you must provide a model parameter`"
    ),
    ("messages", "empty"): f"`minItems: 1`: {SPEC}",
    ("messages[].content", "empty"): (
        f"`minItems: 1` for an array of content parts (developer, system, user, tool): {SPEC}"
    ),
    ("max_tokens", "below_range"): API_MIN_1,
    ("max_completion_tokens", "below_range"): API_MIN_1,
    **{
        (field, kind): f"{RANGE} ({bounds})"
        for field, bounds in {
            "temperature": "0..2",
            "top_p": "0..1",
            "n": "1..128",
            "presence_penalty": "-2..2",
            "frequency_penalty": "-2..2",
            "top_logprobs": "0..20",
        }.items()
        for kind in ("below_range", "above_range")
    },
    ("logit_bias.15", "above_range"): (
        "a bias is -100..100: the specification and the SDK's docstring say so in words"
    ),
    ("stop", "oversize"): f"`maxItems: 4` (129 stop sequences): {SPEC}",
    ("tools", "empty"): (
        "OpenAI answers `tools: []` with 400 `empty_array` (vLLM matched it: "
        "vllm-project/vllm#39780); the specification is silent"
    ),
    ("tools", "oversize"): (
        "OpenAI answers 129 tools with 400 `array_above_max_length` (`Expected an array with "
        "maximum length 128`); the specification is silent"
    ),
    **{
        (field, kind): NAME
        for field in ("tools[].function.name", "response_format.json_schema.name")
        for kind in ("empty", "bad_pattern", "oversize")
    },
    **{
        ("tool_choice.function.name", kind): (
            "a tool choice names a declared tool, and no tool can have this name (" + NAME + ")"
        )
        for kind in ("empty", "bad_pattern", "oversize")
    },
    **{
        ("messages[].content[].image_url.url", kind): URL
        for kind in (
            "empty",
            "unknown_value",
            "bad_pattern",
            "oversize",
            "non_http_url",
            "file_url",
            "bad_data_url",
            "not_image_data_url",
            "urlsafe_base64",
        )
    },
}
# The bad requests pydantic's JSON reader cannot read: nested deeper than it goes (a response
# or tool schema of objects 100 deep). Their insides are `Dict[str, object]` to the types.
UNREADABLE = {
    ("tools[].function.parameters", "deep_nesting"),
    ("response_format.json_schema.schema", "deep_nesting"),
}
# What the SDK's types take where a valid request has a value and the schema refuses: parts of
# OpenAI's API that open-model servers do not implement and the verifier never sends. No
# generated bad request is one of them (test_every_bad_request...); the simulated vendor
# refuses them with a 400, as a server without the feature may.
NARROWER: dict[tuple[str, str], str] = {
    ("messages[]", "role='function'"): "deprecated function messages (tool messages replace them)",
    ("tools[]", "type='custom'"): "custom tools (free-text input, OpenAI's own)",
    ("tool_choice", "type='custom'"): "forcing a custom tool",
    ("tool_choice", "type='allowed_tools'"): "allowed_tools, OpenAI's subset of the tools",
    ("messages[].tool_calls[]", "type='custom'"): "a custom tool's call",
    ("messages[].content[]", "type='input_audio'"): "audio input",
    ("messages[].content[]", "type='file'"): "file input",
    ("messages[].content[]", "type='image_url'"): (
        "not narrower: the smallest image part the types allow has url `x`, no URL (see the "
        "url rows of STRICTER)"
    ),
}
# Fields whose SDK type says nothing of their value: the oracle says nothing there either.
UNTYPED = {
    "tools[].function.parameters": "dict[str, object]",
    "response_format.json_schema.schema": "dict[str, object]",
    # Deprecated, and not in the request schema.
    "functions[].parameters": "dict[str, object]",
}


def _oracle(body: object) -> list[object]:
    return list(complaints(with_model(body, "m")))


def test_every_valid_base_and_edge_request_is_valid_for_the_sdk_types() -> None:
    for name, base in BASES.items():
        assert _oracle(base) == [], name
    for edge in edge_requests():
        assert _oracle(edge["request"]) == [], edge["id"]


def test_every_bad_request_is_refused_by_the_sdk_types_at_its_field_or_listed() -> None:
    accepted, unreadable, elsewhere = set(), set(), {}
    for case in bad_requests():
        if "request" not in case:
            # Made on the body's bytes (cut short, a key twice, NaN, Latin-1): JSON's syntax,
            # which the types do not speak of (tests/test_negative.py reads them).
            continue
        key = (case["field"], case["mutation"])
        try:
            found = complaints(with_model(case["request"], "m"))
        except Unreadable:
            unreadable.add(key)
            continue
        if case["mutation"] in BEYOND_SCHEMA:
            # Well-formed for both: what it asks cannot be had (checked by the schema's test).
            assert found == [], case["id"]
        elif not found:
            accepted.add(key)
        elif not names_field(found, case["path"]):
            elsewhere[case["id"]] = found
    assert elsewhere == {}
    assert unreadable == UNREADABLE
    assert accepted == set(STRICTER)


def test_every_other_value_the_sdk_types_offer_is_taken_by_the_schema_or_listed() -> None:
    refused = {}
    for base in BASES.values():
        for path, label, value in alternatives(with_model(base, "m")):
            body = _replaced(base, path, value)
            key = (field_name(path), label)
            if _oracle(body) == [] and rejected_by_schema(body) is not None:
                refused[key] = rejected_by_schema(body)
    assert set(refused) == set(NARROWER), refused


def test_the_fields_the_sdk_types_leave_open_are_listed() -> None:
    assert untyped_fields() == UNTYPED


def test_every_field_of_the_schema_is_a_field_of_the_sdk_types() -> None:
    # The schema invents no field: vendor extras (top_k, chat_template_kwargs) are allowed by
    # it, not declared.
    assert set(schema_fields()) - sdk_fields() == set()


@pytest.mark.parametrize(
    ("body", "path", "kind"),
    [
        # Strict: no string for an integer, no string for a boolean.
        ({**BASES["plain"], "max_tokens": "8"}, ("max_tokens",), "int_type"),
        ({**BASES["logprobs"], "logprobs": "true"}, ("logprobs",), "bool_type"),
        # Arrays are checked item by item (an SDK `Iterable` alone would be checked lazily).
        (
            {**BASES["plain"], "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            ("messages", 0, "content", 0, "text"),
            "missing",
        ),
        # The complaint is at the body's key, not the union member's tag of the same name.
        (
            _replaced(BASES["tool_turn"], ("messages", 2, "tool_calls", 0, "id"), None),
            ("messages", 2, "tool_calls", 0, "id"),
            "string_type",
        ),
        # An unknown role: one complaint at the message, not one per kind of message.
        (
            {**BASES["plain"], "messages": [{"role": "robot", "content": "hi"}]},
            ("messages", 0),
            "union_tag_invalid",
        ),
    ],
)
def test_the_oracle_refuses_what_the_types_refuse_where_it_is(
    body: dict[str, object], path: tuple[object, ...], kind: str
) -> None:
    found = complaints(with_model(body, "m"))
    assert [(c.path, c.kind) for c in found] == [(path, kind)]


def test_the_oracle_takes_what_the_types_take() -> None:
    # A string content (which a lazy `Iterable` branch would take apart), an integer for a
    # float, vendor extras, and a streamed request against the streaming overload.
    body = {**BASES["stream"], "temperature": 1, "top_k": 20, "chat_template_kwargs": {}}
    assert complaints(with_model(body, "m")) == []
    assert [c.path for c in complaints({**with_model(body, "m"), "stream": "yes"})] == [("stream",)]
