"""One way to write a sub-check: a family declares its checks by name, and one runner runs them.

A family whose cases name a ``check`` maps each name to a sub-check: an exchange that yields
its requests and returns its findings with its metrics (:data:`Graded`). The sub-check says
why it cannot grade by raising: :class:`Unsupported` (it does not apply here),
:class:`Rejected` (a valid request was declined with a 4xx), :class:`Undecided` (the answers
cannot be judged), or :class:`~.evidence.Malformed` (an answer without what the check reads).
:func:`run_checks` turns each into the case's outcome, as schemathesis's ``run_checks`` turns
its checks' failures into results; :func:`status_counts` is every family's per-check tally.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...outcome import CaseRecord, Finding, Outcome, Status
from ...protocol.answers import ChatResult
from ...protocol.requests import Exchange, Request
from .common import rejected, unsupported
from .evidence import Malformed

if TYPE_CHECKING:
    from ...cases.corpus import Case
    from ..registry import RunContext

# A sub-check: yields its requests, reads their answers, returns its findings and metrics.
Graded = Generator[Request, ChatResult, tuple[list[Finding], dict[str, Any]]]
SubCheck = Callable[["Case", "RunContext"], Graded]


class Unsupported(Exception):
    """The check does not apply to this endpoint or profile (the message says why).

    `metrics` are what was asked before it was known (requests sent, seeds read); they go
    over the outcome's ``{"check": ..., "requests": 0}``.
    """

    def __init__(self, reason: str, metrics: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.metrics = dict(metrics or {})


class Rejected(Exception):
    """A valid request of the case was declined with a 4xx.

    Args:
        result: the refusal.
        request: the request refused.
        contract: the request fields the model's contract states, innermost first, each
            with the code its refusal gives (read by a family's own refusal handler); empty
            when the contract states none of the request's fields.
    """

    def __init__(
        self,
        result: ChatResult,
        request: Mapping[str, Any] | None = None,
        contract: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> None:
        super().__init__(f"HTTP {result.status}")
        self.result = result
        self.request = request
        self.contract = contract


class Undecided(Exception):
    """The answers cannot be judged (the message says why); `code` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# A sub-check whose only metric is how many requests it sent (see :func:`counting_requests`).
FindingsOnly = Generator[Request, ChatResult, list[Finding]]


def counting_requests(grade: Callable[[Case, RunContext], FindingsOnly]) -> SubCheck:
    """The sub-check `grade`, with the requests the case sent as its metrics."""

    def graded(case: Case, ctx: RunContext) -> Graded:
        findings = yield from grade(case, ctx)
        return findings, {"requests": len(ctx.observed)}

    return graded


# A family's own reading of a refusal: the check's name, the refusal, the case's context.
Refusal = Callable[[str, Rejected, "RunContext"], Exchange]


def run_checks(
    case: Case,
    ctx: RunContext,
    checks: Mapping[str, SubCheck],
    *,
    default: SubCheck | None = None,
    refusal: Refusal | None = None,
) -> Exchange:
    """Run the sub-check `case` names (`default` for a name `checks` lacks) into its outcome.

    Every outcome's metrics carry the check's name. A refusal is unsupported (the feature is
    not served) unless the family reads it itself (`refusal`).
    """
    check = case.data["check"]
    run = checks[check] if default is None else checks.get(check, default)
    try:
        findings, metrics = yield from run(case, ctx)
    except Unsupported as exc:
        return unsupported(str(exc), {"check": check, "requests": 0, **exc.metrics})
    except Rejected as refused:
        if refusal is not None:
            return (yield from refusal(check, refused, ctx))
        return rejected(check, refused.result, {"check": check, "requests": len(ctx.observed)})
    except Undecided as exc:
        metrics = {"check": check, "requests": len(ctx.observed)}
        return Outcome(Status.ERROR, code=exc.code, message=str(exc), metrics=metrics)
    except Malformed as broken:
        findings, metrics = list(broken.findings), {"requests": len(ctx.observed)}
    return Outcome.from_findings(findings, metrics={**metrics, "check": check})


def status_counts(
    records: Iterable[CaseRecord], metric: str = "check"
) -> dict[str, dict[str, int]]:
    """Cases by status, per value of the outcome metric `metric` ("?" without it), sorted (pure)."""
    counts: dict[str, Counter[str]] = {}
    for record in records:
        key = str(record.outcome.metrics.get(metric, "?"))
        counts.setdefault(key, Counter())[record.status] += 1
    return {key: dict(sorted(tally.items())) for key, tally in sorted(counts.items())}
