"""The tokenizer endpoints servers add beside the OpenAI API, and how to ask each for token ids.

The ladder, best first:

1. ``POST /tokenize`` with ``messages`` (vLLM, SGLang): the ids of the whole chat prompt;
2. a chat completion with ``return_token_ids`` (vLLM): ``prompt_token_ids`` of the very
   request that generated;
3. ``POST /apply-template`` then ``POST /tokenize`` with the prompt text (llama.cpp);
4. nothing: only ``usage.prompt_tokens``, compared by differences.

Each function here is an exchange (see :mod:`verifier.protocol.requests`): it yields the
requests and reads their answers, and whoever drives it (the probe, a family through the
executor) sends them. Request names are relative: the driver prefixes the case or ``probe/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from .answers import ChatResult
from .requests import Chat, Exchange, Get, Post


@dataclasses.dataclass(frozen=True, slots=True)
class TokenizerEndpoints:
    """Which tokenizer endpoints the server answers.

    Args:
        tokenize: ``messages`` (chat prompt ids), ``content`` (text ids only), or None.
        apply_template: POST /apply-template renders a conversation.
        detokenize: POST /detokenize turns ids into text.
        return_token_ids: a chat completion returns ``prompt_token_ids`` when asked.
        server_template_sha256: sha256 of the chat template the server reports (GET /props).
    """

    tokenize: str | None = None
    apply_template: bool = False
    detokenize: bool = False
    return_token_ids: bool = False
    server_template_sha256: str | None = None

    @property
    def method(self) -> str:
        """The best rung of the ladder this server allows."""
        if self.tokenize == "messages":
            return "tokenize_messages"
        if self.return_token_ids:
            return "return_token_ids"
        if self.apply_template and self.tokenize == "content":
            return "apply_template_tokenize"
        return "prompt_tokens"

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON data."""
        return {**dataclasses.asdict(self), "method": self.method}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenizerEndpoints:
        """The inverse of :meth:`to_dict`."""
        fields: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        return cls(**fields)


def _ids(result: ChatResult) -> list[int] | None:
    body = result.body
    if not result.ok or not isinstance(body, dict):
        return None
    tokens = body.get("tokens")
    if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
        return tokens
    if isinstance(tokens, list) and all(
        isinstance(t, dict) and isinstance(t.get("id"), int) for t in tokens
    ):
        return [t["id"] for t in tokens]
    return None


def _with_tools(body: dict[str, Any], tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    if tools:
        body["tools"] = list(tools)
    return body


def tokenize_messages(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    name: str,
) -> Generator[Post, ChatResult, list[int] | None]:
    """Chat prompt ids from ``POST /tokenize`` with messages, or None when not answered."""
    body = {"model": model, "messages": list(messages), "add_generation_prompt": True}
    return _ids((yield Post("/tokenize", _with_tools(body, tools), name)))


def tokenize_text(
    text: str, *, parse_special: bool, name: str
) -> Generator[Post, ChatResult, list[int] | None]:
    """Ids of raw text from ``POST /tokenize`` with content (llama.cpp), or None."""
    body = {"content": text, "add_special": False, "parse_special": parse_special}
    return _ids((yield Post("/tokenize", body, name)))


def apply_template(
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    name: str,
) -> Generator[Post, ChatResult, str | None]:
    """The prompt text the server renders (``POST /apply-template``), or None."""
    result = yield Post("/apply-template", _with_tools({"messages": list(messages)}, tools), name)
    if result.ok and isinstance(result.body, dict) and isinstance(result.body.get("prompt"), str):
        return str(result.body["prompt"])
    return None


def detokenize_answer(
    ids: Sequence[int], *, name: str
) -> Generator[Post, ChatResult, tuple[str | None, ChatResult]]:
    """Text of ids from ``POST /detokenize`` (llama.cpp ``content``, vLLM ``prompt``), or None.

    The answer comes too: a check tells a refusal of the ids from a missing route.
    """
    result = yield Post("/detokenize", {"tokens": list(ids)}, name)
    if result.ok and isinstance(result.body, dict):
        for key in ("content", "prompt", "text"):
            if isinstance(result.body.get(key), str):
                return str(result.body[key]), result
    return None, result


def _with_ids(
    model: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """A one-token completion asking for ``prompt_token_ids`` (vLLM)."""
    body = {
        "model": model,
        "messages": list(messages),
        "max_tokens": 1,
        "temperature": 0,
        "return_token_ids": True,
    }
    return _with_tools(body, tools)


def probe_tokenizer_endpoints(model: str, greeting: str = "Hello") -> Exchange:
    """Find which rungs of the ladder the server offers (a few small requests saying `greeting`)."""
    hello = [{"role": "user", "content": greeting}]
    by_messages = yield from tokenize_messages(model, hello, name="tokenize-messages")
    by_content = yield from tokenize_text(greeting, parse_special=False, name="tokenize-content")
    rendered = yield from apply_template(hello, name="apply-template")
    back, _ = yield from detokenize_answer(by_content or by_messages or [0], name="detokenize")
    with_ids = yield Chat(_with_ids(model, hello, None), "return-token-ids", observe=False)
    returns_ids = (
        with_ids.ok
        and isinstance(with_ids.body, dict)
        and isinstance(with_ids.body.get("prompt_token_ids"), list)
    )
    props = yield Get("/props", "props")
    template = (
        props.body.get("chat_template") if props.ok and isinstance(props.body, dict) else None
    )
    # A server that ignores "messages" and tokenizes an empty content answers no ids.
    messages_ok = bool(by_messages) and by_messages != by_content
    return TokenizerEndpoints(
        tokenize="messages" if messages_ok else ("content" if by_content else None),
        apply_template=rendered is not None,
        detokenize=back is not None,
        return_token_ids=returns_ids,
        server_template_sha256=hashlib.sha256(template.encode()).hexdigest()
        if isinstance(template, str)
        else None,
    )


def prompt_token_ids(
    model: str,
    endpoints: TokenizerEndpoints,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    name: str,
) -> Generator[Chat | Post, ChatResult, tuple[list[int] | None, str]]:
    """The server's ids of a chat prompt by the best rung available, and the rung used."""
    method = endpoints.method
    if method == "tokenize_messages":
        ids = yield from tokenize_messages(model, messages, tools=tools, name=name)
        return ids, method
    if method == "return_token_ids":
        result = yield Chat(_with_ids(model, messages, tools), name, observe=False)
        ids = (
            result.body.get("prompt_token_ids")
            if result.ok and isinstance(result.body, dict)
            else None
        )
        return (ids if isinstance(ids, list) else None), method
    if method == "apply_template_tokenize":
        prompt = yield from apply_template(messages, tools=tools, name=f"{name}/apply-template")
        if prompt is None:
            return None, method
        ids = yield from tokenize_text(prompt, parse_special=True, name=f"{name}/tokenize")
        return ids, method
    return None, method
