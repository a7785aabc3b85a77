"""Running cases ahead of pytest, so that ``--concurrency N`` cases are in flight per process.

pytest runs items one after another. The scheduler starts the requests of the cases pytest
will ask for next on a thread pool, in that order, and each item then only waits for its
case's outcome. A case runs exactly as it would alone (its answers graded in its own order,
those of its requests that do not depend on each other sent together: :mod:`.in_flight`), so
outcomes do not depend on N; only the time does.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from ..cases.corpus import Case
from ..outcome import Outcome


class CaseScheduler:
    """Runs cases on up to `concurrency` threads, in the order they are announced.

    Args:
        run: runs and grades one case (:func:`verifier.run.executor.run_case` with the context).
        concurrency: cases in flight at once; 1 runs each case when pytest asks for it.
    """

    def __init__(self, run: Callable[[Case], Outcome | None], concurrency: int) -> None:
        self._run = run
        # The objects made so far (modules, corpus, profile) live as long as the process:
        # kept out of the collector's full passes, which stop every request in flight (about
        # 70 ms each, several per run) and cost pytest's own collection at exit 0.6 s.
        gc.freeze()
        if concurrency > 1:
            # Threads that mostly wait on sockets: a shorter GIL switch interval lets one
            # whose answer arrived run sooner (the default 5 ms is added to its latency).
            sys.setswitchinterval(0.001)
        self._pool = (
            ThreadPoolExecutor(concurrency, thread_name_prefix="verifier-case")
            if concurrency > 1
            else None
        )
        self._futures: dict[str, Future[Outcome | None]] = {}
        self._lock = threading.Lock()

    def ahead(self, cases: Iterable[Case]) -> None:
        """Start `cases` (in this order) unless they were started already."""
        if self._pool is None:
            return
        with self._lock:
            for case in cases:
                if case.key not in self._futures:
                    self._futures[case.key] = self._pool.submit(self._run, case)

    def outcome(self, case: Case) -> Outcome | None:
        """The outcome of `case`: waits for it when it was started ahead, else runs it now.

        None when the run declined the case (``--budget auto`` stopped its family).
        """
        with self._lock:
            future = self._futures.pop(case.key, None)
        return self._run(case) if future is None else future.result()

    def close(self) -> None:
        """Drop the cases not yet started and wait for those in flight (they use the client)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
