"""Pure comparison of tool calls: BFCL-style acceptable values, any-order matching, signatures."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...outcome import Finding
from ...protocol.answers import Choice

_IGNORED_IN_STRINGS = re.compile(r"[\s,./\-_*^'\"]+")


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """A tool call reduced to what is compared: the name and the parsed arguments.

    ``arguments`` is the parsed JSON value, or None when the raw string did not parse
    (``raw`` keeps it either way).
    """

    name: str | None
    arguments: Any
    raw: str | None

    @property
    def key(self) -> tuple[str, str]:
        """A comparable form: key order and whitespace of the JSON do not matter."""
        if self.arguments is None:
            return (self.name or "", f"raw:{self.raw}")
        return (self.name or "", json.dumps(self.arguments, sort_keys=True, ensure_ascii=False))


def parse_arguments(raw: str | None) -> Any:
    """The arguments string parsed as JSON, or None when it is missing or not JSON."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return None


def calls_of(choice: Choice | None) -> list[Call]:
    """The calls of a choice with their arguments parsed."""
    if choice is None:
        return []
    return [Call(c.name, parse_arguments(c.arguments), c.arguments) for c in choice.tool_calls]


def signature(calls: Sequence[Call]) -> tuple[tuple[str, str], ...]:
    """The calls of one answer as a sorted tuple: parallel calls in another order are the same."""
    return tuple(sorted(call.key for call in calls))


def _normal_string(value: str) -> str:
    return _IGNORED_IN_STRINGS.sub("", value.casefold())


def value_matches(actual: Any, acceptable: Any) -> bool:
    """One value against one acceptable value (strings loosely, numbers by value, recursively)."""
    if isinstance(acceptable, str):
        return isinstance(actual, str) and _normal_string(actual) == _normal_string(acceptable)
    if isinstance(acceptable, bool) or isinstance(actual, bool):
        return actual is acceptable
    if isinstance(acceptable, int | float):
        return isinstance(actual, int | float) and actual == acceptable
    if isinstance(acceptable, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(acceptable)
            and all(value_matches(a, b) for a, b in zip(actual, acceptable, strict=True))
        )
    if isinstance(acceptable, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == acceptable.keys()
            and all(value_matches(actual[k], acceptable[k]) for k in acceptable)
        )
    return bool(actual == acceptable)


def argument_problems(arguments: Any, acceptable: Mapping[str, list[Any]]) -> list[str]:
    """Why `arguments` is not one of the acceptable argument sets (empty when it is)."""
    if not isinstance(arguments, dict):
        return ["the arguments are not an object"]
    problems = []
    for name, options in acceptable.items():
        if name not in arguments:
            if "" not in options:
                problems.append(f"argument {name!r} is missing")
            continue
        if not any(value_matches(arguments[name], option) for option in options if option != ""):
            shown = [o for o in options if o != ""]
            problems.append(
                f"argument {name!r} is {json.dumps(arguments[name], ensure_ascii=False)}, "
                f"acceptable: {json.dumps(shown, ensure_ascii=False)}"
            )
    for name in arguments:
        if name not in acceptable:
            problems.append(f"argument {name!r} is not expected")
    return problems


def _matches(call: Call, expected: Mapping[str, Any]) -> bool:
    return call.name == expected["name"] and not argument_problems(
        call.arguments, expected["arguments"]
    )


def compare_calls(
    calls: Sequence[Call], expected: Sequence[Mapping[str, Any]], *, attempt: str | None = None
) -> list[Finding]:
    """Findings for the calls made against the calls expected, matched in any order.

    Codes: ``unexpected_call`` (a call where none, or no more, was expected),
    ``missing_call`` (an expected call not made), ``wrong_tool`` (another tool
    called in its place), ``value_mismatch`` (the right tool with other values).
    """
    remaining = list(calls)
    unmatched = []
    for wanted in expected:
        hit = next((c for c in remaining if _matches(c, wanted)), None)
        if hit is None:
            unmatched.append(wanted)
        else:
            remaining.remove(hit)
    findings = [_unmatched(wanted, remaining, bool(calls), attempt) for wanted in unmatched]
    for extra in remaining:
        message = (
            f"called {extra.name!r} where no tool fits"
            if not expected
            else f"called {extra.name!r} beyond the {len(expected)} expected call(s)"
        )
        findings.append(Finding("unexpected_call", message, actual=extra.name, attempt=attempt))
    return findings


def _unmatched(
    wanted: Mapping[str, Any], remaining: list[Call], called: bool, attempt: str | None
) -> Finding:
    """Why an expected call had no match: the tool with other values, another tool, or none.

    Takes the call it pairs `wanted` with out of `remaining`.
    """
    same_name = next((c for c in remaining if c.name == wanted["name"]), None)
    if same_name is not None:
        remaining.remove(same_name)
        problems = argument_problems(same_name.arguments, wanted["arguments"])
        return Finding(
            "value_mismatch",
            f"{wanted['name']}: " + "; ".join(problems),
            expected={k: v[0] for k, v in wanted["arguments"].items() if v[0] != ""},
            actual=same_name.arguments,
            attempt=attempt,
            compare=True,
        )
    if remaining:
        other = remaining.pop(0)
        return Finding(
            "wrong_tool",
            f"called {other.name!r} where {wanted['name']!r} was expected",
            expected=wanted["name"],
            actual=other.name,
            attempt=attempt,
        )
    return Finding(
        "missing_call",
        f"no call to {wanted['name']!r}" + (" (no tool was called)" if not called else ""),
        expected=wanted["name"],
        attempt=attempt,
    )
