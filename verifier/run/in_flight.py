"""The requests in flight: at most ``--concurrency`` at once, announced ones sent ahead.

A family whose next requests do not depend on this one's answer announces them
(:func:`verifier.protocol.requests.together`). With more than one request allowed in flight,
they are sent on a pool while the family reads the first answer; each answer is still handed
back when the family yields its request, in the family's order, so outcomes do not depend on
how many were in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ..protocol.answers import ChatResult


class InFlight:
    """Sends requests at most `limit` at once, across every case of the process.

    Args:
        limit: the most requests in flight at once (``--concurrency``); at 1 nothing is sent
            ahead, and every request goes out when its family yields it.
    """

    def __init__(self, limit: int) -> None:
        self.ahead_allowed = limit > 1
        self._slots = threading.BoundedSemaphore(limit)
        self._pool = (
            ThreadPoolExecutor(limit, thread_name_prefix="verifier-request")
            if self.ahead_allowed
            else None
        )

    def send(self, send: Callable[[], ChatResult]) -> ChatResult:
        """Call `send` once a slot is free (its retries keep the slot)."""
        with self._slots:
            return send()

    def ahead(self, send: Callable[[], ChatResult]) -> Future[ChatResult]:
        """Start `send` on the pool; its answer (or its fault) is the future's."""
        assert self._pool is not None, "nothing is sent ahead at a limit of 1"
        return self._pool.submit(self.send, send)

    def close(self) -> None:
        """Wait for the requests sent ahead that are still in flight."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
