"""The start of a verification session: everything a run needs, built once, then frozen.

The controller (or the only process, without xdist) loads the corpus, probes the endpoint,
chooses the profile and opens (or resumes) the journal; an xdist worker takes the probe's
result, the profile and the resumed outcomes from the controller (:func:`worker_input`).
Families say what they need of the start (the probe's questions, a reference client, their
own context and extra cases) through their registry hooks: nothing here names a family.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..cases.corpus import Corpus, case_validator, load_corpus
from ..cases.packs import described, load_packs
from ..cases.rotation import from_environment, is_twin
from ..checks import FAMILIES
from ..checks.registry import Contextualise, Probed, RunContext
from ..config import RunConfig, known_families, load_baseline, prepare_out_dir
from ..endpoint.client import EndpointClient
from ..endpoint.load import run_load
from ..endpoint.probe import Capabilities, probe, probe_reference
from ..endpoint.probe_words import PUBLISHED, ProbeWords
from ..endpoint.transcript import Transcript
from ..errors import CaseDataError, ConfigError, SigningError, VerifierError
from ..protocol.tokenize import TokenizerEndpoints
from ..reference.profiles import NO_PROFILE, Profile, load_profile, profile_for_model
from ..scorecard.gate import load_thresholds
from .budget import Budget
from .journal import FINAL_STATUSES, Journal, JournalContents, read_journal, resume_mismatch
from .outdir import OutDir

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jsonschema.protocols import Validator

WORKER_INPUT_KEY = "verifier"


def now() -> str:
    """The time, as the journal and scorecard write it."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclasses.dataclass(frozen=True, slots=True)
class Grading:
    """The profile that grades the run and the thresholds that depend on it.

    Args:
        spec: ``--profile`` as given or chosen (None: no profile).
        profile: that profile, loaded.
        chosen: how it was chosen ("given", "served model M") or None.
        gate: the gate's thresholds with ``--gate``, else None.
        thresholds: the family thresholds ``--budget auto`` stops at.
        budget: the ``--budget auto`` state, or None.
    """

    spec: str | None
    profile: Profile | None
    chosen: str | None
    gate: tuple[dict[str, dict[str, Any]], str] | None
    thresholds: dict[str, dict[str, Any]]
    budget: Budget | None

    @classmethod
    def load(cls, run: RunConfig, spec: str | None, chosen: str | None) -> Grading:
        """Load the profile `spec` (None: none), and the thresholds that depend on it."""
        profile = None if spec is None else load_profile(spec)
        profile_gate = profile.policies.gate if profile else None
        known = known_families(FAMILIES.names())
        thresholds = load_thresholds(run.gate_thresholds, profile_gate, known)
        budget = Budget(thresholds[0]) if run.budget == "auto" else None
        return cls(spec, profile, chosen, thresholds if run.gate else None, thresholds[0], budget)

    def record(self) -> dict[str, Any] | None:
        """What the journal and scorecard say of the profile, how it was chosen included."""
        if self.profile is None:
            return None
        return {**self.profile.describe(), "chosen": self.chosen}


@dataclasses.dataclass(frozen=True, slots=True)
class RunState:
    """One process's verification run, as its start built it.

    Args:
        run: the options.
        corpus: the cases, generated ones included.
        out: the ``--out`` folder's paths.
        baseline: the ``--baseline`` scorecard, or None.
        contexts: each running family's context hook (see ``Family.before_run``).
        signing_key: the ``--sign-key`` (the controller's alone), or None.
        run_id: the run's id (kept by ``--resume``).
        started: when the run began (its first session's time when resumed).
        capabilities: what the probe found.
        done: the outcomes a resumed run keeps, by case key.
        grading: the profile and thresholds.
        client: the endpoint's client.
        reference: the ``--reference-endpoint`` client, when a family asks it.
        journal: the open journal (the controller's alone), else None.
        moved_previous: an earlier run's files were moved to ``previous/``.
        sessions: the sessions that wrote the journal, this one included.
    """

    run: RunConfig
    corpus: Corpus
    out: OutDir
    baseline: dict[str, Any] | None
    contexts: tuple[Contextualise, ...]
    signing_key: Ed25519PrivateKey | None
    run_id: str
    started: str
    capabilities: Capabilities
    done: dict[str, dict[str, Any]]
    grading: Grading
    client: EndpointClient
    reference: EndpointClient | None
    journal: Journal | None = None
    moved_previous: bool = False
    sessions: int = 1

    def context(self) -> RunContext:
        """The context every case of this process runs with."""
        caps = self.capabilities
        context = RunContext(
            model=caps.model,
            seed=self.run.seed,
            repeats=self.run.repeats,
            profile=self.grading.profile,
            stop_early=self.grading.budget is not None,
            endpoints=caps.tokenizer_endpoints or TokenizerEndpoints(),
            vision=caps.vision,
            formats=caps.formats,
        )
        probed = Probed(logprobs=caps.logprobs, reference=caps.reference)
        for contextualise in self.contexts:
            context = dataclasses.replace(context, **contextualise(probed))
        return context

    def worker_input(self) -> dict[str, Any]:
        """What a worker needs from the controller (plain JSON data)."""
        return {
            "run_id": self.run_id,
            "capabilities": self.capabilities.to_dict(),
            "done": self.done,
            "profile": self.grading.spec,
            "profile_chosen": self.grading.chosen,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class _Local:
    """What every process builds from the options alone, before any request."""

    corpus: Corpus
    out: OutDir
    baseline: dict[str, Any] | None
    contexts: tuple[Contextualise, ...]
    signing_key: Ed25519PrivateKey | None


def load_cases(run: RunConfig) -> Corpus:
    """The run's cases, each checked by its family.

    The public corpus, each family's extra cases, then each ``--cases`` pack's; with
    ``--cases-only``, the packs' alone.

    Raises:
        ConfigError: a pack cannot be loaded, a line of it is bad, or one of its cases has
            the id of another case of its family.
        CaseDataError: a bad line of the public corpus.
    """
    own = [FAMILIES[name] for name in run.families]
    corpus = Corpus((), {}, public=False)
    if not run.cases_only:
        corpus = load_corpus(
            run.families,
            folders={f.name: f.cases for f in own if f.cases is not None},
            schemas={f.name: f.case_schema for f in own if f.case_schema is not None},
        )
        for family in own:
            extra = family.extra_cases(run) if family.extra_cases is not None else None
            if extra is not None:
                cases, label, digest = extra
                corpus = corpus.extended(cases, label, digest)
    corpus = _with_packs(run, corpus)
    corpus = _rotated(run, corpus)
    for case in corpus.cases:
        check = FAMILIES[case.family].check_case
        if check is not None:
            check(case)
    return corpus


def _with_packs(run: RunConfig, corpus: Corpus) -> Corpus:
    """`corpus` with the run's packs' cases of its families, each pack named in it."""
    if not run.cases:
        return corpus
    try:
        packs = load_packs(run.cases, FAMILIES.names(), _validator)
    except (ConfigError, CaseDataError) as exc:
        raise ConfigError(f"--cases {exc}") from None
    seen = {case.key: case.source for case in corpus.cases}
    for pack in packs:
        cases = pack.cases_of(run.families)
        for case in cases:
            if case.key in seen:
                raise ConfigError(
                    f"--cases {case.source}: duplicate case id {case.id!r} (first at "
                    f"{seen[case.key]})"
                )
            seen[case.key] = case.source
        corpus = corpus.extended(cases, f"pack:{pack.name}", pack.digest)
        corpus = dataclasses.replace(corpus, packs=(*corpus.packs, described(pack, run.families)))
    return corpus


def _rotated(run: RunConfig, corpus: Corpus) -> Corpus:
    """`corpus` with each case's rotated twin beside it under --rotate (the order shuffled)."""
    if run.rotate is None:
        return corpus
    rotation = from_environment(run.rotate, os.environ)
    cases = rotation.interleaved(corpus.cases, FAMILIES.rotators(run.families))
    twins = [case for case in cases if is_twin(case.id)]
    record = {
        "commitment": rotation.commitment,
        "families": sorted({case.family for case in twins}),
        "twins": len(twins),
    }
    return dataclasses.replace(corpus, cases=tuple(cases), rotation=record)


def _validator(family: str) -> Validator | None:
    """A family's own case validator (a plugin's schema); None for a packaged schema."""
    schema = FAMILIES[family].case_schema
    return None if schema is None else case_validator(family, schema)


def _local(run: RunConfig, corpus: Corpus, worker: bool) -> _Local:
    """The out folder, the baseline, the families' own preparations and the signing key."""
    out = OutDir(prepare_out_dir(run.out_dir), FAMILIES.writes)
    baseline = None if run.baseline is None else load_baseline(run.baseline)
    contexts = tuple(
        before(run, baseline)
        for name in run.families
        if (before := FAMILIES[name].before_run) is not None
    )
    # Loaded before any request, so that a wrong key costs nothing.
    signing_key = None
    if run.sign_key is not None and not worker:
        from ..scorecard.signing import load_private_key

        try:
            signing_key = load_private_key(run.sign_key)
        except SigningError as exc:
            raise ConfigError(f"--sign-key: {exc}") from None
    return _Local(corpus, out, baseline, contexts, signing_key)


def _clients(
    run: RunConfig, out: OutDir, run_id: str, worker: str
) -> tuple[EndpointClient, EndpointClient | None]:
    """The endpoint's client and, when a family asks it, the reference's, each with its shard."""

    def client(url: str, key: str | None, key_env: str) -> EndpointClient:
        return EndpointClient(
            url,
            api_key=key,
            api_key_env=key_env,
            timeout=run.timeout,
            max_retries=run.max_retries,
            backoff=run.retry_backoff,
            insecure=run.insecure,
        )

    main = client(run.endpoint, run.api_key(), run.api_key_env)
    main.transcript = Transcript(out.shard(run_id, worker), main.redactor)
    if run.reference_endpoint is None or "reference" not in FAMILIES.needs(run):
        return main, None
    key = os.environ.get(run.reference_key_env) or None
    reference = client(run.reference_endpoint, key, run.reference_key_env)
    reference.transcript = Transcript(
        out.shard(run_id, f"{worker}-reference"), reference.redactor, "reference"
    )
    return main, reference


def start_worker(run: RunConfig, corpus: Corpus, workerinput: Mapping[str, Any]) -> RunState:
    """An xdist worker's run: the controller's probe, profile and resumed outcomes."""
    local = _local(run, corpus, worker=True)
    shared = workerinput[WORKER_INPUT_KEY]
    client, reference = _clients(run, local.out, shared["run_id"], workerinput["workerid"])
    caps = Capabilities.from_dict(shared["capabilities"])
    return RunState(
        run,
        local.corpus.over_apis(FAMILIES.apis(run, caps.apis)),
        local.out,
        local.baseline,
        local.contexts,
        None,
        shared["run_id"],
        "",
        caps,
        shared["done"],
        Grading.load(run, shared["profile"], shared["profile_chosen"]),
        client,
        reference,
    )


def start_controller(run: RunConfig, corpus: Corpus) -> RunState:
    """Probe the endpoint, choose the profile, open (or resume) the journal.

    Raises:
        VerifierError: the endpoint cannot be used, or the run cannot resume (one line);
            --out is then left as it was.
    """
    started = now()
    local = _local(run, corpus, worker=False)
    given = run.profile if run.profile != NO_PROFILE else None
    # A bad profile or thresholds file stops the run before any request.
    grading = Grading.load(run, given, "given" if given else None)
    resumed = _resumed_journal(run, local.out)
    run_id = resumed.header["run_id"] if resumed and resumed.header else uuid.uuid4().hex
    client, reference = _clients(run, local.out, run_id, "main")
    try:
        caps = _probe(run, client, reference)
        if run.profile is None:
            grading = _choose_profile(run, caps) or grading
        state = RunState(
            run,
            local.corpus.over_apis(FAMILIES.apis(run, caps.apis)),
            local.out,
            local.baseline,
            local.contexts,
            local.signing_key,
            run_id,
            started,
            caps,
            {},
            grading,
            client,
            reference,
        )
        header = _header(state)
        if resumed is not None:
            state = _resume(state, resumed, header)
    except VerifierError:
        # The run never started: --out stays as it was (no previous/ move, no shard).
        for each in (client, reference):
            if each is not None:
                each.close()
                each.transcript.close()
                if each.transcript.path is not None:
                    local.out.discard_shard(each.transcript.path)
        raise
    if state.journal is not None:
        return state
    moved = False if run.resume else local.out.move_previous(keep_run=run_id)
    state = dataclasses.replace(
        state, journal=Journal.create(local.out.journal, header), moved_previous=moved
    )
    if run.load:
        # Before the cases, so that their traffic does not load the levels; a resumed run
        # keeps the load probe of its first session.
        run_load(client, caps.model, list(run.load), run.seed)
    return state


def _probe(
    run: RunConfig, client: EndpointClient, reference: EndpointClient | None
) -> Capabilities:
    """What the endpoint (and the reference) can do, asked as the running families need.

    Under --rotate the probes' words are the secret's: no fixed first request starts a run.
    """
    needs = FAMILIES.needs(run)
    words = PUBLISHED
    if run.rotate is not None:
        words = ProbeWords.drawn(from_environment(run.rotate, os.environ).random("probe", "words"))
    caps = probe(
        client,
        run.model,
        vision="images" in needs,
        tokenizer="tokenizer_endpoints" in needs,
        logprobs="logprobs" in needs,
        apis=run.apis,
        formats="formats" in needs,
        words=words,
    )
    if reference is not None:
        caps = dataclasses.replace(caps, reference=probe_reference(reference, run.reference_model))
    return caps


def _choose_profile(run: RunConfig, caps: Capabilities) -> Grading | None:
    """The built-in profile of the model the endpoint serves, if there is one.

    Raises:
        ConfigError: that profile's files cannot be had (offline, not in the hub cache):
            the run stops rather than silently going without the model's contract.
    """
    for served in (caps.served_model, caps.model):
        name = profile_for_model(served)
        if name is not None:
            try:
                return Grading.load(run, name, f"served model {served}")
            except ConfigError as exc:
                raise ConfigError(
                    f"the endpoint serves {served}, whose built-in profile is {name}: {exc} "
                    f"(or run without it: --profile none)"
                ) from None
    return None


def _resumed_journal(run: RunConfig, out: OutDir) -> JournalContents | None:
    """The journal in --out when resuming a run that has one."""
    if not (run.resume and out.journal.exists()):
        return None
    contents = read_journal(out.journal)
    return None if contents.header is None else contents


def _settings(state: RunState) -> dict[str, Any]:
    """The run's settings, with the temperature its requests really carried."""
    settings = dict(state.run.settings())
    profile = state.grading.profile
    if profile is not None and profile.sampled:
        settings["temperature"] = None
    if state.capabilities.reference is not None:
        given = settings["reference"]
        assert isinstance(given, dict)
        settings["reference"] = {**given, "model": state.capabilities.reference.model}
    return settings


def _header(state: RunState) -> dict[str, Any]:
    """The run's journal header."""
    corpus = state.corpus
    return {
        "run_id": state.run_id,
        "started": state.started,
        "verifier_version": __version__,
        "settings": _settings(state),
        "profile": state.grading.record(),
        "corpus": corpus.record(),
        "capabilities": state.capabilities.to_dict(),
    }


def _resume(state: RunState, resumed: JournalContents, header: dict[str, Any]) -> RunState:
    """The run resumed from its journal: its start, graded outcomes and sessions kept.

    Raises:
        VerifierError: the journal's run was made with other settings.
    """
    old = resumed.header
    assert old is not None, "a resumed journal has a header"
    mismatch = resume_mismatch(old, header)
    if mismatch:
        raise VerifierError(
            f"--resume: the run in {state.out.root} differs ({mismatch}); "
            f"use the same options, or another --out, or drop --resume"
        )
    done = {
        key: record["outcome"]
        for key, record in resumed.latest().items()
        if record["outcome"]["status"] in FINAL_STATUSES
    }
    return dataclasses.replace(
        state,
        started=old["started"],
        done=done,
        sessions=resumed.sessions + 1,
        journal=Journal.resume(state.out.journal, resumed, now()),
    )


def case_costs(run: RunConfig) -> Callable[..., float]:
    """A case's expected time, in generated answers: its family's estimate, repeated."""
    from ..checks.registry import repeats_for

    def cost(case: Any) -> float:
        family = FAMILIES[case.family]
        repeats = repeats_for(run.repeats, case.family)
        return repeats * (family.cost(case) if family.cost else 1.0)

    return cost
