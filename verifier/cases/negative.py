"""Bad requests derived from the request schema, and valid edge requests (pure).

Valid requests (:data:`BASES`) hold between them every field of
``schemas/chat_request.schema.json``. Every field of each is mutated in each way
:func:`_mutations` knows (missing, null, another type, empty, out of range, not an integer, a
value no enumeration or pattern allows, oversize, an image URL that is neither http nor a
well-formed base64 image data URL), and a mutation is kept when the schema rejects the request
it makes: the contract, not a list, decides what is bad. Four more are made on the body's
bytes, which JSON Schema cannot express: a body cut short, a duplicated key, a non-finite
number, Latin-1 bytes. A few are bad beyond what the schema can see (:func:`_beyond_schema`):
an image that cannot be fetched or decoded, a response schema no value satisfies; and
pathological JSON Schemas (:data:`PATHOLOGICAL`) an endpoint may refuse or answer, but not
with a server error or a hang. Each bad request is the smallest base that holds its field,
with one change: nothing else in it can be what the endpoint objects to; :func:`smaller`
offers smaller ones still, for the search that shrinks a failure.

:func:`edge_requests` are requests the schema accepts at its boundaries (non-ASCII property
names in a tool's parameters, an empty description, a tool name of 64 characters, a large
enumeration): an endpoint must answer them.

The other APIs get bad requests of their own the same way: valid requests in their terms
(:data:`MESSAGES_BASES`, :data:`RESPONSES_BASES`) mutated and kept where their own request
schema (``messages_request``, ``responses_request``) rejects the result, each case carrying
its ``api``, and edge requests of their own: chat's, said in their terms where they can be.

``--negative N`` takes N of them per API (default: one per field of chat's schema,
:func:`default_count`), spread over the fields in a seeded order, so that any N covers as many
fields as it can; the same seed gives the same cases.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import random
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jsonschema.exceptions import best_match

from .. import cache, resources
from ..reference.profiles import pinned_values
from .corpus import Case

# The verifier's cache kind of the generated bad requests.
GENERATED = "negative-requests"

# Where the run puts the model it tests; a mutation of the field replaces this placeholder.
MODEL = "$MODEL"
USER = {"role": "user", "content": "Say hi."}
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    },
}
# A 1x1 PNG: small enough for every vision endpoint, decodable by every one.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
    "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}

# The valid requests whose fields are mutated, by name (what one needs of the endpoint: NEEDS).
BASES: dict[str, dict[str, Any]] = {
    "plain": {"model": MODEL, "messages": [USER], "max_tokens": 8, "user": "verifier"},
    "sampling": {
        "model": MODEL,
        "messages": [USER],
        "max_completion_tokens": 8,
        "temperature": 0.7,
        "top_p": 0.9,
        "n": 1,
        "seed": 7,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "logit_bias": {"15": 1},
        "stop": ["\n\n"],
    },
    "logprobs": {
        "model": MODEL,
        "messages": [USER],
        "max_tokens": 4,
        "logprobs": True,
        "top_logprobs": 2,
    },
    "stream": {
        "model": MODEL,
        "messages": [USER],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "tools": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "max_tokens": 32,
        "tools": [WEATHER],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    },
    "named_tool": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "max_tokens": 32,
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
    "tool_turn": {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are brief.", "name": "setup"},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "12 C, rain"},
        ],
        "max_tokens": 16,
        "tools": [WEATHER],
    },
    "parts": {
        "model": MODEL,
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Say hi."}]},
        ],
        "max_tokens": 8,
    },
    "image": {
        "model": MODEL,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What colour is this?"},
                    {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
                ],
            }
        ],
        "max_tokens": 8,
    },
    "json_schema": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Answer with a JSON object."}],
        "max_tokens": 16,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "description": "One field.",
                "schema": ANSWER_SCHEMA,
                "strict": True,
            },
        },
    },
    "json_object": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Answer with a JSON object."}],
        "max_tokens": 16,
        "response_format": {"type": "json_object"},
    },
}
# The other APIs' valid requests, in their own terms (their references' request bodies): the
# same requests where the API has words for them, and the fields only it has.
MESSAGES_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": WEATHER["function"]["parameters"],
}
RESPONSES_TOOL: dict[str, Any] = {"type": "function", **WEATHER["function"]}
MESSAGES_BASES: dict[str, dict[str, Any]] = {
    "plain": {
        "model": MODEL,
        "max_tokens": 8,
        "messages": [USER],
        "metadata": {"user_id": "verifier"},
    },
    "sampling": {
        "model": MODEL,
        "max_tokens": 8,
        "messages": [USER],
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "stop_sequences": ["\n\n"],
    },
    "stream": {"model": MODEL, "max_tokens": 8, "messages": [USER], "stream": True},
    "tools": {
        "model": MODEL,
        "max_tokens": 32,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [MESSAGES_TOOL],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
    },
    "named_tool": {
        "model": MODEL,
        "max_tokens": 32,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "tools": [MESSAGES_TOOL],
        "tool_choice": {"type": "tool", "name": "get_weather"},
    },
    "tool_turn": {
        "model": MODEL,
        "max_tokens": 16,
        "system": "You are brief.",
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "12 C, rain",
                        "is_error": False,
                    }
                ],
            },
        ],
        "tools": [MESSAGES_TOOL],
    },
    "parts": {
        "model": MODEL,
        "max_tokens": 8,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}],
    },
    "image": {
        "model": MODEL,
        "max_tokens": 8,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What colour is this?"},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": PIXEL.partition("base64,")[2],
                        },
                    },
                ],
            }
        ],
    },
    "thinking": {
        "model": MODEL,
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [USER],
    },
}
RESPONSES_BASES: dict[str, dict[str, Any]] = {
    "plain": {"model": MODEL, "input": "Say hi.", "max_output_tokens": 16, "user": "verifier"},
    "sampling": {
        "model": MODEL,
        "input": "Say hi.",
        "max_output_tokens": 16,
        "temperature": 0.7,
        "top_p": 0.9,
    },
    "logprobs": {
        "model": MODEL,
        "input": "Say hi.",
        "max_output_tokens": 16,
        "top_logprobs": 2,
        "include": ["message.output_text.logprobs"],
    },
    "stream": {"model": MODEL, "input": "Say hi.", "max_output_tokens": 16, "stream": True},
    "tools": {
        "model": MODEL,
        "input": "Weather in Oslo?",
        "max_output_tokens": 32,
        "tools": [RESPONSES_TOOL],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    },
    "named_tool": {
        "model": MODEL,
        "input": "Weather in Oslo?",
        "max_output_tokens": 32,
        "tools": [RESPONSES_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
    },
    "tool_turn": {
        "model": MODEL,
        "instructions": "You are brief.",
        "input": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "12 C, rain"},
        ],
        "max_output_tokens": 16,
        "tools": [RESPONSES_TOOL],
    },
    "parts": {
        "model": MODEL,
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Say hi."}]},
        ],
        "max_output_tokens": 16,
    },
    "image": {
        "model": MODEL,
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What colour is this?"},
                    {"type": "input_image", "image_url": PIXEL, "detail": "low"},
                ],
            }
        ],
        "max_output_tokens": 16,
    },
    "json_schema": {
        "model": MODEL,
        "input": "Answer with a JSON object.",
        "max_output_tokens": 16,
        "text": {
            "format": {
                "type": "json_schema",
                "name": "answer",
                "description": "One field.",
                "schema": ANSWER_SCHEMA,
                "strict": True,
            }
        },
    },
    "json_object": {
        "model": MODEL,
        "input": "Answer with a JSON object.",
        "max_output_tokens": 16,
        "text": {"format": {"type": "json_object"}},
    },
}
# Each API's valid requests, and the schema of its request body.
API_BASES = {"chat": BASES, "messages": MESSAGES_BASES, "responses": RESPONSES_BASES}
REQUEST_SCHEMAS = {
    "chat": "chat_request",
    "messages": "messages_request",
    "responses": "responses_request",
}
# The field of each API's request that holds the conversation.
CONVERSATION = {"chat": "messages", "messages": "messages", "responses": "input"}
# What a base needs of the endpoint beyond chat.
NEEDS = {"image": "vision"}
# Subtrees that are JSON Schemas of their own (a tool's parameters, a response schema): their
# insides are the model's contract with the caller, not the request's shape.
OPAQUE = ("parameters", "schema", "input_schema")


# The replacement that deletes a field.
ABSENT = object()


def _mutations(value: Any, in_object: bool) -> Iterator[tuple[str, Any]]:
    """(kind, replacement) for a field's value; ``missing`` is the :data:`ABSENT` marker."""
    if in_object:
        yield "missing", ABSENT
    yield "null", None
    other = {str: 42, bool: "true", int: "1", float: "0.5", list: {"0": 1}, dict: [1]}
    yield "wrong_type", other.get(type(value), "x")
    if isinstance(value, str):
        yield "empty", ""
        yield "unknown_value", "no-such-value"
        yield "bad_pattern", "not a name!"
        yield "oversize", "x" * 65
        if value.startswith(("http", "data:")):
            yield "non_http_url", "ftp://example.invalid/image.png"
            # A server that honoured it would hand its own files to the caller.
            yield "file_url", "file:///etc/hostname"
            yield "bad_data_url", "data:image/png;base64,@@@not base64"
            yield "not_image_data_url", "data:text/plain;base64,aGVsbG8="
            head, _, data = value.partition("base64,")
            urlsafe = data.replace("+", "-").replace("/", "_")
            if urlsafe != data:
                yield "urlsafe_base64", f"{head}base64,{urlsafe}"
    elif isinstance(value, list):
        yield "empty", []
        if value:
            yield "oversize", [copy.deepcopy(value[0]) for _ in range(129)]
    elif isinstance(value, dict):
        yield "empty", {}
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield "below_range", -3
        yield "above_range", 10**9
        if isinstance(value, int):
            yield "fraction", 1.5


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) below `value`, parents first; opaque subtrees not entered."""
    if path:
        yield path, value
    if path and path[-1] in OPAQUE:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def field_name(path: tuple[Any, ...]) -> str:
    """A path as a field of the schema: ``messages[].content[].image_url.url``."""
    text = ""
    for step in path:
        text += "[]" if isinstance(step, int) else f".{step}" if text else step
    return text


def _replaced(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    if value is ABSENT:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return changed


def rejected_by_schema(body: Any, api: str = "chat") -> str | None:
    """The complaint of `api`'s request schema about a body (its JSON path and message), or None."""
    error = _error(body, api)
    return None if error is None else f"{error.json_path}: {error.message}"


def _error(body: Any, api: str) -> Any:
    # The schema sees a model where the run fills one in (any non-empty string does).
    validator = resources.validator(REQUEST_SCHEMAS[api])
    return best_match(validator.iter_errors(with_model(body, "m")))


def narrowed(body: Any, sampling: Mapping[str, Mapping[str, Any]], keep: str | None) -> Any:
    """`body` within a profile's sampling limits and pins, but for its field `keep` (pure).

    The request schema is OpenAI's; a model's release may narrow it (a temperature pinned,
    a top_p capped). A bad request's other values, and an edge request's every value, are
    moved inside them (to the first pinned value, or the nearest bound), so that its one
    change stays all that is wrong with it, or nothing is.
    """
    if not isinstance(body, dict):
        return body
    changed = dict(body)
    for name, limit in sampling.items():
        value = changed.get(name)
        if name == keep or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        pinned = pinned_values(limit)
        if pinned:
            changed[name] = value if value in pinned else pinned[0]
        else:
            changed[name] = min(max(value, limit.get("min", value)), limit.get("max", value))
    return changed


def with_model(body: Any, model: str) -> Any:
    """`body` with `model` where the :data:`MODEL` placeholder is (a mutated model stays)."""
    if isinstance(body, dict) and body.get("model") == MODEL:
        return {**body, "model": model}
    return body


@functools.cache
def bad_requests(api: str = "chat") -> tuple[dict[str, Any], ...]:
    """Every bad request `api`'s bases and the mutations give, the schema-rejected ones only.

    Each is ``{"id", "field", "mutation", "base", "request" | "raw_body", "why", "expect"}``
    (and ``api`` for an API other than chat), in a fixed order; a field that several bases
    hold is mutated in the first base that holds it. Made once per process, and kept in the
    verifier's cache under a digest of this module and the schemas (validating every
    candidate takes a third of a second); not to be changed.
    """
    key = hashlib.sha256(
        Path(__file__).read_bytes() + resources.schemas_digest().encode() + api.encode()
    ).hexdigest()
    kept = cache.read(GENERATED, key)
    if kept is not None:
        return tuple(json.loads(kept))
    made = _made(api)
    cache.write(GENERATED, key, json.dumps(made, ensure_ascii=False).encode())
    return made


def _made(api: str) -> tuple[dict[str, Any], ...]:
    found: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    bases = API_BASES[api]
    for base_name, base in bases.items():
        for path, value in _paths(base):
            field = field_name(path)
            in_object = isinstance(path[-1], str)
            for kind, replacement in _mutations(value, in_object):
                if (field, kind) in seen:
                    continue
                body = _replaced(base, path, replacement)
                why = rejected_by_schema(body, api)
                if why is None:
                    continue
                seen.add((field, kind))
                found.append(
                    _case(base_name, field, kind, {"request": body, "path": list(path)}, why, api)
                )
    plain = bases["plain"]
    for kind, raw, why in _raw_mutations(plain, CONVERSATION[api]):
        found.append(_case("plain", "(body)", kind, {"raw_body": raw}, why, api))
    # Latin-1 bytes: the text is valid JSON, only its encoding is wrong.
    latin = {**plain, CONVERSATION[api]: [{"role": "user", "content": "Größe?"}]}
    encoded = {"raw_body": json.dumps(latin, ensure_ascii=False), "encoding": "latin-1"}
    why = "the body is Latin-1, where JSON must be UTF-8 (RFC 8259)"
    found.append(_case("plain", "(body)", "not_utf8", encoded, why, api))
    for base_name, path, kind, replacement, why, expect in _beyond_schema(api):
        body = {"request": _replaced(bases[base_name], path, replacement), "path": list(path)}
        found.append(_case(base_name, field_name(path), kind, body, why, api, expect))
    return tuple(found)


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {
            "type": "object",
            "properties": {"a": schema},
            "required": ["a"],
            "additionalProperties": False,
        }
    return schema


# JSON Schemas that are valid documents but hard or impossible to generate for: an endpoint may
# refuse them, or answer them, but within its time and without a server error.
PATHOLOGICAL: dict[str, tuple[dict[str, Any], str]] = {
    "recursive_schema": (
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "string"},
                        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
                    },
                    "required": ["value", "next"],
                    "additionalProperties": False,
                }
            },
            "$ref": "#/$defs/node",
        },
        "a schema that refers to itself (a linked list)",
    ),
    "deep_nesting": (_nested(100), "objects nested 100 deep"),
    "huge_enum": (
        {
            "type": "object",
            "properties": {"item": {"enum": [f"item-{i}" for i in range(10_000)]}},
            "required": ["item"],
            "additionalProperties": False,
        },
        "an enumeration of 10,000 values",
    ),
    "unsatisfiable_schema": (
        {
            "type": "object",
            "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 1}},
            "required": ["a"],
            "additionalProperties": False,
        },
        "no value satisfies it: a string of at least 3 and at most 1 characters",
    ),
}
# The mutations the request schema cannot see (the request is well-formed; what it asks is not).
BEYOND_SCHEMA = frozenset({"unreachable_url", "undecodable_image", *PATHOLOGICAL})
# Where each API's requests hold a JSON Schema of the caller's: a tool's parameters, a
# response's schema (Messages' structured output is not in every vendor's API: none here).
SCHEMA_PATHS: dict[str, dict[str, tuple[Any, ...]]] = {
    "chat": {
        "tools": ("tools", 0, "function", "parameters"),
        "json_schema": ("response_format", "json_schema", "schema"),
    },
    "messages": {"tools": ("tools", 0, "input_schema")},
    "responses": {
        "tools": ("tools", 0, "parameters"),
        "json_schema": ("text", "format", "schema"),
    },
}
UNREACHABLE = "https://image.invalid/pixel.png"
NOT_PNG = "data:image/png;base64,aGVsbG8gd29ybGQ="
# Where each API's image base holds its image, and that image unreachable or undecodable.
IMAGES: dict[str, tuple[tuple[Any, ...], Any, Any]] = {
    "chat": (("messages", 0, "content", 1, "image_url", "url"), UNREACHABLE, NOT_PNG),
    "messages": (
        ("messages", 0, "content", 1, "source"),
        {"type": "url", "url": UNREACHABLE},
        {"type": "base64", "media_type": "image/png", "data": NOT_PNG.partition("base64,")[2]},
    ),
    "responses": (("input", 0, "content", 1, "image_url"), UNREACHABLE, NOT_PNG),
}


def _beyond_schema(api: str) -> Iterator[tuple[str, tuple[Any, ...], str, Any, str, str]]:
    """(base, path, kind, replacement, why, expect): bad requests the request schema cannot see.

    Well-formed, but asking for what cannot be had: an image that cannot be fetched or
    decoded, a JSON Schema no answer can satisfy (``reject``); or pathological JSON Schemas
    an endpoint may refuse or answer (``bounded``: no server error, no hang).
    """
    url, unreachable, not_png = IMAGES[api]
    yield (
        "image",
        url,
        "unreachable_url",
        unreachable,
        "the host is under .invalid, which never resolves (RFC 6761)",
        "reject",
    )
    yield (
        "image",
        url,
        "undecodable_image",
        not_png,
        "the image's bytes are not an image",
        "reject",
    )
    for base, path in SCHEMA_PATHS[api].items():
        for kind, (pathological, why) in PATHOLOGICAL.items():
            # Messages' input_schema must say it is an object (its reference), beside any $ref.
            schema = {"type": "object", **pathological} if api == "messages" else pathological
            # A response no value satisfies cannot be given; a tool no call satisfies
            # can still be left uncalled.
            expect = (
                "reject" if kind == "unsatisfiable_schema" and base == "json_schema" else "bounded"
            )
            yield base, path, kind, schema, why, expect


def _raw_mutations(base: dict[str, Any], key: str) -> Iterator[tuple[str, str, str]]:
    text = json.dumps(base)
    yield "cut_short", text[: len(text) // 2], "the body ends in the middle of the JSON"
    # Two values for one key: JSON's RFC says names should be unique, and parsers disagree on
    # which one wins; the second is invalid, so no reading of the body is a valid request.
    doubled = text[:-1] + f', "{key}": 5}}'
    yield "duplicate_key", doubled, f"{key} is given twice, the second time as a number"
    nan = json.dumps({**base, "temperature": math.nan})
    yield "non_finite", nan, "temperature is NaN, which JSON has no syntax for"


def _case(
    base: str,
    field: str,
    kind: str,
    body: dict[str, Any],
    why: str,
    api: str = "chat",
    expect: str = "reject",
) -> dict[str, Any]:
    where = field.replace("[]", ".n")
    named = base if api == "chat" else f"{api}-{base}"
    slug = re.sub(r"[^a-z0-9]+", "-", f"{named}-{where}-{kind}".lower()).strip("-")
    case_id = f"negative-{slug}"[:100]
    return {
        "id": case_id,
        **({} if api == "chat" else {"api": api}),
        "field": field,
        "mutation": kind,
        "base": base,
        **body,
        "why": why,
        "expect": expect,
    }


# An enumeration as long as a real tool's can be, and property names beyond ASCII.
LARGE_ENUM = {
    "type": "object",
    "properties": {"item": {"enum": [f"item-{i}" for i in range(500)]}},
}
NON_ASCII = {
    "type": "object",
    "properties": {"größe": {"type": "string"}, "名前": {"type": "string"}},
}
# The longest tool name every API and the model contracts take (chat's and Responses' limit;
# Messages takes 128, the Kimi contract 64).
LONGEST_NAME = "n" * 64
# A system prompt of some 1,000 tokens.
LONG_SYSTEM = "Be brief. " * 400


def edge_requests(api: str = "chat") -> list[dict[str, Any]]:
    """Requests at `api`'s schema's boundaries that an endpoint must answer (each valid)."""
    edges = {"chat": _chat_edges, "messages": _messages_edges, "responses": _responses_edges}[api]
    return [
        _case(
            "edge",
            field,
            kind,
            {"request": body},
            "valid at the schema's boundary",
            api=api,
            expect="accept",
        )
        for field, kind, body in edges()
    ]


def _messages_edges() -> list[tuple[str, str, dict[str, Any]]]:
    """Messages' edge requests: chat's, in Messages' terms (its temperature tops at 1)."""

    def tool(**fields: Any) -> dict[str, Any]:
        return {**MESSAGES_BASES["tools"], "tools": [fields]}

    plain = MESSAGES_BASES["plain"]
    return [
        (
            "tools[].input_schema",
            "non_ascii_property",
            tool(name="lookup", description="Look a word up.", input_schema=NON_ASCII),
        ),
        (
            "tools[].description",
            "empty_description",
            tool(name="lookup", description="", input_schema={"type": "object"}),
        ),
        ("tools[].name", "longest_name", tool(name=LONGEST_NAME, input_schema={"type": "object"})),
        ("tools[].input_schema", "large_enum", tool(name="pick", input_schema=LARGE_ENUM)),
        ("stop_sequences", "four_stops", {**plain, "stop_sequences": ["a", "b", "c", "d"]}),
        ("temperature", "temperature_bounds", {**plain, "temperature": 1}),
        ("system", "long_system_prompt", {**plain, "system": LONG_SYSTEM}),
    ]


def _responses_edges() -> list[tuple[str, str, dict[str, Any]]]:
    """Responses' edge requests: chat's, in Responses' terms (it has no stop sequences)."""

    def tool(**fields: Any) -> dict[str, Any]:
        return {**RESPONSES_BASES["tools"], "tools": [{"type": "function", **fields}]}

    plain = RESPONSES_BASES["plain"]
    logprobs = RESPONSES_BASES["logprobs"]
    return [
        (
            "tools[].parameters",
            "non_ascii_property",
            tool(name="lookup", description="Look a word up.", parameters=NON_ASCII),
        ),
        ("tools[].description", "empty_description", tool(name="lookup", description="")),
        ("tools[].name", "longest_name", tool(name=LONGEST_NAME, parameters={"type": "object"})),
        ("tools[].parameters", "large_enum", tool(name="pick", parameters=LARGE_ENUM)),
        ("temperature", "temperature_bounds", {**plain, "temperature": 2}),
        ("top_logprobs", "top_logprobs_zero", {**logprobs, "top_logprobs": 0}),
        ("instructions", "long_system_prompt", {**plain, "instructions": LONG_SYSTEM}),
    ]


def _chat_edges() -> list[tuple[str, str, dict[str, Any]]]:
    """Chat's edge requests."""

    def tool(**function: Any) -> dict[str, Any]:
        return {**BASES["tools"], "tools": [{"type": "function", "function": function}]}

    plain = BASES["plain"]
    return [
        (
            "tools[].function.parameters",
            "non_ascii_property",
            tool(name="lookup", description="Look a word up.", parameters=NON_ASCII),
        ),
        ("tools[].function.description", "empty_description", tool(name="lookup", description="")),
        (
            "tools[].function.name",
            "longest_name",
            tool(name=LONGEST_NAME, parameters={"type": "object"}),
        ),
        ("tools[].function.parameters", "large_enum", tool(name="pick", parameters=LARGE_ENUM)),
        ("stop", "four_stops", {**plain, "stop": ["a", "b", "c", "d"]}),
        ("temperature", "temperature_bounds", {**plain, "temperature": 2}),
        ("top_logprobs", "top_logprobs_zero", {**plain, "logprobs": True, "top_logprobs": 0}),
        (
            "messages[].content",
            "long_system_prompt",
            {**plain, "messages": [{"role": "system", "content": LONG_SYSTEM}, USER]},
        ),
    ]


@functools.cache
def schema_fields(api: str = "chat") -> tuple[str, ...]:
    """Every field `api`'s request schema declares, as :func:`field_name` writes them."""
    found: set[str] = set()
    schema = resources.schema(REQUEST_SCHEMAS[api])

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            walk(_resolve(schema, node["$ref"]), path)
        for key, child in (node.get("properties") or {}).items():
            name = f"{path}.{key}" if path else key
            found.add(name)
            if key not in OPAQUE:
                walk(child, name)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        for keyword in ("anyOf", "oneOf", "allOf"):
            for branch in node.get(keyword) or []:
                walk(branch, path)
        for keyword in ("then", "else"):
            walk(node.get(keyword), path)

    walk(schema, "")
    return tuple(sorted(found))


def _resolve(schema: dict[str, Any], ref: str) -> Any:
    node: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def smaller(
    case: dict[str, Any], body: dict[str, Any], path: list[Any]
) -> Iterator[tuple[dict[str, Any], list[Any]]]:
    """Smaller requests than `body` that are bad for the same reason as `case` (pure).

    `body` is the case's request or a smaller one found before, `path` where its change is
    there. A part is a key of an object or an item of an array, never the change or what holds
    it, nor the token limit (:data:`KEPT`); a smaller request is kept when the change is still
    all that is wrong with it: the same schema complaint, and the request valid with the
    base's value put back, its tool results each answering an earlier call (for a change the
    schema cannot see, the request valid as it is). In the order most worth sending, as delta
    debugging does: every part that can go, gone (in one pass from the last part to the
    first); then each half of the parts that can go one by one; then `body` less each of
    those parts.
    """
    keeps = _Keeps(case, body, path)
    singles = [
        part
        for part, _ in _paths(body)
        if not _holds(part, path) and keeps(*_without(body, path, [part]))
    ]
    least, where = body, path
    for part in reversed(singles):
        candidate, moved = _without(least, where, [part])
        if keeps(candidate, moved):
            least, where = candidate, moved
    half = len(singles) // 2
    groups = [singles[:half], singles[half:]] if half else []
    offered: list[dict[str, Any]] = [body]
    if least not in offered:
        offered.append(least)
        yield least, where
    for group in [*groups, *([part] for part in singles)]:
        candidate, moved = _without(body, path, group)
        if candidate not in offered and keeps(candidate, moved):
            offered.append(candidate)
            yield candidate, moved


# Never taken out: without its token limit, a smaller request asks for more work, not less
# (a real model then writes until its context ends).
KEPT = frozenset({("max_tokens",), ("max_completion_tokens",), ("max_output_tokens",)})


def _holds(part: tuple[Any, ...], path: list[Any]) -> bool:
    return part in KEPT or list(part) == path[: len(part)]


def _without(
    body: dict[str, Any], path: list[Any], parts: list[tuple[Any, ...]]
) -> tuple[dict[str, Any], list[Any]]:
    """`body` less `parts` (given parents first), and where the change at `path` is then."""
    for part in reversed(parts):
        if _at(body, list(part)) is not ABSENT:
            body, path = _replaced(body, part, ABSENT), _moved(path, part)
    return body, path


class _Keeps:
    """Whether a smaller request is still bad only by `case`'s change (see :func:`smaller`)."""

    def __init__(self, case: dict[str, Any], body: dict[str, Any], path: list[Any]) -> None:
        self.api = case.get("api", "chat")
        self.original = _at(API_BASES[self.api][case["base"]], case["path"])
        self.beyond = case["mutation"] in BEYOND_SCHEMA
        where, self.said = _complaint(body, self.api) or ([], "")
        # The complaint is at the change or at what holds it (a missing key's object).
        self.depth = len(where) if where == path[: len(where)] else None

    def __call__(self, candidate: dict[str, Any], moved: list[Any]) -> bool:
        api = self.api
        if self.beyond:
            return rejected_by_schema(candidate, api) is None and _answers_calls(candidate, api)
        if _complaint(candidate, api) != (moved[: self.depth], self.said) or self.depth is None:
            return False
        restored = _replaced(candidate, tuple(moved), self.original)
        return rejected_by_schema(restored, api) is None and _answers_calls(restored, api)


def _answers_calls(body: dict[str, Any], api: str = "chat") -> bool:
    """Every tool result answers a call made before it (each API's rule).

    Chat: a tool message's ``tool_call_id``, an earlier assistant message's call; Messages:
    a ``tool_result`` block's ``tool_use_id``, an earlier ``tool_use`` block's; Responses: a
    ``function_call_output`` item's ``call_id``, an earlier ``function_call`` item's.
    """
    called: set[Any] = set()
    for item in body.get(CONVERSATION[api]) or []:
        if not isinstance(item, dict):
            continue
        for made, answered in _calls(item, api):
            if answered:
                if made not in called:
                    return False
            else:
                called.add(made)
    return True


def _calls(item: dict[str, Any], api: str) -> Iterator[tuple[Any, bool]]:
    """(id, is an answer) for each call an item of the conversation makes or answers."""
    if api == "chat":
        for call in item.get("tool_calls") or []:
            if isinstance(call, dict):
                yield call.get("id"), False
        if item.get("role") == "tool":
            yield item.get("tool_call_id"), True
    elif api == "messages":
        blocks = item.get("content")
        for block in blocks if isinstance(blocks, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield block.get("id"), False
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                yield block.get("tool_use_id"), True
    elif item.get("type") in ("function_call", "function_call_output"):
        yield item.get("call_id"), item["type"] == "function_call_output"


def _complaint(body: Any, api: str = "chat") -> tuple[list[Any], str] | None:
    """Where `api`'s schema's complaint about `body` is, and what it says; None for none."""
    error = _error(body, api)
    return None if error is None else (list(error.absolute_path), error.message)


def _at(body: Any, path: list[Any]) -> Any:
    """The value at `path` in `body`, or :data:`ABSENT`."""
    node = body
    for step in path:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return ABSENT
    return node


def _moved(path: list[Any], deleted: tuple[Any, ...]) -> list[Any]:
    """`path` after the array item at `deleted` is taken out before it (else unchanged)."""
    depth = len(deleted) - 1
    index = deleted[-1]
    if (
        isinstance(index, int)
        and len(path) > depth
        and list(deleted[:-1]) == path[:depth]
        and isinstance(path[depth], int)
        and index < path[depth]
    ):
        return [*path[:depth], path[depth] - 1, *path[depth + 1 :]]
    return path


def every_case(api: str = "chat") -> list[dict[str, Any]]:
    """`api`'s bad requests and edge requests, in their fixed order."""
    return [*bad_requests(api), *edge_requests(api)]


def default_count(api: str = "chat") -> int:
    """``--negative``'s default: one case per field that has any, so every run covers them all."""
    return len({case["field"] for case in every_case(api)})


def chosen(count: int, seed: int, api: str = "chat") -> list[dict[str, Any]]:
    """`count` of `api`'s bad and edge requests, spread over the fields.

    Round-robin over the fields, each field's own cases and the fields' order shuffled by
    `seed`: any `count` covers as many fields as it can, and the same seed the same cases.
    """
    rng = random.Random(seed)
    by_field: dict[str, list[dict[str, Any]]] = {}
    for case in every_case(api):
        by_field.setdefault(case["field"], []).append(case)
    queues = []
    for field in sorted(by_field):
        cases = by_field[field]
        rng.shuffle(cases)
        queues.append(cases)
    rng.shuffle(queues)
    picked: list[dict[str, Any]] = []
    while len(picked) < count and any(queues):
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(queue.pop())
    return picked


def negative_cases(
    count: int, seed: int, apis: tuple[str, ...] = ("chat",)
) -> tuple[list[Case], str]:
    """`count` generated wire cases (``check: generated``) per API and their sha256."""
    cases = []
    picked = [data for api in apis for data in chosen(count, seed, api)]
    for number, data in enumerate(picked, start=1):
        entry = {**data, "check": "generated"}
        if data["base"] in NEEDS:
            entry["needs"] = NEEDS[data["base"]]
        cases.append(Case("wire", data["id"], entry, f"negative(seed={seed}):{number}"))
    digest = hashlib.sha256(json.dumps([c.data for c in cases], sort_keys=True).encode())
    return cases, digest.hexdigest()
