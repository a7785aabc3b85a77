"""What the simulated vendor rejects: requests and response formats a correct server refuses."""

from __future__ import annotations

import binascii
import dataclasses
import functools
import io
import json
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from PIL import Image

from .. import resources
from ..reference.dialect import DEFAULT_FIELD, Dialect
from ..reference.images import decode_data_url
from ..reference.profiles import Profile, pinned_values
from .defects import (
    DYNAMIC_TOOLS_IGNORED,
    DYNAMIC_TOOLS_REJECTED,
    EFFORT_REJECTED,
    MISSING_REASONING_ACCEPTED,
    NON_ASCII_PROPERTIES_REJECTED,
    REASONING_HISTORY_REJECTED,
    SAMPLING_LIMITS_IGNORED,
    SAMPLING_PINS_IGNORED,
    SAMPLING_PINS_REFUSED,
    THINKING_SWITCH_REJECTED,
    TOP_LOGPROBS_LIMIT_CUT,
    Defects,
)
from .distribution import MAX_TOP_LOGPROBS
from .rules import MODEL_ID

ROLES = ("system", "developer", "user", "assistant", "tool")
_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """What the simulated vendor accepts beyond the OpenAI basics.

    Args:
        sampling: the model's sampling limits (a profile's ``sampling`` setting).
        vision: the vendor takes images; False makes it a text-only endpoint.
        max_side: the largest image side it documents.
        model: the model id it serves (any other is refused with a 404).
        dialect: the model's reasoning dialect, or None.
        needs_reasoning: with thinking on, a tool-call turn sent back without its reasoning
            is refused (the lab's API does, by the contract).
        refuses_reasoning: an assistant message carrying reasoning is refused (a defect).
        dynamic_tools: tools declared in a system message are offered to the model (the
            contract documents them); False: they are dropped.
        refuses_dynamic_tools: a system message without content is refused (a defect).
        refuses_non_ascii_properties: a schema with a non-ASCII property name is refused (a
            defect).
        refuses_thinking_switch: a request carrying the dialect's thinking switch is refused
            (a defect).
        refuses_effort: a request setting the dialect's effort field is refused (a defect).
        cuts_top_logprobs: top_logprobs above the maximum is taken as the maximum (a defect).
    """

    sampling: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    vision: bool = True
    max_side: int = 4096
    model: str = MODEL_ID
    dialect: Dialect | None = None
    needs_reasoning: bool = False
    refuses_reasoning: bool = False
    dynamic_tools: bool = False
    refuses_dynamic_tools: bool = False
    refuses_non_ascii_properties: bool = False
    refuses_thinking_switch: bool = False
    refuses_effort: bool = False
    cuts_top_logprobs: bool = False

    @classmethod
    def of(cls, profile: Profile | None, defects: Defects, *, vision: bool, model: str) -> Policy:
        """The vendor's policy for a profile (or none), with its defects applied."""
        images = (profile.policies.images or {}) if profile else {}
        dialect = profile.dialect if profile else None
        return cls(
            sampling=sampling_enforced(profile, defects),
            vision=vision,
            max_side=int(images.get("max_side", 4096)),
            model=model,
            dialect=dialect,
            needs_reasoning=dialect is not None
            and dialect.tool_turns_need_reasoning
            and not defects.has(MISSING_REASONING_ACCEPTED),
            refuses_reasoning=defects.has(REASONING_HISTORY_REJECTED),
            dynamic_tools=bool((profile.policies.features or {}).get("dynamic_tools"))
            and not defects.has(DYNAMIC_TOOLS_IGNORED)
            if profile
            else False,
            refuses_dynamic_tools=defects.has(DYNAMIC_TOOLS_REJECTED),
            refuses_non_ascii_properties=defects.has(NON_ASCII_PROPERTIES_REJECTED),
            refuses_thinking_switch=defects.has(THINKING_SWITCH_REJECTED),
            refuses_effort=defects.has(EFFORT_REJECTED),
            cuts_top_logprobs=defects.has(TOP_LOGPROBS_LIMIT_CUT),
        )


def with_declared_tools(request: dict[str, Any], policy: Policy) -> dict[str, Any]:
    """The request as the model sees it: tools a system message declares offered with the rest.

    Where the contract documents such messages, their tools join the top-level ones and a
    system message left without content goes; otherwise the field is dropped, as a request
    model without it drops an unknown field.
    """
    messages = request.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and "tools" in m for m in messages
    ):
        return request
    declared = [t for m in messages if isinstance(m, dict) for t in m.get("tools") or []]
    kept = [
        {k: v for k, v in m.items() if k != "tools"}
        for m in messages
        if not (policy.dynamic_tools and m.get("role") == "system" and m.get("content") is None)
    ]
    tools = [*(request.get("tools") or []), *declared] if policy.dynamic_tools else None
    return {**request, "messages": kept, **({"tools": tools} if tools else {})}


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
    return _schema_problem(json.dumps(schema))


# The deepest schema the vendor compiles, as OpenAI's structured outputs limit nesting; deeper
# ones are refused before any recursion over them.
MAX_SCHEMA_DEPTH = 32
# Lower and upper bounds of one keyword pair; a pair whose lower bound exceeds its upper one
# admits no value.
_BOUNDS = (
    ("minLength", "maxLength"),
    ("minimum", "maximum"),
    ("minItems", "maxItems"),
    ("minProperties", "maxProperties"),
)


@functools.lru_cache(maxsize=1024)
def _schema_problem(schema_json: str) -> str | None:
    """Why a response_format's schema (as JSON) is unusable; checked once per schema."""
    where = "response_format.json_schema.schema"
    schema = json.loads(schema_json)
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        return f"{where} is nested deeper than {MAX_SCHEMA_DEPTH} levels"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"{where} is not a valid JSON Schema: {exc.message}"
    missing = _unresolved_refs(schema, schema)
    if missing:
        return f"{where} has unresolvable $ref {missing[0]!r}"
    impossible = _impossible(schema)
    if impossible:
        return f"{where} admits no value: {impossible}"
    return None


def _depth(value: Any) -> int:
    """How deep JSON `value` nests (iteratively: a deep one must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            stack += [(child, depth + 1) for child in node.values()]
        elif isinstance(node, list):
            stack += [(child, depth + 1) for child in node]
    return deepest


def _impossible(schema: Any) -> str | None:
    """A keyword pair or an empty enumeration anywhere in `schema` that no value satisfies."""
    if isinstance(schema, list):
        return next((found for item in schema if (found := _impossible(item))), None)
    if not isinstance(schema, dict):
        return None
    for low, high in _BOUNDS:
        lower, upper = schema.get(low), schema.get(high)
        if isinstance(lower, int | float) and isinstance(upper, int | float) and lower > upper:
            return f"{low} {lower} is above {high} {upper}"
    if schema.get("enum") == []:
        return "enum is empty"
    return next(
        (
            found
            for key, child in schema.items()
            if key not in ("const", "enum", "default", "examples") and (found := _impossible(child))
        ),
        None,
    )


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
        where = f"tools[{position}].function.parameters"
        if _depth(parameters) > MAX_SCHEMA_DEPTH:
            return f"{where} is nested deeper than {MAX_SCHEMA_DEPTH} levels"
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


def sampling_enforced(profile: Profile | None, defects: Defects) -> dict[str, Any]:
    """The profile's sampling limits and pins as the vendor enforces them, defects applied."""
    enforced: dict[str, Any] = {}
    for name, limit in ((profile.policies.sampling or {}) if profile else {}).items():
        kept: dict[str, Any] = dict(limit)
        if defects.has(SAMPLING_LIMITS_IGNORED):
            kept = {k: v for k, v in kept.items() if k not in ("min", "max")}
        if defects.has(SAMPLING_PINS_IGNORED):
            kept = {k: v for k, v in kept.items() if k not in ("fixed", "values")}
        if defects.has(SAMPLING_PINS_REFUSED):
            kept["off_policy"] = "reject"
        enforced[name] = kept
    return enforced


def _sampling_problem(request: Mapping[str, Any], limits: Mapping[str, Any]) -> str | None:
    for name, limit in limits.items():
        value = request.get(name)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        pinned = pinned_values(limit)
        # A coerced pin is accepted: the vendor uses the pinned value instead.
        if pinned and value not in pinned and limit.get("off_policy", "reject") == "reject":
            return (
                f"{name} is fixed at {' or '.join(map(str, pinned))} for this model, given {value}"
            )
        if value < limit.get("min", value) or value > limit.get("max", value):
            return f"{name} must be within [{limit.get('min')}, {limit.get('max')}], given {value}"
    return None


def image_problem(part: Mapping[str, Any], policy: Policy) -> str | None:
    """Why an image part must be refused, or None when the vendor can use it."""
    if not policy.vision:
        return "this model does not accept images"
    url = (
        (part.get("image_url") or {}).get("url")
        if isinstance(part.get("image_url"), dict)
        else None
    )
    if not isinstance(url, str):
        return "image_url.url is required"
    if not url.startswith("data:"):
        scheme = url.split(":", 1)[0]
        return f"image URLs with scheme {scheme!r} are not fetched; send a data: URL"
    try:
        _, data = decode_data_url(url)
    except (ValueError, binascii.Error):
        return "the image data URL is not valid base64"
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            image.verify()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return "the image cannot be decoded"
    if width < 1 or height < 1:
        return "the image has no pixels"
    if max(width, height) > policy.max_side:
        return f"the image is {width}x{height}; the largest side allowed is {policy.max_side}"
    return None


def _history_problem(request: Mapping[str, Any], policy: Policy) -> Rejection | None:
    """Why past reasoning in the request's history must be refused, or None.

    A tool-call turn without its reasoning is refused with the code ``missing_reasoning``,
    which the vendor's defects may answer otherwise.
    """
    field = policy.dialect.history_field if policy.dialect else DEFAULT_FIELD
    thinking = policy.dialect is not None and policy.dialect.mode(request) is True
    for position, message in enumerate(request["messages"]):
        if message.get("role") != "assistant":
            continue
        if policy.refuses_reasoning and field in message:
            return Rejection(
                400,
                f"messages[{position}].{field}: extra inputs are not permitted",
                None,
                "messages",
            )
        if (
            policy.needs_reasoning
            and thinking
            and message.get("tool_calls")
            and not message.get(field)
        ):
            return Rejection(
                400,
                f"thinking is enabled but {field} is missing in assistant tool call message "
                f"at index {position}",
                "missing_reasoning",
                "messages",
            )
    return None


def request_problem(request: Any, policy: Policy | None = None) -> Rejection | None:
    """Why a chat-completions request body must be rejected, or None when it is valid."""
    policy = policy or Policy()
    if not isinstance(request, dict):
        return Rejection(400, "the request body must be a JSON object")
    top = request.get("top_logprobs")
    if policy.cuts_top_logprobs and isinstance(top, int) and top > MAX_TOP_LOGPROBS:
        # Judged as if the maximum had been asked for; the answer lists at most that many.
        request = {**request, "top_logprobs": MAX_TOP_LOGPROBS}
    if request.get("model") != policy.model:
        return Rejection(
            404, f"The model {request.get('model')!r} does not exist", "model_not_found", "model"
        )
    problem = _messages_problem(request.get("messages"))
    if problem:
        return Rejection(400, problem, param="messages")
    for position, message in enumerate(request["messages"]):
        if (
            policy.refuses_dynamic_tools
            and message.get("content") is None
            and message["role"] == "system"
        ):
            return Rejection(400, f"messages[{position}].content: field required", param="messages")
    limits = _limits_problem(request)
    if limits:
        return limits
    problem = _tools_problem(request.get("tools"))
    if problem:
        return Rejection(400, problem, param="tools")
    if policy.refuses_non_ascii_properties and _non_ascii_property(request):
        return Rejection(400, "grammar compilation failed: a property name is not ASCII")
    problem = response_format_problem(request.get("response_format"))
    if problem:
        return Rejection(400, problem, "invalid_response_format", "response_format")
    problem = _sampling_problem(request, policy.sampling)
    if problem:
        return Rejection(400, problem, param=problem.split(" ", 1)[0])
    history = _history_problem(request, policy)
    if history:
        return history
    refused = _dialect_problem(request, policy)
    if refused:
        return refused
    image = _images_problem(request, policy)
    if image:
        return image
    return _contract_problem(request)


def _limits_problem(request: Mapping[str, Any]) -> Rejection | None:
    """Why the request's token counts, n, top_logprobs or stop must be refused, or None."""
    for key in ("max_tokens", "max_completion_tokens", "n", "top_logprobs"):
        value = request.get(key)
        low = 0 if key == "top_logprobs" else 1
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < low
        ):
            return Rejection(400, f"{key} must be an integer >= {low}, given {value!r}", param=key)
    top = request.get("top_logprobs")
    if isinstance(top, int) and top > MAX_TOP_LOGPROBS:
        return Rejection(
            400,
            f"top_logprobs must be at most {MAX_TOP_LOGPROBS}, given {top}",
            param="top_logprobs",
        )
    stop = request.get("stop")
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        return Rejection(400, "stop must be a string or an array of strings", param="stop")
    return None


def _images_problem(request: Mapping[str, Any], policy: Policy) -> Rejection | None:
    """Why the first image part the vendor cannot use must be refused, or None."""
    for message in request["messages"]:
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                problem = image_problem(part, policy)
                if problem:
                    return Rejection(400, problem, "invalid_image", "messages")
    return None


def _dialect_problem(request: Mapping[str, Any], policy: Policy) -> Rejection | None:
    """A reasoning field the vendor's defects refuse, as a request model without it does."""
    dialect = policy.dialect
    if dialect is None:
        return None
    refused: Mapping[str, Any] | None = None
    if policy.refuses_thinking_switch and dialect.switched(request):
        refused = dialect.off if dialect.mode(request) is False else dialect.on
    effort = dialect.effort
    if policy.refuses_effort and effort is not None and effort.level_of(request) is not None:
        refused = effort.fields(str(effort.level_of(request)))
    if not refused:
        return None
    field = next(iter(refused))
    return Rejection(400, f"{field}: extra inputs are not permitted", param=field)


def _declares_tools(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("role") == "system"
        and "tools" in message
        and message.get("content") is None
    )


def _non_ascii_property(value: Any) -> bool:
    """Whether a ``properties`` object anywhere in `value` has a non-ASCII name."""
    if isinstance(value, dict):
        names = value.get("properties")
        if isinstance(names, dict) and not all(name.isascii() for name in names):
            return True
        return any(_non_ascii_property(item) for item in value.values())
    if isinstance(value, list):
        return any(_non_ascii_property(item) for item in value)
    return False


def _contract_problem(request: Mapping[str, Any]) -> Rejection | None:
    """The request against the OpenAI request schema (``schemas/chat_request.schema.json``).

    After the checks above, which name the common mistakes in words of their own: this
    catches every other field of the wrong type, range or value. A system message that
    declares tools needs no content: Kimi K3's extension of the OpenAI messages, whether or not
    this vendor then offers those tools to the model (``dynamic-tools-ignored``).
    """
    messages = [{**m, "content": ""} if _declares_tools(m) else m for m in request["messages"]]
    request = {**request, "messages": messages}
    error = best_match(resources.validator("chat_request").iter_errors(request))
    if error is None:
        return None
    param = str(error.absolute_path[0]) if error.absolute_path else None
    return Rejection(400, f"{error.json_path}: {error.message}", param=param)
