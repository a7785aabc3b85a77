"""What the simulated model "knows": the natural calls for the corpus's tool-calling prompts.

The simulated vendor is a test double, not a language model. For a prompt of
the packaged tool-calling corpus it answers with the case's own expected calls
(the first acceptable value of each argument), which is what a perfect model
would do; for any other prompt it has no natural call. A vendor told a rotation's secret
(``verifier simulate --rotate``) knows the rotated twins' calls too, as a model that
generalises would: the test double cannot generalise, so it is told. Contract cases (the
``tool_choice`` category) reuse the prompts of other cases, so their natural
answer is the sibling's: that is what makes an ignored ``tool_choice`` visible. The reasoning
corpus's agent loops state the calls a perfect model makes in order: the model makes the
next one after each tool result, and answers once they are all made.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..cases.corpus import load_corpus
from ..cases.rotation import Rotation, reasoning_case, tool_case


def request_key(
    messages: Sequence[Any], tools: Sequence[Mapping[str, Any]], *, parameters: bool = False
) -> str:
    """Identify a prompt by its messages and the names of the tools offered.

    With `parameters`, by their parameter names too: two rotated twins may word their prompt
    and name their tools alike and still name their parameters otherwise. (The published
    prompts are known by tool names alone: the reasoning corpus asks them with tools of its
    own.)
    """
    offered: list[Any] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        if not parameters:
            offered.append(function.get("name"))
            continue
        schema = function.get("parameters")
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        keys = sorted(properties) if isinstance(properties, Mapping) else []
        offered.append([function.get("name"), keys])
    return json.dumps([messages, offered], sort_keys=True, ensure_ascii=False)


def canonical_call(expected: Mapping[str, Any]) -> dict[str, Any]:
    """An expected call with each argument's first acceptable value (``""`` = left out)."""
    arguments = {k: v[0] for k, v in expected["arguments"].items() if v and v[0] != ""}
    return {"name": expected["name"], "arguments": arguments}


@functools.cache
def natural_calls_table(rotation: Rotation | None = None) -> dict[str, list[dict[str, Any]]]:
    """Natural calls by :func:`request_key`, from the cases that state them.

    With a `rotation`, its twins' instead, keyed with their parameter names.
    """
    table: dict[str, list[dict[str, Any]]] = {}
    for case in load_corpus(["tool_calling"]).cases:
        twin = rotation.twin(case, tool_case) if rotation is not None else None
        data = case.data if rotation is None else twin.data if twin is not None else None
        if data is None or "expected" not in data or data.get("tool_choice") == "none":
            continue
        key = request_key(data["messages"], data["tools"], parameters=rotation is not None)
        table.setdefault(key, [canonical_call(call) for call in data["expected"]["calls"]])
    return table


def natural_calls(
    request: Mapping[str, Any], rotation: Rotation | None = None
) -> list[dict[str, Any]]:
    """The calls the simulated model would make for `request` if it were free to choose.

    It knows the published cases' prompts, and a `rotation`'s twins' when told one.
    """
    messages, tools = request.get("messages", []), request.get("tools") or []
    found = natural_calls_table().get(request_key(messages, tools))
    if found is None and rotation is not None:
        found = natural_calls_table(rotation).get(request_key(messages, tools, parameters=True))
    return [dict(call) for call in found or []]


def _last_user_text(messages: Sequence[Any]) -> str | None:
    users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    return content if isinstance(content, str) else None


@functools.cache
def planned_calls_table(rotation: Rotation | None = None) -> dict[str, list[dict[str, Any]]]:
    """The calls of the reasoning cases that state them, by last user message and tools.

    With a `rotation`, its twins' instead (their prompts are worded otherwise).
    """
    table: dict[str, list[dict[str, Any]]] = {}
    for case in load_corpus(["reasoning"]).cases:
        twin = rotation.twin(case, reasoning_case) if rotation is not None else None
        data = case.data if rotation is None else twin.data if twin is not None else None
        if data is not None and "calls" in data:
            key = request_key([_last_user_text(data["messages"])], data.get("tools", []))
            table.setdefault(key, [dict(call) for call in data["calls"]])
    return table


def planned_calls(
    request: Mapping[str, Any], rotation: Rotation | None = None
) -> list[dict[str, Any]]:
    """The next call of a planned agent loop: one per tool result since the last user message.

    It knows the published loops' prompts, and a `rotation`'s twins' when told one.
    """
    messages = request.get("messages", [])
    key = request_key([_last_user_text(messages)], request.get("tools") or [])
    plan = planned_calls_table().get(key)
    if plan is None and rotation is not None:
        plan = planned_calls_table(rotation).get(key)
    if not plan:
        return []
    roles = [m.get("role") if isinstance(m, Mapping) else None for m in messages]
    after = roles[len(roles) - roles[::-1].index("user") :] if "user" in roles else roles
    done = after.count("tool")
    return [dict(plan[done])] if done < len(plan) else []
