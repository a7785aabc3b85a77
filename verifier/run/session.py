"""The verification session's pytest hooks: they feed the case items and collect reports.

Registered by :mod:`verifier.plugin` when ``--endpoint`` is given. The start of the run is
:mod:`.startup`'s (one frozen :class:`~.startup.RunState` per process), its end
:mod:`.finish`'s; in between, the scheduler runs the cases ahead of the items that report
them. Items are ``<family>::<case id>``, collected instead of test files.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from .. import __version__
from ..cases.corpus import Case, Corpus
from ..checks import FAMILIES
from ..config import RunConfig
from ..outcome import Outcome, Status
from ..reference.profiles import NO_PROFILE, builtin_names
from ..render.gate_text import summary_lines as gate_lines
from ..render.report import budget_lines, summary_lines
from .executor import Executor
from .finish import exit_status, finish
from .in_flight import InFlight
from .items import SESSION_KEY, CaseItem, FamilyCollector, queued_items
from .schedule import CaseScheduler
from .startup import (
    WORKER_INPUT_KEY,
    RunState,
    case_costs,
    load_cases,
    now,
    start_controller,
    start_worker,
)


def start_session(config: pytest.Config, run: RunConfig) -> None:
    """Create the session for this process and register its hooks.

    Raises:
        VerifierError: the corpus does not load, --out cannot be written, or
            the endpoint cannot be used (one line each).
    """
    session = VerifierSession(config, run)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "verifier-session")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(session.state), "verifier-xdist")


class VerifierSession:
    """The pytest side of one verification session in one process (controller, worker or both).

    Args:
        config: pytest's configuration.
        run: the run's options.
    """

    def __init__(self, config: pytest.Config, run: RunConfig) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        corpus = load_cases(run)
        self._case_cost = case_costs(run)
        if not config.option.collectonly:
            threading.Thread(
                target=self._prepare, args=(corpus,), name="verifier-prepare", daemon=True
            ).start()
        if self.is_worker:
            self.state = start_worker(run, corpus, config.workerinput)  # type: ignore[attr-defined]
        else:
            self.state = start_controller(run, corpus)
        budget = self.state.grading.budget
        if budget is not None:
            # The budget counts the outcomes a resumed run starts with.
            for key, outcome in self.state.done.items():
                budget.record(key.partition("/")[0], outcome["status"])
        state = self.state
        self.in_flight = InFlight(run.concurrency)
        self.executor = Executor(
            state.client, state.context(), budget, state.reference, self.in_flight
        )
        self.scheduler = CaseScheduler(self.executor.run, run.concurrency)
        self.scorecard: dict[str, Any] | None = None

    def _prepare(self, corpus: Corpus) -> None:
        """Do the cases' local work (their images) in the background.

        It runs while the probe waits on the network, so that it does not hold the GIL
        later, under the requests in flight.
        """
        for case in sorted(corpus.cases, key=self._case_cost, reverse=True):
            prepare = FAMILIES[case.family].prepare
            if prepare is not None:
                # A failure here is met again, and reported, when the case itself runs.
                with contextlib.suppress(Exception):
                    prepare(case)

    # -- hooks ---------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """Say what is being verified, where results go, and what resume kept."""
        return header_lines(self.state)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool | None:
        """Collect the case items instead of test files (not on the xdist controller)."""
        if self.config.pluginmanager.hasplugin("dsession"):
            return None
        items: list[pytest.Item] = []
        for name in self.state.run.families:
            node = FamilyCollector.from_parent(
                session, name=name, nodeid=name, cases=self.state.corpus.by_family(name)
            )
            items.extend(session.genitems(node))
        session.items = items
        hook = self.config.hook
        hook.pytest_collection_modifyitems(session=session, config=self.config, items=session.items)
        hook.pytest_collection_finish(session=session)
        session.testscollected = len(session.items)
        return True

    def outcome_for(self, case: Case) -> tuple[Outcome | None, bool]:
        """The case's outcome: from the journal when resuming, else from the scheduler.

        None when its family stopped before the case was sent (``--budget auto``, or the
        family's own sequential decision).
        """
        recorded = self.state.done.get(case.key)
        if recorded is not None:
            return Outcome.from_dict(recorded), True
        return self.scheduler.outcome(case), False

    def budget_reason(self, case: Case) -> str:
        """Why `case` was not sent: ``--budget auto``, or its family's own decision."""
        return self.executor.stop_reason(case.family) or "budget: not sent"

    def _start_ahead(self, items: list[pytest.Item]) -> None:
        """Let the scheduler start the cases of `items` not graded yet, in this order."""
        self.scheduler.ahead(
            item.case
            for item in items
            if isinstance(item, CaseItem) and item.case.key not in self.state.done
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Without xdist this process runs every item: start them all ahead.

        The costliest start first, so that no long case is left to run alone at the end;
        pytest still reports them in their own order.
        """
        if not self.is_worker and not self.config.pluginmanager.hasplugin("dsession"):
            self._start_ahead(sorted(session.items, key=self._cost, reverse=True))

    def _cost(self, item: pytest.Item) -> float:
        """An item's expected time (see :func:`~.startup.case_costs`); 0 for other items."""
        return self._case_cost(item.case) if isinstance(item, CaseItem) else 0.0

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """On an xdist worker, start the items it was sent and has not begun yet."""
        if self.is_worker:
            self._start_ahead([item, *([nextitem] if nextitem else []), *queued_items(item)])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Put the case's outcome on the report of the phase that decided it."""
        report = yield
        if isinstance(item, CaseItem) and item.outcome is not None:
            decided = "setup" if item.outcome.status is Status.ERROR else "call"
            if call.when == decided:
                report.verifier_case = item.case.key
                report.verifier_family = item.case.family
                report.verifier_api = item.case.api
                report.verifier_outcome = item.outcome.to_dict()
                report.verifier_resumed = item.resumed
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Journal each new outcome (controller only; workers' reports arrive here too)."""
        if self.is_worker or self.state.journal is None:
            return
        outcome = getattr(report, "verifier_outcome", None)
        if outcome is None or getattr(report, "verifier_resumed", False):
            return
        key: str = report.verifier_case
        api: str = report.verifier_api
        self.state.journal.append(
            {
                "case": key,
                "family": report.verifier_family,
                # Chat's records name no API, as before there were others.
                **({"api": api} if api != "chat" else {}),
                "time": now(),
                "outcome": outcome,
            }
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Close the transcript; on the controller, merge it and write the scorecard."""
        self.scheduler.close()
        self.in_flight.close()
        for client in (self.state.client, self.state.reference):
            if client is not None:
                client.close()
                client.transcript.close()
        if self.is_worker or self.state.journal is None:
            return
        self.scorecard = finish(self.state)
        session.exitstatus = exit_status(self.scorecard, session.exitstatus)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the per-family verdicts and where the scorecard is."""
        card = self.scorecard
        if card is None:
            return
        terminalreporter.write_sep("=", "verifier scorecard")
        for line in summary_lines(card):
            terminalreporter.write_line(line)
        for line in budget_lines(card["budget"]) if "budget" in card else []:
            terminalreporter.write_line(line)
        if "gate" in card:
            for line in gate_lines(card["gate"]):
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"scorecard: {self.state.out.scorecard}")
        if self.state.signing_key is not None:
            terminalreporter.write_line(f"signed: {self.state.out.signed}")


def header_lines(state: RunState) -> list[str]:
    """What is being verified, where results go, and what resume kept."""
    caps = state.capabilities
    served = (
        f" (served as {caps.served_model})"
        if caps.served_model and caps.served_model != caps.model
        else ""
    )
    lines = [
        f"verifier {__version__}: {state.run.endpoint_display} model {caps.model}{served}",
        _profile_line(state),
        f"verifier out: {state.out.root} (run {state.run_id})",
    ]
    if state.done:
        lines.append(f"verifier resume: {len(state.done)} cases already graded are not sent again")
    if state.moved_previous:
        lines.append(f"verifier: the previous run's files were moved to {state.out.previous}")
    return lines


def _profile_line(state: RunState) -> str:
    """Which profile grades the run, and how it was chosen."""
    profile = state.grading.profile
    if profile is None:
        why = "--profile none" if state.run.profile == NO_PROFILE else "no --profile given"
        return (
            f"verifier profile: none ({why}; chat_template and tokenizer need one: "
            f"--profile NAME or PATH, built in: {', '.join(builtin_names())})"
        )
    where = "built in" if profile.builtin else str(profile.root)
    if profile.snapshot is not None:
        snapshot = profile.snapshot
        contract = ", built-in contract" if profile.builtin else ""
        where = f"hf:{snapshot.repo} at commit {snapshot.commit[:12]}{contract}"
    if state.grading.chosen and state.grading.chosen.startswith("served model "):
        served = state.grading.chosen.removeprefix("served model ")
        return (
            f"verifier profile: {profile.name} ({where}), chosen because the endpoint "
            f"serves {served}; --profile none turns this off"
        )
    return f"verifier profile: {profile.name} ({where})"


class XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        """Send each worker the probe's result and the resumed outcomes."""
        node.workerinput[WORKER_INPUT_KEY] = self.state.worker_input()
