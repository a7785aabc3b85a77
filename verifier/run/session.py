"""The verification session: corpus, probe, journal, case items, scorecard.

Registered by :mod:`verifier.plugin` when ``--endpoint`` is given. The
controller (or the only process, without xdist) loads the corpus, probes the
endpoint, opens the journal and writes the scorecard; a worker receives the
probe's result and the resumed outcomes through ``workerinput`` and only runs
cases. Items are ``<family>::<case id>``, collected instead of test files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from .. import __version__
from ..cases.corpus import Case, Corpus, load_corpus
from ..checks import FAMILIES
from ..checks.parity import load_recording, recording_bytes
from ..checks.registry import ParityContext, RunContext, repeats_for
from ..config import PARITY, RunConfig, known_families, load_baseline, prepare_out_dir
from ..endpoint.client import EndpointClient
from ..endpoint.load import run_load
from ..endpoint.probe import Capabilities, probe, probe_reference
from ..endpoint.transcript import Transcript
from ..errors import ConfigError, SigningError, VerifierError
from ..outcome import CaseRecord, Outcome, Status
from ..protocol.tokenize import TokenizerEndpoints
from ..reference.profiles import NO_PROFILE, builtin_names, load_profile, profile_for_model
from ..render.report import budget_lines, summary_lines
from ..scorecard.build import TranscriptSummary, build_scorecard
from ..scorecard.gate import load_thresholds
from ..scorecard.gate import summary_lines as gate_lines
from ..scorecard.performance import measure
from ..scorecard.provenance import endpoint_records, seen_in_transcript
from .budget import Budget
from .budget import summary as budget_summary
from .executor import Executor
from .items import SESSION_KEY, CaseItem, FamilyCollector, queued_items
from .journal import FINAL_STATUSES, Journal, JournalContents, read_journal, resume_mismatch
from .outdir import OutDir, write_results
from .schedule import CaseScheduler

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


def parity_context(
    caps: Capabilities,
    baseline: Mapping[str, Any] | None,
    recordings: Mapping[str, Any] | None,
    method: str = "auto",
) -> ParityContext:
    """What the parity family compares with: the live reference, a recording, or nothing.

    Alternatives are asked for as many as both sides list (a recording lists its own). Where
    either side lists none, or `method` (``--parity-method``) says so, first tokens are
    sampled instead, unless `method` is ``logprobs``.
    """
    own = caps.logprobs or {}
    sample = method != "logprobs"
    by_logprobs = method != "sampling"
    why = own.get("why") or "the probe did not ask for logprobs"
    if method == "sampling":
        why = "--parity-method sampling"
    if caps.reference is not None:
        theirs = caps.reference["logprobs"]
        tops = [own.get("top"), theirs.get("top")]
        live = {"live": True, "reference_model": caps.reference["model"]}
        if None in tops or not by_logprobs:
            if by_logprobs:
                why = own.get("why") or f"the reference: {theirs.get('why')}"
            return ParityContext(why_unavailable=why, sampling=sample, **live)
        return ParityContext(top_logprobs=min(t for t in tops if t is not None), **live)
    if baseline is not None and recordings is None:
        return ParityContext(
            why_unavailable="the --baseline scorecard recorded no parity answers: run the "
            "reference with --families ...,parity"
        )
    if recordings is None:
        # A recording run: logprobs where the endpoint gives them, and samples.
        top = own.get("top") if by_logprobs else None
        return ParityContext(top_logprobs=top, why_unavailable=why, sampling=sample)
    traced = [rec for rec in recordings.values() if "first" in rec]
    if by_logprobs and own.get("top") is not None and traced:
        listed = [len(top) for rec in traced for top in rec["first"]["k"] if top]
        top = min(own["top"], max(listed)) if listed else own["top"]
        return ParityContext(top_logprobs=top, recordings=recordings)
    if by_logprobs and own.get("top") is not None:
        why = "the --baseline recording has no logprobs"
    if sample and any("samples" in rec for rec in recordings.values()):
        return ParityContext(why_unavailable=why, sampling=True, recordings=recordings)
    if sample:
        why += "; and the --baseline recording has no samples"
    return ParityContext(why_unavailable=why)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class VerifierSession:
    """The state of one verification session in one process (controller, worker or both)."""

    def __init__(self, config: pytest.Config, run: RunConfig) -> None:
        self.config = config
        self.run = run
        self.is_worker = hasattr(config, "workerinput")
        self.corpus = self._corpus()
        if not config.option.collectonly:
            threading.Thread(target=self._prepare, name="verifier-prepare", daemon=True).start()
        self.out = OutDir(prepare_out_dir(run.out_dir))
        self.baseline = None if run.baseline is None else load_baseline(run.baseline)
        self.recordings = self._recordings()
        # Loaded before any request, so that a wrong key costs nothing.
        self.signing_key = None
        if run.sign_key is not None and not self.is_worker:
            from ..scorecard.signing import load_private_key

            try:
                self.signing_key = load_private_key(run.sign_key)
            except SigningError as exc:
                raise ConfigError(f"--sign-key: {exc}") from None
        self.journal: Journal | None = None
        self.moved_previous = False
        self.sessions = 1
        if self.is_worker:
            self._start_worker(config.workerinput)  # type: ignore[attr-defined]
        else:
            self._start_controller()
        self._count_done()
        self.executor = Executor(self.client, self.context(), self.budget, self.reference)
        self.scheduler = CaseScheduler(self.executor.run, run.concurrency)

    def _recordings(self) -> dict[str, Any] | None:
        """The baseline's recorded parity answers, when parity runs and it recorded them."""
        entry = ((self.baseline or {}).get("families") or {}).get(PARITY)
        if self.run.baseline is None or entry is None or PARITY not in self.run.families:
            return None
        if not (entry.get("metrics") or {}).get("recording"):
            return None
        return load_recording(self.run.baseline, entry)

    def _corpus(self) -> Corpus:
        """The run's cases (the generated ones included), each checked by its family."""
        run = self.run
        own = [FAMILIES[name] for name in run.families]
        corpus = load_corpus(
            run.families,
            folders={f.name: f.cases for f in own if f.cases is not None},
            schemas={f.name: f.case_schema for f in own if f.case_schema is not None},
        )
        if run.generated and "structured_output" in run.families:
            from ..cases.generated import generated_cases

            extra, digest = generated_cases(run.generated, run.generation_seed)
            corpus = corpus.extended(extra, "structured_output/generated", digest)
        if run.negative and "wire" in run.families:
            from ..cases.negative import negative_cases

            extra, digest = negative_cases(run.negative, run.seed)
            corpus = corpus.extended(extra, "wire/negative", digest)
        for case in corpus.cases:
            check = FAMILIES[case.family].check_case
            if check is not None:
                check(case)
        return corpus

    def _start_worker(self, workerinput: dict[str, Any]) -> None:
        """An xdist worker takes the controller's probe, profile and resumed outcomes."""
        shared = workerinput[WORKER_INPUT_KEY]
        self.run_id: str = shared["run_id"]
        self.capabilities = Capabilities.from_dict(shared["capabilities"])
        self.done: dict[str, dict[str, Any]] = shared["done"]
        self._use_profile(shared["profile"], shared["profile_chosen"])
        self.client = self._client(workerinput["workerid"])
        self.reference = self._reference_client(workerinput["workerid"])

    def _start_controller(self) -> None:
        """Probe the endpoint, choose the profile, open (or resume) the journal."""
        run = self.run
        self.started = _now()
        self.done = {}
        given = run.profile if run.profile != NO_PROFILE else None
        # A bad profile or thresholds file stops the run before any request.
        self._use_profile(given, "given" if given else None)
        resumed = self._resumed_journal()
        self.client = self._client("main")
        self.reference = self._reference_client("main")
        parity = PARITY in run.families
        try:
            self.capabilities = probe(
                self.client,
                run.model,
                # --negative's image requests are sent only where images are taken.
                vision="vision" in run.families or bool(run.negative and "wire" in run.families),
                tokenizer=bool({"chat_template", "tokenizer", "reasoning"} & set(run.families)),
                logprobs=parity,
            )
            if self.reference is not None:
                self.capabilities = dataclasses.replace(
                    self.capabilities,
                    reference=probe_reference(self.reference, run.reference_model),
                )
            if run.profile is None:
                self._choose_profile()
            header = self._header(resumed)
        except VerifierError:
            # The run never started: --out stays as it was (no previous/ move, no shard).
            for client in (self.client, self.reference):
                if client is None:
                    continue
                client.close()
                client.transcript.close()
                if client.transcript.path is not None:
                    self.out.discard_shard(client.transcript.path)
            raise
        if self.journal is None:
            if not self.run.resume:
                self.moved_previous = self.out.move_previous(keep_run=self.run_id)
            self.journal = Journal.create(self.out.journal, header)
            if run.load:
                # Before the cases, so that their traffic does not load the levels; a
                # resumed run keeps the load probe of its first session.
                run_load(self.client, self.capabilities.model, list(run.load), run.seed)

    def _use_profile(self, spec: str | None, chosen: str | None) -> None:
        """Load the profile `spec` (None: none), and the thresholds that depend on it."""
        self.profile_spec = spec
        self.profile = None if spec is None else load_profile(spec)
        self.profile_chosen = chosen
        profile_gate = self.profile.policies.gate if self.profile else None
        known = known_families(FAMILIES.names())
        thresholds = load_thresholds(self.run.gate_thresholds, profile_gate, known)
        self.gate = thresholds if self.run.gate else None
        # --budget auto stops at the gate's thresholds (the defaults without --gate).
        self.thresholds = thresholds[0]
        self.budget = Budget(self.thresholds) if self.run.budget == "auto" else None

    def _choose_profile(self) -> None:
        """Take the built-in profile of the model the endpoint serves, if there is one.

        Raises:
            ConfigError: that profile's files cannot be had (offline, not in the hub cache):
                the run stops rather than silently going without the model's contract.
        """
        caps = self.capabilities
        for served in (caps.served_model, caps.model):
            name = profile_for_model(served)
            if name is not None:
                try:
                    self._use_profile(name, f"served model {served}")
                except ConfigError as exc:
                    raise ConfigError(
                        f"the endpoint serves {served}, whose built-in profile is {name}: {exc} "
                        f"(or run without it: --profile none)"
                    ) from None
                return

    def _prepare(self) -> None:
        """Do the cases' local work (their images) in the background.

        It runs while the probe waits on the network, so that it does not hold the GIL
        later, under the requests in flight.
        """
        for case in sorted(self.corpus.cases, key=self._case_cost, reverse=True):
            prepare = FAMILIES[case.family].prepare
            if prepare is not None:
                # A failure here is met again, and reported, when the case itself runs.
                with contextlib.suppress(Exception):
                    prepare(case)

    def _resumed_journal(self) -> JournalContents | None:
        """The journal in --out when resuming a run that has one (its run id is kept)."""
        self.run_id = uuid.uuid4().hex
        if not (self.run.resume and self.out.journal.exists()):
            return None
        contents = read_journal(self.out.journal)
        if contents.header is None:
            return None
        self.run_id = contents.header["run_id"]
        return contents

    def _settings(self) -> dict[str, Any]:
        """The run's settings, with the temperature its requests really carried."""
        settings = dict(self.run.settings())
        if self.profile is not None and self.profile.sampled:
            settings["temperature"] = None
        if self.capabilities.reference is not None:
            given = settings["reference"]
            assert isinstance(given, dict)
            settings["reference"] = {**given, "model": self.capabilities.reference["model"]}
        return settings

    def _header(self, resumed: JournalContents | None) -> dict[str, Any]:
        """The run's journal header; when resuming, the old one, checked against this run."""
        header = {
            "run_id": self.run_id,
            "started": self.started,
            "verifier_version": __version__,
            "settings": self._settings(),
            "profile": self._profile_record(),
            "corpus": {"digest": self.corpus.digest, "families": dict(self.corpus.digests)},
            "capabilities": self.capabilities.to_dict(),
        }
        if resumed is None:
            return header
        old = resumed.header
        assert old is not None, "a resumed journal has a header"
        mismatch = resume_mismatch(old, header)
        if mismatch:
            raise VerifierError(
                f"--resume: the run in {self.out.root} differs ({mismatch}); "
                f"use the same options, or another --out, or drop --resume"
            )
        self.started = old["started"]
        self.done = {
            key: record["outcome"]
            for key, record in resumed.latest().items()
            if record["outcome"]["status"] in FINAL_STATUSES
        }
        self.sessions = resumed.sessions + 1
        self.journal = Journal.resume(self.out.journal, resumed, _now())
        return dict(old)

    def _profile_record(self) -> dict[str, Any] | None:
        """What the journal and scorecard say of the profile, how it was chosen included."""
        if self.profile is None:
            return None
        return {**self.profile.describe(), "chosen": self.profile_chosen}

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
            insecure=run.insecure,
        )
        client.transcript = Transcript(self.out.shard(self.run_id, worker), client.redactor)
        return client

    def _reference_client(self, worker: str) -> EndpointClient | None:
        """The client of --reference-endpoint, when the parity family will ask it."""
        run = self.run
        if run.reference_endpoint is None or PARITY not in run.families:
            return None
        client = EndpointClient(
            run.reference_endpoint,
            api_key=os.environ.get(run.reference_key_env) or None,
            api_key_env=run.reference_key_env,
            timeout=run.timeout,
            max_retries=run.max_retries,
            backoff=run.retry_backoff,
            insecure=run.insecure,
        )
        client.transcript = Transcript(
            self.out.shard(self.run_id, f"{worker}-reference"), client.redactor, "reference"
        )
        return client

    def context(self) -> RunContext:
        """The context every case of this process runs with."""
        caps = self.capabilities
        found = caps.tokenizer_endpoints
        return RunContext(
            model=caps.model,
            seed=self.run.seed,
            repeats=self.run.repeats,
            profile=self.profile,
            stop_early=self.budget is not None,
            endpoints=TokenizerEndpoints.from_dict(found) if found else TokenizerEndpoints(),
            vision=caps.vision,
            parity=parity_context(caps, self.baseline, self.recordings, self.run.parity_method),
        )

    def _count_done(self) -> None:
        """Let the budget count the outcomes a resumed run starts with."""
        if self.budget is not None:
            for key, outcome in self.done.items():
                self.budget.record(key.partition("/")[0], outcome["status"])

    def worker_input(self) -> dict[str, Any]:
        """What a worker needs from the controller (plain JSON data)."""
        return {
            "run_id": self.run_id,
            "capabilities": self.capabilities.to_dict(),
            "done": self.done,
            "profile": self.profile_spec,
            "profile_chosen": self.profile_chosen,
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
            self._profile_line(),
            f"verifier out: {self.out.root} (run {self.run_id})",
        ]
        if self.done:
            lines.append(
                f"verifier resume: {len(self.done)} cases already graded are not sent again"
            )
        if self.moved_previous:
            lines.append(f"verifier: the previous run's files were moved to {self.out.previous}")
        return lines

    def _profile_line(self) -> str:
        """Which profile grades the run, and how it was chosen."""
        profile = self.profile
        if profile is None:
            why = "--profile none" if self.run.profile == NO_PROFILE else "no --profile given"
            return (
                f"verifier profile: none ({why}; chat_template and tokenizer need one: "
                f"--profile NAME or PATH, built in: {', '.join(builtin_names())})"
            )
        where = "built in" if profile.builtin else str(profile.root)
        if profile.snapshot is not None:
            snapshot = profile.snapshot
            contract = ", built-in contract" if profile.builtin else ""
            where = f"hf:{snapshot.repo} at commit {snapshot.commit[:12]}{contract}"
        if self.profile_chosen and self.profile_chosen.startswith("served model "):
            served = self.profile_chosen.removeprefix("served model ")
            return (
                f"verifier profile: {profile.name} ({where}), chosen because the endpoint "
                f"serves {served}; --profile none turns this off"
            )
        return f"verifier profile: {profile.name} ({where})"

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
        recorded = self.done.get(case.key)
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
            if isinstance(item, CaseItem) and item.case.key not in self.done
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
        """An item's expected time (see :meth:`_case_cost`); 0 for other items."""
        return self._case_cost(item.case) if isinstance(item, CaseItem) else 0.0

    def _case_cost(self, case: Case) -> float:
        """A case's expected time, in generated answers: its family's estimate, repeated."""
        family = FAMILIES[case.family]
        repeats = repeats_for(self.run.repeats, case.family)
        return repeats * (family.cost(case) if family.cost else 1.0)

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
        key: str = report.verifier_case
        self.journal.append(
            {
                "case": key,
                "family": report.verifier_family,
                "time": _now(),
                "outcome": outcome,
            }
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Close the transcript; on the controller, merge it and write the scorecard."""
        self.scheduler.close()
        for client in (self.client, self.reference):
            if client is not None:
                client.close()
                client.transcript.close()
        if self.is_worker or self.journal is None:
            return
        self.journal.close()
        self.out.merge_shards()
        contents = read_journal(self.out.journal)
        card = self._scorecard(contents)
        # The gate decides the exit status of a run that got to grade its cases; an
        # interrupted or broken session keeps pytest's own status.
        if "gate" in card and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
        ):
            passed = card["gate"]["passed"]
            session.exitstatus = pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED
        elif session.exitstatus == pytest.ExitCode.OK and any(
            ruling["verdict"] == "fail"
            for family in card["families"].values()
            for ruling in family.get("rulings", ())
        ):
            # Every case passed, but a decision over all of a family's cases did not.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        recording = None
        if PARITY in card["families"]:
            records = [
                CaseRecord.from_dict(r) for r in contents.latest().values() if r["family"] == PARITY
            ]
            recording = recording_bytes(records)
        write_results(self.out, card, self.signing_key, recording)
        self.scorecard = card

    def _scorecard(self, contents: JournalContents) -> dict[str, Any]:
        """The run's scorecard, complete, from the journal and the merged transcript."""
        latest = contents.latest()
        sha, records = self.out.transcript_digest()
        transcript = self.out.transcript
        lines = transcript.read_bytes().splitlines() if transcript.exists() else []
        attempts = list(endpoint_records(lines))
        seen = seen_in_transcript(attempts) if lines else {}
        performance = measure(
            attempts,
            self.run.families,
            concurrency=self.run.concurrency,
            prices=self.run.prices,
            tokenizer=self._token_counter(),
        )
        budget = None
        if self.budget is not None:
            budget = budget_summary(
                ((r["family"], r["outcome"]["status"]) for r in latest.values()),
                {name: len(self.corpus.by_family(name)) for name in self.run.families},
                self.thresholds,
            )
        assert contents.header is not None, "the journal starts with its header"
        return build_scorecard(
            contents.header,
            latest,
            finished=_now(),
            transcript=TranscriptSummary(sha, records, seen),
            sessions=contents.sessions,
            baseline=self.baseline,
            summarizers=FAMILIES.summarizers(),
            budget=budget,
            gate=self.gate,
            performance=performance,
        )

    def _token_counter(self) -> tuple[str, Callable[[str], int]] | None:
        """The profile tokenizer's name and its count of a text's tokens (no profile: None)."""
        if self.profile is None:
            return None
        encode = self.profile.tokenizer.encode_ordinary
        return self.profile.tokenizer.name, lambda text: len(encode(text))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the per-family verdicts and where the scorecard is."""
        card = getattr(self, "scorecard", None)
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
        terminalreporter.write_line(f"scorecard: {self.out.scorecard}")
        if self.signing_key is not None:
            terminalreporter.write_line(f"signed: {self.out.signed}")


class XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    def __init__(self, session: VerifierSession) -> None:
        self.session = session

    def pytest_configure_node(self, node: Any) -> None:
        """Send each worker the probe's result and the resumed outcomes."""
        node.workerinput[WORKER_INPUT_KEY] = self.session.worker_input()
