"""What grading a case produces: findings and one outcome per case."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Any

# A family's own sub-metrics for the scorecard, a pure function of (the latest outcome records
# of its cases, the baseline scorecard's entry for the family) -> metrics.
Summarize = Callable[[Iterable["CaseRecord"], Mapping[str, Any] | None], dict[str, Any]]


class Status(enum.StrEnum):
    """How a case ended. FAIL means the endpoint is wrong; ERROR means it could not be judged."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One thing wrong with a response, as data.

    Args:
        code: stable short name of the defect class within its family (``schema_mismatch``).
        message: what was found versus what was allowed, in one sentence.
        json_path: where in the response or output it was found (``$.items[3]``).
        expected: what a correct endpoint would have given, where that is known.
        actual: what came back.
        attempt: which request of the case it came from (``non-stream-2``).
        compare: `expected` and `actual` are two versions of the same thing, so the
            report shows their difference (deepdiff) rather than both in full.
    """

    code: str
    message: str
    json_path: str | None = None
    expected: Any = None
    actual: Any = None
    attempt: str | None = None
    compare: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain JSON data (None fields left out)."""
        return {
            k: v for k, v in dataclasses.asdict(self).items() if v is not None and v is not False
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """The inverse of :meth:`to_dict`."""
        fields: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        fields["compare"] = bool(fields["compare"])
        return cls(**fields)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """The graded result of one case.

    Args:
        status: pass, fail, error or unsupported.
        code: the headline code: the first finding's for a fail, the fault's for an
            error, the reason's for unsupported; None for a pass.
        message: the headline in one line.
        findings: every finding, in the order found.
        metrics: numbers the scorecard aggregates (``requests``, ``pass_k``, ...).
        evidence: a small excerpt of what came back, for the failure report.
    """

    status: Status
    code: str | None = None
    message: str = ""
    findings: tuple[Finding, ...] = ()
    metrics: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    evidence: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_findings(
        cls,
        findings: Iterable[Finding],
        *,
        metrics: Mapping[str, Any] | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> Outcome:
        """PASS when there is no finding, else FAIL headed by the first finding."""
        found = tuple(findings)
        if not found:
            return cls(Status.PASS, metrics=dict(metrics or {}), evidence=dict(evidence or {}))
        head = found[0]
        extra = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        return cls(
            Status.FAIL,
            code=head.code,
            message=head.message + extra,
            findings=found,
            metrics=dict(metrics or {}),
            evidence=dict(evidence or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        """The outcome as plain JSON data."""
        return {
            "status": self.status.value,
            "code": self.code,
            "message": self.message,
            "findings": [f.to_dict() for f in self.findings],
            "metrics": dict(self.metrics),
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        """The inverse of :meth:`to_dict`."""
        return cls(
            status=Status(data["status"]),
            code=data.get("code"),
            message=data.get("message", ""),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            metrics=dict(data.get("metrics", {})),
            evidence=dict(data.get("evidence", {})),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class CaseRecord:
    """A case's graded outcome, as the journal keeps it.

    Args:
        case: the case's key, ``family/id``.
        family: its family.
        outcome: what grading it gave.
        api: the API its requests went through.
    """

    case: str
    family: str
    outcome: Outcome
    api: str = "chat"

    @property
    def id(self) -> str:
        """The case's id within its family."""
        return self.case.split("/", 1)[1]

    @property
    def status(self) -> str:
        """The outcome's status, as the scorecard spells it."""
        return self.outcome.status.value

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseRecord:
        """A journal's outcome record (its ``time`` aside); one without ``api`` is chat's."""
        return cls(
            data["case"],
            data["family"],
            Outcome.from_dict(data["outcome"]),
            data.get("api", "chat"),
        )
