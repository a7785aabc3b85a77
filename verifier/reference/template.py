"""Chat-template rendering with Hugging Face ``apply_chat_template`` semantics, sandboxed.

The template runs in jinja2's sandbox: it can read the conversation and call
the helpers chat templates use (``raise_exception``, ``tojson``,
``strftime_now``), but it cannot read files, import modules or reach Python
internals (reaching for one is an error, not an empty string as in the stock
sandbox), and whatever a template raises is one :class:`TemplateError` line.
Unlike Hugging Face's immutable sandbox it may append to lists it
builds, as llama.cpp's engine allows (the Kimi K2 template queues tool-call ids
that way); it renders a deep copy of the conversation, so nothing the caller
holds changes. Whitespace follows Hugging Face (``trim_blocks`` and
``lstrip_blocks``), and ``tojson`` keeps non-ASCII characters.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime
import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment, SecurityError

from ..errors import ConfigError
from .tokenizer_backends import special_pattern

_MARKER = re.compile("\ue000(\\d+)\ue001")


class TemplateError(ConfigError):
    """The chat template does not render (a syntax error, or raise_exception was called)."""


class _Sandbox(SandboxedEnvironment):
    """jinja2's sandbox, made to fail loudly where it would print nothing.

    The stock sandbox turns a refused attribute (``lipsum.__globals__``) into an
    undefined value that prints as an empty string; a chat template has no business
    reaching for Python internals, so it stops with an error that names the attribute.
    """

    def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
        """Refuse the attribute at once instead of returning a silent undefined."""
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe."
        )


def _one_line(text: str) -> str:
    """`text` with its line breaks folded, so that a template's error stays one line."""
    return " ".join(text.split())


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:  # noqa: A002 - the name templates use
    return datetime.datetime.now().strftime(format)


# The renderings a template remembers (the most recently used).
_REMEMBERED = 1024
# The longest arguments (as JSON) a rendering is remembered for: a long-context prompt would hold
# megabytes per entry, and is rendered once per use anyway (milliseconds).
_LONGEST_REMEMBERED = 100_000


@dataclasses.dataclass(frozen=True)
class Rendered:
    """A rendered prompt, and where in it stand conversation strings that spell protected text.

    ``spans`` are (start, end) offsets of user-written strings that contain a protected
    string (a special token's text): those must be tokenized as ordinary text.
    """

    text: str
    spans: tuple[tuple[int, int], ...] = ()


def _mark(messages: list[dict[str, Any]], pattern: re.Pattern[str]) -> list[str]:
    """Replace, in place, conversation strings that match `pattern` by numbered markers."""
    originals: list[str] = []

    def marked(value: Any) -> Any:
        if isinstance(value, str) and pattern.search(value):
            originals.append(value)
            return f"\ue000{len(originals) - 1}\ue001"
        return value

    for message in messages:
        if "content" in message:
            message["content"] = marked(message["content"])
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                if isinstance(part, dict) and "text" in part:
                    part["text"] = marked(part["text"])
        if "reasoning_content" in message:
            message["reasoning_content"] = marked(message["reasoning_content"])
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and "arguments" in function:
                function["arguments"] = marked(function["arguments"])
    return originals


def _restore(text: str, originals: Sequence[str]) -> Rendered | None:
    """Put the originals back where their markers stand; None unless each stands exactly once."""
    matches = list(_MARKER.finditer(text))
    if sorted(int(m.group(1)) for m in matches) != list(range(len(originals))):
        return None
    pieces: list[str] = []
    spans = []
    cursor = length = 0
    for match in matches:
        piece = text[cursor : match.start()]
        original = originals[int(match.group(1))]
        pieces += [piece, original]
        length += len(piece)
        spans.append((length, length + len(original)))
        length += len(original)
        cursor = match.end()
    pieces.append(text[cursor:])
    return Rendered("".join(pieces), tuple(spans))


def _search_spans(text: str, strings: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """Where `strings` stand in `text`, each searched after the previous one (a fallback)."""
    spans = []
    position = 0
    for value in strings:
        start = text.find(value, position)
        if start >= 0:
            spans.append((start, start + len(value)))
            position = start + len(value)
    return tuple(sorted(spans))


class ChatTemplate:
    """A jinja chat template and the special-token strings it may refer to.

    Args:
        source: the template text.
        variables: the values Hugging Face passes besides the conversation
            (``bos_token``, ``eos_token``, ...).

    Raises:
        TemplateError: the template does not parse.
    """

    def __init__(self, source: str, variables: Mapping[str, Any] | None = None) -> None:
        self.source = source
        self.variables = dict(variables or {})
        self._remember()
        # No loader: include, import and extends have nothing to read files with.
        environment = _Sandbox(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        environment.filters["tojson"] = _tojson
        environment.globals["raise_exception"] = _raise_exception
        environment.globals["strftime_now"] = _strftime_now
        try:
            self._template = environment.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            reason = _one_line(exc.message or "")
            raise TemplateError(
                f"the chat template does not parse: line {exc.lineno}: {reason}"
            ) from None
        except Exception as exc:
            # The template is text from a model folder: whatever its compilation raises (a
            # RecursionError for deep nesting) is the template's fault, said in one line.
            raise TemplateError(
                f"the chat template does not compile: {type(exc).__name__}: {_one_line(str(exc))}"
            ) from None

    def _remember(self) -> None:
        """Start an empty memory of renderings (one per template and variables)."""
        # A run renders the same conversation again and again (a case's repeats, the prompt
        # before each answer, the same answer each time): each conversation once. A template
        # that reads the clock renders anew every time.
        self._remembering = "strftime_now" not in self.source
        self._memory: collections.OrderedDict[str, Rendered] = collections.OrderedDict()
        self._lock = threading.Lock()

    def with_variables(self, variables: Mapping[str, Any]) -> ChatTemplate:
        """The same template rendering with `variables` as well (sharing its compilation)."""
        other = copy.copy(self)
        other.variables = {**self.variables, **variables}
        other._remember()
        return other

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        protect: Sequence[str] = (),
        **kwargs: Any,
    ) -> Rendered:
        """Render a conversation as the model sees it.

        Args:
            messages: the conversation.
            tools: the tool declarations.
            add_generation_prompt: end with the assistant header.
            protect: strings (special tokens' text) whose occurrences in conversation
                strings must be found: such strings are rendered through numbered
                markers, so the result's spans say exactly where user text stands.
            kwargs: further template variables.

        Raises:
            TemplateError: the template raised, or failed on this conversation.
        """
        key = self._key(messages, tools, add_generation_prompt, protect, kwargs)
        if key is not None:
            with self._lock:
                if key in self._memory:
                    self._memory.move_to_end(key)
                    return self._memory[key]
        rendered = self._render_fresh(messages, tools, add_generation_prompt, protect, kwargs)
        if key is not None:
            with self._lock:
                self._memory[key] = rendered
                if len(self._memory) > _REMEMBERED:
                    self._memory.popitem(last=False)
        return rendered

    def _key(self, *arguments: Any) -> str | None:
        """The arguments of a rendering as JSON, every dict in its order; None: not remembered."""
        if not self._remembering:
            return None
        try:
            key = json.dumps(arguments, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
        return key if len(key) <= _LONGEST_REMEMBERED else None

    def _render_fresh(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
        protect: Sequence[str],
        kwargs: Mapping[str, Any],
    ) -> Rendered:
        conversation = copy.deepcopy([dict(m) for m in messages])
        originals: list[str] = []
        if protect:
            originals = _mark(conversation, special_pattern(tuple(protect)))
        text = self._render(conversation, tools, add_generation_prompt, kwargs)
        if not originals:
            return Rendered(text)
        restored = _restore(text, originals)
        if restored is not None:
            return restored
        # The template transformed a marked string: render plainly, place spans by search.
        plain = copy.deepcopy([dict(m) for m in messages])
        text = self._render(plain, tools, add_generation_prompt, kwargs)
        return Rendered(text, _search_spans(text, originals))

    def _render(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
        kwargs: Mapping[str, Any],
    ) -> str:
        context = {
            **self.variables,
            **kwargs,
            "messages": messages,
            "tools": copy.deepcopy([dict(t) for t in tools]) if tools else None,
            "add_generation_prompt": add_generation_prompt,
        }
        try:
            return str(self._template.render(**context))
        except jinja2.exceptions.TemplateError as exc:
            raise TemplateError(f"the chat template failed: {_one_line(str(exc))}") from None
        except Exception as exc:
            # The template is code from a model folder: whatever it raises (1/0, a range the
            # sandbox refuses, runaway recursion) is its fault, never the verifier's crash.
            raise TemplateError(
                f"the chat template failed: {type(exc).__name__}: {_one_line(str(exc))}"
            ) from None
