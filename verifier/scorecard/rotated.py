"""Public cases against their rotated twins: whether a vendor special-cases the published prompts.

Under ``--rotate`` each case that can vary runs beside its twin (:mod:`verifier.cases.rotation`):
the same request in other words, names and numbers, its expectation derived with it. A vendor
that treats every prompt alike is as often right on a case as on its twin. Over a family's
pairs where both were graded, a case is right when it passed and (where the family measures
accuracy) was accurate; the discordant pairs decide. Right as published and wrong rotated
(``lost``) should be no likelier than the other way (``gained``): the one-sided exact McNemar
test gives the chance of at least `lost` of the discordant pairs falling that way if both were
equally likely, and below :data:`ALPHA` the family fails with ``public_cases_special_cased``,
listing the twins that differ. So a vendor that serves every prompt alike is called
special-casing in at most one run in a hundred per family. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..cases.rotation import SUFFIX
from ..outcome import CaseRecord
from ..stats import binomial_upper_tail, rate

CODE = "public_cases_special_cased"
# The false-alarm rate per family per run of a vendor that treats public and rotated alike.
ALPHA = 0.01
NAME = "public vs rotated"
METHOD = (
    "each case paired with its rotated twin over the same API; right = passed and, where "
    "measured, accurate; p: one-sided exact McNemar test (binomial tail of the pairs right "
    f"as published only, among the discordant pairs); special-cased when p < {ALPHA}"
)


def _pair_key(record: CaseRecord) -> tuple[str, str, bool]:
    """(the public case's id, the API, whether this is the twin)."""
    case = record.id.removesuffix(f"[{record.api}]") if record.api != "chat" else record.id
    twin = case.endswith(SUFFIX)
    return case.removesuffix(SUFFIX), record.api, twin


def _right(record: CaseRecord) -> bool:
    return record.status == "pass" and record.outcome.metrics.get("accurate") is not False


def comparison(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """The family's public-versus-rotated comparison and its ruling, or {} without twins (pure).

    Returns ``{"rotation": metrics, "rulings": [ruling]}``: the pairs graded on both sides,
    each side's rate right, the discordant counts, the p-value, and the twins that differ
    (right as published, wrong rotated) with what each twin got. No pair graded on both
    sides decides nothing: no ruling.
    """
    public: dict[tuple[str, str], CaseRecord] = {}
    twins: dict[tuple[str, str], CaseRecord] = {}
    for record in records:
        case, api, twin = _pair_key(record)
        (twins if twin else public)[case, api] = record
    if not twins:
        return {}
    both = lost = gained = neither = 0
    differing: list[dict[str, Any]] = []
    for key in sorted(twins.keys() & public.keys()):
        ours, theirs = public[key], twins[key]
        if ours.status not in ("pass", "fail") or theirs.status not in ("pass", "fail"):
            continue
        here, there = _right(ours), _right(theirs)
        both += here and there
        neither += not here and not there
        gained += there and not here
        if here and not there:
            lost += 1
            differing.append(_differs(ours, theirs))
    pairs = both + lost + gained + neither
    p_value = binomial_upper_tail(lost, lost + gained)
    special = p_value < ALPHA
    metrics = {
        "method": METHOD,
        "pairs": pairs,
        "public": rate(both + lost, pairs),
        "rotated": rate(both + gained, pairs),
        "lost": lost,
        "gained": gained,
        "p_value": p_value,
        "alpha": ALPHA,
        "differing": differing,
    }
    ruling = {
        "name": NAME,
        "outcome": "special-cased" if special else "alike",
        "verdict": "fail" if special else "pass",
        "code": CODE if special else None,
        "pairs": pairs,
        "differing": lost,
        "twins": "rotated",
        "p_value": metrics["p_value"],
    }
    return {"rotation": metrics, "rulings": [ruling] if pairs else []}


def _differs(public: CaseRecord, twin: CaseRecord) -> dict[str, Any]:
    """A pair right as published and wrong rotated: the twin, and what it got."""
    metrics = twin.outcome.metrics
    got: list[str] = list(metrics.get("quality") or ())
    got += [f.code for f in twin.outcome.findings if f.code not in got]
    return {"case": public.id, "twin": twin.id, "api": twin.api, "twin_got": got}
