"""Secret rotations: a fresh twin of every case that can vary, derived from a secret.

``--rotate SECRET_ENV`` names an environment variable holding a secret. For each case of a
family that can vary (its family's ``rotate``), the secret derives a twin, its id the case's
with :data:`SUFFIX`: other tool names, parameter names and argument numbers, other words
around the prompt, another order of tools. The twin's expectation is derived with it, so it
is graded as exactly as the case. The same secret gives the same twins, so an auditor who
holds it can re-derive a run; the scorecard holds a commitment to the secret (an HMAC of a
fixed text under it), never the secret. Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..jsontext import first_json
from .corpus import Case

# A twin's id: its case's with this after it (before any ``[api]``); no case id has a "~".
SUFFIX = "~rotated"
# Shorter secrets could be found again from the commitment by trying them.
MIN_SECRET = 16
COMMITMENT = "hmac-sha256"
_COMMITTED = b"llm-endpoint-verifier rotation commitment v1"

# A family's variant of one case's data under `rng`, or None when it cannot vary.
Rotator = Callable[[Mapping[str, Any], random.Random], "dict[str, Any] | None"]


@dataclasses.dataclass(frozen=True, slots=True)
class Rotation:
    """The run's secret rotation: its twins, its seed and its commitment.

    Args:
        secret: the secret (never recorded).
        env: the environment variable it came from.
    """

    secret: bytes = dataclasses.field(repr=False)
    env: str = ""

    def _mac(self, *parts: str) -> bytes:
        return hmac.new(self.secret, "\0".join(parts).encode(), hashlib.sha256).digest()

    @property
    def commitment(self) -> str:
        """``hmac-sha256:HEX``: what the scorecard holds, checkable by whoever has the secret."""
        digest = hmac.new(self.secret, _COMMITTED, hashlib.sha256).hexdigest()
        return f"{COMMITMENT}:{digest}"

    @property
    def seed(self) -> int:
        """The seed the run sends when ``--seed`` is not given: not the fixed default."""
        return int.from_bytes(self._mac("seed")[:4], "big") >> 1

    def random(self, family: str, case_id: str) -> random.Random:
        """The generator of one case's twin: the same secret and case, the same twin."""
        return random.Random(int.from_bytes(self._mac("case", family, case_id), "big"))

    def twin(self, case: Case, rotate: Rotator) -> Case | None:
        """The case's rotated twin, or None when nothing in it can vary."""
        data = rotate(case.data, self.random(case.family, case.id))
        if data is None or data == case.data:
            return None
        return dataclasses.replace(
            case, id=f"{case.id}{SUFFIX}", data=data, source=f"{case.source} (rotated)"
        )

    def interleaved(self, cases: Sequence[Case], rotators: Mapping[str, Rotator]) -> list[Case]:
        """`cases` with their twins: each pair in an order of the secret's, pairs shuffled."""
        pairs: list[list[Case]] = []
        for case in cases:
            rotate = rotators.get(case.family)
            twin = self.twin(case, rotate) if rotate is not None else None
            pair = [case] if twin is None else [case, twin]
            self.random(case.family, f"{case.id}\0order").shuffle(pair)
            pairs.append(pair)
        random.Random(int.from_bytes(self._mac("order"), "big")).shuffle(pairs)
        return [case for pair in pairs for case in pair]


def from_environment(env: str, environ: Mapping[str, str]) -> Rotation:
    """The rotation whose secret the environment variable `env` holds.

    Raises:
        ConfigError: the variable is unset or empty, or the secret is too short.
    """
    secret = environ.get(env, "")
    if not secret:
        raise ConfigError(f"--rotate {env}: the environment variable {env} is not set")
    if len(secret) < MIN_SECRET:
        raise ConfigError(
            f"--rotate {env}: the secret is {len(secret)} characters; use at least "
            f"{MIN_SECRET} (openssl rand -hex 16), or its commitment could be reversed"
        )
    return Rotation(secret.encode(), env)


def is_twin(case_id: str) -> bool:
    """Whether an id (without its ``[api]``) is a rotated twin's."""
    return case_id.endswith(SUFFIX)


# The words around a prompt that change nothing it asks.
_OPENINGS = ("", "Hi! ", "Hello. ", "Quick question: ", "Please help: ", "Good morning! ")
_CLOSINGS = ("", " Thanks!", " Thank you.", " Cheers.", " Much appreciated.")
# What a parameter name becomes: a qualifier around it, in the case's letter case.
_QUALIFIERS = (("", "_value"), ("", "_arg"), ("in_", ""), ("the_", ""), ("", "_param"))
_TOOL_SUFFIXES = ("v2", "api", "svc", "tool", "fn", "op", "ext", "now")
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


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclasses.dataclass(frozen=True, slots=True)
class _Names:
    """One case's renaming: tools by old name, and how parameter names change."""

    tools: Mapping[str, str]
    qualifier: tuple[str, str]
    camel: bool

    def key(self, name: str) -> str:
        before, after = self.qualifier
        renamed = f"{before}{name}{after}"
        return _camel(renamed) if self.camel else renamed


# How one schema's property names change: old name -> (new name, its value's renaming).
_Tree = dict[str, "tuple[str, _Node]"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Node:
    """The renaming of one schema's values: its properties', and its items'."""

    properties: _Tree | None = None
    items: _Node | None = None


def _rename_schema(schema: Any, names: _Names) -> tuple[Any, _Node]:
    """The schema with its property names renamed, and the renaming of its values."""
    if not isinstance(schema, dict):
        return schema, _Node()
    out = dict(schema)
    items = None
    if isinstance(schema.get("items"), dict):
        out["items"], items = _rename_schema(schema["items"], names)
    properties = schema.get("properties")
    if not isinstance(properties, dict) or NAMES_ELSEWHERE & schema.keys():
        return out, _Node(items=items)
    tree: _Tree = {}
    renamed: dict[str, Any] = {}
    for name, sub in properties.items():
        new_sub, node = _rename_schema(sub, names)
        tree[name] = (names.key(name), node)
        renamed[names.key(name)] = new_sub
    if len(renamed) < len(properties):
        return out, _Node(items=items)
    out["properties"] = renamed
    if isinstance(schema.get("required"), list):
        out["required"] = [tree[n][0] if n in tree else n for n in schema["required"]]
    return out, _Node(tree, items)


def _rename_value(value: Any, node: _Node) -> Any:
    """A value of a schema renamed as its schema was."""
    if isinstance(value, dict) and node.properties is not None:
        return {
            node.properties[k][0] if k in node.properties else k: _rename_value(
                v, node.properties[k][1] if k in node.properties else _Node()
            )
            for k, v in value.items()
        }
    if isinstance(value, list) and node.items is not None:
        return [_rename_value(item, node.items) for item in value]
    return value


def _tool_names(names: Iterable[str], rng: random.Random) -> dict[str, str]:
    """New names for a case's tools, distinct, each unlike its old one."""
    camel = rng.random() < 0.5
    suffix = rng.choice(_TOOL_SUFFIXES)
    names = list(dict.fromkeys(names))
    new = {name: f"{_camel(name) if camel else name}_{suffix}"[:64] for name in names}
    if len(set(new.values())) < len(new):
        new = {name: f"{name}_{suffix}"[:64] for name in names}
    return new


def _last_user(messages: list[dict[str, Any]]) -> int | None:
    found = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    return found[-1] if found and isinstance(messages[found[-1]].get("content"), str) else None


def _wording(rng: random.Random) -> tuple[str, str]:
    """Other words to put around a prompt: an opening, a closing, not both empty."""
    opening, closing = rng.choice(_OPENINGS), rng.choice(_CLOSINGS)
    return opening, closing if opening or closing else _CLOSINGS[1]


def _reworded(text: str, rng: random.Random) -> str:
    """The text with other words around it (never the same text)."""
    opening, closing = _wording(rng)
    return f"{opening}{text}{closing}"


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
    the tools come in another order. Expected calls, the conversation's earlier calls, a named
    ``tool_choice`` and the descriptions that name a tool follow.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    names = _Names(
        _tool_names([t["function"]["name"] for t in twin["tools"]], rng),
        rng.choice(_QUALIFIERS),
        camel=rng.random() < 0.5,
    )
    index = _last_user(twin["messages"])
    if index is not None:
        _renumbered(twin, index, rng)
        twin["messages"][index]["content"] = _reworded(twin["messages"][index]["content"], rng)
    nodes: dict[str, _Node] = {}
    for tool in twin["tools"]:
        function = tool["function"]
        function["parameters"], nodes[function["name"]] = _rename_schema(
            function["parameters"], names
        )
    for call in (twin.get("expected") or {}).get("calls") or []:
        node = nodes.get(call["name"], _Node())
        call["arguments"] = {
            _key(node, k): [_rename_value(v, _child(node, k)) for v in alternatives]
            for k, alternatives in call["arguments"].items()
        }
        call["name"] = names.tools.get(call["name"], call["name"])
    for message in twin["messages"]:
        _rename_history(message, names, nodes)
    for tool in twin["tools"]:
        function = tool["function"]
        function["name"] = names.tools[function["name"]]
        _renamed_descriptions(function, names.tools)
    choice = twin.get("tool_choice")
    if isinstance(choice, dict):
        choice["function"]["name"] = names.tools.get(
            choice["function"]["name"], choice["function"]["name"]
        )
    rng.shuffle(twin["tools"])
    return twin


def _key(node: _Node, name: str) -> str:
    return node.properties[name][0] if node.properties and name in node.properties else name


def _child(node: _Node, name: str) -> _Node:
    return node.properties[name][1] if node.properties and name in node.properties else _Node()


def _rename_history(message: dict[str, Any], names: _Names, nodes: Mapping[str, _Node]) -> None:
    """An earlier turn's calls (and a tool result's name) under the new names."""
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or function.get("name") not in names.tools:
            continue
        old = function["name"]
        function["name"] = names.tools[old]
        if isinstance(call.get("id"), str):
            call["id"] = _id_renamed(call["id"], old, names.tools[old])
        try:
            arguments = json.loads(function.get("arguments", ""))
        except (TypeError, json.JSONDecodeError):
            continue
        function["arguments"] = json.dumps(
            _rename_value(arguments, nodes.get(old, _Node())), ensure_ascii=False
        )
    if message.get("role") == "tool" and message.get("name") in names.tools:
        message["name"] = names.tools[message["name"]]
    if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
        for old, new in names.tools.items():
            message["tool_call_id"] = _id_renamed(message["tool_call_id"], old, new)


def _id_renamed(call_id: str, old: str, new: str) -> str:
    """A call id that names its function (Kimi's ``functions.NAME:IDX``) naming it anew."""
    return re.sub(rf"^functions\.{re.escape(old)}:", f"functions.{new}:", call_id)


def _renamed_descriptions(schema: Any, tools: Mapping[str, str]) -> None:
    """Descriptions anywhere in a tool that name a tool, naming it anew."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                for old, new in tools.items():
                    value = re.sub(rf"\b{re.escape(old)}\b", new, value)
                schema[key] = value
            else:
                _renamed_descriptions(value, tools)
    elif isinstance(schema, list):
        for item in schema:
            _renamed_descriptions(item, tools)


def structured_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A structured-output case's twin: property names renamed, enums reordered, reworded.

    A JSON Schema's property names change (in schemas that name properties only in
    ``properties`` and ``required``), with the JSON the prompt spells out, so the answer it
    asks for is the same answer in the new names; a json_object case's spelled-out keys change
    alike. Enumerations come in another order, the schema has another name, and the last user
    message gets other words around it. A malformed format stays as written: its fault is the
    case.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    names = _Names({}, rng.choice(_QUALIFIERS), camel=rng.random() < 0.5)
    index = _last_user(twin["messages"])
    response_format = twin["response_format"]
    spec = response_format.get("json_schema")
    malformed = twin.get("kind") == "malformed"
    spelled = _spelled_json(twin["messages"][index]["content"]) if index is not None else None
    node: _Node | None = None
    if not malformed and response_format.get("type") == "json_schema" and isinstance(spec, dict):
        schema, node = _rename_schema(spec.get("schema"), names)
        if spelled is not None and spelled[2] is None:
            # The prompt's JSON could not follow the new names: the schema keeps its own.
            schema, node = spec.get("schema"), None
        spec["schema"] = _shuffled_enums(schema, rng)
        spec["name"] = f"{spec['name']}_{rng.choice(_TOOL_SUFFIXES)}"[:64]
    elif not malformed and spelled is not None and isinstance(spelled[2], dict):
        node = _value_node(spelled[2], names)
    if index is not None:
        text = twin["messages"][index]["content"]
        if spelled is not None and node is not None and spelled[2] is not None:
            start, end, value = spelled
            renamed = json.dumps(_rename_value(value, node), ensure_ascii=False)
            before = _prose_renamed(text[:start], node)
            text = before + renamed + _prose_renamed(text[end:], node)
        twin["messages"][index]["content"] = _reworded(text, rng)
    return twin


def _value_node(value: Any, names: _Names) -> _Node:
    """The renaming of every key of a JSON value (a list's objects share one)."""
    if isinstance(value, dict):
        return _Node({key: (names.key(key), _value_node(v, names)) for key, v in value.items()})
    if isinstance(value, list):
        merged: _Tree = {}
        for item in value:
            merged.update(_value_node(item, names).properties or {})
        return _Node(items=_Node(merged))
    return _Node()


def _prose_renamed(text: str, node: _Node) -> str:
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


def chat_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """A chat-template probe's twin: other words around every user turn, tools renamed.

    The same words go around every user turn of the probe and of its baseline, so a relative
    probe still differs from its baseline by what it probes; tools and the calls in the
    history (with ids that name their function) get other names, parameters too. The count
    expected is the profile's rendering of the twin, as for any probe.
    """
    twin: dict[str, Any] = json.loads(json.dumps(data))
    opening, closing = _wording(rng)
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
    names = _Names(
        _tool_names([*offered, *called], rng), rng.choice(_QUALIFIERS), camel=rng.random() < 0.5
    )
    for conversation in conversations:
        nodes: dict[str, _Node] = {}
        for tool in conversation.get("tools") or ():
            function = tool.get("function")
            if not isinstance(function, dict) or "name" not in function:
                continue
            old = function["name"]
            function["parameters"], nodes[old] = _rename_schema(function.get("parameters"), names)
            function["name"] = names.tools[old]
            _renamed_descriptions(function, names.tools)
        for message in conversation["messages"]:
            if message.get("role") == "user":
                message["content"] = _around(message.get("content"), opening, closing)
            _rename_history(message, names, nodes)
    return twin


def _around(content: Any, opening: str, closing: str) -> Any:
    """A message's content with words around it: a text, or its first and last text parts."""
    if isinstance(content, str):
        return f"{opening}{content}{closing}"
    if not isinstance(content, list):
        return content
    texts = [i for i, part in enumerate(content) if isinstance(part, dict) and "text" in part]
    if texts:
        first, last = texts[0], texts[-1]
        content[first] = {**content[first], "text": opening + content[first]["text"]}
        content[last] = {**content[last], "text": content[last]["text"] + closing}
    return content


# A digit's words, as the vision family's expectations spell them.
_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def vision_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A vision semantic case's twin: other colours and digits drawn, expectations with them.

    Colours are exchanged among the colours the corpus draws, digits among the ten, each by
    one permutation for the case, so images that were alike stay alike and those that
    differed still differ; the question gets other words around it. Only the cases that
    expect an answer vary (semantic, stale cache, transport): the others' answers are not
    graded.
    """
    if "expect" not in data:
        return None
    twin: dict[str, Any] = json.loads(json.dumps(data))
    palette = sorted({image["color"] for image in twin["images"] if "color" in image} | _COLOURS)
    colours = dict(zip(palette, _deranged(palette, rng), strict=True))
    digits = dict(zip(range(10), _deranged(list(range(10)), rng), strict=True))
    for position, image in enumerate(twin["images"]):
        if "color" in image:
            image["color"] = colours[image["color"]]
            twin["expect"][position] = [image["color"]]
        if "digit" in image:
            image["digit"] = digits[image["digit"]]
            twin["expect"][position] = [str(image["digit"]), _DIGITS[image["digit"]]]
    twin["question"] = _reworded(twin["question"], rng)
    return twin


# The colours the vision corpus draws (each one a word the expectations use).
_COLOURS = frozenset({"red", "green", "blue", "yellow", "purple", "orange"})


def _deranged(values: list[Any], rng: random.Random) -> list[Any]:
    """`values` in an order where none keeps its place."""
    while True:
        shuffled = list(values)
        rng.shuffle(shuffled)
        if all(a != b for a, b in zip(values, shuffled, strict=True)):
            return shuffled


def tokenizer_case(data: Mapping[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """A tokenizer text's twin: its ASCII digits drawn anew, each run as long as it was.

    A run keeps its length and a leading zero (the pre-tokeniser splits digits by position
    and length, so the twin tests what the case tests); the expected ids are the profile's
    for the twin's text, as for any case. Digits inside special-token markup
    (``<|reserved_token_163700|>``) stay: they name the token the case spells. A text
    without another digit does not vary: its characters are what it tests.
    """
    text = data["text"]

    def drawn(match: re.Match[str]) -> str:
        run = match.group()
        first = "0" if run[0] == "0" else rng.choice("123456789")
        return first + "".join(rng.choice("0123456789") for _ in run[1:])

    pieces = re.split(r"(<\|[^|]*\|>)", text)
    for _ in range(8):
        new = "".join(
            piece if n % 2 else re.sub(r"[0-9]+", drawn, piece) for n, piece in enumerate(pieces)
        )
        if new != text:
            return {**json.loads(json.dumps(data)), "text": new}
    return None
