"""A model's files from the Hugging Face hub, pinned to a commit, through ``huggingface_hub``.

``--profile hf:ORG/NAME[@REVISION]`` and the built-in profiles that ship no files (their
``hub`` setting) read the chat template, tokenizer and configs from a snapshot of the model
repository. ``huggingface_hub`` does the fetching as everywhere else in the field: its cache
(``HF_HUB_CACHE``, ``HF_HOME``), tokens (``HF_TOKEN``), and offline mode (``HF_HUB_OFFLINE=1``:
the cache only, never the network). Only data files are fetched: a repository's Python code
(a tokenizer that needs ``trust_remote_code``) is never downloaded nor run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError

HUB_PREFIX = "hf:"
# The files a profile reads: templates, tokenizers, the model's and processor's configs.
FILES = (
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tiktoken.model",
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "processor_config.json",
)
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """The files of one commit of a hub repository, in the local cache.

    Args:
        repo: ``ORG/NAME``.
        revision: the revision asked for (a branch, tag or commit).
        commit: the commit it resolved to.
        folder: the snapshot's folder in the cache.
        files: each file fetched -> its sha256.
    """

    repo: str
    revision: str
    commit: str
    folder: Path
    files: dict[str, str]

    def describe(self) -> dict[str, Any]:
        """What the scorecard records: the repository, revision, commit and file digests."""
        return {
            "repo": self.repo,
            "revision": self.revision,
            "commit": self.commit,
            "files": dict(sorted(self.files.items())),
        }


def parse(spec: str) -> tuple[str, str]:
    """``hf:ORG/NAME[@REVISION]`` -> (repo, revision); the revision defaults to ``main``.

    Raises:
        ConfigError: not of that form.
    """
    repo, _, revision = spec.removeprefix(HUB_PREFIX).partition("@")
    if not _REPO.match(repo) or (revision == "" and "@" in spec):
        raise ConfigError(
            f"--profile: {spec!r} is not a hub repository (expected hf:ORG/NAME or "
            f"hf:ORG/NAME@REVISION)"
        )
    return repo, revision or "main"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(
    repo: str,
    revision: str,
    *,
    cache_dir: Path | None = None,
    local_files_only: bool | None = None,
) -> Snapshot:
    """The snapshot of `repo` at `revision`, from the cache or downloaded into it.

    Args:
        repo: ``ORG/NAME``.
        revision: a branch, tag or commit.
        cache_dir: the hub cache (default: huggingface_hub's, from ``HF_HUB_CACHE``/``HF_HOME``).
        local_files_only: never use the network (default: ``HF_HUB_OFFLINE``).

    Raises:
        ConfigError: the repository or revision is unknown, private without a token, not in
            the cache in offline mode, or unreachable (one line saying which and what to do).
    """
    where = f"{HUB_PREFIX}{repo}@{revision}"
    folder = _download(repo, revision, where, cache_dir, local_files_only)
    commit = folder.name
    if not _COMMIT.match(commit):
        raise ConfigError(f"--profile {where}: the cache gave {folder}, not a commit's snapshot")
    files = {name: _sha256(folder / name) for name in FILES if (folder / name).is_file()}
    if not files:
        raise ConfigError(
            f"--profile {where}: commit {commit} has none of the model files ({', '.join(FILES)})"
        )
    return Snapshot(repo, revision, commit, folder, files)


def _download(
    repo: str, revision: str, where: str, cache_dir: Path | None, local_files_only: bool | None
) -> Path:
    """The snapshot folder of `repo` at `revision`; a ConfigError saying why it is not to be had."""
    from huggingface_hub import constants, errors, snapshot_download

    offline = constants.HF_HUB_OFFLINE if local_files_only is None else local_files_only
    try:
        folder = Path(
            snapshot_download(
                repo,
                revision=revision,
                cache_dir=cache_dir,
                allow_patterns=list(FILES),
                local_files_only=offline,
            )
        )
    except errors.GatedRepoError:
        raise ConfigError(
            f"--profile {where}: the repository is gated: accept its terms on the hub and set "
            f"HF_TOKEN to a token of that account"
        ) from None
    except errors.RepositoryNotFoundError:
        raise ConfigError(
            f"--profile {where}: no such repository on the hub (or it is private: set HF_TOKEN)"
        ) from None
    except errors.RevisionNotFoundError:
        raise ConfigError(
            f"--profile {where}: the repository has no revision {revision!r}"
        ) from None
    except errors.LocalEntryNotFoundError:
        cache = cache_dir or constants.HF_HUB_CACHE
        reason = "offline mode is on (HF_HUB_OFFLINE)" if offline else "the hub is unreachable"
        raise ConfigError(
            f"--profile {where}: not in the hub cache ({cache}) and {reason}: fetch it once "
            f"online (hf download {repo} --revision {revision}) or point HF_HUB_CACHE at a "
            f"cache that holds it"
        ) from None
    except (errors.HfHubHTTPError, OSError) as exc:
        raise ConfigError(
            f"--profile {where}: the hub did not answer: {' '.join(str(exc).split())[:200]}"
        ) from None
    return folder


def remote_code_tokenizer(folder: Path) -> str | None:
    """The class a repository's tokenizer needs remote code for, or None.

    A tokenizer is remote code when ``tokenizer_config.json`` maps ``AutoTokenizer`` to a
    module of the repository (``auto_map``) and there is no ``tokenizer.json`` to read instead.
    """
    if (folder / "tokenizer.json").is_file():
        return None
    config = folder / "tokenizer_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    auto_map = data.get("auto_map") if isinstance(data, dict) else None
    auto = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else None
    if isinstance(auto, list):
        auto = next((a for a in auto if a), None)
    return auto if isinstance(auto, str) else None
