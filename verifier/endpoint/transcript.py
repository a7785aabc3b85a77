"""The transcript: every request/response attempt, one JSON line each, secrets removed."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

from .redaction import Redactor


class Transcript:
    """Appends one JSON line per attempt to a file, flushed as it completes.

    One process writes one file (a shard); the controller merges the shards at
    the end of the run. Safe to use from several threads.

    Args:
        path: the shard to append to, or None to record nothing.
        redactor: removes the API key from everything written.
        target: ``reference`` for the reference deployment's client: every record says so,
            so that what the endpoint served is never mixed with what the reference did.
    """

    def __init__(self, path: Path | None, redactor: Redactor, target: str | None = None) -> None:
        self._redactor = redactor
        self._target = target
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        """Append `record` (redacted) as one line."""
        if self._file is None:
            return
        if self._target is not None:
            record = {**record, "target": self._target}
        line = json.dumps(self._redactor.data(record), ensure_ascii=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        """Close the file; later writes are dropped."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
