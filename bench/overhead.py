"""Benchmark the verifier's own cost per request: ``EndpointClient.chat`` against the simulator.

The simulated vendor runs in a process of its own, at zero latency, so the CPU time of this
process (``time.process_time``, every thread) is the verifier's client alone: the openai SDK
underneath, our retry loop, parsing the answer into a ``ChatResult`` (the stream's SSE
events accumulated), and the transcript line written for every attempt (to a temporary
file, as in a run). Each cell sends ``--requests`` requests, one at a time
(concurrency 1) or from a pool of threads that share one client (as ``--concurrency`` does
in a run), non-stream and stream. The request is a forced tool call (one tool,
``tool_choice: required``), the commonest kind of request in the suite.

For comparison the same requests go through the raw openai SDK
(``client.chat.completions.create``, the stream iterated to its end), which is what a user's
own script would pay; the verifier asks the SDK for the raw response and parses it itself.

Before the timed cells, a new client and its first request are timed alone ("cold": the
SDK's client and connection pool, its lazily imported parts, the first TCP connection; the
vendor warmed up first); then ``--warmup`` requests per cell are sent untimed.

It prints a table, then, as its last line, one JSON object for machines.

Run from the repository root, in the project's virtualenv::

    python bench/overhead.py                       # 2000 requests per cell
    python bench/overhead.py --requests 500 --concurrency 1,8,32
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
from _harness import Simulator, emit, parse_list, table

from verifier.endpoint.client import NO_KEY, EndpointClient
from verifier.endpoint.transcript import Transcript
from verifier.simulator.rules import MODEL_ID

REQUEST: dict[str, Any] = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    },
                    "required": ["city"],
                },
            },
        }
    ],
    "tool_choice": "required",
    "temperature": 0,
    "seed": 1234,
}
MODES = ("non-stream", "stream")


@dataclass(frozen=True)
class Cell:
    """The figures of one client, mode and concurrency."""

    client: str
    mode: str
    concurrency: int
    requests: int
    wall: float
    cpu: float
    latency: float

    @property
    def rps(self) -> float:
        """Requests per second of wall time."""
        return self.requests / self.wall

    def record(self) -> dict[str, Any]:
        """The cell for the JSON line (times per request in milliseconds)."""
        return {
            "client": self.client,
            "mode": self.mode,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "wall_ms_per_request": round(self.wall / self.requests * 1000, 4),
            "cpu_ms_per_request": round(self.cpu / self.requests * 1000, 4),
            "mean_latency_ms": round(self.latency * 1000, 3),
            "rps": round(self.rps, 1),
        }


def verifier_sender(client: EndpointClient, stream: bool) -> Callable[[], None]:
    """One request through the verifier's client; a wrong answer stops the bench."""

    def send() -> None:
        result = client.chat(REQUEST, stream=stream, label="bench/overhead#1")
        if not result.ok or result.problems or not result.choices[0].tool_calls:
            raise RuntimeError(f"unexpected answer: {result.status} {result.problems}")

    return send


def sdk_sender(sdk: openai.OpenAI, stream: bool) -> Callable[[], None]:
    """One request through the raw openai SDK, its answer parsed (stream: iterated)."""

    def send() -> None:
        if stream:
            chunks = list(
                sdk.chat.completions.create(
                    **REQUEST, stream=True, stream_options={"include_usage": True}
                )
            )
            if chunks[-1].usage is None:
                raise RuntimeError("the stream ended without usage")
        else:
            answer = sdk.chat.completions.create(**REQUEST)
            if not answer.choices[0].message.tool_calls:
                raise RuntimeError("no tool call in the answer")

    return send


def measure(
    send: Callable[[], None], requests: int, concurrency: int
) -> tuple[float, float, float]:
    """Wall and CPU seconds for `requests` sends on `concurrency` threads, and mean latency."""
    latencies: list[float] = []

    def timed(_: int) -> None:
        started = time.perf_counter()
        send()
        # list.append is atomic under the GIL: no lock needed from the pool's threads.
        latencies.append(time.perf_counter() - started)

    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    if concurrency == 1:
        for number in range(requests):
            timed(number)
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(timed, range(requests)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, sum(latencies) / len(latencies)


def cold_request(url: str, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds to make a client and send its first request, in this process.

    The vendor is warmed first with a plain urllib request (it has first-answer costs of its
    own), so that what is timed is the client's: the SDK's client and connection pool, its
    lazily imported parts, the first connection.
    """
    for stream in (False, True):
        warm = urllib.request.Request(
            f"{url}/chat/completions",
            data=json.dumps({**REQUEST, "stream": stream}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(warm) as answer:
            answer.read()
    wall, cpu = time.perf_counter(), time.process_time()
    client = EndpointClient(url, api_key=None)
    client.transcript = Transcript(folder / "cold.jsonl", client.redactor)
    verifier_sender(client, False)()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    client.close()
    client.transcript.close()
    return wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="timed requests per cell")
    parser.add_argument(
        "--concurrency",
        type=parse_list,
        default=[1, 32],
        help="comma-separated thread counts sharing one client (default: 1,32)",
    )
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests per cell")
    parser.add_argument("--no-sdk", action="store_true", help="skip the raw openai SDK comparison")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.warmup < 0:
        parser.error("--requests must be positive and --warmup not negative")

    cells: list[Cell] = []
    with Simulator() as simulator, tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        cold_wall, cold_cpu = cold_request(simulator.url, folder)
        client = EndpointClient(simulator.url, api_key=None)
        client.transcript = Transcript(folder / "transcript.jsonl", client.redactor)
        sdk = openai.OpenAI(base_url=simulator.url, api_key=NO_KEY, max_retries=0)
        clients: dict[str, Callable[[bool], Callable[[], None]]] = {
            "verifier": lambda stream: verifier_sender(client, stream)
        }
        if not args.no_sdk:
            clients["openai-sdk"] = lambda stream: sdk_sender(sdk, stream)
        for mode in MODES:
            for concurrency in args.concurrency:
                for label, make in clients.items():
                    send = make(mode == "stream")
                    if args.warmup:
                        measure(send, args.warmup, concurrency)
                    wall, cpu, latency = measure(send, args.requests, concurrency)
                    cells.append(Cell(label, mode, concurrency, args.requests, wall, cpu, latency))
        client.close()
        client.transcript.close()
        sdk.close()

    print(
        f"overhead: {args.requests} requests per cell (a forced tool call) against the "
        f"simulated vendor in another process, zero latency; CPU = this process only"
    )
    print(
        f"cold (a new verifier client and its first request): {cold_wall * 1000:.1f} ms wall, "
        f"{cold_cpu * 1000:.1f} ms CPU"
    )
    table(
        ("client", "mode", "threads", "wall ms/req", "CPU ms/req", "mean latency ms", "req/s"),
        [
            (
                c.client,
                c.mode,
                c.concurrency,
                c.wall / c.requests * 1000,
                c.cpu / c.requests * 1000,
                c.latency * 1000,
                c.rps,
            )
            for c in cells
        ],
    )
    emit(
        {
            "bench": "overhead",
            "requests": args.requests,
            "cold_wall_ms": round(cold_wall * 1000, 3),
            "cold_cpu_ms": round(cold_cpu * 1000, 3),
            "cells": [cell.record() for cell in cells],
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
