"""Running one case: the executor drives the family's exchange through the one client.

The family yields requests and grades what comes back (:mod:`verifier.checks.registry`); the
executor sends each request, records the case's answers for the shape checks every family
gets, turns a transport fault the family did not handle into an ERROR outcome, and applies
``--budget auto``'s stopping rule.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from ..cases.corpus import Case
from ..checks import FAMILIES
from ..checks.registry import RunContext
from ..checks.support.accounting import account_answers, with_accounting
from ..checks.support.shapes import shape_summary
from ..endpoint.client import EndpointClient
from ..errors import EndpointError
from ..outcome import CaseRecord, Outcome, Status
from ..protocol.answers import ChatResult
from ..protocol.apis import TITLES, NotExpressible
from ..protocol.labels import Label
from ..protocol.requests import Chat, Request, drive
from .budget import Budget
from .in_flight import InFlight


class Executor:
    """Runs the cases of one process: each family's exchange through the one client.

    Args:
        client: the endpoint client (the only way a request leaves).
        context: the settings and probe findings every case runs with.
        budget: ``--budget auto``'s stopping rule, or None: a family it has stopped sends
            no further case.
        reference: the client of the reference deployment (``--reference-endpoint``), for
            requests whose target is ``reference``; None when there is none.
        in_flight: the process's requests in flight (``--concurrency``); None sends each
            request when its family yields it.
    """

    def __init__(
        self,
        client: EndpointClient,
        context: RunContext,
        budget: Budget | None,
        reference: EndpointClient | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        self.client = client
        self.context = context
        self.budget = budget
        self.reference = reference
        self.in_flight = in_flight
        self._graded: dict[str, list[CaseRecord]] = {}
        self._lock = threading.Lock()

    def stop_reason(self, family: str) -> str | None:
        """Why the family's remaining cases are not sent: its budget, or its own decision."""
        if self.budget is not None:
            reason = self.budget.stopped(family)
            if reason:
                return reason
        settled = FAMILIES[family].settled
        if settled is None:
            return None
        with self._lock:
            graded = list(self._graded.get(family, ()))
        return settled(graded)

    def run(self, case: Case) -> Outcome | None:
        """The case's outcome; None when its family stopped before it was sent."""
        if self.stop_reason(case.family):
            return None
        outcome = run_case(case, self.context, self.client, self.reference, self.in_flight)
        if self.budget is not None:
            self.budget.record(case.family, outcome.status)
        with self._lock:
            self._graded.setdefault(case.family, []).append(
                CaseRecord(case.key, case.family, outcome, case.api)
            )
        return outcome


class _CaseSender:
    """Sends one case's requests: to the reference or the endpoint, announced ones ahead."""

    def __init__(
        self,
        case: Case,
        client: EndpointClient,
        reference: EndpointClient | None,
        in_flight: InFlight | None,
    ) -> None:
        self.case = case
        self.client = client
        self.reference = reference
        self.in_flight = in_flight
        self.ahead: dict[str, tuple[Request, Future[ChatResult]]] = {}

    def send(self, request: Request) -> ChatResult:
        """The answer to `request`: the one sent ahead for it, or one sent now."""
        if request.name in self.ahead:
            announced, future = self.ahead.pop(request.name)
            assert announced == request, f"{request.name} is not the request announced"
            return future.result()
        in_flight = self.in_flight
        if in_flight is not None and in_flight.ahead_allowed and isinstance(request, Chat):
            for follower in request.then:
                self.ahead[follower.name] = (follower, in_flight.ahead(self._call(follower)))
        call = self._call(request)
        return call() if in_flight is None else in_flight.send(call)

    def _call(self, request: Request) -> Callable[[], ChatResult]:
        target = self.client
        if isinstance(request, Chat) and request.target == "reference":
            assert self.reference is not None, "a reference request without --reference-endpoint"
            target = self.reference
        label = str(Label(self.case.family, self.case.id, request.name))
        # The reference is asked through chat: its answers are the distributions compared.
        api = self.case.api if target is self.client else "chat"
        return lambda: target.send(request, label, api)


def run_case(
    case: Case,
    base: RunContext,
    client: EndpointClient,
    reference: EndpointClient | None = None,
    in_flight: InFlight | None = None,
) -> Outcome:
    """Run and grade `case`; a transport fault that outlived the retries is an ERROR outcome.

    Every answer the case got is also checked against the OpenAI answer schemas; what is
    found goes into the outcome's ``shapes`` metric (this family's verdict is not touched:
    the wire family owns shapes). With a profile, every answer's bill is held to what it
    delivered (output accounting, :mod:`verifier.checks.support.accounting`): its figures go
    into the ``accounting`` metric and its findings fail the case, whichever family sent it.
    A request for the reference goes to `reference`. Requests a family announces
    (``Chat.then``) go out ahead through `in_flight` when it allows more than one; an answer
    counts as the case's only once the family has yielded its request.
    """
    ctx = dataclasses.replace(base, observed=[])
    sender = _CaseSender(case, client, reference, in_flight)
    # The endpoint's answers to chat requests, with what was asked: output accounting's input.
    asked: list[tuple[Mapping[str, Any], ChatResult]] = []

    def send(request: Request) -> ChatResult:
        answer = sender.send(request)
        if request.observe:
            ctx.observed.append(answer)
            if isinstance(request, Chat) and request.target == "endpoint":
                asked.append((request.body, answer))
        return answer

    try:
        outcome: Outcome = drive(FAMILIES[case.family].run(case, ctx), send)
    except EndpointError as exc:
        outcome = Outcome(
            Status.ERROR,
            code=exc.code,
            message=exc.message,
            metrics={"attempts": exc.attempts},
        )
    except NotExpressible as exc:
        outcome = Outcome(
            Status.UNSUPPORTED,
            code="not_expressible",
            message=f"unsupported: the case cannot be sent through {TITLES[exc.api]}: {exc.reason}",
        )
    shapes = shape_summary(ctx.observed)
    outcome = dataclasses.replace(outcome, metrics={**outcome.metrics, "shapes": shapes})
    if base.profile is None:
        return outcome
    accounting, findings = account_answers(base.profile, asked)
    return with_accounting(outcome, accounting, findings)
