"""A structured-output case's twin."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from typing import Any

from ...jsontext import first_json
from .names import QUALIFIERS, TOOL_SUFFIXES, Names, Node, Tree, rename_schema, rename_value
from .wording import instructions, last_user, reword_instructions, reworded


def structured_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A structured-output case's twin: property names renamed, enums reordered, reworded.

    A JSON Schema's property names change (in schemas that name properties only in
    ``properties`` and ``required``), with the JSON the prompt spells out, so the answer it
    asks for is the same answer in the new names; a json_object case's spelled-out keys change
    alike. Enumerations come in another order, the schema has another name, the last user
    message gets other words around it and the system prompt another wording. A malformed
    format stays as written: its fault is the case.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    names = Names({}, rng.choice(QUALIFIERS), camel=rng.random() < 0.5)
    index = last_user(twin["messages"])
    response_format = twin["response_format"]
    spec = response_format.get("json_schema")
    malformed = twin.get("kind") == "malformed"
    spelled = _spelled_json(twin["messages"][index]["content"]) if index is not None else None
    node: Node | None = None
    if not malformed and response_format.get("type") == "json_schema" and isinstance(spec, dict):
        schema, node = rename_schema(spec.get("schema"), names)
        if spelled is not None and spelled[2] is None:
            # The prompt's JSON could not follow the new names: the schema keeps its own.
            schema, node = spec.get("schema"), None
        spec["schema"] = _shuffled_enums(schema, rng)
        spec["name"] = f"{spec['name']}_{rng.choice(TOOL_SUFFIXES)}"[:64]
    elif not malformed and spelled is not None and isinstance(spelled[2], dict):
        node = _value_node(spelled[2], names)
    if index is not None:
        text = twin["messages"][index]["content"]
        if spelled is not None and node is not None and spelled[2] is not None:
            start, end, value = spelled
            renamed = json.dumps(rename_value(value, node), ensure_ascii=False)
            before = _prose_renamed(text[:start], node)
            text = before + renamed + _prose_renamed(text[end:], node)
        twin["messages"][index]["content"] = reworded(text, rng)
    reword_instructions(twin["messages"], instructions(rng))
    return twin


def _value_node(value: Any, names: Names) -> Node:
    """The renaming of every key of a JSON value (a list's objects share one)."""
    if isinstance(value, dict):
        return Node({key: (names.key(key), _value_node(v, names)) for key, v in value.items()})
    if isinstance(value, list):
        merged: Tree = {}
        for item in value:
            merged.update(_value_node(item, names).properties or {})
        return Node(items=Node(merged))
    return Node()


def _prose_renamed(text: str, node: Node) -> str:
    """Prose that names a property by its identifier (``deleted_at``), naming it anew.

    Only names with an underscore: a plain word (``city``) in prose is a word, not the key.
    """
    for old, (new, _) in (node.properties or {}).items():
        if "_" in old:
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


def _spelled_json(text: str) -> tuple[int, int, Any] | None:
    """Where the prompt spells out its JSON, the answer it asks for, and its value.

    The value is None where the text is not as json.dumps writes it: it cannot be rewritten
    in place.
    """
    found = first_json(text)
    if found is None:
        return None
    start, end, value = found
    same = json.dumps(value, ensure_ascii=False) == text[start:end]
    return start, end, value if same else None


def _shuffled_enums(schema: Any, rng: random.Random) -> Any:
    """The schema with each enumeration's values in another order."""
    if isinstance(schema, dict):
        out = {key: _shuffled_enums(value, rng) for key, value in schema.items()}
        if isinstance(schema.get("enum"), list) and len(schema["enum"]) > 1:
            values = list(schema["enum"])
            rng.shuffle(values)
            out["enum"] = values
        return out
    if isinstance(schema, list):
        return [_shuffled_enums(item, rng) for item in schema]
    return schema
