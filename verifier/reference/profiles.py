"""Model profiles: the chat template and tokenizer of the model under test, and its policies.

A profile is a folder the user brings from the model release. What is found in it:

- the chat template: ``chat_template.jinja``, else the ``chat_template`` of
  ``tokenizer_config.json``;
- the tokenizer: ``tokenizer.json`` (Hugging Face), else a tiktoken BPE file
  (``tiktoken.model``) with its pre-tokenisation regex (from ``tokenizer_spec.json``,
  ``verifier-profile.json`` or the built-in profile named on the command line) and
  the special tokens of ``tokenizer_config.json``;
- optionally ``verifier-profile.json`` (validated against ``schemas/profile.schema.json``):
  file names, the regex, and policies such as the prompt-token tolerance.

``--profile PATH`` or ``--profile NAME:PATH``; NAME picks built-in defaults
(``kimi-k2``: Kimi's regex and reserved special tokens).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions

from .. import resources
from ..errors import ConfigError
from .template import ChatTemplate, Rendered, TemplateError
from .tokenizer import (
    KIMI_PAT_STR,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    encode_prompt,
)

PROFILE_FILE = "verifier-profile.json"
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Built-in defaults by profile name; a folder's verifier-profile.json overrides them.
BUILTIN: dict[str, dict[str, Any]] = {
    "kimi-k2": {"tokenizer": {"pat_str": KIMI_PAT_STR, "reserved_special_tokens": 256}},
}


@dataclasses.dataclass(frozen=True)
class Profile:
    """A loaded profile: render and tokenize exactly as the model expects.

    Args:
        name: the profile's name (the NAME of NAME:PATH, else the folder's name).
        root: the folder.
        template: the chat template.
        tokenizer: the tokenizer.
        settings: the merged verifier-profile.json settings.
    """

    name: str
    root: Path
    template: ChatTemplate
    tokenizer: Tokenizer
    settings: Mapping[str, Any]

    @property
    def template_digest(self) -> str:
        """sha256 of the template text."""
        return hashlib.sha256(self.template.source.encode()).hexdigest()

    @property
    def prompt_tokens_tolerance(self) -> int:
        """How far usage.prompt_tokens may stray from the local count (default 0)."""
        return int(self.settings.get("prompt_tokens_tolerance", 0))

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> Rendered:
        """The prompt text of a conversation, with where user text spelling special tokens is."""
        return self.template.render(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            protect=tuple(self.tokenizer.special_tokens),
        )

    def encode(self, rendered: Rendered) -> list[int]:
        """Ids of a rendered prompt, with user-written special-token text kept ordinary."""
        return encode_prompt(self.tokenizer, rendered.text, rendered.spans)

    def prompt_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Render and encode a conversation."""
        rendered = self.render(messages, tools, add_generation_prompt=add_generation_prompt)
        return self.encode(rendered)

    def describe(self) -> dict[str, Any]:
        """What the scorecard records about the profile."""
        return {
            "name": self.name,
            "template_sha256": self.template_digest,
            "tokenizer": self.tokenizer.name,
            "tokenizer_sha256": self.tokenizer.digest,
        }


def parse_spec(spec: str) -> tuple[str, Path]:
    """``PATH`` or ``NAME:PATH`` -> (name, folder).

    Raises:
        ConfigError: the folder does not exist.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.resolve().name, path.resolve()
    name, sep, rest = spec.partition(":")
    if sep and _NAME.match(name):
        folder = Path(rest).expanduser()
        if folder.is_dir():
            return name, folder.resolve()
        raise ConfigError(
            f"--profile: {rest!r} is not a folder (expected NAME:PATH to a model folder)"
        )
    raise ConfigError(f"--profile: {spec!r} is not a folder (expected PATH or NAME:PATH)")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--profile: cannot read {path}: {exc}") from None


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _template_source(
    root: Path, settings: Mapping[str, Any], config: Mapping[str, Any]
) -> tuple[str, str]:
    """The chat template's text and where it came from (for messages)."""
    named = settings.get("template")
    candidates = [root / named] if named else [root / "chat_template.jinja"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8"), str(candidate)
    template = config.get("chat_template")
    if isinstance(template, list):
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    if isinstance(template, str):
        return template, f"{root / 'tokenizer_config.json'} (chat_template)"
    raise ConfigError(
        f"--profile: {root} has no chat template (chat_template.jinja or tokenizer_config.json)"
    )


def _tokenizer(root: Path, settings: Mapping[str, Any], config: Mapping[str, Any]) -> Tokenizer:
    spec = settings.get("tokenizer", {})
    file = spec.get("file")
    if (file and file.endswith(".json")) or (not file and (root / "tokenizer.json").is_file()):
        return HFTokenizer(root / (file or "tokenizer.json"))
    path = root / (file or "tiktoken.model")
    if not path.is_file():
        raise ConfigError(f"--profile: {root} has no tokenizer (tokenizer.json or tiktoken.model)")
    pat_str = spec.get("pat_str")
    if not pat_str:
        raise ConfigError(
            f"--profile: {path.name} needs its pre-tokenisation regex: add tokenizer_spec.json or "
            f"{PROFILE_FILE} with tokenizer.pat_str, or use a built-in NAME ({', '.join(BUILTIN)})"
        )
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(path))
    base = len(ranks)
    reserved = int(spec.get("reserved_special_tokens", 0))
    named = {
        int(k): v["content"]
        for k, v in (config.get("added_tokens_decoder") or {}).items()
        if isinstance(v, Mapping) and isinstance(v.get("content"), str)
    }
    specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(base, base + reserved)}
    specials.update({text: i for i, text in named.items() if i >= base})
    return TiktokenTokenizer(path, pat_str, specials, ranks)


def load_profile(spec: str) -> Profile:
    """Load the profile named by ``--profile``.

    Raises:
        ConfigError: the folder, its files or its settings do not load, or the template
            does not render a one-message conversation.
    """
    name, root = parse_spec(spec)
    settings: dict[str, Any] = dict(BUILTIN.get(name, {}))
    spec_file = root / "tokenizer_spec.json"
    if spec_file.is_file():
        data = _read_json(spec_file)
        settings = _merge(
            settings,
            {
                "tokenizer": {
                    "file": data.get("vocab_file"),
                    "pat_str": data.get("pat_str"),
                    "reserved_special_tokens": data.get("num_reserved_special_tokens", 0),
                }
            },
        )
    if (root / PROFILE_FILE).is_file():
        data = _read_json(root / PROFILE_FILE)
        error = jsonschema_exceptions.best_match(resources.validator("profile").iter_errors(data))
        if error is not None:
            raise ConfigError(
                f"--profile: {root / PROFILE_FILE}: {error.json_path}: {error.message}"
            )
        settings = _merge(settings, data)
    config = (
        _read_json(root / "tokenizer_config.json")
        if (root / "tokenizer_config.json").is_file()
        else {}
    )
    variables = {
        key: text
        for key in ("bos_token", "eos_token", "unk_token", "pad_token")
        if (text := _token_text(config.get(key))) is not None
    }
    try:
        source, origin = _template_source(root, settings, config)
        template = ChatTemplate(source, variables)
        tokenizer = _tokenizer(root, settings, config)
    except TemplateError as exc:
        raise ConfigError(f"--profile: {origin}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--profile: cannot read {root}: {exc}") from None
    except ConfigError:
        raise
    except Exception as exc:
        # tiktoken and tokenizers report a malformed file with a bare ValueError or
        # Exception; the user needs to know which folder holds it, in one line.
        raise ConfigError(
            f"--profile: the tokenizer in {root} does not load: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from None
    profile = Profile(name, root, template, tokenizer, settings)
    try:
        profile.prompt_ids([{"role": "user", "content": "Hello"}])
    except TemplateError as exc:
        raise ConfigError(f"--profile: {origin}: {exc}") from None
    return profile
