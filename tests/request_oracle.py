"""An oracle for chat requests independent of ``schemas/chat_request.schema.json``.

The openai SDK's request types (``openai.types.chat.completion_create_params``) are generated
from OpenAI's API specification; pydantic validates TypedDicts. Three adaptations, none of
which changes what the types accept:

- ``Iterable[X]`` and ``SequenceNotStr[X]`` become ``list[X]``: on the wire they are JSON
  arrays, and pydantic validates an ``Iterable`` lazily (a string passes as one, its items are
  checked only when something iterates them).
- A union of TypedDicts that each fix one key to distinct literals (a message's ``role``, a
  part's or a tool's ``type``) is validated as a union discriminated by that key, so a
  complaint names the member the request chose and not every other one.
- The top-level type is the SDK's own overload: ``CompletionCreateParamsStreaming`` for a body
  with ``"stream": true``, ``CompletionCreateParamsNonStreaming`` otherwise.

Validation is strict and in JSON mode: the API takes JSON and refuses ``"1"`` for an integer
and ``"true"`` for a boolean (``Invalid type for 'max_tokens': expected an integer, but got a
string instead``), which pydantic's lax mode would coerce; a JSON integer is still a number.
Keys the types do not declare are ignored, as the request schema allows them: OpenAI's API
refuses them (``Unrecognized request argument supplied``), but a server may take its own
(``top_k``, ``chat_template_kwargs``), and a bad request is about the keys both declare.

Where the types say nothing the oracle says nothing: ranges, lengths and patterns (which the
specification states and a TypedDict cannot), and the fields typed ``object`` or
``Dict[str, object]`` (:func:`untyped_fields`).
"""

from __future__ import annotations

import collections.abc
import functools
import json
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

import typing_extensions as te
from openai.types.chat import completion_create_params as sdk
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

# The SDK's array types: JSON arrays on the wire.
ARRAYS = (collections.abc.Iterable, collections.abc.Sequence, list)
LITERALS = (typing.Literal, te.Literal)
# The discriminated unions' tags, which a complaint's location holds besides the body's keys.
TAGS: set[str] = set()


@dataclass(frozen=True)
class Complaint:
    """One thing the oracle refuses: where in the body (as its keys and indices), and why."""

    path: tuple[str | int, ...]
    kind: str
    message: str


class Unreadable(Exception):
    """pydantic's JSON reader refused the body before the types saw it (nesting too deep)."""


@functools.cache
def wire_type(tp: Any) -> Any:
    """`tp` as the JSON it stands for: arrays as lists, TypedDict unions discriminated."""
    origin = get_origin(tp)
    if te.is_typeddict(tp):
        return _typeddict(tp)
    if origin in (Union, types.UnionType):
        return _union(get_args(tp))
    if origin in ARRAYS:
        (item,) = get_args(tp)
        return list[wire_type(item)]
    if origin is dict:
        key, value = get_args(tp)
        return dict[wire_type(key), wire_type(value)]
    if origin is te.Annotated:
        inner, *metadata = get_args(tp)
        return te.Annotated[(wire_type(inner), *metadata)]
    if origin in LITERALS or origin is None:
        return tp
    raise TypeError(f"the oracle does not know the SDK type {tp!r}")


def _typeddict(tp: Any) -> Any:
    fields = {}
    for name, hint in te.get_type_hints(tp, include_extras=True).items():
        # pydantic's rule: required if listed so, or marked Required; NotRequired wins.
        required = name in tp.__required_keys__
        while get_origin(hint) in (te.Required, te.NotRequired):
            required = get_origin(hint) is te.Required
            (hint,) = get_args(hint)
        wrap = te.Required if required else te.NotRequired
        fields[name] = wrap[wire_type(hint)]
    return te.TypedDict(tp.__name__, fields, total=False)


def _union(members: tuple[Any, ...]) -> Any:
    converted = [wire_type(member) for member in members]
    records = [member for member in converted if te.is_typeddict(member)]
    others = [member for member in converted if not te.is_typeddict(member)]
    key = discriminator(records) if len(records) > 1 else None
    if key is None:
        return Union[tuple(converted)]  # noqa: UP007 (a tuple of types, built at run time)
    # Each member's tag is a string no body holds as a key (``type='function'``): a
    # complaint's location then tells the member from a key of the same name (a tool
    # call's ``function``).
    tags = {}
    for record in records:
        values = _literal_values(record.__annotations__[key])
        tag = f"{key}=" + "|".join(repr(value) for value in values)
        TAGS.add(tag)
        tags.update({value: tag for value in values})
    members = tuple(
        te.Annotated[record, Tag(tags[_literal_values(record.__annotations__[key])[0]])]
        for record in records
    )
    tagged = te.Annotated[Union[members], Discriminator(_tag_reader(key, tags))]  # noqa: UP007
    return Union[(tagged, *others)] if others else tagged  # noqa: UP007


def _tag_reader(key: str, tags: dict[Any, str]) -> Callable[[Any], str | None]:
    def tag(value: Any) -> str | None:
        """The member a value asks for by its `key` (an unknown one: a tag no member has)."""
        if not isinstance(value, dict) or key not in value:
            return None
        found = value[key]
        known = isinstance(found, str) and found in tags
        return tags[found] if known else f"{key}={found!r}"

    return tag


def discriminator(records: list[Any]) -> str | None:
    """The key every record requires as a literal, with no value shared by two of them."""
    keys = set.intersection(*(set(record.__required_keys__) for record in records))
    for key in sorted(keys):
        values = [_literal_values(record.__annotations__[key]) for record in records]
        flat = [value for found in values for value in found]
        if all(values) and len(flat) == len(set(flat)):
            return key
    return None


def _literal_values(hint: Any) -> tuple[Any, ...]:
    while get_origin(hint) in (te.Required, te.NotRequired):
        (hint,) = get_args(hint)
    return get_args(hint) if get_origin(hint) in LITERALS else ()


def top_type(body: Any) -> Any:
    """The SDK's overload for `body` (streaming or not), as :func:`wire_type` makes it."""
    streaming = isinstance(body, dict) and body.get("stream") is True
    return wire_type(
        sdk.CompletionCreateParamsStreaming if streaming else sdk.CompletionCreateParamsNonStreaming
    )


def complaints(body: Any) -> list[Complaint]:
    """What the SDK's types refuse in `body` (nothing: valid), each at a path of the body.

    Raises :class:`Unreadable` when pydantic's JSON reader cannot read the body at all.
    """
    try:
        _adapter(top_type(body)).validate_json(json.dumps(body), strict=True)
    except ValidationError as error:
        found = [_complaint(body, detail) for detail in error.errors()]
        if any(c.kind == "json_invalid" for c in found):
            raise Unreadable(found[0].message) from error
        # A complaint that another one goes deeper than is a union's other member saying the
        # value is not of its kind (``content`` is no string): the deeper one is the member
        # the value is of.
        return [c for c in found if not any(_below(other.path, c.path) for other in found)]
    return []


def _below(path: tuple[Any, ...], ancestor: tuple[Any, ...]) -> bool:
    return len(path) > len(ancestor) and path[: len(ancestor)] == ancestor


def _complaint(body: Any, detail: Any) -> Complaint:
    """pydantic's error as a path of the body: the steps that name no key or index of it
    (a union member's name such as ``str`` or ``list[...]``) are left out."""
    node, path = body, []
    loc = detail["loc"]
    for index, step in enumerate(loc):
        if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
            path.append(step)
        elif isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
            path.append(step)
        elif step in TAGS:
            continue
        elif detail["type"] == "missing" and index == len(loc) - 1:
            path.append(step)
    return Complaint(tuple(path), detail["type"], detail["msg"])


def names_field(found: list[Complaint], path: list[Any]) -> bool:
    """Whether every complaint is about the field at `path`: at it or inside it, or at the
    object that holds it (a missing key, a missing or unknown discriminator)."""
    at = tuple(path)
    return bool(found) and all(c.path[: len(at)] == at or c.path == at[:-1] for c in found)


def untyped_fields() -> dict[str, str]:
    """The request's fields whose SDK type says nothing of their value, by field name
    (``tools[].function.parameters``, as the generator writes them), with that type."""
    found: dict[str, str] = {}
    for field, hint in _fields(top_type({}), ""):
        if hint is object or (get_origin(hint) is dict and get_args(hint)[1] is object):
            found[field] = repr(hint).replace("typing.", "")
    return found


def sdk_fields() -> set[str]:
    """Every field the SDK's request types declare, streaming or not, as field names."""
    return {
        field
        for streaming in ({}, {"stream": True})
        for field, _ in _fields(top_type(streaming), "")
    }


def _fields(tp: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """(field name, type) for every key below `tp` (recursive types are not in the SDK)."""
    origin = get_origin(tp)
    if te.is_typeddict(tp):
        for name, hint in te.get_type_hints(tp, include_extras=True).items():
            while get_origin(hint) in (te.Required, te.NotRequired):
                (hint,) = get_args(hint)
            field = f"{prefix}.{name}" if prefix else name
            yield field, hint
            yield from _fields(hint, field)
    elif origin in (Union, types.UnionType, te.Annotated):
        for member in get_args(tp) if origin is not te.Annotated else get_args(tp)[:1]:
            yield from _fields(member, prefix)
    elif origin is list:
        yield from _fields(get_args(tp)[0], f"{prefix}[]")


def alternatives(body: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], str, Any]]:
    """(path, label, value): each other value the SDK's types offer where `body` has one.

    At a literal, every other literal of its type; at a member of a discriminated union (a
    message, a content part, a tool, a tool call, a tool choice, a response format), the
    smallest value of every other member (its required keys only). Each is to be put in
    place of the body's value: what the API's types accept there, one member at a time.
    """
    yield from _alternatives(top_type(body), body, ())


def _alternatives(
    tp: Any, value: Any, path: tuple[Any, ...]
) -> Iterator[tuple[tuple[Any, ...], str, Any]]:
    members = _members(tp)
    chosen = _chosen(members, value)
    records = [member for member in members if te.is_typeddict(member)]
    key = discriminator(records) if len(records) > 1 else None
    if path:
        for member in members:
            if member is chosen:
                continue
            if get_origin(member) in LITERALS:
                for literal in get_args(member):
                    if literal != value:
                        yield path, repr(literal), literal
            elif te.is_typeddict(member):
                tag = _literal_values(member.__annotations__[key])[0] if key else None
                yield path, f"{key}={tag!r}" if key else member.__name__, smallest(member)
        for literal in get_args(chosen) if get_origin(chosen) in LITERALS else ():
            if literal != value:
                yield path, repr(literal), literal
    if te.is_typeddict(chosen) and isinstance(value, dict):
        hints = te.get_type_hints(chosen, include_extras=True)
        for name, item in value.items():
            if name in hints:
                yield from _alternatives(_bare(hints[name]), item, (*path, name))
    elif get_origin(chosen) is list and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _alternatives(get_args(chosen)[0], item, (*path, index))


def _bare(hint: Any) -> Any:
    while get_origin(hint) in (te.Required, te.NotRequired):
        (hint,) = get_args(hint)
    return hint


def _members(tp: Any) -> list[Any]:
    """A type's alternatives, unions and discriminated unions flattened."""
    origin = get_origin(tp)
    if origin is te.Annotated:
        return _members(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return [leaf for member in get_args(tp) for leaf in _members(member)]
    return [tp]


def _chosen(members: list[Any], value: Any) -> Any:
    """The member `value` is valid for (the first, for a value several take)."""
    for member in members:
        try:
            _adapter(member).validate_json(json.dumps(value), strict=True)
        except ValidationError:
            continue
        return member
    raise ValueError(f"no member of {members!r} takes {value!r}")


@functools.cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def smallest(tp: Any) -> Any:
    """The smallest value of `tp` that its type takes: required keys only, one item a list."""
    tp = _bare(tp)
    origin = get_origin(tp)
    if te.is_typeddict(tp):
        hints = te.get_type_hints(tp, include_extras=True)
        return {key: smallest(hints[key]) for key in sorted(tp.__required_keys__)}
    if origin in LITERALS:
        return get_args(tp)[0]
    if origin in (Union, types.UnionType, te.Annotated):
        members = [m for m in _members(tp) if m is not type(None)]
        return smallest(members[0])
    if origin is list:
        return [smallest(get_args(tp)[0])]
    if origin is dict or tp is object:
        return {}
    return {str: "x", int: 1, float: 1.0, bool: True}[tp]
