"""A model's reasoning dialect, as its contract states it.

From the profile's ``thinking`` and ``reasoning``: how thinking is switched and its effort
set, where reasoning comes back, its raw form, and what the lab's API does with past reasoning.

Both sides read it: the reasoning family builds its requests and expectations from it, and
the simulated vendor answers by it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

# The field reasoning goes back in when neither the contract nor the answer says (DeepSeek's
# and Moonshot's name; vLLM's newer one is "reasoning").
DEFAULT_FIELD = "reasoning_content"
# The names a message's reasoning goes under.
FIELDS = ("reasoning_content", "reasoning")
# OpenAI's chat field for the reasoning effort (the Responses API's reasoning.effort).
OPENAI_EFFORT = "reasoning_effort"
# The history rules of ``reasoning.history``.
HISTORY_RULES = ("all", "tool_turns", "none")


@dataclasses.dataclass(frozen=True, slots=True)
class Effort:
    """How a client sets the reasoning effort.

    Args:
        field: the request field, a dotted path for a nested one
            (``chat_template_kwargs.reasoning_effort``).
        levels: the levels, from least to most reasoning.
    """

    field: str
    levels: tuple[str, ...]

    def fields(self, level: str) -> dict[str, Any]:
        """The request fields that ask for `level`."""
        outer, _, inner = self.field.partition(".")
        return {outer: {inner: level}} if inner else {outer: level}

    def level_of(self, request: Mapping[str, Any]) -> str | None:
        """The level a request asks for, or None when it sets none."""
        outer, _, inner = self.field.partition(".")
        value = request.get(outer)
        if inner:
            value = value.get(inner) if isinstance(value, Mapping) else None
        return value if isinstance(value, str) else None


@dataclasses.dataclass(frozen=True, slots=True)
class Dialect:
    """What the model's contract says of its reasoning.

    Args:
        on: the request fields that turn thinking on (empty when none are needed), or None
            when the contract states no way to.
        off: the request fields that turn it off, or None when it cannot be turned off.
        always_on: the model always reasons, whatever the request says.
        field: the message field the lab's API returns reasoning in (and takes it back in),
            or None when the contract does not say (either name is right).
        tags: the start and end tags of the raw form, or None when unstated.
        tool_markers: text that opens a tool call in the raw output.
        effort: how effort is set, or None when the contract states no effort.
        history: which past reasoning a client sends back (:data:`HISTORY_RULES`).
        tool_turns_need_reasoning: the lab's API refuses a tool-call turn sent back
            without its reasoning, while thinking is on.
        json_ends_thinking: response_format answers come without reasoning on the lab's API.
        tokens_tolerance: how much further reasoning_tokens may stray from the reasoning's
            tokens than its tags explain.
    """

    on: Mapping[str, Any] | None
    off: Mapping[str, Any] | None
    always_on: bool = False
    field: str | None = None
    tags: tuple[str, str] | None = None
    tool_markers: tuple[str, ...] = ()
    effort: Effort | None = None
    history: str = "all"
    tool_turns_need_reasoning: bool = False
    json_ends_thinking: bool = False
    tokens_tolerance: int = 0

    @classmethod
    def of(
        cls, thinking: Mapping[str, Any] | None, reasoning: Mapping[str, Any] | None
    ) -> Dialect | None:
        """The dialect of a profile's ``thinking`` and ``reasoning`` settings; None if neither."""
        if not thinking and not reasoning:
            return None
        reasoning = reasoning or {}
        always = bool(reasoning.get("always_on"))
        on: Mapping[str, Any] | None = dict((thinking or {}).get("on") or {})
        if not on and not always:
            on = None
        off = None if always else (thinking or {}).get("off")
        tags = reasoning.get("tags")
        effort = reasoning.get("effort")
        return cls(
            on=on,
            off=dict(off) if off else None,
            always_on=always,
            field=reasoning.get("field"),
            tags=(str(tags["start"]), str(tags["end"])) if tags else None,
            tool_markers=tuple(reasoning.get("tool_markers", ())),
            effort=Effort(str(effort["field"]), tuple(effort["levels"])) if effort else None,
            history=str(reasoning.get("history", "all")),
            tool_turns_need_reasoning=bool(reasoning.get("tool_turns_need_reasoning")),
            json_ends_thinking=reasoning.get("structured_output") == "ends_thinking",
            tokens_tolerance=int(reasoning.get("tokens_tolerance", 0)),
        )

    @property
    def history_field(self) -> str:
        """The field past reasoning goes back in when the answer did not name one."""
        return self.field or DEFAULT_FIELD

    @property
    def markers(self) -> tuple[str, ...]:
        """The raw form's tags: text no answer's content may hold."""
        return self.tags or ()

    def mode(self, request: Mapping[str, Any]) -> bool | None:
        """Whether `request` turns thinking on (True), off (False), or says nothing (None).

        A model that always reasons is on whatever the request says; a request that sets an
        effort level asks for reasoning.
        """
        if self.always_on:
            return True
        if self.off is not None and _contains(request, self.off):
            return False
        if self.on and _contains(request, self.on):
            return True
        if self.effort is not None and self.effort.level_of(request) is not None:
            return True
        return None

    def switched(self, request: Mapping[str, Any]) -> bool:
        """`request` carries the fields that turn thinking on or off (when there are any)."""
        return any(fields and _contains(request, fields) for fields in (self.on, self.off))

    def in_model_terms(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`request` with the other APIs' reasoning settings as the contract's own fields.

        A Messages ``thinking`` object (enabled or disabled) becomes the contract's switch, and
        ``reasoning_effort`` (OpenAI's chat field, the Responses API's ``reasoning.effort``) the
        contract's effort field: how a vendor serving the model behind those APIs must pass
        them on, and how the model's template must render them.
        """
        out = dict(request)
        thinking = out.get("thinking")
        kind = thinking.get("type") if isinstance(thinking, Mapping) else None
        switch = {"enabled": self.on, "disabled": self.off}.get(str(kind))
        if switch is not None:
            out.pop("thinking")
            out = merged(out, switch)
        level, effort = out.get(OPENAI_EFFORT), self.effort
        if effort is not None and isinstance(level, str) and effort.field != OPENAI_EFFORT:
            out.pop(OPENAI_EFFORT)
            out = merged(out, effort.fields(level))
        return out

    def replayed(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with past reasoning kept as :attr:`history` says a client sends it back.

        ``all`` keeps every assistant turn's reasoning; ``tool_turns`` only that of the turns
        after the last user message (the current tool-call loop); ``none`` drops it.
        """
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        kept = []
        for index, message in enumerate(messages):
            copy = dict(message)
            drop = self.history == "none" or (self.history == "tool_turns" and index < last_user)
            if drop and copy.get("role") == "assistant":
                for field in FIELDS:
                    copy.pop(field, None)
            kept.append(copy)
        return kept


def merged(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """Settings (or request fields) merged left to right, objects key by key."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
                out[key] = merged(out[key], value)
            else:
                out[key] = value
    return out


def _contains(request: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    """Every field of `fields` is in `request` with that value (objects compared field by field)."""
    for key, wanted in fields.items():
        value = request.get(key)
        if isinstance(wanted, Mapping):
            if not isinstance(value, Mapping) or not _contains(value, wanted):
                return False
        elif value != wanted or isinstance(value, bool) != isinstance(wanted, bool):
            return False
    return True
