"""The registry of check families: one entry per family, keyed by its name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..outcome import Outcome
    from ..run.executor import RunContext

RunFunction = Callable[["Case", "RunContext"], "Outcome"]
CaseCheck = Callable[["Case"], None]
# A case's expected time for one run, in requests the endpoint answers by generating, for
# starting the longest cases first.
Cost = Callable[["Case"], float]
# What a request answered without generating (a refusal, /tokenize) costs in those units.
QUICK = 0.1
# Local work for a case that can be done before any request (cached for its run).
Prepare = Callable[["Case"], None]
# (latest outcome records of the family, the baseline scorecard's entry for it) -> sub-metrics
Summarize = Callable[[Iterable[Mapping[str, Any]], Mapping[str, Any] | None], dict[str, Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class Family:
    """A check family.

    Args:
        name: the family's name (its case folder, marker and scorecard key).
        run: sends the case's requests through the context and grades them.
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
    """

    name: str
    run: RunFunction
    default_repeats: int = 1
    check_case: CaseCheck | None = None
    summarize: Summarize | None = None
    description: str = ""
    cost: Cost | None = None
    prepare: Prepare | None = None


class Registry:
    """Families by name; registering a name twice is an error."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}

    def register(self, family: Family) -> Family:
        """Add `family`.

        Raises:
            ValueError: a family of that name is already registered.
        """
        if family.name in self._families:
            raise ValueError(f"a family named {family.name!r} is already registered")
        self._families[family.name] = family
        return family

    def __getitem__(self, name: str) -> Family:
        return self._families[name]

    def __iter__(self) -> Iterator[Family]:
        return iter(self._families.values())

    def names(self) -> tuple[str, ...]:
        """Registered family names, in registration order."""
        return tuple(self._families)


FAMILIES = Registry()


def family(
    name: str,
    *,
    default_repeats: int = 1,
    check_case: CaseCheck | None = None,
    summarize: Summarize | None = None,
    description: str = "",
    cost: Cost | None = None,
    prepare: Prepare | None = None,
) -> Callable[[RunFunction], RunFunction]:
    """Register the decorated ``run(case, ctx)`` function as the family `name`."""

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
            )
        )
        return run

    return decorate
