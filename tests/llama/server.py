"""llama-server processes on free loopback ports, started and stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerFailed(RuntimeError):
    """llama-server exited or never became healthy."""


class LlamaServer:
    """One llama-server process.

    Args:
        binary: the llama-server executable.
        model: the text model GGUF.
        args: further command-line arguments (template, projector).
        log: where the server's output goes (read back when it fails).
    """

    def __init__(self, binary: Path, model: Path, args: list[str], log: Path) -> None:
        self.log = log
        self.port = free_port()
        command = [
            str(binary),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--no-ui",
            "--threads",
            "1",
            "--seed",
            "1234",
            *args,
        ]
        self.command = command
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def url(self) -> str:
        """The API base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_healthy(self, timeout: float = 120) -> None:
        """Poll ``/health`` until the model is loaded.

        Raises:
            ServerFailed: the process exited, or was not healthy in time (with its log tail).
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerFailed(
                    f"llama-server exited with {self.process.returncode}:\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.stop()
        raise ServerFailed(f"llama-server was not healthy within {timeout:g}s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The end of the server's log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the process group by PID: SIGTERM, then SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
