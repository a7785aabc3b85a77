"""llama-server processes on free loopback ports, started and stopped by PID."""

from __future__ import annotations

from pathlib import Path

from tests.server_process import ServerProcess


class LlamaServer(ServerProcess):
    """One llama-server process (one thread, a fixed seed).

    Args:
        binary: the llama-server executable.
        model: the text model GGUF.
        args: further command-line arguments (template, projector).
        log: where the server's output goes (read back when it fails).
        address_space: the most memory the process may map, in bytes (default: no limit).
    """

    def __init__(
        self,
        binary: Path,
        model: Path,
        args: list[str],
        log: Path,
        address_space: int | None = None,
    ) -> None:
        super().__init__("llama-server", log)
        self.launch(
            [
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
            ],
            address_space=address_space,
        )
