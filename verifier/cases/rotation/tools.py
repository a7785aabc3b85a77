"""A tool-calling case's twin."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from typing import Any

from .names import (
    QUALIFIERS,
    Names,
    Node,
    child_node,
    rename_descriptions,
    rename_history,
    rename_schema,
    rename_value,
    renamed_key,
    tool_names,
)
from .wording import instructions, last_user, reword_instructions, reworded


def _renumbered(data: dict[str, Any], index: int, rng: random.Random) -> None:
    """Each whole number the prompt states once and only free arguments take, moved.

    A free argument's schema is a number with no upper bound, enum, const or step of its own.
    The number moves in the prompt and in every expected alternative equal to it; one that the
    rest of the conversation states too (an earlier call, a tool's result) stays.
    """
    text = data["messages"][index]["content"]
    rest = json.dumps(data["messages"][:index] + data["messages"][index + 1 :])
    calls = (data.get("expected") or {}).get("calls") or []
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in data["tools"]}
    free: dict[int, bool] = {}
    for call in calls:
        properties = (schemas.get(call["name"]) or {}).get("properties") or {}
        for key, alternatives in call["arguments"].items():
            for value in alternatives:
                if _whole(value):
                    free[value] = free.get(value, True) and _unbounded(properties.get(key))
    for value, movable in sorted(free.items()):
        if not movable or len(re.findall(_spelled(value), text)) != 1:
            continue
        if re.search(_spelled(value), rest):
            continue
        new = value + rng.randint(1, 3)
        if new in free or re.search(_spelled(new), text):
            continue
        text = re.sub(_spelled(value), str(new), text)
        for call in calls:
            for key, alternatives in call["arguments"].items():
                call["arguments"][key] = [
                    new if _whole(v) and v == value else v for v in alternatives
                ]
    data["messages"][index]["content"] = text


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _spelled(value: int) -> str:
    """The number as a word of its own (not part of a date, time, decimal or name)."""
    return rf"(?<![\w.,:/-]){value}(?![\w:/-]|[.,]\d)"


def _unbounded(schema: Any) -> bool:
    """Whether any larger whole number is as good for `schema` as the one given."""
    if not isinstance(schema, dict) or schema.get("type") not in ("integer", "number"):
        return False
    return not ({"enum", "const", "maximum", "exclusiveMaximum", "multipleOf"} & schema.keys())


def tool_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A tool-calling case's twin: tools renamed and reordered, the prompt reworded.

    Every tool gets another name; every parameter name another name (in schemas that name
    properties only in ``properties`` and ``required``); whole numbers the prompt states once
    and an expected argument takes move; the last user message gets other words around it;
    the tools come in another order; a system prompt is worded otherwise. Expected calls, the
    conversation's earlier calls, a named ``tool_choice`` and the descriptions that name a
    tool follow.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    names = Names(
        tool_names([t["function"]["name"] for t in twin["tools"]], rng),
        rng.choice(QUALIFIERS),
        camel=rng.random() < 0.5,
    )
    index = last_user(twin["messages"])
    if index is not None:
        _renumbered(twin, index, rng)
        twin["messages"][index]["content"] = reworded(twin["messages"][index]["content"], rng)
    nodes: dict[str, Node] = {}
    for tool in twin["tools"]:
        function = tool["function"]
        function["parameters"], nodes[function["name"]] = rename_schema(
            function["parameters"], names
        )
    for call in (twin.get("expected") or {}).get("calls") or []:
        node = nodes.get(call["name"], Node())
        call["arguments"] = {
            renamed_key(node, k): [rename_value(v, child_node(node, k)) for v in alternatives]
            for k, alternatives in call["arguments"].items()
        }
        call["name"] = names.tools.get(call["name"], call["name"])
    for message in twin["messages"]:
        rename_history(message, names, nodes)
    for tool in twin["tools"]:
        function = tool["function"]
        function["name"] = names.tools[function["name"]]
        rename_descriptions(function, names.tools)
    choice = twin.get("tool_choice")
    if isinstance(choice, dict):
        choice["function"]["name"] = names.tools.get(
            choice["function"]["name"], choice["function"]["name"]
        )
    rng.shuffle(twin["tools"])
    reword_instructions(twin["messages"], instructions(rng))
    return twin
