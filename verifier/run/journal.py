"""The results journal: one JSON line per outcome, written through, so a killed run can resume.

The first line is the run header (``"type": "run"``): run id, start time and
the settings that must match for ``--resume`` to continue the run. Every later
line is an outcome record (``"type": "outcome"``). A case may appear more than
once (an ``error`` is retried on resume): the last record of a case wins.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError

SCHEMA_VERSION = 1
# Outcomes that resume keeps; an error is run again.
FINAL_STATUSES = frozenset({"pass", "fail", "unsupported"})
# A killed process loses nothing a write returned for (the kernel holds it); fsync guards only
# against the machine going down, which loses the records written since the last one (resume
# runs those cases again). At most one a second spares a disk flush per case: 0.3 s of a 7 s
# run against the simulated vendor.
SYNC_INTERVAL = 1.0


@dataclasses.dataclass(slots=True)
class JournalContents:
    """What a journal file holds.

    Args:
        header: the run header, or None for an empty file.
        records: outcome records in file order.
        torn: the last line was incomplete (a killed writer) and was dropped.
        valid_bytes: the length of the file up to the last whole line.
        sessions: how many sessions wrote to it (1 + the number of resumes).
    """

    header: dict[str, Any] | None
    records: list[dict[str, Any]]
    torn: bool
    valid_bytes: int
    sessions: int = 1

    def latest(self) -> dict[str, dict[str, Any]]:
        """The last record of each case, by case key, in first-seen order."""
        latest: dict[str, dict[str, Any]] = {}
        for record in self.records:
            latest[record["case"]] = record
        return latest


def read_journal(path: Path) -> JournalContents:
    """Read a journal, dropping a torn last line.

    Raises:
        ConfigError: a line other than the last is not a JSON record.
    """
    data = path.read_bytes()
    # Every complete record ends with a newline; anything after the last one is torn.
    valid = data.rfind(b"\n") + 1
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    sessions = 1
    for number, raw in enumerate(data[:valid].split(b"\n")[:-1], start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict) or "type" not in record:
                raise ValueError("not a journal record")
        except (ValueError, UnicodeDecodeError):
            raise ConfigError(
                f"{path}:{number}: the journal is damaged (not a JSON record); "
                f"start a new run without --resume or use another --out"
            ) from None
        if record["type"] == "run":
            header = record
        elif record["type"] == "outcome":
            records.append(record)
        elif record["type"] == "resume":
            sessions += 1
    return JournalContents(header, records, valid < len(data), valid, sessions)


class Journal:
    """Appends outcome records, each written to the file before the call returns.

    The file is fsynced with its first line, then with the first record written at least
    SYNC_INTERVAL seconds after the last fsync, and when it is closed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._synced = -SYNC_INTERVAL

    @classmethod
    def create(cls, path: Path, header: dict[str, Any]) -> Journal:
        """Start a new journal with `header` as its first line."""
        path.unlink(missing_ok=True)
        journal = cls(path)
        journal._write({"type": "run", "schema_version": SCHEMA_VERSION, **header})
        return journal

    @classmethod
    def resume(cls, path: Path, contents: JournalContents, started: str) -> Journal:
        """Continue a journal read with :func:`read_journal`, cutting a torn last line."""
        if contents.torn:
            with path.open("r+b") as f:
                f.truncate(contents.valid_bytes)
        journal = cls(path)
        journal._write({"type": "resume", "started": started})
        return journal

    def append(self, record: dict[str, Any]) -> None:
        """Append one outcome record."""
        self._write({"type": "outcome", **record})

    def _write(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            os.write(self._fd, line)
            now = time.monotonic()
            if now - self._synced >= SYNC_INTERVAL:
                os.fsync(self._fd)
                self._synced = now

    def close(self) -> None:
        """Flush the file to disk and close it."""
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1


# Settings a resumed run may change: they change how fast, never what is graded.
RESUMABLE_SETTINGS = frozenset({"concurrency", "insecure"})


def resume_mismatch(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Which setting differs between a journal's run and this one, if any."""
    for key, value in new["settings"].items():
        if key in RESUMABLE_SETTINGS:
            continue
        if old.get("settings", {}).get(key) != value:
            return f"{key}: {old.get('settings', {}).get(key)!r} then, {value!r} now"
    if old.get("corpus", {}).get("digest") != new["corpus"]["digest"]:
        return "the case corpus changed"
    if old.get("profile") != new.get("profile"):
        return "the profile changed"
    return None
