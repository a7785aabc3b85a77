"""Seeded transport faults and in-flight counting for the simulated vendor.

Which chat request a fault hits is a pure function of the fault seed, the fault's
name and the request's number, so a run against the same vendor with the same seed
meets the same faults on the same requests. Each fault draws on its own, whatever
else is switched on; only which one applies, when several hit, depends on their order.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator

from .defects import FAULT_TRUNCATED_STREAM, Defect, Defects


def fires(seed: int, fault: Defect, number: int, rate: float) -> bool:
    """Whether `fault` hits chat request `number` (1, 2, ...) under `seed`."""
    # A string seed is hashed with SHA-512 by random.Random: stable across processes and
    # Python runs, unlike hash(), and independent from fault to fault.
    return random.Random(f"{seed}:{fault.name}:{number}").random() < rate


def choose_fault(defects: Defects, seed: int, number: int, *, stream: bool) -> Defect | None:
    """The seeded fault that hits chat request `number`, or None.

    At most one applies: the first in :data:`~verifier.simulator.defects.RATE_FAULTS`
    order that fires; ``fault-truncated-stream`` is skipped for non-stream requests.
    """
    for fault, rate in defects.rates():
        if fault == FAULT_TRUNCATED_STREAM and not stream:
            continue
        if fires(seed, fault, number, rate):
            return fault
    return None


class InFlight:
    """Counts the chat requests being answered at the same moment (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    @property
    def count(self) -> int:
        """How many chat requests are being answered now."""
        with self._lock:
            return self._count

    @contextlib.contextmanager
    def enter(self) -> Iterator[int]:
        """Count one request for the duration of the block.

        Yields how many requests were in flight, this one included, when it arrived.
        """
        with self._lock:
            self._count += 1
            position = self._count
        try:
            yield position
        finally:
            with self._lock:
                self._count -= 1
