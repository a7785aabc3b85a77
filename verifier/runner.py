"""Running one case: the context a family's ``run`` gets, and the error boundary around it."""

from __future__ import annotations

import dataclasses
from typing import Any

from .cases import Case
from .checks import FAMILIES
from .endpoint.client import EndpointClient
from .endpoint.probe import Capabilities
from .endpoint.response import ChatResult
from .errors import EndpointError
from .outcome import Outcome, Status


@dataclasses.dataclass(frozen=True, slots=True)
class RunContext:
    """What a family's ``run(case, ctx)`` may use: the one client and the run's settings.

    Args:
        client: the endpoint client (the only way to send a request).
        capabilities: what the probe found (model, server).
        repeats: ``--repeats``, or None for the family's default.
        seed: the seed sent with every sampling request.
    """

    client: EndpointClient
    capabilities: Capabilities
    repeats: int | None
    seed: int

    @property
    def model(self) -> str:
        """The model under test."""
        return self.capabilities.model

    def repeats_for(self, family: str) -> int:
        """How many times a case of `family` runs."""
        return self.repeats if self.repeats is not None else FAMILIES[family].default_repeats

    def request(self, case: Case, **fields: Any) -> dict[str, Any]:
        """A chat request for `case`: model, deterministic sampling, then `fields`."""
        body: dict[str, Any] = {"model": self.model, "temperature": 0, "seed": self.seed}
        body.update(fields)
        return body

    def send(
        self, case: Case, request: dict[str, Any], *, stream: bool, name: str, **options: Any
    ) -> ChatResult:
        """Send `request` for `case`, labelled ``family/id#name`` in the transcript."""
        return self.client.chat(request, stream=stream, label=f"{case.key}#{name}", **options)


def run_case(case: Case, ctx: RunContext) -> Outcome:
    """Run and grade `case`; a transport fault that outlived the retries is an ERROR outcome."""
    try:
        return FAMILIES[case.family].run(case, ctx)
    except EndpointError as exc:
        return Outcome(
            Status.ERROR,
            code=exc.code,
            message=exc.message,
            metrics={"attempts": exc.attempts},
        )
