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
from .wording import (
    around,
    instructions,
    last_user,
    reword_instructions,
    reworded,
    wording,
)


def chat_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A chat-template probe's twin: other words around every user turn, tools renamed.

    System prompts are worded otherwise, alike in the probe and its baseline.

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
    reword = instructions(rng)
    for conversation in conversations:
        reword_instructions(conversation["messages"], reword)
    return twin


def wire_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A wire case's twin: its request's last user text and its instructions worded otherwise.

    What the case checks (the answer's shape, a parameter's effect, a refusal) does not depend
    on the words; a request with no text to reword (a body that is not JSON, content that is
    not a text) does not vary, nor does a generated case: the generated set is drawn from the
    run's seed, which the secret gives.
    """
    request = data.get("request")
    if not isinstance(request, Mapping) or data.get("check") == "generated":
        return None
    twin: dict[str, Any] = json.loads(json.dumps(data))
    _reword_request(twin["request"], rng)
    return twin


def reasoning_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A reasoning case's twin: its prompts and its instructions worded otherwise.

    The last user message (or each of an effort case's prompts) gets other words around it; a
    system prompt another wording. Tools keep their names: an agent loop's results and calls
    are keyed by them.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    _reword_request(twin, rng)
    if isinstance(twin.get("prompts"), list):
        twin["prompts"] = [reworded(prompt, rng) for prompt in twin["prompts"]]
    return twin


def _reword_request(request: dict[str, Any], rng: random.Random) -> None:
    """A request's last user text reworded and its instructions (each API's field) too."""
    messages = request.get("messages")
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        index = last_user(messages)
        if index is not None:
            messages[index]["content"] = reworded(messages[index]["content"], rng)
    if isinstance(request.get("input"), str):
        request["input"] = reworded(request["input"], rng)
    reword = instructions(rng)
    if isinstance(messages, list):
        reword_instructions(messages, reword)
    for field in ("system", "instructions"):
        if isinstance(request.get(field), str):
            request[field] = reword(request[field])
