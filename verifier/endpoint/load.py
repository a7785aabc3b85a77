"""The load probe (``--load C1,C2,...``): the same streamed requests at rising concurrency.

At each level C the probe keeps C requests in flight until :func:`requests_at` of them have
been answered; every one asks for the same fixed answer (greedy, :data:`MAX_TOKENS` tokens
at most), streamed, so that its time to first token and its decode rate can be read from the
chunks. The requests go through the one client and are recorded in the transcript as
``load/cC#k``; :func:`verifier.scorecard.request_figures.load_curve` makes the curve of them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..errors import EndpointError
from ..protocol.labels import Label
from .client import EndpointClient

MAX_TOKENS = 64
PROMPT = (
    "Tell a short story about a lighthouse keeper who finds a message in a bottle. "
    "Write it in plain prose, about a hundred words."
)


def requests_at(level: int) -> int:
    """How many requests level `level` sends: twice the level, and at least eight."""
    return max(8, 2 * level)


def run_load(client: EndpointClient, model: str, levels: list[int], seed: int) -> None:
    """Send the load probe's requests, level after level (their records are its result).

    A request that fails counts in the level's error rate (its attempts are in the
    transcript); it never stops the probe.
    """
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "seed": seed,
    }

    def send(level: int, number: int) -> None:
        try:
            client.chat(body, stream=True, label=str(Label.load(level, number)))
        except EndpointError:
            pass  # Recorded in the transcript, where the level's error rate reads it.

    for level in levels:
        with ThreadPoolExecutor(level, thread_name_prefix="verifier-load") as pool:
            for future in [
                pool.submit(send, level, number) for number in range(1, requests_at(level) + 1)
            ]:
                future.result()
