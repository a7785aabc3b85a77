"""The files of a run in the ``--out`` folder: names, atomic writes, shards, results."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..render.scorecard_markdown import render_scorecard_markdown
from ..scorecard.validate import scorecard_json

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclasses.dataclass(frozen=True, slots=True)
class OutDir:
    """The paths of one run's output files.

    Args:
        root: the ``--out`` folder.
        extra: the names of the files families write beside the scorecard, asked only when
            an earlier run's files are archived (it may import every family).
    """

    root: Path
    extra: Callable[[], tuple[str, ...]] = tuple

    @property
    def journal(self) -> Path:
        """Append-only outcome records (resume reads it)."""
        return self.root / "journal.jsonl"

    @property
    def transcript(self) -> Path:
        """Every request/response attempt, merged from the shards at the end of a session."""
        return self.root / "transcript.jsonl"

    @property
    def shards(self) -> Path:
        """Per-process transcript files written during a session."""
        return self.root / "transcript.d"

    @property
    def scorecard(self) -> Path:
        """The scorecard JSON."""
        return self.root / "scorecard.json"

    @property
    def signed(self) -> Path:
        """The signed scorecard: a DSSE envelope (``--sign-key``)."""
        return self.root / "scorecard.dsse.json"

    @property
    def summary(self) -> Path:
        """The scorecard as a human summary in Markdown."""
        return self.root / "scorecard.md"

    @property
    def previous(self) -> Path:
        """Where a new run moves the files of the run before it."""
        return self.root / "previous"

    def shard(self, run_id: str, worker: str) -> Path:
        """The transcript shard of one process."""
        return self.shards / f"{run_id}.{worker}.{os.getpid()}.jsonl"

    def move_previous(self, keep_run: str) -> bool:
        """Move an earlier run's files into ``previous/`` so that a new run loses nothing.

        Args:
            keep_run: the id of the run starting now, whose transcript shards stay.

        Returns:
            True when there was an earlier run.
        """
        names = [
            self.journal,
            self.transcript,
            self.scorecard,
            self.signed,
            self.summary,
            *(self.root / name for name in self.extra()),
        ]
        present = [p for p in names if p.exists()]
        shards = [
            p
            for p in (self.shards.iterdir() if self.shards.is_dir() else ())
            if not p.name.startswith(f"{keep_run}.")
        ]
        if not present and not shards:
            return False
        if self.previous.exists():
            shutil.rmtree(self.previous)
        self.previous.mkdir()
        for path in present:
            path.rename(self.previous / path.name)
        if shards:
            (self.previous / self.shards.name).mkdir()
            for path in shards:
                path.rename(self.previous / self.shards.name / path.name)
        return True

    def discard_shard(self, shard: Path) -> None:
        """Remove a shard of a run that never started (and the shard folder, when empty)."""
        shard.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.shards.rmdir()

    def merge_shards(self) -> None:
        """Append every shard's records to the transcript, in time order, then remove the shards.

        A torn last line (a process killed mid-write) is dropped. The transcript
        is replaced atomically, so a crash here leaves the old one intact.
        """
        if not self.shards.is_dir():
            return
        shard_files = sorted(self.shards.glob("*.jsonl"))
        records: list[tuple[str, int, str]] = []
        for order, shard in enumerate(shard_files):
            for line in shard.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                records.append((str(record.get("time", "")), order, line))
        records.sort(key=lambda r: (r[0], r[1]))
        existing = self.transcript.read_bytes() if self.transcript.exists() else b""
        if existing and not existing.endswith(b"\n"):
            existing += b"\n"
        merged = existing + "".join(line + "\n" for _, _, line in records).encode("utf-8")
        write_atomic(self.transcript, merged)
        shutil.rmtree(self.shards)

    def transcript_digest(self) -> tuple[str, int]:
        """sha256 of the transcript file and its number of records."""
        if not self.transcript.exists():
            return hashlib.sha256(b"").hexdigest(), 0
        data = self.transcript.read_bytes()
        return hashlib.sha256(data).hexdigest(), data.count(b"\n")


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; results are meant to be read and shared, so follow the umask.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        with os.fdopen(handle, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_results(
    out: OutDir,
    card: dict[str, Any],
    signing_key: Ed25519PrivateKey | None,
    files: Mapping[str, bytes] | None = None,
) -> None:
    """Write the scorecard, its summary and, with a key, its signed envelope, each atomically.

    The families' `files` (by name; a recording whose sha256 the scorecard holds) are written
    first, so that a scorecard never names a file that is not there.
    """
    for name, data in (files or {}).items():
        write_atomic(out.root / name, data)
    write_atomic(out.scorecard, scorecard_json(card))
    write_atomic(out.summary, render_scorecard_markdown(card).encode("utf-8"))
    if signing_key is not None:
        from ..scorecard.signing import sign_statement, statement

        sha = card["transcript"]["sha256"]
        signed = statement(card, transcript_sha256=sha, corpus_sha256=card["corpus"]["digest"])
        write_atomic(out.signed, sign_statement(signed, signing_key))
    else:
        # An envelope from an earlier session no longer matches this scorecard.
        out.signed.unlink(missing_ok=True)
