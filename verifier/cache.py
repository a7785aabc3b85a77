"""The verifier's own cache: work already done on the same bytes, remembered by digest.

It only ever saves time: every entry is keyed by a sha256 over everything the work depended
on, so a changed input is a new key, and a cache that cannot be read or written is a cache
that is empty. It lives in ``$VERIFIER_CACHE_DIR``, else ``$XDG_CACHE_HOME/llm-verifier``,
else ``~/.cache/llm-verifier``; ``VERIFIER_CACHE_DIR=`` (empty) turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

CACHE_ENV = "VERIFIER_CACHE_DIR"


def cache_dir() -> Path | None:
    """The cache folder, or None when it is turned off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llm-verifier"


def _entry(kind: str, key: str) -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / kind / key


def is_marked(kind: str, key: str) -> bool:
    """Whether `key` (a sha256) was marked as done under `kind`."""
    entry = _entry(kind, key)
    return entry is not None and entry.is_file()


def mark(kind: str, key: str) -> None:
    """Remember that the work `key` of `kind` was done; a failure to write is no error."""
    write(kind, key, b"")


def read(kind: str, key: str) -> bytes | None:
    """The bytes kept for `key` under `kind`, or None: absent, unreadable or damaged.

    An entry holds the sha256 of its bytes before them, so that a damaged file is never
    taken for a result (an image sent wrong would be blamed on the endpoint).
    """
    entry = _entry(kind, key)
    if entry is None:
        return None
    try:
        stored = entry.read_bytes()
    except OSError:
        return None
    digest, data = stored[:32], stored[32:]
    return data if hashlib.sha256(data).digest() == digest else None


def write(kind: str, key: str, data: bytes) -> None:
    """Keep `data` for `key` under `kind`, whole or not at all; a failure is no error."""
    entry = _entry(kind, key)
    if entry is None:
        return
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a reader in another process sees all of it or nothing.
        handle, name = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(hashlib.sha256(data).digest() + data)
            os.replace(name, entry)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name)
