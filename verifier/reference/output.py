"""What a model generates for an assistant message, as its chat template writes it (pure).

The template renders a conversation with the message appended; the part after the
conversation's generation prompt is what the model itself produced: content, reasoning where
the template writes it, tool calls in the model's own markup, and the special token that
closes the turn (a newline the template puts between turns is not generated, and is cut).
Output accounting counts it; the simulated vendor bills it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from .dialect import FIELDS
from .profiles import Profile
from .template import Rendered, TemplateError

# What follows the turn's last special token and is not generated (a newline between turns).
_TRAILING = re.compile(r"\s*\Z")


@dataclasses.dataclass(frozen=True, slots=True)
class Output:
    """The model's output for one assistant message.

    Args:
        text: what the model generated, as text, special tokens included.
        spans: where message strings stand in it (ordinary text, whatever they spell).
        reasoning_added: the template does not write this message's reasoning back (its
            history rule drops it), so the reasoning was put between the dialect's tags where
            the template leaves them empty, or before the rest: the count is then not the
            template's own.
    """

    text: str
    spans: tuple[tuple[int, int], ...]
    reasoning_added: bool = False


def model_output(
    profile: Profile, request: Mapping[str, Any], message: Mapping[str, Any]
) -> Output | None:
    """The model's output for `message` after `request`'s conversation.

    None when the template cannot say: it raises, or the conversation with the message does
    not begin with the conversation's generation prompt.
    """
    messages = [dict(m) for m in request.get("messages") or [] if isinstance(m, Mapping)]
    tools = request.get("tools") if isinstance(request.get("tools"), list) else None
    kwargs = request.get("chat_template_kwargs")
    variables = dict(kwargs) if isinstance(kwargs, Mapping) else {}
    protect = tuple(profile.tokenizer.special_tokens)
    try:
        prompt = profile.template.render(
            messages, tools=tools, add_generation_prompt=True, protect=protect, **variables
        )
        whole = profile.template.render(
            [*messages, dict(message)],
            tools=tools,
            add_generation_prompt=False,
            protect=protect,
            **variables,
        )
    except TemplateError:
        return None
    bounds = _output_bounds(profile, prompt.text, whole, messages, tools, variables)
    if bounds is None:
        return None
    start, end = bounds
    text = whole.text[start:end]
    specials = [text.rfind(token) + len(token) for token in protect if token in text]
    if specials and _TRAILING.fullmatch(text, max(specials)):
        text = text[: max(specials)]
    spans = [
        (max(s, start) - start, min(e - start, len(text))) for s, e in whole.spans if e > start
    ]
    output = Output(text, tuple((s, e) for s, e in spans if s < e))
    return _with_reasoning(profile, message, output)


def _output_bounds(
    profile: Profile,
    prompt: str,
    whole: Rendered,
    messages: list[dict[str, Any]],
    tools: list[Any] | None,
    variables: Mapping[str, Any],
) -> tuple[int, int] | None:
    """Where the message's output stands in `whole` (the conversation with the message).

    Where the conversation with the message extends its generation prompt, it is everything
    after that prompt. Templates that render the rest otherwise once a final answer follows
    (Kimi K2 Thinking drops earlier turns' reasoning; a template may write the tools after
    the last turn) break that: the output then runs from the last assistant header the
    generation prompt adds to the first turn-closing text after the message's own strings.
    None when neither holds.
    """
    if whole.text.startswith(prompt):
        return len(prompt), len(whole.text)
    try:
        before = profile.template.render(
            messages, tools=tools, add_generation_prompt=False, **variables
        ).text
        closing = _closing(profile, variables)
    except TemplateError:
        return None
    header = prompt[len(before) :] if prompt.startswith(before) else ""
    at = whole.text.rfind(header) if header else -1
    if at < 0 or not closing:
        return None
    start = at + len(header)
    strings = [e for s, e in whole.spans if s >= start]
    end = whole.text.find(closing, max(strings, default=start))
    return (start, end + len(closing)) if end >= 0 else None


def _closing(profile: Profile, variables: Mapping[str, Any]) -> str:
    """The text the template closes an assistant turn with (``<|im_end|>``), or ''."""
    asked = [{"role": "user", "content": "?"}]
    prompt = profile.template.render(asked, add_generation_prompt=True, **variables).text
    whole = profile.template.render(
        [*asked, {"role": "assistant", "content": "!"}], add_generation_prompt=False, **variables
    ).text
    if not whole.startswith(prompt) or "!" not in whole[len(prompt) :]:
        return ""
    return whole[len(prompt) :].split("!", 1)[1].strip()


def _with_reasoning(profile: Profile, message: Mapping[str, Any], output: Output) -> Output:
    """`output` with the message's reasoning in it, where the template left it out."""
    reasoning = next(
        (message[f] for f in FIELDS if isinstance(message.get(f), str) and message[f]), None
    )
    if reasoning is None or reasoning in output.text:
        return output
    dialect = profile.dialect
    opening, closing = (dialect.tags if dialect is not None else None) or ("", "")
    empty = opening + closing
    at = output.text.find(empty) + len(opening) if empty and empty in output.text else 0
    text = (
        output.text[:at] + (reasoning if at else opening + reasoning + closing) + output.text[at:]
    )
    shift = len(text) - len(output.text)
    spans = tuple((s + shift, e + shift) if s >= at else (s, e) for s, e in output.spans)
    start = at if at else len(opening)
    return Output(text, tuple(sorted((*spans, (start, start + len(reasoning))))), True)
