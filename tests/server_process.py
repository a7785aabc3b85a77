"""A real server under test as a process on a free loopback port, started and stopped by PID."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    """A loopback port free a moment ago (bound and released), for a server told its port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerFailed(RuntimeError):
    """The server exited or never became healthy (the message ends with its log's tail)."""


class ServerProcess:
    """One server process in a session of its own, so that stopping it stops its children.

    A subclass builds its command line for ``self.port`` and calls :meth:`launch`.

    Args:
        name: what errors call the server.
        log: where the server's output goes (read back when it fails).
    """

    # Seconds between two /health polls, allowed to become healthy, and for a graceful stop.
    poll_interval = 0.1
    health_timeout = 120.0
    stop_grace = 10.0

    def __init__(self, name: str, log: Path) -> None:
        self.name = name
        self.log = log
        self.port = free_port()
        self.command: list[str] = []

    def launch(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        address_space: int | None = None,
    ) -> None:
        """Start `command` with its output in the log, within `address_space` bytes if given."""
        self.command = list(command)

        def limit() -> None:
            assert address_space is not None
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                start_new_session=True,
                preexec_fn=None if address_space is None else limit,
            )

    @property
    def url(self) -> str:
        """The API base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Poll ``/health`` until the model is loaded and the server answers.

        Args:
            timeout: seconds allowed (default: the class's ``health_timeout``).

        Raises:
            ServerFailed: the process exited, or was not healthy in time (with its log tail).
        """
        timeout = self.health_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerFailed(
                    f"{self.name} exited with {self.process.returncode}:\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(self.poll_interval)
        self.stop()
        raise ServerFailed(f"{self.name} was not healthy within {timeout:g}s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The end of the server's log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the process group by PID: SIGTERM, then SIGKILL for whatever outlived it.

        The group holds the server's children too (vLLM's engine core), which may outlive the
        process that started them.
        """
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
