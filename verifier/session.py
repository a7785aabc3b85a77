"""The verification session: corpus, probe, journal, case items, scorecard.

Registered by :mod:`verifier.plugin` when ``--endpoint`` is given. The
controller (or the only process, without xdist) loads the corpus, probes the
endpoint, opens the journal and writes the scorecard; a worker receives the
probe's result and the resumed outcomes through ``workerinput`` and only runs
cases. Items are ``<family>::<case id>``, collected instead of test files.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from . import __version__
from .cases import Case, Corpus, load_corpus
from .checks import FAMILIES
from .config import FAMILY_NAMES, RunConfig, load_baseline, prepare_out_dir
from .endpoint.client import EndpointClient
from .endpoint.probe import Capabilities, probe, probe_vision
from .endpoint.tokenize import probe_tokenizer_endpoints
from .endpoint.transcript import Transcript
from .errors import VerifierError
from .gate import evaluate, load_thresholds
from .gate import summary_lines as gate_lines
from .journal import FINAL_STATUSES, Journal, read_journal
from .outcome import Outcome, Status
from .outdir import OutDir, write_atomic
from .reference.profiles import load_profile
from .render.scorecard_markdown import render_scorecard_markdown
from .report import render_outcome, summary_lines
from .runner import RunContext, run_case
from .scorecard.build import build_scorecard
from .scorecard.provenance import seen_in_transcript
from .scorecard.validate import scorecard_json
from .signing import load_private_key, sign_statement, statement

SESSION_KEY = pytest.StashKey["VerifierSession"]()
WORKER_INPUT_KEY = "verifier"


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
        config.pluginmanager.register(XdistHooks(session), "verifier-xdist")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class VerifierSession:
    """The state of one verification session in one process (controller, worker or both)."""

    def __init__(self, config: pytest.Config, run: RunConfig) -> None:
        self.config = config
        self.run = run
        self.is_worker = hasattr(config, "workerinput")
        self.corpus: Corpus = load_corpus(run.families)
        if run.generated and "structured_output" in run.families:
            from .checks.schema_strategy import generated_cases

            extra, digest = generated_cases(run.generated, run.generation_seed)
            self.corpus = self.corpus.extended(extra, "structured_output/generated", digest)
        for case in self.corpus.cases:
            check = FAMILIES[case.family].check_case
            if check is not None:
                check(case)
        self.out = OutDir(prepare_out_dir(run.out_dir))
        self.profile = None if run.profile is None else load_profile(run.profile)
        self.baseline = None if run.baseline is None else load_baseline(run.baseline)
        # Loaded before any request, so that a wrong key costs nothing.
        self.signing_key = (
            None if run.sign_key is None or self.is_worker else load_private_key(run.sign_key)
        )
        self.gate: tuple[dict[str, dict[str, Any]], str] | None = None
        if run.gate:
            profile_gate = self.profile.settings.get("gate") if self.profile else None
            self.gate = load_thresholds(run.gate_thresholds, profile_gate, FAMILY_NAMES)
        self.journal: Journal | None = None
        self.moved_previous = False
        self.sessions = 1
        if self.is_worker:
            shared = config.workerinput[WORKER_INPUT_KEY]  # type: ignore[attr-defined]
            self.run_id: str = shared["run_id"]
            self.capabilities = Capabilities.from_dict(shared["capabilities"])
            self.done: dict[str, dict[str, Any]] = shared["done"]
            worker = config.workerinput["workerid"]  # type: ignore[attr-defined]
            self.client = self._client(worker)
            return
        self.started = _now()
        self.done = {}
        header = self._open_journal()
        self.client = self._client("main")
        try:
            self.capabilities = probe(self.client, run.model)
            if "vision" in run.families:
                self.capabilities = dataclasses.replace(
                    self.capabilities, vision=probe_vision(self.client, self.capabilities.model)
                )
            if {"chat_template", "tokenizer"} & set(run.families):
                endpoints = probe_tokenizer_endpoints(self.client, self.capabilities.model)
                self.capabilities = dataclasses.replace(
                    self.capabilities, tokenizer_endpoints=endpoints.to_dict()
                )
        except VerifierError:
            self.client.close()
            self.client.transcript.close()
            raise
        if self.journal is None:
            header["capabilities"] = self.capabilities.to_dict()
            self.journal = Journal.create(self.out.journal, header)

    def _open_journal(self) -> dict[str, Any]:
        """Resume the journal in --out, or prepare the header of a new run."""
        header = {
            "run_id": uuid.uuid4().hex,
            "started": self.started,
            "verifier_version": __version__,
            "settings": self.run.settings(),
            "profile": self.profile.describe() if self.profile else None,
            "corpus": {"digest": self.corpus.digest, "families": dict(self.corpus.digests)},
        }
        if self.run.resume and self.out.journal.exists():
            contents = read_journal(self.out.journal)
            old = contents.header
            if old is not None:
                mismatch = _resume_mismatch(old, header)
                if mismatch:
                    raise VerifierError(
                        f"--resume: the run in {self.out.root} differs ({mismatch}); "
                        f"use the same options, or another --out, or drop --resume"
                    )
                self.run_id = old["run_id"]
                self.started = old["started"]
                self.done = {
                    key: record["outcome"]
                    for key, record in contents.latest().items()
                    if record["outcome"]["status"] in FINAL_STATUSES
                }
                self.sessions = contents.sessions + 1
                self.journal = Journal.resume(self.out.journal, contents, _now())
                return old
        if not self.run.resume:
            self.moved_previous = self.out.move_previous()
        self.run_id = header["run_id"]
        return header

    def _client(self, worker: str) -> EndpointClient:
        run = self.run
        api_key = run.api_key()
        client = EndpointClient(
            run.endpoint,
            api_key=api_key,
            api_key_env=run.api_key_env,
            timeout=run.timeout,
            max_retries=run.max_retries,
            backoff=run.retry_backoff,
        )
        client.transcript = Transcript(self.out.shard(self.run_id, worker), client.redactor)
        return client

    def context(self) -> RunContext:
        """The context every case of this process runs with."""
        return RunContext(
            client=self.client,
            capabilities=self.capabilities,
            repeats=self.run.repeats,
            seed=self.run.seed,
            profile=self.profile,
        )

    def worker_input(self) -> dict[str, Any]:
        """What a worker needs from the controller (plain JSON data)."""
        return {
            "run_id": self.run_id,
            "capabilities": self.capabilities.to_dict(),
            "done": self.done,
        }

    # -- hooks ---------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """Say what is being verified, where results go, and what resume kept."""
        caps = self.capabilities
        served = (
            f" (served as {caps.served_model})"
            if caps.served_model and caps.served_model != caps.model
            else ""
        )
        lines = [
            f"verifier {__version__}: {self.run.endpoint_display} model {caps.model}{served}",
            f"verifier out: {self.out.root} (run {self.run_id})",
        ]
        if self.done:
            lines.append(
                f"verifier resume: {len(self.done)} cases already graded are not sent again"
            )
        if self.moved_previous:
            lines.append(f"verifier: the previous run's files were moved to {self.out.previous}")
        return lines

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool | None:
        """Collect the case items instead of test files (not on the xdist controller)."""
        if self.config.pluginmanager.hasplugin("dsession"):
            return None
        items: list[pytest.Item] = []
        for name in self.run.families:
            node = FamilyCollector.from_parent(
                session, name=name, nodeid=name, cases=self.corpus.by_family(name)
            )
            items.extend(session.genitems(node))  # type: ignore[arg-type]
        session.items = items
        hook = self.config.hook
        hook.pytest_collection_modifyitems(session=session, config=self.config, items=session.items)
        hook.pytest_collection_finish(session=session)
        session.testscollected = len(session.items)
        return True

    def outcome_for(self, case: Case) -> tuple[Outcome, bool]:
        """The case's outcome: from the journal when resuming, else by running it now."""
        recorded = self.done.get(case.key)
        if recorded is not None:
            return Outcome.from_dict(recorded), True
        return run_case(case, self.context()), False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """Put the case's outcome on the report of the phase that decided it."""
        report = yield
        if isinstance(item, CaseItem) and item.outcome is not None:
            decided = "setup" if item.outcome.status is Status.ERROR else "call"
            if call.when == decided:
                report.verifier_case = item.case.key
                report.verifier_family = item.case.family
                report.verifier_outcome = item.outcome.to_dict()
                report.verifier_resumed = item.resumed
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Journal each new outcome (controller only; workers' reports arrive here too)."""
        if self.is_worker or self.journal is None:
            return
        outcome = getattr(report, "verifier_outcome", None)
        if outcome is None or getattr(report, "verifier_resumed", False):
            return
        key: str = report.verifier_case  # type: ignore[attr-defined]
        self.journal.append(
            {
                "case": key,
                "family": report.verifier_family,  # type: ignore[attr-defined]
                "time": _now(),
                "outcome": outcome,
            }
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Close the transcript; on the controller, merge it and write the scorecard."""
        self.client.close()
        self.client.transcript.close()
        if self.is_worker or self.journal is None:
            return
        self.journal.close()
        self.out.merge_shards()
        contents = read_journal(self.out.journal)
        assert contents.header is not None, "the journal starts with its header"
        sha, records = self.out.transcript_digest()
        transcript = self.out.transcript
        seen = (
            seen_in_transcript(transcript.read_bytes().splitlines()) if transcript.exists() else {}
        )
        card = build_scorecard(
            contents.header,
            contents.latest(),
            finished=_now(),
            transcript_sha256=sha,
            transcript_records=records,
            sessions=contents.sessions,
            baseline=self.baseline,
            seen=seen,
        )
        if self.gate is not None:
            card["gate"] = evaluate(card, *self.gate)
            # The gate decides the exit status of a run that got to grade its cases; an
            # interrupted or broken session keeps pytest's own status.
            if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                passed = card["gate"]["passed"]
                session.exitstatus = pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED
        write_atomic(self.out.scorecard, scorecard_json(card))
        write_atomic(self.out.summary, render_scorecard_markdown(card).encode("utf-8"))
        if self.signing_key is not None:
            signed = statement(card, transcript_sha256=sha, corpus_sha256=card["corpus"]["digest"])
            write_atomic(self.out.signed, sign_statement(signed, self.signing_key))
        else:
            # An envelope from an earlier session no longer matches this scorecard.
            self.out.signed.unlink(missing_ok=True)
        self.scorecard = card

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the per-family verdicts and where the scorecard is."""
        card = getattr(self, "scorecard", None)
        if card is None:
            return
        terminalreporter.write_sep("=", "verifier scorecard")
        for line in summary_lines(card):
            terminalreporter.write_line(line)
        if "gate" in card:
            for line in gate_lines(card["gate"]):
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"scorecard: {self.out.scorecard}")
        if self.signing_key is not None:
            terminalreporter.write_line(f"signed: {self.out.signed}")


def _resume_mismatch(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Which setting differs between a journal's run and this one, if any."""
    for key, value in new["settings"].items():
        if old.get("settings", {}).get(key) != value:
            return f"{key}: {old.get('settings', {}).get(key)!r} then, {value!r} now"
    if old.get("corpus", {}).get("digest") != new["corpus"]["digest"]:
        return "the case corpus changed"
    if old.get("profile") != new.get("profile"):
        return "the profile changed"
    return None


class XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    def __init__(self, session: VerifierSession) -> None:
        self.session = session

    def pytest_configure_node(self, node: Any) -> None:
        """Send each worker the probe's result and the resumed outcomes."""
        node.workerinput[WORKER_INPUT_KEY] = self.session.worker_input()


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
        if self.outcome.status is Status.ERROR:
            pytest.fail(render_outcome(self.case, self.outcome), pytrace=False)

    def runtest(self) -> None:
        """Pass, fail with the explanation, or skip as unsupported."""
        outcome = self.outcome
        assert outcome is not None, "setup ran the case"
        if outcome.status is Status.UNSUPPORTED:
            message = outcome.message
            pytest.skip(message if message.startswith("unsupported") else f"unsupported: {message}")
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
