"""What the simulated vendor rejects: requests and response formats a correct server refuses."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from .model import MODEL_ID

ROLES = ("system", "developer", "user", "assistant", "tool")
_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclasses.dataclass(frozen=True, slots=True)
class Rejection:
    """Why a request is refused: the HTTP status, a message naming the field, an error code."""

    status: int
    message: str
    code: str | None = None
    param: str | None = None


def _unresolved_refs(schema: Any, root: Any) -> list[str]:
    """Local $refs in `schema` that point nowhere."""
    missing = []
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            node = root
            for part in ref[1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    missing.append(ref)
                    break
        for key, value in schema.items():
            if key not in ("const", "enum"):
                missing += _unresolved_refs(value, root)
    elif isinstance(schema, list):
        for item in schema:
            missing += _unresolved_refs(item, root)
    return missing


def response_format_problem(response_format: Any) -> str | None:
    """Why a response_format must be rejected with a 400, or None when it is usable."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        return "response_format must be an object"
    kind = response_format.get("type")
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return f"response_format.type {kind!r} is not one of text, json_object, json_schema"
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        return "response_format.json_schema must be an object"
    name = spec.get("name")
    if not isinstance(name, str) or not _FORMAT_NAME.fullmatch(name):
        return "response_format.json_schema.name must be 1-64 letters, digits, '_' or '-'"
    schema = spec.get("schema", {})
    if not isinstance(schema, dict | bool):
        return "response_format.json_schema.schema must be a JSON Schema object"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"response_format.json_schema.schema is not a valid JSON Schema: {exc.message}"
    missing = _unresolved_refs(schema, schema)
    if missing:
        return f"response_format.json_schema.schema has unresolvable $ref {missing[0]!r}"
    return None


def _tools_problem(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools must be an array"
    for position, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(function, dict)
        ):
            return f"tools[{position}] must be {{'type': 'function', 'function': {{...}}}}"
        if not isinstance(function.get("name"), str) or not function["name"]:
            return f"tools[{position}].function.name is required"
        parameters = function.get("parameters", {})
        if not isinstance(parameters, dict):
            return f"tools[{position}].function.parameters must be a JSON Schema object"
    return None


def _messages_problem(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    call_ids: set[str] = set()
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"messages[{position}].role must be one of {', '.join(ROLES)}"
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            return f"messages[{position}].content must be a string or an array of parts"
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                call_ids.add(call["id"])
        if message["role"] == "tool" and message.get("tool_call_id") not in call_ids:
            answered = message.get("tool_call_id")
            return (
                f"messages[{position}] answers tool_call_id {answered!r}, which no earlier call has"
            )
    return None


def request_problem(request: Any) -> Rejection | None:
    """Why a chat-completions request body must be rejected, or None when it is valid."""
    if not isinstance(request, dict):
        return Rejection(400, "the request body must be a JSON object")
    if request.get("model") != MODEL_ID:
        return Rejection(
            404, f"The model {request.get('model')!r} does not exist", "model_not_found", "model"
        )
    problem = _messages_problem(request.get("messages"))
    if problem:
        return Rejection(400, problem, param="messages")
    for key in ("max_tokens", "max_completion_tokens", "n", "top_logprobs"):
        value = request.get(key)
        low = 0 if key == "top_logprobs" else 1
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < low
        ):
            return Rejection(400, f"{key} must be an integer >= {low}, given {value!r}", param=key)
    stop = request.get("stop")
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        return Rejection(400, "stop must be a string or an array of strings", param="stop")
    problem = _tools_problem(request.get("tools"))
    if problem:
        return Rejection(400, problem, param="tools")
    problem = response_format_problem(request.get("response_format"))
    if problem:
        return Rejection(400, problem, "invalid_response_format", "response_format")
    return None
