"""Plumbing the benchmarks share: the simulated vendor as a process, verifier runs, transcripts.

The simulated vendor always runs in a process of its own, so that its CPU time never counts
as the verifier's and its threads never compete for the verifier's GIL. A verifier run is
``python -m pytest --endpoint URL --out DIR ...`` in a subprocess, in an empty folder, as a
user types it; its wall time is measured from just before the process is started to its exit.

Times in a transcript are wall-clock (UTC, millisecond precision) at the start of each
attempt, and ``latency_ms`` is how long the attempt took, so an attempt ends at
``start + latency``. The benchmarks compare them with ``time.time()`` taken here, which is
the same clock.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from verifier.run.journal import JournalContents, read_journal
from verifier.run.outdir import OutDir
from verifier.simulator.process import SimulatorProcess, child_env

REPO = Path(__file__).resolve().parent.parent
# The built-in Kimi K2 profile with the test vision projector's image rule.
KIMI_PROFILE = f"kimi-k2:{REPO / 'tests' / 'data' / 'kimi-k2-vision'}"
CHAT_PATH = "/chat/completions"
PROBE = "probe"


class Simulator(SimulatorProcess):
    """``verifier simulate`` as a process of its own, whose CPU time can be read.

    Args:
        args: options after ``verifier simulate --port 0`` (``--latency-ms``, ``--defect``...).
    """

    def __init__(self, *args: str) -> None:
        super().__init__(list(args), cwd=REPO)

    def cpu(self) -> float | None:
        """CPU seconds the vendor has used so far (user + system), or None off Linux."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return None
        # utime and stime are fields 14 and 15 of proc(5)'s stat; the split starts at field 3,
        # after the command name (which may hold spaces and parentheses).
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """One transcript record: a request attempt and what came back."""

    start: float
    latency: float
    label: str
    url: str
    status: int | None
    usage: dict[str, Any] | None
    service: float | None = None

    @property
    def end(self) -> float:
        """When the answer was read (epoch seconds)."""
        return self.start + self.latency

    @property
    def family(self) -> str:
        """The family of the case that sent it, or ``probe``."""
        return self.label.partition("/")[0]

    @property
    def case(self) -> str:
        """``family/case id`` (the label without its ``#request`` name)."""
        return self.label.partition("#")[0]

    @property
    def is_probe(self) -> bool:
        """Sent by the probe before any case."""
        return self.family == PROBE

    @property
    def is_chat(self) -> bool:
        """A chat-completions request (not /models, /tokenize and the like)."""
        return self.url.endswith(CHAT_PATH)

    @property
    def delayed(self) -> bool:
        """A chat request the simulated vendor answered, after its ``--latency-ms``.

        It sleeps only before an answer: a request it rejects with a 4xx comes back at once.
        """
        return self.is_chat and self.status is not None and 200 <= self.status < 300


def _usage(response: Any) -> dict[str, Any] | None:
    """The usage object of a non-stream body, or of a stream's chunk that carries it."""
    if isinstance(response, dict):
        usage = response.get("usage")
        return usage if isinstance(usage, dict) else None
    if isinstance(response, list):
        for chunk in reversed(response):
            found = _usage(chunk)
            if found is not None:
                return found
    return None


def epoch(stamp: str) -> float:
    """Epoch seconds of an ISO 8601 time as the verifier writes them."""
    return datetime.fromisoformat(stamp).timestamp()


def parse_attempt(record: dict[str, Any]) -> Attempt:
    """An :class:`Attempt` from one transcript line's JSON."""
    return Attempt(
        start=epoch(record["time"]),
        latency=float(record.get("latency_ms") or 0.0) / 1000,
        label=str(record.get("label", "")),
        url=str(record.get("url", "")),
        status=record.get("status"),
        usage=_usage(record.get("response")),
        service=_server_timing(record.get("headers")),
    )


def _server_timing(headers: Any) -> float | None:
    """The vendor's own time in seconds, from its ``Server-Timing: total;dur=MS`` header."""
    value = headers.get("server-timing") if isinstance(headers, dict) else None
    match = re.search(r"dur=([0-9.]+)", value or "")
    return float(match.group(1)) / 1000 if match else None


def read_transcript(path: Path) -> list[Attempt]:
    """Every attempt of a transcript file, in start order."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return sorted(
        (parse_attempt(json.loads(line)) for line in lines if line.strip()), key=lambda a: a.start
    )


@dataclasses.dataclass
class Run:
    """One finished ``pytest --endpoint`` process.

    Args:
        started: epoch seconds just before the process was started.
        wall: seconds from then to its exit.
        cpu: CPU seconds (user + system) of the process and of the workers it started.
    """

    returncode: int
    started: float
    wall: float
    cpu: float
    out: Path
    stdout: str
    stderr: str

    def transcript(self) -> list[Attempt]:
        """The run's attempts, in start order."""
        return read_transcript(OutDir(self.out).transcript)

    def scorecard(self) -> dict[str, Any]:
        """The run's scorecard."""
        return json.loads(OutDir(self.out).scorecard.read_text(encoding="utf-8"))

    def journal(self) -> JournalContents:
        """The run's journal: its header and one outcome record per graded case."""
        return read_journal(OutDir(self.out).journal)

    def check(self, *allowed: int) -> Run:
        """Self, or an error with the run's output when it exited otherwise than `allowed`."""
        if self.returncode not in (allowed or (0,)):
            raise RuntimeError(
                f"the verifier run exited {self.returncode}:\n{self.stdout[-3000:]}"
                f"\n{self.stderr[-3000:]}"
            )
        return self


def add_suite_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose what a run verifies: ``--families`` and ``--profile``."""
    parser.add_argument("--families", help="comma-separated families (default: all)")
    parser.add_argument("--profile", default=KIMI_PROFILE, help="NAME:PATH (default: Kimi K2)")


def suite_args(options: argparse.Namespace) -> list[str]:
    """The verifier options for :func:`add_suite_options`' choices."""
    families = ["--families", options.families] if options.families else []
    return ["--profile", options.profile, *families]


def verifier_command(url: str, out: Path, args: Sequence[str]) -> list[str]:
    """The command line a user types (the cache plugin off: it would write into the folder).

    Over chat completions alone unless `args` name ``--api``: the figures, and the bare SDK
    loop they are set beside, are chat's.
    """
    command = [sys.executable, "-m", "pytest", "--endpoint", url, "--out", str(out)]
    chat = () if "--api" in args else ("--api", "chat")
    return [*command, "-p", "no:cacheprovider", *chat, *args]


@contextmanager
def workdir() -> Iterator[Path]:
    """An empty temporary folder for runs, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="verifier-bench-") as name:
        yield Path(name)


def run_verifier(url: str, args: Sequence[str], work: Path, timeout: float = 3600) -> Run:
    """Run the verifier in a subprocess in `work`, writing to a new folder under it."""
    out = Path(tempfile.mkdtemp(prefix="out-", dir=work))
    started = time.time()
    clock = time.perf_counter()
    before = _children_cpu()
    completed = subprocess.run(
        verifier_command(url, out, args),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
    )
    wall = time.perf_counter() - clock
    cpu = _children_cpu() - before
    return Run(completed.returncode, started, wall, cpu, out, completed.stdout, completed.stderr)


@dataclasses.dataclass(frozen=True, slots=True)
class BareRun:
    """The bare openai-SDK loop (``_bare_loop.py``) replaying a run's requests.

    Args:
        wall: seconds from just before its process was started to its exit.
        cpu: CPU seconds (user + system) of that process.
        requests: the requests it sent; errors: how many of them raised an SDK error.
    """

    wall: float
    cpu: float
    requests: int
    errors: int


def run_bare_loop(url: str, run: Run, concurrency: int, work: Path) -> BareRun:
    """Replay every request of `run`'s transcript, in start order, through a bare SDK loop."""
    lines = OutDir(run.out).transcript.read_text(encoding="utf-8").splitlines()
    records = sorted((json.loads(line) for line in lines if line.strip()), key=_start)
    requests = work / "bare-requests.jsonl"
    with requests.open("w", encoding="utf-8") as out:
        for record in records:
            keys = ("method", "url", "stream")
            out.write(json.dumps({**{k: record[k] for k in keys}, "body": record["request"]}))
            out.write("\n")
    command = [
        sys.executable,
        str(REPO / "bench" / "_bare_loop.py"),
        str(requests),
        "--base-url",
        url,
        "--concurrency",
        str(concurrency),
    ]
    clock = time.perf_counter()
    before = _children_cpu()
    completed = subprocess.run(command, capture_output=True, text=True, env=child_env())
    wall = time.perf_counter() - clock
    cpu = _children_cpu() - before
    if completed.returncode != 0:
        raise RuntimeError(f"the bare SDK loop failed:\n{completed.stderr[-3000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return BareRun(wall, cpu, result["requests"], result["errors"])


def _start(record: dict[str, Any]) -> float:
    return epoch(record["time"])


def _children_cpu() -> float:
    """CPU seconds of this process's children that have exited and been waited for.

    A child's figure includes its own waited-for children (pytest-xdist workers).
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def collected(stdout: str) -> int:
    """The number of items pytest says it collected (``588 tests collected``)."""
    found = re.search(r"(\d+) tests? collected", stdout)
    if found is None:
        raise RuntimeError(f"no collection count in the output:\n{stdout[-2000:]}")
    return int(found.group(1))


def parse_list(value: str) -> list[int]:
    """``8,32,128`` as positive integers (argparse type)."""
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive whole numbers like 8,32, got {value!r}"
        )
    return numbers


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as an aligned table: the first column left, the others right."""
    cells = [[str(h) for h in headers], *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print(
            "  ".join(
                value.ljust(width) if i == 0 else value.rjust(width)
                for i, (value, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def emit(record: dict[str, Any]) -> None:
    """Print the machine-readable result: one JSON object, the last line of the output."""
    print(json.dumps(record))
