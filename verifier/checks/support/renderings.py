"""Wrong renderings of a prompt, and which of them explain what an endpoint said (pure).

Each hypothesis is a known class of serving bug, written as the prompt a server with that bug
builds from a conversation: user text that spells a special token parsed as one
(``special_token_injection``), the system prompt dropped (``system_dropped``) or merged into
the first user message (``system_merged``), no generation prompt
(``generation_prompt_missing``), an extra BOS token (``double_bos``), reasoning left out of
the history (``reasoning_history_dropped``) or moved into the content
(``reasoning_in_content``), the text NFKC-normalised (``input_normalised``), tool
declarations without their descriptions or left out (``tools_rendered_differently``), a
final assistant message continued instead of answered (``assistant_prefill``), a final
assistant message marked ``partial: true`` (Moonshot's partial mode) answered instead of
continued (``partial_prefill_ignored``).

A cause is named only when the evidence singles it out: the hypothesis must explain every
observation of the case (each conversation's ``usage.prompt_tokens``, and the endpoint's
token ids and rendered text where it offers them), it must differ from the reference where
the endpoint does, and nothing else may explain them as well: neither another hypothesis nor
a constant offset (an accounting skew or a hidden system prompt), which explains any single
count.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...reference.template import Rendered
from ...reference.tokenizer_backends import encode_all_special, encode_prompt

if TYPE_CHECKING:
    from ...reference.profiles import Profile

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    """The messages and tools of one request."""

    messages: Messages
    tools: Tools = None


@dataclasses.dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt as a server builds it: its ids, and its text (None: the same as the reference's)."""

    ids: tuple[int, ...]
    text: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Observed:
    """What the endpoint said about one conversation's prompt.

    Args:
        count: ``usage.prompt_tokens``.
        ids: the prompt's ids by the endpoint's tokenizer routes, where it offers them.
        text: the prompt text it renders (``/apply-template``), where it offers it.
        cached: the input it says came from its cache (``cached_tokens``; Messages'
            ``cache_read_input_tokens``), where it says so.
    """

    count: int
    ids: tuple[int, ...] | None = None
    text: str | None = None
    cached: int | None = None


def _prompt(profile: Profile, rendered: Rendered, *, all_special: bool = False) -> Prompt:
    ids = (
        encode_all_special(profile.tokenizer, rendered.text)
        if all_special
        else encode_prompt(profile.tokenizer, rendered.text, rendered.spans)
    )
    return Prompt(tuple(ids), rendered.text)


def partial(messages: Messages) -> bool:
    """The conversation ends with an assistant message to continue (``partial: true``)."""
    return (
        bool(messages)
        and messages[-1].get("role") == "assistant"
        and bool(messages[-1].get("partial"))
    )


def _text(profile: Profile, messages: Messages, tools: Tools) -> Rendered:
    """The prompt text a correct server renders (a partial final message continued)."""
    if partial(messages):
        continued = profile.render_continued(messages, tools)
        if continued is not None:
            return continued
    return profile.render(messages, tools)


def reference(profile: Profile, conversation: Conversation) -> Prompt:
    """The prompt a correct server builds (a partial final message continued, not answered)."""
    return _prompt(profile, _text(profile, conversation.messages, conversation.tools))


def _rendered(
    profile: Profile, messages: Messages, tools: Tools, *, generation: bool = True
) -> Prompt:
    """The prompt of `messages` with one thing wrong, the rest as a correct server builds it."""
    if generation:
        return _prompt(profile, _text(profile, messages, tools))
    return _prompt(profile, profile.render(messages, tools, add_generation_prompt=False))


def _texts(message: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """`message` with `change` applied to its text (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": change(content)}
    if isinstance(content, list):
        parts = [
            {**p, "text": change(p["text"])} if isinstance(p.get("text"), str) else p
            for p in content
            if isinstance(p, Mapping)
        ]
        return {**message, "content": parts}
    return dict(message)


def _special_token_injection(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    return [_prompt(p, _text(p, m, t), all_special=True)]


def _system_dropped(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    return [_rendered(p, [x for x in m if x.get("role") != "system"], t)]


def _system_merged(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    system = "\n".join(str(x.get("content") or "") for x in m if x.get("role") == "system")
    rest = [dict(x) for x in m if x.get("role") != "system"]
    users = [x for x in rest if x.get("role") == "user" and isinstance(x.get("content"), str)]
    if not system or not users:
        return []
    users[0]["content"] = f"{system}\n\n{users[0]['content']}"
    return [_rendered(p, rest, t)]


def _generation_prompt_missing(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    return [_rendered(p, m, t, generation=False)]


def _double_bos(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    bos = p.tokenizer.special_tokens.get(str(p.template.variables.get("bos_token")))
    if bos is None:
        return []
    return [Prompt((bos, *reference(p, Conversation(m, t)).ids))]


def _reasoning_history_dropped(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    return [_rendered(p, [{k: v for k, v in x.items() if k != "reasoning_content"} for x in m], t)]


def _reasoning_in_content(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    moved = []
    for message in m:
        if message.get("role") == "assistant" and message.get("reasoning_content"):
            body = f"<think>{message['reasoning_content']}</think>{message.get('content') or ''}"
            rest = {k: v for k, v in message.items() if k != "reasoning_content"}
            message = {**rest, "content": body}
        moved.append(message)
    return [_rendered(p, moved, t)]


def _tools_rendered_differently(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    """Tool declarations without their descriptions, or left out of the prompt."""
    if not t:
        return []
    bare = [
        {**tool, "function": {k: v for k, v in tool["function"].items() if k != "description"}}
        if isinstance(tool.get("function"), Mapping)
        else tool
        for tool in t
    ]
    return [_rendered(p, m, bare), _rendered(p, m, None)]


def _input_normalised(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    return [_rendered(p, [_texts(x, lambda s: unicodedata.normalize("NFKC", s)) for x in m], t)]


def _assistant_prefill(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    """A final assistant message continued: the two ways servers build that prompt.

    Hugging Face's ``continue_final_message`` renders the whole conversation and cuts it
    after the final message's text; llama.cpp renders the conversation before it with the
    generation prompt and appends the text.
    """
    if not m or m[-1].get("role") != "assistant" or not isinstance(m[-1].get("content"), str):
        return []
    if partial(m):
        return []  # continuing it is what was asked for: the reference
    continued = p.render_continued(m, t)
    prompts = [] if continued is None else [_prompt(p, continued)]
    before = p.render(m[:-1], t)
    text = m[-1]["content"]
    cut = Rendered(before.text + text, (*before.spans, (len(before.text), len(before.text + text))))
    prompts.append(_prompt(p, cut))
    return prompts


def _partial_prefill_ignored(p: Profile, m: Messages, t: Tools) -> list[Prompt]:
    """A partial final assistant message answered as a closed turn, with a new one opened."""
    return [_prompt(p, p.render(m, t))] if partial(m) else []


Hypothesis = Callable[["Profile", Messages, Tools], list[Prompt]]
# The wrong renderings, by the code that names each.
HYPOTHESES: dict[str, Hypothesis] = {
    "special_token_injection": _special_token_injection,
    "system_dropped": _system_dropped,
    "system_merged": _system_merged,
    "generation_prompt_missing": _generation_prompt_missing,
    "double_bos": _double_bos,
    "reasoning_history_dropped": _reasoning_history_dropped,
    "reasoning_in_content": _reasoning_in_content,
    "input_normalised": _input_normalised,
    "tools_rendered_differently": _tools_rendered_differently,
    "assistant_prefill": _assistant_prefill,
    "partial_prefill_ignored": _partial_prefill_ignored,
}


def agrees(prompt: Prompt, observed: Observed) -> bool:
    """The endpoint's answers about a prompt are what `prompt` predicts."""
    if len(prompt.ids) != observed.count:
        return False
    if observed.ids is not None and tuple(observed.ids) != prompt.ids:
        return False
    return prompt.text is None or observed.text is None or observed.text == prompt.text


Case = Sequence[tuple[Conversation, Observed]]


def explaining(profile: Profile, case: Case) -> list[str]:
    """The hypotheses that explain every observation of the case (see the module docstring).

    A hypothesis explains a conversation's observation when one of its prompts for it agrees
    with it (one that does not apply to a conversation predicts the reference there); it
    must also explain at least one observation that differs from the reference.
    """
    references = [reference(profile, conversation) for conversation, _ in case]
    found = []
    for code, hypothesis in HYPOTHESES.items():
        explains_all = True
        explains_a_difference = False
        for ref, (conversation, observed) in zip(references, case, strict=True):
            prompts = hypothesis(profile, conversation.messages, conversation.tools) or [ref]
            if not any(agrees(prompt, observed) for prompt in prompts):
                explains_all = False
                break
            explains_a_difference = explains_a_difference or not agrees(ref, observed)
        if explains_all and explains_a_difference:
            found.append(code)
    return found


def constant_offset(profile: Profile, case: Case) -> int | None:
    """The k by which every count is off while the prompt itself is the reference's.

    This is what an accounting skew or a hidden system prompt gives: the endpoint's ids and
    rendered text, where seen, are the reference's, and every count is off by the same k.
    None when the counts are off by different amounts, or not off, or the ids or the text
    say otherwise.
    """
    offsets = set()
    for conversation, observed in case:
        ref = reference(profile, conversation)
        if observed.ids is not None and tuple(observed.ids) != ref.ids:
            return None
        if observed.text is not None and observed.text != ref.text:
            return None
        offsets.add(observed.count - len(ref.ids))
    if len(offsets) != 1 or 0 in offsets:
        return None
    return offsets.pop()


def confirmed(case: Case) -> bool:
    """A constant offset is an observation, not a guess, with a second count, ids or text."""
    return len(case) > 1 or any(o.ids is not None or o.text is not None for _, o in case)


def first_difference(expected: Sequence[int], actual: Sequence[int]) -> int:
    """The first position where two id sequences differ (the shorter length if one is a prefix)."""
    for position, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return position
    return min(len(expected), len(actual))


def text_difference(expected: str, actual: str) -> int:
    """The first character where two texts differ (the shorter length if one is a prefix)."""
    return next(
        (i for i, (x, y) in enumerate(zip(expected, actual, strict=False)) if x != y),
        min(len(expected), len(actual)),
    )


def described(codes: Iterable[str]) -> str:
    """Codes as words, for messages: ``system_dropped`` -> ``system dropped``."""
    return ", ".join(code.replace("_", " ") for code in codes)
