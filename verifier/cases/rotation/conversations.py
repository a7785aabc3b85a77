"""Twins of the families that probe a conversation as a whole: chat template, wire, reasoning."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from .names import (
    QUALIFIERS,
    Names,
    Node,
    rename_descriptions,
    rename_history,
    rename_schema,
    tool_names,
)
from .wording import around, wording


def chat_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A chat-template probe's twin: other words around every user turn, tools renamed.

    The same words go around every user turn of the probe and of its baseline, so a relative
    probe still differs from its baseline by what it probes; tools and the calls in the
    history (with ids that name their function) get other names, parameters too. The count
    expected is the profile's rendering of the twin, as for any probe.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    opening, closing = wording(rng)
    conversations = [twin, *([twin["baseline"]] if "baseline" in twin else [])]
    offered = [
        tool["function"]["name"]
        for conversation in conversations
        for tool in conversation.get("tools") or ()
        if isinstance(tool.get("function"), dict) and "name" in tool["function"]
    ]
    called = [
        call["function"]["name"]
        for conversation in conversations
        for message in conversation["messages"]
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    ]
    names = Names(
        tool_names([*offered, *called], rng), rng.choice(QUALIFIERS), camel=rng.random() < 0.5
    )
    for conversation in conversations:
        nodes: dict[str, Node] = {}
        for tool in conversation.get("tools") or ():
            function = tool.get("function")
            if not isinstance(function, dict) or "name" not in function:
                continue
            old = function["name"]
            function["parameters"], nodes[old] = rename_schema(function.get("parameters"), names)
            function["name"] = names.tools[old]
            rename_descriptions(function, names.tools)
        for message in conversation["messages"]:
            if message.get("role") == "user":
                message["content"] = around(message.get("content"), opening, closing)
            rename_history(message, names, nodes)
    return twin
