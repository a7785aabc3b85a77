"""The simulated vendor's "grammar engine": bend a natural answer until it fits a JSON Schema.

A real constrained decoder steers the model's natural answer into the schema.
:func:`conform` does the same deterministically: it keeps what already fits and
repairs what does not (truncates a list at maxItems, picks an enum value,
clamps a number, adds a required property). A keyword in `ignore` is not
enforced: that is how the defects "keyword accepted but silently not enforced"
are simulated.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator

MISSING: Any = object()

# A valid example per string format, used when a value must be made up.
FORMAT_EXAMPLES = {
    "date-time": "2024-01-02T03:04:05Z",
    "date": "2024-01-02",
    "time": "03:04:05Z",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
    "json-pointer": "/a",
    "regex": "a+",
}


def conform(
    value: Any, schema: Any, *, ignore: frozenset[str] = frozenset(), root: Any = None
) -> Any:
    """A value that satisfies `schema` (except the keywords in `ignore`), close to `value`.

    Args:
        value: the natural answer, or ``MISSING`` to make one up.
        schema: a JSON Schema (2020-12 keywords; local ``$ref`` only).
        ignore: keywords not enforced.
        root: the document local ``$ref`` resolve against (default: `schema`).
    """
    engine = _Engine(root if root is not None else schema, ignore)
    result = engine.fit(value, schema, depth=0)
    if not ignore and not _valid(result, schema):
        made_up = engine.fit(MISSING, schema, depth=0)
        if _valid(made_up, schema):
            return made_up
    return result


@functools.lru_cache(maxsize=1024)
def _validator(schema_text: str) -> Draft202012Validator:
    return Draft202012Validator(
        json.loads(schema_text), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def _valid(value: Any, schema: Any) -> bool:
    if value is MISSING:
        return False
    return _validator(json.dumps(schema, sort_keys=True)).is_valid(value)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: True is not 1, and 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _matches_type(value: Any, wanted: str) -> bool:
    actual = _type_of(value)
    return actual == wanted or (wanted == "number" and actual == "integer")


class _Engine:
    def __init__(self, root: Any, ignore: frozenset[str]) -> None:
        self.root = root
        self.ignore = ignore

    def on(self, keyword: str, schema: Mapping[str, Any]) -> bool:
        return keyword in schema and keyword not in self.ignore

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return {}
        node = self.root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def valid(self, value: Any, schema: Any) -> bool:
        if value is MISSING:
            return False
        wrapped = schema
        if isinstance(schema, dict) and "$defs" not in schema and isinstance(self.root, dict):
            wrapped = {**schema, "$defs": self.root.get("$defs", {})}
        return _valid(value, wrapped)

    def fit(self, value: Any, schema: Any, depth: int) -> Any:
        if schema is True or schema == {}:
            return None if value is MISSING else value
        if schema is False or not isinstance(schema, dict) or depth > 24:
            return None if value is MISSING else value
        if self.on("$ref", schema):
            target = self.resolve(schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            value = self.fit(value, target, depth + 1)
            if rest:
                value = self.fit(value, rest, depth + 1)
            return value
        if self.on("const", schema):
            return schema["const"]
        if self.on("enum", schema):
            if any(_same(value, option) for option in schema["enum"]):
                return value
            return self.closest(value, schema["enum"])
        if self.on("allOf", schema):
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            # The rest first (it may add required properties the parts then constrain),
            # then each part, then the rest again for what a part may have disturbed.
            value = self.fit(value, rest, depth + 1) if rest else value
            for part in schema["allOf"]:
                value = self.fit(value, part, depth + 1)
            return self.fit(value, rest, depth + 1) if rest else value
        for keyword in ("anyOf", "oneOf"):
            if self.on(keyword, schema):
                return self.fit_union(value, schema, keyword, depth)
        if self.on("if", schema):
            rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
            value = self.fit(value, rest, depth + 1)
            # Decide the branch on the value as it now stands, not as it came in.
            branch = "then" if self.valid(value, schema["if"]) else "else"
            if branch in schema and branch not in self.ignore:
                value = self.fit(value, schema[branch], depth + 1)
            return value
        if self.on("not", schema):
            rest = {k: v for k, v in schema.items() if k != "not"}
            value = self.fit(value, rest, depth + 1)
            if self.valid(value, schema["not"]):
                value = self.escape_not(value, rest, schema["not"], depth)
            return value
        value = self.fit_type(value, schema)
        if isinstance(value, dict):
            return self.fit_object(value, schema, depth)
        if isinstance(value, list):
            return self.fit_array(value, schema, depth)
        if isinstance(value, str):
            return self.fit_string(value, schema)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self.fit_number(value, schema)
        return value

    def closest(self, value: Any, options: list[Any]) -> Any:
        if isinstance(value, str):
            for option in options:
                if isinstance(option, str) and option.lower() == value.lower():
                    return option
        for option in options:
            if _type_of(option) == _type_of(value) and value is not MISSING:
                return option
        return options[0] if options else value

    def fit_union(self, value: Any, schema: dict[str, Any], keyword: str, depth: int) -> Any:
        rest = {k: v for k, v in schema.items() if k != keyword}
        branches = schema[keyword]
        if value is not MISSING:
            passing = [b for b in branches if self.valid(value, {**rest, **_as_dict(b)})]
            if passing and (keyword == "anyOf" or len(passing) == 1):
                return value
        for index, branch in enumerate(branches):
            candidate = self.fit(value, {**rest, **_as_dict(branch)}, depth + 1)
            if keyword == "oneOf":
                others = [b for i, b in enumerate(branches) if i != index]
                candidate = self.exclusive(candidate, _as_dict(branch), others)
            if keyword == "anyOf" or sum(self.valid(candidate, b) for b in branches) == 1:
                return candidate
        return self.fit(value, {**rest, **_as_dict(branches[0])}, depth + 1)

    def exclusive(self, value: Any, branch: dict[str, Any], others: list[Any]) -> Any:
        """For oneOf: drop object keys that only other branches require, so one branch matches."""
        if not isinstance(value, dict) or not any(self.valid(value, o) for o in others):
            return value
        needed = set(branch.get("required", []))
        foreign = {k for o in others if isinstance(o, dict) for k in o.get("required", [])}
        return {k: v for k, v in value.items() if k in needed or k not in foreign}

    def escape_not(self, value: Any, rest: dict[str, Any], forbidden: Any, depth: int) -> Any:
        candidates: list[Any] = [MISSING]
        if isinstance(value, str):
            candidates = [value + "x", "x" + value, "other"]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            candidates = [value + 1, value - 1, value + 2]
        elif isinstance(value, list):
            candidates = [value[:-1], value + value[:1]]
        elif isinstance(value, dict):
            candidates = [dict(list(value.items())[:-1]), {**value, "other": 1}]
        for candidate in candidates + ["other", 0, 1, False, None, [], {}]:
            fitted = self.fit(candidate, rest, depth + 1)
            if not self.valid(fitted, forbidden):
                return fitted
        return value

    def fit_type(self, value: Any, schema: Mapping[str, Any]) -> Any:
        wanted = schema.get("type") if "type" not in self.ignore else None
        if wanted is None:
            if value is not MISSING:
                return value
            wanted = _implied_type(schema)
        types = [wanted] if isinstance(wanted, str) else list(wanted)
        if value is not MISSING and any(_matches_type(value, t) for t in types):
            if "integer" in types and isinstance(value, float) and "number" not in types:
                return int(value)
            return value
        for kind in types:
            converted = _convert(value, kind)
            if converted is not MISSING:
                return converted
        return _EMPTY[types[0]]()

    def fit_object(self, value: dict[str, Any], schema: Mapping[str, Any], depth: int) -> Any:
        result = self.fit_properties(value, schema, depth)
        required = self.add_required(result, schema, depth)
        if self.on("dependentSchemas", schema):
            for trigger, subschema in schema["dependentSchemas"].items():
                if trigger in result:
                    result = self.fit(result, subschema, depth + 1)
        if self.on("maxProperties", schema):
            self.drop_optional(result, schema, required)
        if self.on("minProperties", schema):
            self.add_optional(result, schema, depth)
        return result

    def fit_properties(
        self, value: dict[str, Any], schema: Mapping[str, Any], depth: int
    ) -> dict[str, Any]:
        """The object's own keys, each fitted to every subschema that applies to it."""
        properties: Mapping[str, Any] = schema.get("properties", {})
        patterns: Mapping[str, Any] = schema.get("patternProperties", {})
        result: dict[str, Any] = {}
        for key, item in value.items():
            subschemas = []
            if key in properties and "properties" not in self.ignore:
                subschemas.append(properties[key])
            if "patternProperties" not in self.ignore:
                subschemas += [s for p, s in patterns.items() if re.search(p, key)]
            if not subschemas and key not in properties:
                extra = schema.get("additionalProperties", True)
                if "additionalProperties" in self.ignore:
                    extra = True
                if extra is False:
                    continue
                subschemas.append(extra)
            if self.on("propertyNames", schema) and not self.valid(key, schema["propertyNames"]):
                continue
            for subschema in subschemas:
                item = self.fit(item, subschema, depth + 1)
            result[key] = item
        return result

    def add_required(
        self, result: dict[str, Any], schema: Mapping[str, Any], depth: int
    ) -> list[str]:
        """Add the required and dependent-required keys `result` lacks; returns them all."""
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = list(schema.get("required", [])) if "required" not in self.ignore else []
        dependents = (
            schema.get("dependentRequired", {}) if self.on("dependentRequired", schema) else {}
        )
        while True:
            for key in required:
                if key not in result:
                    result[key] = self.fit(MISSING, properties.get(key, {}), depth + 1)
            # Keys added above may trigger dependencies of their own: repeat until none is missing.
            missing = [
                n for t, ns in dependents.items() if t in result for n in ns if n not in result
            ]
            if not missing:
                return required
            required += missing

    def drop_optional(
        self, result: dict[str, Any], schema: Mapping[str, Any], required: list[str]
    ) -> None:
        """Drop the last optional keys until `result` has at most maxProperties."""
        # Declared requirements are kept even when `required` itself is not enforced.
        keep = set(required) | set(schema.get("required", []))
        for key in reversed(list(result)):
            if len(result) <= schema["maxProperties"]:
                break
            if key not in keep:
                del result[key]

    def add_optional(self, result: dict[str, Any], schema: Mapping[str, Any], depth: int) -> None:
        """Add declared properties, then made-up keys, until `result` has minProperties."""
        for key, subschema in schema.get("properties", {}).items():
            if len(result) >= schema["minProperties"]:
                break
            if key not in result:
                result[key] = self.fit(MISSING, subschema, depth + 1)
        counter = 0
        while len(result) < schema["minProperties"] and counter < 1000:
            key = self.new_key(schema, counter)
            counter += 1
            if key is not None and key not in result:
                extra = schema.get("additionalProperties", True)
                result[key] = self.fit(MISSING, extra if isinstance(extra, dict) else {}, depth + 1)

    def new_key(self, schema: Mapping[str, Any], counter: int) -> str | None:
        names = schema.get("propertyNames")
        key = f"key{counter}"
        if isinstance(names, dict):
            key = (
                self.fit_string(key, names)
                if "type" not in names or names.get("type") == "string"
                else key
            )
            if not self.valid(key, names):
                return None
        patterns = schema.get("patternProperties")
        if schema.get("additionalProperties") is False and patterns:
            key = example_for_pattern(next(iter(patterns))) + str(counter)
        return key

    def fit_array(self, value: list[Any], schema: Mapping[str, Any], depth: int) -> Any:
        prefix = schema.get("prefixItems", []) if "prefixItems" not in self.ignore else []
        items = schema.get("items", True) if "items" not in self.ignore else True
        result = []
        for position, item in enumerate(value):
            if position < len(prefix):
                result.append(self.fit(item, prefix[position], depth + 1))
            elif items is False:
                break
            else:
                result.append(self.fit(item, items, depth + 1))
        for position in range(len(result), len(prefix)):
            if self.on("minItems", schema) and position >= schema["minItems"]:
                break
            result.append(self.fit(MISSING, prefix[position], depth + 1))
        if self.on("uniqueItems", schema) and schema["uniqueItems"]:
            unique: list[Any] = []
            for item in result:
                if item not in unique:
                    unique.append(item)
            result = unique
        if self.on("maxItems", schema):
            result = result[: schema["maxItems"]]
        if self.on("minItems", schema):
            item_schema = items if isinstance(items, dict) else {}
            attempts = 0
            while len(result) < schema["minItems"] and attempts < 200:
                candidate = self.fresh_item(item_schema, result, attempts, depth)
                attempts += 1
                if not (schema.get("uniqueItems") and candidate in result):
                    result.append(candidate)
        if self.on("contains", schema):
            contains = schema["contains"]
            if not any(self.valid(item, contains) for item in result):
                made = self.fit(MISSING, contains, depth + 1)
                if (
                    schema.get("maxItems") is not None
                    and len(result) >= schema["maxItems"]
                    and result
                ):
                    result[-1] = made
                else:
                    result.append(made)
        return result

    def fresh_item(self, schema: Mapping[str, Any], existing: list[Any], n: int, depth: int) -> Any:
        seeds: list[Any] = [f"item{n + len(existing)}", n + len(existing), float(n + len(existing))]
        for seed in seeds:
            candidate = self.fit(seed, schema, depth + 1)
            if candidate not in existing:
                return candidate
        if isinstance(schema.get("enum"), list):
            for option in schema["enum"]:
                if option not in existing:
                    return option
        return self.fit(MISSING, schema, depth + 1)

    def fit_string(self, value: str, schema: Mapping[str, Any]) -> str:
        fmt = schema.get("format") if "format" not in self.ignore else None
        if fmt in FORMAT_EXAMPLES and not self.valid(value, {"format": fmt}):
            value = FORMAT_EXAMPLES[fmt]
        if self.on("pattern", schema) and not re.search(schema["pattern"], value):
            value = example_for_pattern(schema["pattern"])
        if self.on("maxLength", schema) and len(value) > schema["maxLength"]:
            value = value[: schema["maxLength"]]
        if self.on("minLength", schema) and len(value) < schema["minLength"]:
            value = value + "x" * (schema["minLength"] - len(value))
        return value

    def fit_number(self, value: float, schema: Mapping[str, Any]) -> float:
        integer = schema.get("type") == "integer" and "type" not in self.ignore
        step = schema.get("multipleOf") if "multipleOf" not in self.ignore else None
        low, high = -math.inf, math.inf
        if self.on("minimum", schema):
            low = schema["minimum"]
        if self.on("maximum", schema):
            high = schema["maximum"]
        nudge = step or (1 if integer else 0.5)
        if self.on("exclusiveMinimum", schema):
            low = max(low, schema["exclusiveMinimum"] + _tiny(nudge, schema["exclusiveMinimum"]))
        if self.on("exclusiveMaximum", schema):
            high = min(high, schema["exclusiveMaximum"] - _tiny(nudge, schema["exclusiveMaximum"]))
        value = min(max(value, low), high)
        if step:
            value = _round_to(value, step, low, high)
        if integer:
            candidate = round(value)
            if candidate < low:
                candidate = math.ceil(low)
            if candidate > high:
                candidate = math.floor(high)
            return int(candidate)
        return value


def _tiny(step: float, bound: float) -> float:
    return step if isinstance(bound, int) or float(bound).is_integer() else step / 10


def _round_to(value: float, step: float, low: float, high: float) -> float:
    multiple = round(value / step) * step
    if multiple < low:
        multiple = math.ceil(low / step) * step
    if multiple > high:
        multiple = math.floor(high / step) * step
    if isinstance(step, int) and float(multiple).is_integer():
        return int(multiple)
    return round(multiple, 10)


def _as_dict(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict):
        return schema
    return {} if schema is True else {"not": {}}


def _implied_type(schema: Mapping[str, Any]) -> str:
    if any(
        k in schema
        for k in (
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "minProperties",
        )
    ):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems", "contains")):
        return "array"
    if any(k in schema for k in ("pattern", "minLength", "maxLength", "format")):
        return "string"
    if any(
        k in schema
        for k in ("minimum", "maximum", "multipleOf", "exclusiveMinimum", "exclusiveMaximum")
    ):
        return "number"
    return "string"


_EMPTY: dict[str, Callable[[], Any]] = {
    "object": dict,
    "array": list,
    "string": lambda: "text",
    "integer": lambda: 0,
    "number": lambda: 0,
    "boolean": lambda: False,
    "null": lambda: None,
}


def _convert(value: Any, kind: str) -> Any:
    """`value` turned into `kind` where an obvious conversion exists, else MISSING."""
    if value is MISSING:
        return MISSING
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if kind in ("integer", "number") and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return MISSING
        return int(number) if kind == "integer" or number.is_integer() else number
    if kind == "integer" and isinstance(value, float):
        return round(value)
    if kind == "array" and not isinstance(value, list | dict):
        return [value]
    return MISSING


def example_for_pattern(pattern: str) -> str:
    """A short string that matches the regular expression `pattern` (deterministic)."""
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return ""
    return _emit(parsed, sre_parse)


def _emit(parsed: Any, sre_parse: Any) -> str:
    c = sre_parse
    out: list[str] = []
    for op, arg in parsed:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append("a" if chr(arg) != "a" else "b")
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            out.append(_class_char(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, sub = arg
            out.append(_emit(sub, c) * max(low, 0))
        elif name == "SUBPATTERN":
            out.append(_emit(arg[-1], c))
        elif name == "ATOMIC_GROUP":
            out.append(_emit(arg, c))
        elif name == "BRANCH":
            out.append(_emit(arg[1][0], c))
        elif name == "GROUPREF":
            out.append("")
    return "".join(out)


def _class_char(items: list[Any]) -> str:
    negate = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
            continue
        if negate:
            return "a" if not _in_class("a", items) else "~"
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            category = str(arg)
            return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " ", "CATEGORY_WORD": "a"}.get(
                category, "a"
            )
    return "a"


def _in_class(char: str, items: list[Any]) -> bool:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL" and chr(arg) == char:
            return True
        if name == "RANGE" and arg[0] <= ord(char) <= arg[1]:
            return True
        if name == "CATEGORY" and str(arg) == "CATEGORY_WORD" and char.isalnum():
            return True
    return False
