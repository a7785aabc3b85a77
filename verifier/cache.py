"""The verifier's own cache: work already done on the same bytes, remembered by digest.

It only ever saves time: every entry is keyed by a sha256 over everything the work depended
on, so a changed input is a new key, and a cache that cannot be read or written is a cache
that is empty. It lives in ``$VERIFIER_CACHE_DIR``, else ``$XDG_CACHE_HOME/llm-verifier``,
else ``~/.cache/llm-verifier``; ``VERIFIER_CACHE_DIR=`` (empty) turns it off.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

CACHE_ENV = "VERIFIER_CACHE_DIR"


def cache_dir() -> Path | None:
    """The cache folder, or None when it is turned off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llm-verifier"


def _marker(kind: str, key: str) -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / kind / key


def is_marked(kind: str, key: str) -> bool:
    """Whether `key` (a sha256) was marked as done under `kind`."""
    marker = _marker(kind, key)
    return marker is not None and marker.is_file()


def mark(kind: str, key: str) -> None:
    """Remember that the work `key` of `kind` was done; a failure to write is no error."""
    marker = _marker(kind, key)
    if marker is None:
        return
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
