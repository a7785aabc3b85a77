"""Running one case: the context a family's ``run`` gets, and the error boundary around it."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..cases.corpus import Case
from ..checks import FAMILIES
from ..checks.wire import shape_findings
from ..config import TEMPERATURE
from ..endpoint.client import EndpointClient
from ..endpoint.probe import Capabilities
from ..errors import EndpointError
from ..outcome import Outcome, Status
from ..protocol.answers import ChatResult
from ..protocol.tokenize import TokenizerEndpoints
from ..reference.profiles import Profile


@dataclasses.dataclass(frozen=True, slots=True)
class RunContext:
    """What a family's ``run(case, ctx)`` may use: the one client and the run's settings.

    Args:
        client: the endpoint client (the only way to send a request).
        capabilities: what the probe found (model, server).
        repeats: ``--repeats``, or None for the family's default.
        seed: the seed sent with every sampling request.
        observed: every answer the current case got (for the shape checks that run on
            all families); :func:`run_case` gives each case a fresh list.
        profile: the reference model profile (``--profile``), or None.
        stop_early: ``--budget auto``: a case stops repeating once it is known to fail.
    """

    client: EndpointClient
    capabilities: Capabilities
    repeats: int | None
    seed: int
    observed: list[ChatResult] = dataclasses.field(default_factory=list)
    profile: Profile | None = None
    stop_early: bool = False

    @property
    def endpoints(self) -> TokenizerEndpoints:
        """The tokenizer endpoints the probe found (none when it did not look)."""
        found = self.capabilities.tokenizer_endpoints
        return TokenizerEndpoints.from_dict(found) if found else TokenizerEndpoints()

    @property
    def model(self) -> str:
        """The model under test."""
        return self.capabilities.model

    def repeats_for(self, family: str) -> int:
        """How many times a case of `family` runs."""
        return self.repeats if self.repeats is not None else FAMILIES[family].default_repeats

    def request(self, case: Case, **fields: Any) -> dict[str, Any]:
        """A chat request for `case`: model, deterministic sampling, then `fields`."""
        body: dict[str, Any] = {"model": self.model, "temperature": TEMPERATURE, "seed": self.seed}
        body.update(fields)
        return body

    def send(
        self, case: Case, request: dict[str, Any], *, stream: bool, name: str, **options: Any
    ) -> ChatResult:
        """Send `request` for `case`, labelled ``family/id#name`` in the transcript."""
        result = self.client.chat(request, stream=stream, label=f"{case.key}#{name}", **options)
        self.observe(result)
        return result

    def observe(self, result: ChatResult) -> None:
        """Record an answer the case got by another way than :meth:`send`."""
        self.observed.append(result)


def run_case(case: Case, base: RunContext) -> Outcome:
    """Run and grade `case`; a transport fault that outlived the retries is an ERROR outcome.

    Every answer the case got is also checked against the OpenAI answer schemas; what is
    found goes into the outcome's ``shapes`` metric (this family's verdict is not touched:
    the wire family owns shapes).
    """
    ctx = dataclasses.replace(base, observed=[])
    try:
        outcome = FAMILIES[case.family].run(case, ctx)
    except EndpointError as exc:
        outcome = Outcome(
            Status.ERROR,
            code=exc.code,
            message=exc.message,
            metrics={"attempts": exc.attempts},
        )
    shapes = shape_summary(ctx.observed)
    return dataclasses.replace(outcome, metrics={**outcome.metrics, "shapes": shapes})


def shape_summary(results: list[ChatResult]) -> dict[str, Any]:
    """How many answers broke the OpenAI schemas, by code, with the first message."""
    codes: dict[str, int] = {}
    first = None
    for result in results:
        for finding in shape_findings(result):
            codes[finding.code] = codes.get(finding.code, 0) + 1
            first = first or finding.message
    return {
        "answers": len(results),
        "violations": sum(codes.values()),
        "codes": codes,
        "first": first,
    }
