"""Reference tokenizers: a tiktoken BPE file or a Hugging Face tokenizer.json, read locally.

Both backends meet one seam, :class:`Tokenizer`. Nothing here downloads: a
tiktoken file is read with ``load_tiktoken_bpe`` from a local path, a
tokenizer.json (a file, or built from a GGUF file's metadata) with ``tokenizers``.

Special-token hygiene lives in :func:`encode_prompt`: text a user wrote is
encoded as ordinary text even when it spells a special token; only what the
template itself inserted is special.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

# Kimi's published pre-tokenisation regex (tokenization_kimi.py); a regex, not a vocabulary.
KIMI_PAT_STR = "|".join(
    [
        r"""[\p{Han}]+""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


class Tokenizer(Protocol):
    """What the reference needs from a tokenizer."""

    name: str
    digest: str

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """Special token text -> id."""

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text`, every character ordinary (special-token text included)."""

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (invalid UTF-8 replaced)."""

    def vocab_size(self) -> int:
        """Number of ids."""


def file_digest(*paths: Path) -> str:
    """sha256 over files' names and bytes: what identifies a tokenizer or a template."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class TiktokenTokenizer:
    """A tiktoken BPE file with its pre-tokenisation regex and special tokens.

    Args:
        path: the ``*.model`` / ``*.tiktoken`` file (base64 token, rank per line).
        pat_str: the pre-tokenisation regex.
        special_tokens: special token text -> id.
        ranks: the file's ranks when the caller has already read them.
    """

    def __init__(
        self,
        path: Path,
        pat_str: str,
        special_tokens: Mapping[str, int],
        ranks: Mapping[bytes, int] | None = None,
    ) -> None:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        self.name = path.name
        self.path = path
        self.pat_str = pat_str
        self.special_tokens = dict(special_tokens)
        self.digest = hashlib.sha256(
            path.read_bytes()
            + pat_str.encode()
            + repr(sorted(self.special_tokens.items())).encode()
        ).hexdigest()
        self._encoding = tiktoken.Encoding(
            name=f"verifier:{path.name}",
            pat_str=pat_str,
            mergeable_ranks=dict(ranks) if ranks is not None else load_tiktoken_bpe(str(path)),
            special_tokens=self.special_tokens,
        )

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text`, every character ordinary."""
        return self._encoding.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`."""
        return self._encoding.decode(list(ids), errors="replace")

    def vocab_size(self) -> int:
        """Number of ids."""
        return int(self._encoding.n_vocab)


class HFTokenizer:
    """A Hugging Face tokenizer (through the ``tokenizers`` library).

    Args:
        path: a ``tokenizer.json`` file.
        text: its JSON text instead, built in memory (a GGUF file's tokenizer); `name`
            then says where it came from.
        name: the tokenizer's name in the scorecard (default: the file's name).
    """

    def __init__(
        self, path: Path | None = None, *, text: str | None = None, name: str = ""
    ) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        if path is not None:
            text = path.read_text(encoding="utf-8")
            self.digest = file_digest(path)
        elif text is not None:
            self.digest = hashlib.sha256(text.encode()).hexdigest()
        else:
            raise TypeError("HFTokenizer needs a path or the JSON text")
        self.name = name or (path.name if path is not None else "tokenizer.json")
        self._tokenizer = RustTokenizer.from_str(text)
        # A second instance encodes special-token text as ordinary text.
        self._ordinary = RustTokenizer.from_str(text)
        self._ordinary.encode_special_tokens = True
        self.special_tokens = {
            token.content: int(index)
            for index, token in self._tokenizer.get_added_tokens_decoder().items()
            if token.special
        }

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text`, every character ordinary."""
        return list(self._ordinary.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`."""
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=False))

    def vocab_size(self) -> int:
        """Number of ids."""
        return int(self._tokenizer.get_vocab_size(with_added_tokens=True))


def _trie(words: list[str]) -> str:
    """A regex for `words` as a prefix tree, longest match first.

    At each '<' or '[' of a text the engine follows one branch instead of trying every
    special token in turn (a flat alternation of 256 tokens is slow on markup).
    """
    groups: dict[str, list[str]] = {}
    ends = False
    for word in words:
        if word:
            groups.setdefault(word[0], []).append(word[1:])
        else:
            ends = True
    branches = [re.escape(c) + _trie(rest) for c, rest in sorted(groups.items())]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if ends else body


@functools.lru_cache(maxsize=64)
def special_pattern(tokens: tuple[str, ...]) -> re.Pattern[str]:
    """A compiled regex matching any of `tokens`, longest match first."""
    return re.compile(_trie(sorted(set(tokens))))


def encode_prompt(
    tokenizer: Tokenizer, text: str, ordinary_spans: Sequence[tuple[int, int]] = ()
) -> list[int]:
    """Ids of a rendered prompt: special-token text is special except inside `ordinary_spans`.

    The text is cut at each special token the template inserted; the pieces between
    are encoded as ordinary text (as tiktoken's and Hugging Face's tokenizers do
    when they recognise special tokens), so the result is token-exact.
    """
    specials = tokenizer.special_tokens
    if not specials:
        return tokenizer.encode_ordinary(text)
    starts = [s for s, _ in ordinary_spans]
    ids: list[int] = []
    cursor = 0
    for match in special_pattern(tuple(specials)).finditer(text):
        at = bisect.bisect_right(starts, match.start()) - 1
        if at >= 0 and match.start() < ordinary_spans[at][1]:
            continue
        if match.start() > cursor:
            ids.extend(tokenizer.encode_ordinary(text[cursor : match.start()]))
        ids.append(specials[match.group(0)])
        cursor = match.end()
    if cursor < len(text):
        ids.extend(tokenizer.encode_ordinary(text[cursor:]))
    return ids


def encode_all_special(tokenizer: Tokenizer, text: str) -> list[int]:
    """Ids of `text` with every special-token spelling taken as special (the unsafe way)."""
    return encode_prompt(tokenizer, text, ())
