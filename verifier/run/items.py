"""The pytest items of a verification: one collector per family, one item per case.

An item runs nothing itself: it asks the session (found through :data:`SESSION_KEY`) for its
case's outcome, which the scheduler has started ahead, and reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pytest

from ..cases.corpus import Case
from ..outcome import Outcome, Status
from ..render.report import render_outcome


class CaseSource(Protocol):
    """Where an item gets its case's outcome: the session of this process."""

    def outcome_for(self, case: Case) -> tuple[Outcome | None, bool]:
        """The outcome (None when its family stopped before it) and whether it was resumed."""
        ...

    def budget_reason(self, case: Case) -> str:
        """Why `case` was not sent: ``--budget auto``, or its family's own decision."""
        ...


SESSION_KEY = pytest.StashKey[CaseSource]()


def queued_items(item: pytest.Item) -> list[pytest.Item]:
    """The items an xdist worker was sent and has not started, in its queue's order.

    pytest-xdist keeps them in its worker plugin's ``torun`` queue, which it lets others
    inspect under the queue's lock. Without it (another xdist), nothing is started ahead.
    """
    session = item.session
    for plugin in session.config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "lock"):
            with queue.lock() as pending:
                indices = [index for index in pending if isinstance(index, int)]
            return [session.items[index] for index in indices]
    return []


class FamilyCollector(pytest.Collector):
    """The cases of one family; its node id is the family name."""

    def __init__(self, *, cases: list[Case], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cases = cases

    def collect(self) -> list[pytest.Item]:
        """One item per case."""
        return [CaseItem.from_parent(self, name=case.id, case=case) for case in self.cases]


class CaseItem(pytest.Item):
    """One case: run (or resumed) in setup, judged in the call phase."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.outcome: Outcome | None = None
        self.resumed = False
        self.add_marker(case.family)

    def setup(self) -> None:
        """Send the case's requests and grade them; a transport fault is a pytest error."""
        session = self.config.stash[SESSION_KEY]
        self.outcome, self.resumed = session.outcome_for(self.case)
        if self.outcome is None:
            pytest.skip(session.budget_reason(self.case))
        if self.outcome.status is Status.ERROR:
            pytest.fail(render_outcome(self.case, self.outcome), pytrace=False)

    def runtest(self) -> None:
        """Pass, fail with the explanation, or skip as unsupported."""
        outcome = self.outcome
        assert outcome is not None, "setup ran the case"
        if outcome.status is Status.UNSUPPORTED:
            message = outcome.message
            shown = message.startswith(("unsupported", "recorded"))
            pytest.skip(message if shown else f"unsupported: {message}")
        if outcome.status is Status.FAIL:
            pytest.fail(render_outcome(self.case, outcome), pytrace=False)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Point at the case's line in its file."""
        file, _, line = self.case.source.rpartition(":")
        return (
            Path(file),
            int(line) - 1 if line.isdigit() else None,
            f"{self.case.family}::{self.case.id}",
        )
