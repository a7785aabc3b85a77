"""The simulated vendor's prompt path with a real profile: render, tokenize, count.

With ``verifier simulate --profile``, prompts are rendered with the profile's chat
template and tokenized with its tokenizer, as a real server does, and the
template and tokenizer defects of the catalogue bend that path the way real
vendor bugs do (a dropped system prompt, special tokens parsed in user text, a
doubled BOS, tools rendered without descriptions, a constant skew, NFKC
normalisation, an older vocabulary).
"""

from __future__ import annotations

import copy
import functools
import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from ..reference.output import model_output
from ..reference.profiles import Profile
from ..reference.template import Rendered
from ..reference.tokenizer_backends import (
    TiktokenTokenizer,
    Tokenizer,
    encode_all_special,
    encode_prompt,
)
from .defects import (
    MAX_TOKENS_NOT_HONOURED,
    PARTIAL_PREFILL_IGNORED,
    PROMPT_TOKENS_SKEW,
    TEMPLATE_CONTINUES_FINAL_ASSISTANT,
    TEMPLATE_DOUBLE_BOS,
    TEMPLATE_DROPS_REASONING,
    TEMPLATE_DROPS_SYSTEM,
    TEMPLATE_MERGES_SYSTEM,
    TEMPLATE_NO_GENERATION_PROMPT,
    TEMPLATE_REASONING_IN_CONTENT,
    TEMPLATE_SPECIAL_TOKEN_INJECTION,
    TEMPLATE_TOOLS_RENDERED_DIFFERENTLY,
    TOKENIZER_NFKC_NORMALISES_INPUT,
    TOKENIZER_OLD_VOCAB,
    Defects,
)
from .sight import Eyes, without_images

# How many of the newest merges an "older vocabulary" lacks.
OLD_VOCAB_DROPPED = 40_000


def normalised(value: Any) -> Any:
    """`value` with its text NFKC-normalised (a message's content and text parts)."""
    if isinstance(value, str):
        return unicodedata.normalize("NFKC", value)
    if isinstance(value, list):
        return [normalised(v) for v in value]
    if isinstance(value, dict):
        return {k: normalised(v) if k in ("content", "text") else v for k, v in value.items()}
    return value


def _merge_system(messages: list[Any]) -> list[Any]:
    """System text joined onto the first user message (a template without a system role)."""
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    rest = [m for m in messages if m.get("role") != "system"]
    first = next(
        (m for m in rest if m.get("role") == "user" and isinstance(m.get("content"), str)), None
    )
    if not system or first is None:
        return messages
    first["content"] = f"{system}\n\n{first['content']}"
    return rest


def old_vocabulary(tokenizer: TiktokenTokenizer) -> TiktokenTokenizer:
    """The profile's tiktoken vocabulary without its newest merges (an outdated tokenizer)."""
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(tokenizer.path))
    newest = len(ranks) - OLD_VOCAB_DROPPED
    older = {token: rank for token, rank in ranks.items() if rank < newest}
    return TiktokenTokenizer(
        tokenizer.path, tokenizer.pat_str, tokenizer.special_tokens, ranks=older
    )


# The request key that tells the answer how many prompt tokens the vendor kept (its own
# bookkeeping, never sent by a client: a dropped front is what prompt-truncated-front does).
KEPT = "_kept_prompt_tokens"
# The request key that tells the answer how many prompt tokens came from the prefix cache.
CACHED = "_cached_prompt_tokens"
# The request key that says how many of the prompt's first tokens the model no longer attends
# to (a cache that serves stale KV for them: cached-prefix-changes-answer).
STALE = "_stale_prompt_tokens"
# The request key that gives the prompt text the model reads instead of the request's own (a
# cache that served another prompt's KV: prefix-cache-collision).
SERVED = "_served_prompt"
# A prompt (as its JSON key) this long is a long-context one: few of them are remembered.
LONG_PROMPT = 100_000


class PromptPath:
    """Render and tokenize requests as the simulated vendor does, defects included."""

    def __init__(self, profile: Profile, defects: Defects) -> None:
        self.profile = profile
        self.defects = defects
        self.eyes = Eyes(defects, profile.policies.images)
        self.named_call_ids = bool((profile.policies.tool_call_id or {}).get("names_function"))
        self.dialect = profile.dialect
        self.generation_defaults = profile.policies.generation_defaults or {}
        if defects.has(TOKENIZER_OLD_VOCAB) and not isinstance(
            profile.tokenizer, TiktokenTokenizer
        ):
            raise ValueError(
                f"{TOKENIZER_OLD_VOCAB.name} needs a profile with a tiktoken tokenizer"
            )

    @functools.cached_property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer the vendor uses (an older one with tokenizer-old-vocab)."""
        if self.defects.has(TOKENIZER_OLD_VOCAB):
            assert isinstance(self.profile.tokenizer, TiktokenTokenizer)
            return old_vocabulary(self.profile.tokenizer)
        return self.profile.tokenizer

    def conversation(self, request: Mapping[str, Any]) -> tuple[list[Any], list[Any] | None]:
        """The messages and tools as the vendor's template sees them (images counted apart)."""
        messages = copy.deepcopy(list(without_images(request).get("messages", [])))
        tools = copy.deepcopy(request.get("tools")) or None
        if self.defects.has(TEMPLATE_DROPS_SYSTEM):
            messages = [m for m in messages if m.get("role") != "system"]
        if self.defects.has(TOKENIZER_NFKC_NORMALISES_INPUT):
            messages = [normalised(m) for m in messages]
        if tools and self.defects.has(TEMPLATE_TOOLS_RENDERED_DIFFERENTLY):
            for tool in tools:
                tool.get("function", {}).pop("description", None)
        if self.defects.has(TEMPLATE_MERGES_SYSTEM):
            messages = _merge_system(messages)
        for message in messages:
            assistant = message.get("role") == "assistant"
            reasoning = message.get("reasoning_content") if assistant else None
            if reasoning and self.defects.has(TEMPLATE_REASONING_IN_CONTENT):
                message["content"] = f"<think>{reasoning}</think>{message.get('content') or ''}"
            if reasoning and (
                self.defects.has(TEMPLATE_DROPS_REASONING)
                or self.defects.has(TEMPLATE_REASONING_IN_CONTENT)
            ):
                del message["reasoning_content"]
        return messages, tools

    def _rendered(
        self,
        messages: list[Any],
        tools: list[Any] | None,
        add_generation_prompt: bool,
        variables: Mapping[str, Any] | None = None,
    ) -> Rendered:
        """The prompt the vendor renders, with its template defects.

        `variables` are the request's chat_template_kwargs, which the template sees.
        """
        profile = self.profile.with_template_variables(variables or {})
        if self.defects.has(TEMPLATE_NO_GENERATION_PROMPT):
            add_generation_prompt = False
        final = messages[-1] if messages else {}
        if (
            final.get("role") == "assistant"
            and final.get("partial")
            and (profile.policies.features or {}).get("partial_prefill")
            and not self.defects.has(PARTIAL_PREFILL_IGNORED)
        ):
            # The model's partial mode: its final message continued, not answered.
            continued = profile.render_continued(messages, tools)
            if continued is not None:
                return continued
        if (
            self.defects.has(TEMPLATE_CONTINUES_FINAL_ASSISTANT)
            and final.get("role") == "assistant"
            and isinstance(final.get("content"), str)
        ):
            # llama.cpp's prefill: the conversation before it, the generation prompt, its text.
            before = profile.render(messages[:-1], tools, add_generation_prompt=True)
            end = len(before.text) + len(final["content"])
            spans = (*before.spans, (len(before.text), end))
            return Rendered(before.text + final["content"], spans)
        return profile.render(messages, tools, add_generation_prompt=add_generation_prompt)

    def render(self, request: Mapping[str, Any], *, add_generation_prompt: bool = True) -> str:
        """The prompt text."""
        messages, tools = self.conversation(request)
        variables = request.get("chat_template_kwargs")
        return self._rendered(messages, tools, add_generation_prompt, variables).text

    def prompt_ids(
        self, request: Mapping[str, Any], *, add_generation_prompt: bool = True
    ) -> list[int]:
        """The prompt ids the generation path uses."""
        prompt = without_images(request)
        # Key order is kept: the template renders objects in their order.
        key = json.dumps(
            [
                prompt.get("messages", []),
                prompt.get("tools"),
                add_generation_prompt,
                prompt.get("chat_template_kwargs"),
            ]
        )
        if len(key) > LONG_PROMPT:
            return list(self._long_prompt_ids(key))
        return list(self._prompt_ids(key))

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - one PromptPath per server, kept for its life
    def _prompt_ids(self, key: str) -> tuple[int, ...]:
        """The prompt `key` names, rendered and tokenized once.

        The same prompt comes again and again (a case's repeats, stream after non-stream).
        """
        return self._fresh_ids(key)

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one PromptPath per server, kept for its life
    def _long_prompt_ids(self, key: str) -> tuple[int, ...]:
        # A long-context prompt holds megabytes of ids: the few latest are kept, for the
        # requests that ask questions of the same haystack and for their usage.
        return self._fresh_ids(key)

    def _fresh_ids(self, key: str) -> tuple[int, ...]:
        """Render and tokenize the prompt that `key` names."""
        messages, tools, add_generation_prompt, variables = json.loads(key)
        messages, tools = self.conversation({"messages": messages, "tools": tools})
        rendered = self._rendered(messages, tools, add_generation_prompt, variables)
        if self.defects.has(TEMPLATE_SPECIAL_TOKEN_INJECTION):
            ids = encode_all_special(self.tokenizer, rendered.text)
        else:
            ids = encode_prompt(self.tokenizer, rendered.text, rendered.spans)
        if self.defects.has(TEMPLATE_DOUBLE_BOS):
            bos = self.profile.tokenizer.special_tokens.get(
                str(self.profile.template.variables.get("bos_token"))
            )
            ids = [bos if bos is not None else 0, *ids]
        return tuple(ids)

    def prompt_tokens(self, request: Mapping[str, Any]) -> int:
        """usage.prompt_tokens as the vendor reports it (what it kept, when it dropped some)."""
        skew = self.defects.param(PROMPT_TOKENS_SKEW)
        kept = request.get(KEPT)
        if isinstance(kept, int):
            return kept + (int(skew) if skew else 0)
        images = self.eyes.prompt_tokens(request)
        return len(self.prompt_ids(request)) + images + (int(skew) if skew else 0)

    def seen(self, request: Mapping[str, Any]) -> str:
        """The prompt text the model reads: all of it, or what the vendor kept and served fresh."""
        kept, stale, served = request.get(KEPT), request.get(STALE), request.get(SERVED)
        if isinstance(served, str):
            return served
        if isinstance(kept, int):
            return self.tokenizer.decode(self.prompt_ids(request)[-kept:])
        if isinstance(stale, int):
            return self.tokenizer.decode(self.prompt_ids(request)[stale:])
        return self.render(request)

    def count(self, text: str) -> int:
        """Tokens of `text` under the vendor's tokenizer."""
        return len(self.tokenizer.encode_ordinary(text))

    def bill(self, request: Mapping[str, Any], message: dict[str, Any]) -> int | None:
        """The model's `message` as its template writes it, in tokens (None: it cannot say)."""
        text = self.written(request, message)
        return None if text is None else len(encode_prompt(self.tokenizer, text))

    def written(self, request: Mapping[str, Any], message: dict[str, Any]) -> str | None:
        """The model's `message` as its template writes it (None: it cannot say)."""
        output = model_output(self.profile, request, message)
        return None if output is None else output.text

    def markup(self, text: str) -> int:
        """Tokens of markup the model writes (`text`, its special tokens as such)."""
        return len(encode_prompt(self.tokenizer, text, ()))

    def completion(self, text: str, limit: int | None) -> tuple[str, int, bool]:
        """The answer cut to `limit` tokens: (text, completion tokens, cut)."""
        ids = self.tokenizer.encode_ordinary(text)
        if limit is None or len(ids) <= limit:
            return text, len(ids), False
        keep = limit + 1 if self.defects.has(MAX_TOKENS_NOT_HONOURED) else limit
        return self.tokenizer.decode(ids[:keep]), keep, True
