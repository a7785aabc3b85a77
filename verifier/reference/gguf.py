"""Profiles read from a GGUF file's metadata: ``--profile gguf:PATH``.

Users who serve GGUF files (llama.cpp, Ollama, LM Studio) verify their server against the
file they serve: its ``tokenizer.chat_template`` is the template, and its
``tokenizer.ggml.*`` keys (vocabulary, merges, token types, pre-tokenizer name, BOS/EOS
ids, ``add_bos_token``) are built into a Hugging Face ``tokenizers`` tokenizer, the same
backend a folder's ``tokenizer.json`` loads into.

The pre-tokenizer name (``tokenizer.ggml.pre``) is llama.cpp's label for a family of
published tokenizers; each supported name maps to the pre-tokenizer of the
``tokenizer.json`` that family's lab published, not to llama.cpp's own reimplementation, so
a server's divergence from the release stays visible.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError

# GGUF token types (llama.cpp's llama_token_type): control tokens are special, user-defined
# ones are matched whole in any text but are not special.
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
# tokenizer.ggml.pre -> the published tokenizer.json's pre_tokenizer. Only names whose
# splitting a test proves are here (tests/test_gguf_profile.py, and SmolLM2 against
# llama-server in tests/test_smollm2.py); another is an error, never a guess.
PRE_TOKENIZERS: dict[str, Mapping[str, Any]] = {
    # GPT-2's own byte-level regex.
    "default": {**_BYTE_LEVEL, "use_regex": True},
    "gpt-2": {**_BYTE_LEVEL, "use_regex": True},
    # SmolLM / SmolLM2 (HuggingFaceTB): every digit on its own, then GPT-2's regex.
    "smollm": {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {**_BYTE_LEVEL, "use_regex": True},
        ],
    },
}


@dataclasses.dataclass(frozen=True)
class GGUFTokenizer:
    """The tokenizer and template keys of a GGUF file's metadata."""

    model: str
    pre: str
    tokens: Sequence[str]
    token_types: Sequence[int]
    merges: Sequence[str]
    bos_id: int | None
    eos_id: int | None
    add_bos: bool
    chat_template: str | None
    context_length: int | None = None
    rope_scaling: tuple[str, float, int | None] | None = None


# GGUF value types (the GGUF specification's gguf_metadata_value_type) -> struct format.
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9


class _Metadata:
    """The key-value section of a GGUF file, read without touching the tensors.

    gguf's own ``GGUFReader`` builds a numpy view per array element and per tensor: about
    16 s for a 49k-token vocabulary on these machines, in every process that loads the
    profile. This reads the same section in well under a second.
    """

    def __init__(self, data: bytes | mmap.mmap) -> None:
        self.data = data
        self.at = 0
        if data[:4] != b"GGUF":
            raise ValueError("no GGUF magic number")
        version = struct.unpack_from("<I", data, 4)[0]
        # A big-endian file has its version's bytes swapped.
        self.order = "<" if version < 1 << 16 else ">"
        version = struct.unpack_from(self.order + "I", data, 4)[0]
        if version < 2:
            raise ValueError(f"GGUF version {version} is too old (2 or later is read)")
        self.at = 16
        (count,) = self._unpack("Q")
        self.values: dict[str, Any] = {}
        for _ in range(count):
            key = self._string()
            (kind,) = self._unpack("I")
            self.values[key] = self._value(kind)

    def _unpack(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(self.order + fmt, self.data, self.at)
        self.at += struct.calcsize(self.order + fmt)
        return values

    def _string(self) -> str:
        (size,) = self._unpack("Q")
        text = bytes(self.data[self.at : self.at + size]).decode("utf-8", errors="replace")
        self.at += size
        return text

    def _value(self, kind: int) -> Any:
        if kind == _STRING:
            return self._string()
        if kind == _ARRAY:
            item, count = self._unpack("IQ")
            if item in _SCALARS:
                return list(self._unpack(f"{count}{_SCALARS[item]}"))
            return [self._value(item) for _ in range(count)]
        if kind in _SCALARS:
            return self._unpack(_SCALARS[kind])[0]
        raise ValueError(f"unknown GGUF value type {kind} at byte {self.at}")


def read_metadata(path: Path) -> GGUFTokenizer:
    """The tokenizer and template metadata of the GGUF file at `path`.

    Raises:
        ConfigError: the file does not exist or is not a GGUF file.
    """
    if not path.is_file():
        raise ConfigError(f"--profile gguf:{path}: no such file")
    try:
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            values = _Metadata(data).values
    except (ValueError, OSError, struct.error) as exc:
        raise ConfigError(
            f"--profile gguf:{path}: not a readable GGUF file: {' '.join(str(exc).split())}"
        ) from None
    model = values.get("tokenizer.ggml.model")
    if model is None:
        raise ConfigError(f"--profile gguf:{path}: the file has no tokenizer.ggml.model")
    bos, eos = values.get("tokenizer.ggml.bos_token_id"), values.get("tokenizer.ggml.eos_token_id")
    # The model's own keys are named after its architecture (llama.context_length).
    arch = values.get("general.architecture")
    context = values.get(f"{arch}.context_length")
    factor = values.get(f"{arch}.rope.scaling.factor")
    kind = values.get(f"{arch}.rope.scaling.type")
    scaling = None
    if isinstance(factor, int | float) and kind not in (None, "none") and factor > 1:
        original = values.get(f"{arch}.rope.scaling.original_context_length")
        scaling = (str(kind), float(factor), int(original) if isinstance(original, int) else None)
    return GGUFTokenizer(
        model=str(model),
        pre=str(values.get("tokenizer.ggml.pre") or "default"),
        tokens=list(values.get("tokenizer.ggml.tokens") or []),
        token_types=[int(t) for t in values.get("tokenizer.ggml.token_type") or []],
        merges=list(values.get("tokenizer.ggml.merges") or []),
        bos_id=None if bos is None else int(bos),
        eos_id=None if eos is None else int(eos),
        add_bos=bool(values.get("tokenizer.ggml.add_bos_token")),
        chat_template=values.get("tokenizer.chat_template"),
        context_length=int(context) if isinstance(context, int) and context > 0 else None,
        rope_scaling=scaling,
    )


def tokenizer_json(meta: GGUFTokenizer, where: str) -> str:
    """The Hugging Face ``tokenizer.json`` text the metadata describes.

    Raises:
        ConfigError: a tokenizer type or pre-tokenizer this module does not build, or
            metadata that contradicts itself (naming `where`).
    """
    if meta.model != "gpt2":
        raise ConfigError(
            f"--profile {where}: tokenizer.ggml.model {meta.model!r} is not supported "
            "(supported: 'gpt2', byte-level BPE); give the model's folder instead"
        )
    pre = PRE_TOKENIZERS.get(meta.pre)
    if pre is None:
        raise ConfigError(
            f"--profile {where}: tokenizer.ggml.pre {meta.pre!r} is not supported "
            f"(supported: {', '.join(sorted(PRE_TOKENIZERS))}); give the model's folder instead"
        )
    if not meta.tokens or not meta.merges:
        raise ConfigError(f"--profile {where}: the file has no tokenizer.ggml.tokens or merges")
    types = list(meta.token_types) or [NORMAL] * len(meta.tokens)
    if len(types) != len(meta.tokens):
        raise ConfigError(
            f"--profile {where}: {len(types)} token types for {len(meta.tokens)} tokens"
        )
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(meta.tokens, types),
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": {**_BYTE_LEVEL, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {token: index for index, token in enumerate(meta.tokens)},
            "merges": [merge.split(" ", 1) for merge in meta.merges],
        },
    }
    return json.dumps(document, ensure_ascii=False)


def _added_tokens(tokens: Sequence[str], types: Sequence[int]) -> list[dict[str, Any]]:
    """The ``added_tokens`` entries: control tokens as special, user-defined ones as not."""
    return [
        {
            "id": index,
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": kind == CONTROL,
        }
        for index, (token, kind) in enumerate(zip(tokens, types, strict=True))
        if kind in (CONTROL, USER_DEFINED)
    ]


def template_variables(meta: GGUFTokenizer) -> dict[str, str]:
    """``bos_token`` and ``eos_token`` as the template sees them (their token text)."""
    named = {"bos_token": meta.bos_id, "eos_token": meta.eos_id}
    return {
        key: meta.tokens[index]
        for key, index in named.items()
        if index is not None and 0 <= index < len(meta.tokens)
    }
