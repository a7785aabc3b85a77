"""The registry of check families, keyed by name, and the context a family's ``run`` reads.

A family's ``run(case, ctx)`` is an exchange (:mod:`verifier.protocol.requests`): a generator
that yields the requests it needs, receives each answer before deciding the next, and returns
the case's :class:`~verifier.outcome.Outcome`. It sends nothing itself: the executor in
:mod:`verifier.run.executor` does.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cases.corpus import Case
from ..cases.rotation import Rotator
from ..config import FAMILY_NAMES
from ..outcome import CaseRecord, Summarize
from ..protocol.answers import ChatResult
from ..protocol.logprobs import LogprobsSupport, ReferenceEndpoint
from ..protocol.requests import TEMPERATURE, Exchange
from ..protocol.tokenize import TokenizerEndpoints
from ..reference.profiles import Profile

if TYPE_CHECKING:
    from ..config import RunConfig

RunFunction = Callable[[Case, "RunContext"], Exchange]
CaseCheck = Callable[["Case"], None]
# A case's expected time for one run, in requests the endpoint answers by generating, for
# starting the longest cases first.
Cost = Callable[["Case"], float]
# What a request answered without generating (a refusal, /tokenize) costs in those units.
QUICK = 0.1
# Local work for a case that can be done before any request (cached for its run).
Prepare = Callable[["Case"], None]
# Why a family's remaining cases need not be sent, from the outcomes graded so far, or None.
Settled = Callable[[Sequence[CaseRecord]], str | None]
# What a family needs of the start of the run under its options, among NEEDS.
Needs = Callable[["RunConfig"], Collection[str]]
# The probe asks whether the endpoint takes images, which tokenizer routes it serves, how many
# logprobs it lists, which APIs other than chat serve structured output ("formats");
# "reference" builds the client of --reference-endpoint (and probes it).
# Capabilities, not families: no need is named after a family.
NEEDS = frozenset({"images", "tokenizer_endpoints", "logprobs", "reference", "formats"})
# Cases a family adds under its options (a generated set): the cases, their label in the
# corpus digests and their digest; None for none.
ExtraCases = Callable[["RunConfig"], "tuple[list[Case], str, str] | None"]
# What the family's cases read in the run context (RunContext fields), from what the probe
# found.
Contextualise = Callable[["Probed"], Mapping[str, Any]]
# Before any request, from the run's options and the --baseline scorecard (None without
# one): a bad input raises ConfigError here, so that it costs no request.
BeforeRun = Callable[["RunConfig", "Mapping[str, Any] | None"], Contextualise]
# After the run, from the family's outcome records: the files it writes beside the
# scorecard, by name (the scorecard may hold their digests).
AfterRun = Callable[[Sequence[CaseRecord]], Mapping[str, bytes]]


@dataclasses.dataclass(frozen=True, slots=True)
class Family:
    """A check family.

    Args:
        name: the family's name (its case folder, marker and scorecard key).
        run: yields the case's requests, reads their answers, returns the graded outcome.
        default_repeats: how many times a case runs when ``--repeats`` is not given.
        check_case: extra validation of a loaded case beyond its JSON Schema
            (raises CaseDataError); None when the schema says it all.
        summarize: the family's sub-metrics for the scorecard, a pure function of its
            outcome records and the baseline's entry; None when counts say it all.
        description: one line for ``--help`` and the scorecard.
        cost: a case's expected time for one run, in requests answered by generating
            (:data:`QUICK` for one answered without; more for large images); None when
            every case is one such request.
        prepare: local work a case needs (its images), done in the background while the
            probe waits on the network; None when there is none.
        settled: why the family's remaining cases need not be sent, given the outcomes of
            those graded so far (a sequential decision that has stopped), or None while they
            are needed; None for a family that runs every case.
        cases: the folder of the family's ``*.jsonl`` case files; None for the packaged
            ``cases/<name>/`` (a family from another plugin brings its own).
        case_schema: the JSON Schema each case must match; None for the packaged
            ``schemas/<name>.case.schema.json``.
        needs: what the start of the run must find out for it (:data:`NEEDS`); None for
            nothing.
        extra_cases: the cases it adds under the run's options; None for none.
        before_run: what its cases read in the run context; None for nothing of its own.
        after_run: the files it writes beside the scorecard; None for none.
        writes: the names of those files (a new run moves an earlier run's to previous/).
        apis: the APIs its cases can be sent through (:data:`~verifier.protocol.apis.API_NAMES`):
            each runs over those of them the run verifies, its requests written once as chat
            bodies and rendered for each by its protocol module.
        case_apis: the APIs one case can be sent through, among `apis`, when that depends on
            the case (a check only chat has words for); None: every case, every one of `apis`.
        rotate: a case's variant under ``--rotate`` (:mod:`~verifier.cases.rotation`), its
            expectation derived with it; None: the family's cases do not vary.
    """

    name: str
    run: RunFunction
    default_repeats: int = 1
    check_case: CaseCheck | None = None
    summarize: Summarize | None = None
    description: str = ""
    cost: Cost | None = None
    prepare: Prepare | None = None
    settled: Settled | None = None
    cases: Path | None = None
    case_schema: Mapping[str, Any] | None = None
    needs: Needs | None = None
    extra_cases: ExtraCases | None = None
    before_run: BeforeRun | None = None
    after_run: AfterRun | None = None
    writes: tuple[str, ...] = ()
    apis: frozenset[str] = frozenset({"chat"})
    case_apis: Callable[[Case], Collection[str]] | None = None
    rotate: Rotator | None = None


class Registry:
    """Families by name; registering a name twice is an error.

    The built-in families (`built_in`, modules of this package named after them) are imported
    when first asked for, so that a run imports only the families it runs.
    """

    def __init__(self, built_in: Sequence[str] = ()) -> None:
        self._built_in = tuple(built_in)
        self._families: dict[str, Family] = {}

    def register(self, family: Family) -> Family:
        """Add `family`; the same definition again changes nothing.

        A plugin's hook registers its families once per pytest session, and one process may
        run several sessions.

        Raises:
            ValueError: another family of that name is already registered.
        """
        known = self._families.get(family.name)
        if known == family:
            return known
        if known is not None:
            raise ValueError(f"a family named {family.name!r} is already registered")
        self._families[family.name] = family
        return family

    def __getitem__(self, name: str) -> Family:
        if name not in self._families and name in self._built_in:
            # Its module registers it (the @family decorator).
            importlib.import_module(f"{__package__}.{name}")
        return self._families[name]

    def __iter__(self) -> Iterator[Family]:
        return (self[name] for name in self.names())

    def names(self) -> tuple[str, ...]:
        """The family names: the built-in ones, then those registered, in that order."""
        return (*self._built_in, *(n for n in self._families if n not in self._built_in))

    def summarizers(self, names: Iterable[str]) -> dict[str, Summarize]:
        """Those of `names` that have their own scorecard sub-metrics function, by name."""
        families = [self[name] for name in names]
        return {f.name: f.summarize for f in families if f.summarize is not None}

    def needs(self, run: RunConfig) -> frozenset[str]:
        """What the run's families need of its start (:data:`NEEDS`)."""
        found = {
            need
            for name in run.families
            if (needs := self[name].needs) is not None
            for need in needs(run)
        }
        if unknown := found - NEEDS:
            raise ValueError(f"a family needs what the start cannot find out: {sorted(unknown)}")
        return frozenset(found)

    def apis(self, run: RunConfig, served: Iterable[str]) -> Callable[[Case], tuple[str, ...]]:
        """The APIs each of the run's cases is sent through.

        Those of `served` (the run's APIs: ``--api``, or every one the endpoint serves) its
        family can speak (and, where the family says so, the case), in the order of `served`.
        """
        order = tuple(served)
        chosen = {name: tuple(a for a in order if a in self[name].apis) for name in run.families}

        def of(case: Case) -> tuple[str, ...]:
            apis = chosen.get(case.family, ())
            narrow = self[case.family].case_apis if apis else None
            return apis if narrow is None else tuple(a for a in apis if a in narrow(case))

        return of

    def rotators(self, names: Iterable[str]) -> dict[str, Rotator]:
        """Those of `names` whose cases vary under ``--rotate``, with how."""
        return {name: rotate for name in names if (rotate := self[name].rotate) is not None}

    def writes(self) -> tuple[str, ...]:
        """The names of the files every family may write beside the scorecard."""
        return tuple(name for family in self for name in family.writes)


FAMILIES = Registry(FAMILY_NAMES)


def family(
    name: str,
    *,
    default_repeats: int = 1,
    check_case: CaseCheck | None = None,
    summarize: Summarize | None = None,
    description: str = "",
    cost: Cost | None = None,
    prepare: Prepare | None = None,
    settled: Settled | None = None,
    needs: Needs | None = None,
    extra_cases: ExtraCases | None = None,
    before_run: BeforeRun | None = None,
    after_run: AfterRun | None = None,
    writes: tuple[str, ...] = (),
    apis: Collection[str] = ("chat",),
    case_apis: Callable[[Case], Collection[str]] | None = None,
    rotate: Rotator | None = None,
) -> Callable[[RunFunction], RunFunction]:
    """Register the decorated ``run(case, ctx)`` exchange as the family `name`."""

    def decorate(run: RunFunction) -> RunFunction:
        FAMILIES.register(
            Family(
                name,
                run,
                default_repeats,
                check_case,
                summarize,
                description or (run.__doc__ or "").strip().split("\n")[0],
                cost,
                prepare,
                settled,
                needs=needs,
                extra_cases=extra_cases,
                before_run=before_run,
                after_run=after_run,
                writes=writes,
                apis=frozenset(apis),
                case_apis=case_apis,
                rotate=rotate,
            )
        )
        return run

    return decorate


@dataclasses.dataclass(frozen=True, slots=True)
class Probed:
    """What the probe found that a family's run context may depend on.

    Args:
        logprobs: the most alternatives the endpoint lists, or why none, when the probe asked.
        reference: the reference endpoint's model and logprobs, when one is asked.
    """

    logprobs: LogprobsSupport | None = None
    reference: ReferenceEndpoint | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ParityContext:
    """What the parity family compares with, and how many alternatives it may ask for.

    Args:
        top_logprobs: the most ``top_logprobs`` both the endpoint and the reference give
            (up to 20); None when logprobs are unavailable.
        why_unavailable: why there are none, when there are none.
        live: the reference is an endpoint asked in the same run (``--reference-endpoint``).
        reference_model: the model the reference endpoint serves, when live.
        recordings: the reference's recorded answers by case id (``--baseline``), or None.
        sampling: first tokens are sampled: compared where there are no logprobs (or
            ``--parity-method sampling``), recorded besides them in a recording run.
    """

    top_logprobs: int | None = None
    why_unavailable: str = "the probe did not ask for logprobs"
    live: bool = False
    reference_model: str | None = None
    recordings: Mapping[str, Mapping[str, Any]] | None = None
    sampling: bool = False

    @property
    def recording(self) -> bool:
        """Nothing to compare with: the run records what the endpoint answers."""
        return not self.live and self.recordings is None


@dataclasses.dataclass(frozen=True, slots=True)
class RunContext:
    """What a family's ``run(case, ctx)`` may read: the run's settings and what the probe found.

    Args:
        model: the model under test.
        seed: the seed sent with every sampling request.
        repeats: ``--repeats``: one count for every family, counts by family, or None for
            each family's default.
        profile: the reference model profile (``--profile``), or None.
        stop_early: ``--budget auto``: a case stops repeating once it is known to fail.
        endpoints: the tokenizer endpoints the probe found (none when it did not look).
        vision: the probe's finding on images (see ``Capabilities.vision``).
        observed: every answer the current case got, recorded by the executor (for the
            shape checks that run on all families, and request counts); the executor gives
            each case a fresh list.
        parity: the parity family's reference and logprobs (see :class:`ParityContext`).
        formats: the APIs other than chat that serve no structured output, each with why
            (see ``Capabilities.formats``).
        max_context: ``--max-context``: the longest prompt the context family sends, or None.
    """

    model: str
    seed: int
    repeats: int | dict[str, int] | None = None
    profile: Profile | None = None
    stop_early: bool = False
    endpoints: TokenizerEndpoints = TokenizerEndpoints()
    vision: bool | None = None
    observed: list[ChatResult] = dataclasses.field(default_factory=list)
    parity: ParityContext = ParityContext()
    formats: Mapping[str, str] = dataclasses.field(default_factory=dict)
    max_context: int | None = None

    def repeats_for(self, family: str) -> int:
        """How many times a case of `family` runs."""
        return repeats_for(self.repeats, family)

    @property
    def sampled(self) -> bool:
        """The model's contract pins temperature above 0: answers are samples, not greedy.

        Requests then leave temperature out (the server uses its pin), and checks that
        compare two answers for equality do not apply.
        """
        return self.profile is not None and self.profile.sampled

    def request(self, **fields: Any) -> dict[str, Any]:
        """A chat request: model, deterministic sampling, then `fields`.

        Where the model's contract pins temperature, no temperature is sent, not even a
        case's own: the server uses its pin (sampling_pins checks the pin itself).
        """
        body: dict[str, Any] = {"model": self.model, "temperature": TEMPERATURE, "seed": self.seed}
        body.update(fields)
        if self.sampled:
            del body["temperature"]
        return body


def repeats_for(repeats: int | dict[str, int] | None, family: str) -> int:
    """How many times a case of `family` runs under ``--repeats`` `repeats`."""
    if isinstance(repeats, int):
        return repeats
    given = (repeats or {}).get(family)
    return given if given is not None else FAMILIES[family].default_repeats
