"""Other names for tools and parameters, and the schemas, values and history that follow them."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Iterable, Mapping
from typing import Any

# What a parameter name becomes: a qualifier around it, in the case's letter case.
QUALIFIERS = (("", "_value"), ("", "_arg"), ("in_", ""), ("the_", ""), ("", "_param"))
TOOL_SUFFIXES = ("v2", "api", "svc", "tool", "fn", "op", "ext", "now")
# Schema keywords that name properties besides properties/required: their schema keeps its
# names (renaming would need each keyword's own rule).
NAMES_ELSEWHERE = frozenset(
    {
        "dependentRequired",
        "dependentSchemas",
        "propertyNames",
        "patternProperties",
        "if",
        "then",
        "else",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "$ref",
        "$defs",
        "unevaluatedProperties",
        "const",
        "enum",
        "default",
        "examples",
    }
)


def camel_case(name: str) -> str:
    """``snake_name`` as ``snakeName``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclasses.dataclass(frozen=True, slots=True)
class Names:
    """One case's renaming: tools by old name, and how parameter names change."""

    tools: Mapping[str, str]
    qualifier: tuple[str, str]
    camel: bool

    def key(self, name: str) -> str:
        """A parameter's new name."""
        before, after = self.qualifier
        renamed = f"{before}{name}{after}"
        return camel_case(renamed) if self.camel else renamed


# How one schema's property names change: old name -> (new name, its value's renaming).
Tree = dict[str, "tuple[str, Node]"]


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """The renaming of one schema's values: its properties', and its items'."""

    properties: Tree | None = None
    items: Node | None = None


def rename_schema(schema: Any, names: Names) -> tuple[Any, Node]:
    """The schema with its property names renamed, and the renaming of its values."""
    if not isinstance(schema, dict):
        return schema, Node()
    out = dict(schema)
    items = None
    if isinstance(schema.get("items"), dict):
        out["items"], items = rename_schema(schema["items"], names)
    properties = schema.get("properties")
    if not isinstance(properties, dict) or NAMES_ELSEWHERE & schema.keys():
        return out, Node(items=items)
    tree: Tree = {}
    renamed: dict[str, Any] = {}
    for name, sub in properties.items():
        new_sub, node = rename_schema(sub, names)
        tree[name] = (names.key(name), node)
        renamed[names.key(name)] = new_sub
    if len(renamed) < len(properties):
        return out, Node(items=items)
    out["properties"] = renamed
    if isinstance(schema.get("required"), list):
        out["required"] = [tree[n][0] if n in tree else n for n in schema["required"]]
    return out, Node(tree, items)


def rename_value(value: Any, node: Node) -> Any:
    """A value of a schema renamed as its schema was."""
    if isinstance(value, dict) and node.properties is not None:
        return {
            node.properties[k][0] if k in node.properties else k: rename_value(
                v, node.properties[k][1] if k in node.properties else Node()
            )
            for k, v in value.items()
        }
    if isinstance(value, list) and node.items is not None:
        return [rename_value(item, node.items) for item in value]
    return value


def tool_names(names: Iterable[str], rng: random.Random) -> dict[str, str]:
    """New names for a case's tools, distinct, each unlike its old one."""
    camel = rng.random() < 0.5
    suffix = rng.choice(TOOL_SUFFIXES)
    names = list(dict.fromkeys(names))
    new = {name: f"{camel_case(name) if camel else name}_{suffix}"[:64] for name in names}
    if len(set(new.values())) < len(new):
        new = {name: f"{name}_{suffix}"[:64] for name in names}
    return new


def renamed_key(node: Node, name: str) -> str:
    """A property's new name under `node` (its own where it is not renamed)."""
    return node.properties[name][0] if node.properties and name in node.properties else name


def child_node(node: Node, name: str) -> Node:
    """The renaming of a property's value under `node`."""
    return node.properties[name][1] if node.properties and name in node.properties else Node()


def rename_history(message: dict[str, Any], names: Names, nodes: Mapping[str, Node]) -> None:
    """An earlier turn's calls (and a tool result's name) under the new names."""
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or function.get("name") not in names.tools:
            continue
        old = function["name"]
        function["name"] = names.tools[old]
        if isinstance(call.get("id"), str):
            call["id"] = id_renamed(call["id"], old, names.tools[old])
        try:
            arguments = json.loads(function.get("arguments", ""))
        except (TypeError, json.JSONDecodeError):
            continue
        function["arguments"] = json.dumps(
            rename_value(arguments, nodes.get(old, Node())), ensure_ascii=False
        )
    if message.get("role") == "tool" and message.get("name") in names.tools:
        message["name"] = names.tools[message["name"]]
    if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
        for old, new in names.tools.items():
            message["tool_call_id"] = id_renamed(message["tool_call_id"], old, new)


def id_renamed(call_id: str, old: str, new: str) -> str:
    """A call id that names its function (Kimi's ``functions.NAME:IDX``) naming it anew."""
    return re.sub(rf"^functions\.{re.escape(old)}:", f"functions.{new}:", call_id)


def rename_descriptions(schema: Any, tools: Mapping[str, str]) -> None:
    """Descriptions anywhere in a tool that name a tool, naming it anew."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                for old, new in tools.items():
                    value = re.sub(rf"\b{re.escape(old)}\b", new, value)
                schema[key] = value
            else:
                rename_descriptions(value, tools)
    elif isinstance(schema, list):
        for item in schema:
            rename_descriptions(item, tools)
