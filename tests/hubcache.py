"""A Hugging Face hub cache written by the tests, in the hub's own layout, so nothing downloads.

``models--ORG--NAME/blobs/<sha256>`` holds each file once, ``snapshots/<commit>/<name>`` links
to it, and ``refs/<branch>`` names the commit, as ``huggingface_hub`` leaves them after a
download; with ``HF_HUB_OFFLINE=1`` it reads them without the network.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

# Kimi's files in the package: the release's tokenizer and the K2 Instruct template.
KIMI_DIR = Path(__file__).resolve().parents[1] / "verifier" / "reference" / "builtin" / "kimi-k2"
KIMI_FILES = ("tiktoken.model", "tokenizer_config.json", "chat_template.jinja")


def commit_of(text: str) -> str:
    """A made-up 40-hex commit id, stable for a given text."""
    return hashlib.sha1(text.encode()).hexdigest()


def populate(
    cache: Path, repo: str, commit: str, files: Mapping[str, bytes], branch: str | None = "main"
) -> Path:
    """Write `files` as commit `commit` of `repo` into the hub cache `cache`; its snapshot."""
    root = cache / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snapshot))
    if branch is not None:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / branch).write_text(commit)
    return snapshot


def kimi_files() -> dict[str, bytes]:
    """Kimi's tokenizer and template as its hub repositories hold them: the tokenizer's config
    maps AutoTokenizer to the repository's own code (tokenization_kimi.py), which is not here."""
    return {name: (KIMI_DIR / name).read_bytes() for name in KIMI_FILES}
