"""``verifier simulate`` as a process of its own, for test suites and benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: this one's, with bytecode caching on.

    Without the cache every child recompiles (and pytest assertion-rewrites) every module.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **(extra or {})}


class SimulatorProcess:
    """``verifier simulate --port 0 ARGS`` as a process; its base URL is the first line it prints.

    Args:
        args: options after ``--port 0`` (``--latency-ms``, ``--defect``...).
        env: variables added to the environment (a key for ``--require-key-env``).
        cwd: the working folder, or None for this one.

    Raises:
        RuntimeError: the process did not print a URL (with what it wrote to stderr).
    """

    def __init__(
        self, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        # stderr goes to a file, not a pipe: a pipe nobody reads while the vendor runs
        # would block it once its tracebacks filled the pipe's buffer.
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "verifier", "simulate", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=cwd,
            env=child_env(env),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("http://"):
            self._halt()
            self._stderr.seek(0)
            said = self._stderr.read().decode("utf-8", "replace")[-2000:]
            self._stderr.close()
            raise RuntimeError(f"verifier simulate {' '.join(args)} did not start: {line!r} {said}")
        self.url = line

    def stop(self) -> None:
        """Stop the process (SIGTERM lets it close its socket), killing it if it hangs."""
        self._halt()
        self._stderr.close()

    def _halt(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> SimulatorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
