"""Build the comparison: vendor names, what makes inputs incomparable, one view per family."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..config import FAMILY_NAMES
from ..protocol.apis import API_NAMES, TITLES
from .families import VIEWS, generic
from .measures import STATUSES, family_measure, rate_measure, verdict_measure
from .origins import profile_text, setting_text, short_digest
from .speed import performance_view
from .tables import (
    Comparison,
    Difference,
    Failure,
    FamilyView,
    Row,
    Table,
    Vendor,
    info_row,
    ranked_row,
)

if TYPE_CHECKING:
    from .inputs import Input

# Families whose cases are graded against the reference profile (--profile).
PROFILE_FAMILIES = ("chat_template", "tokenizer", "vision", "wire")
# Settings that are naturally per vendor: --model names the vendor's own model id.
# Settings that may differ without making outcomes differ (how fast, how TLS was checked,
# whether a load probe ran first: the performance section marks its own comparability).
PER_VENDOR_SETTINGS = frozenset({"model", "concurrency", "insecure", "load"})
# Worst failures shown per vendor and family.
SHOWN_FAILURES = 3


def family_order() -> list[str]:
    """The built-in families in the suite's order (a plugin's families follow, by name)."""
    return list(FAMILY_NAMES)


def vendor_names(
    cards: Sequence[Mapping[str, Any]], labels: Sequence[str | None] | None = None
) -> list[str]:
    """The label given, else URL and model; then the run id, then a number, to make them unique."""
    labels = labels or [None] * len(cards)
    names = [
        label or f"{c['endpoint']['url']} · {c['endpoint'].get('model') or '?'}"
        for c, label in zip(cards, labels, strict=True)
    ]
    counts = Counter(names)
    names = [
        f"{name} (run {c['run']['id'][:8]})" if counts[name] > 1 else name
        for name, c in zip(names, cards, strict=True)
    ]
    counts = Counter(names)
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(f"{name} #{seen[name]}" if counts[name] > 1 else name)
    return unique


def _families(cards: Sequence[Mapping[str, Any]]) -> list[str]:
    present: set[str] = set()
    for card in cards:
        present.update(card["families"])
        present.update(card["settings"].get("families", []))
    order = family_order()
    return [f for f in order if f in present] + sorted(present - set(order))


def differences(cards: Sequence[Mapping[str, Any]], families: Sequence[str]) -> list[Difference]:
    """What the inputs differ in, beyond the vendor itself, and the families it affects."""
    found: list[Difference] = []
    everything = tuple(families)

    def differ(aspect: str, values: Sequence[str], affected: Sequence[str]) -> None:
        if len(set(values)) > 1:
            found.append(Difference(aspect, tuple(values), tuple(affected) or everything))

    differ("verifier version", [str(c["verifier"].get("version")) for c in cards], everything)
    corpus_families = set()
    for key in {k for c in cards for k in c["corpus"].get("families", {})}:
        if len({c["corpus"].get("families", {}).get(key) for c in cards}) > 1:
            corpus_families.add(key.split("/", 1)[0])
    differ(
        "corpus digest",
        [short_digest(c["corpus"]["digest"]) for c in cards],
        [f for f in families if f in corpus_families],
    )
    settings = [c["settings"] for c in cards]
    for key in sorted({k for s in settings for k in s} - PER_VENDOR_SETTINGS):
        values = [s.get(key) for s in settings]
        if key == "families":
            # The order families were asked for in does not change their results.
            ran = [[f for f in families if f in (v or ())] for v in values]
            affected = [f for f in families if not all(f in r for r in ran)]
            differ("families run", [", ".join(r) or "none" for r in ran], affected)
        elif key == "generated":
            differ("generated cases", [setting_text(v) for v in values], ["structured_output"])
        elif key in ("reference", "parity_method"):
            # Only parity asks the reference, and compares by a method; the others never do.
            differ(f"settings: {key}", [setting_text(v) for v in values], ["parity"])
        else:
            differ(f"settings: {key}", [setting_text(v) for v in values], everything)
    differ(
        "reference profile",
        [profile_text(c.get("profile")) for c in cards],
        [f for f in families if f in PROFILE_FAMILIES],
    )
    return found


def notes(cards: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """Things a reader should know that do not make the results incomparable."""
    found = []
    models = [str(c["endpoint"].get("served_model") or c["endpoint"].get("model")) for c in cards]
    if len(set(models)) > 1:
        found.append(
            "the endpoints name their model differently ("
            + "; ".join(f"{n}: {m}" for n, m in zip(names, models, strict=True))
            + "): compare runs of the same model only"
        )
    for name, card in zip(names, cards, strict=True):
        endpoint = card["endpoint"]
        for field, what in (
            ("system_fingerprints", "system fingerprints"),
            ("served_models", "served model names"),
        ):
            seen = endpoint.get(field) or {}
            if len(seen) > 1:
                listed = ", ".join(f"{k} ×{n}" for k, n in seen.items())
                found.append(f"{name} answered with {len(seen)} {what} ({listed})")
        gate = card.get("gate")
        if isinstance(gate, Mapping) and not gate.get("passed", True):
            found.append(f"{name} missed its gate ({gate.get('source')})")
    return found


def _cases(family: Mapping[str, Any] | None) -> str | None:
    if family is None:
        return None
    counts = family.get("counts", {})
    return f"{family.get('cases', 0)}: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)


def _over(entry: Mapping[str, Any] | None, api: str) -> Mapping[str, Any] | None:
    """A family entry's part over one API; None if the family did not run over it.

    Its ``apis`` entry, or the entry itself when the family ran over that API alone.
    """
    if entry is None:
        return None
    if "apis" in entry:
        apis: Mapping[str, Mapping[str, Any]] = entry["apis"]
        return apis.get(api)
    return entry if entry.get("api", "chat") == api else None


def api_rows(entries: Sequence[Mapping[str, Any] | None]) -> tuple[Row, ...]:
    """Each API's verdict and score, and the twins' agreement across APIs.

    None when no vendor ran the family over an API other than chat: a chat-only comparison
    is unchanged.
    """
    apis = [api for api in API_NAMES if any(_over(e, api) is not None for e in entries)]
    if apis == ["chat"] or not apis:
        return ()
    rows = [
        ranked_row(f"over {TITLES[api]}", [family_measure(_over(e, api)) for e in entries])
        for api in apis
    ]
    agreement = [((e or {}).get("metrics") or {}).get("cross_api") for e in entries]
    if any(agreement):
        rows.append(
            ranked_row(
                "same answer across APIs (twin pairs)",
                [rate_measure(a.get("agreement") if a else None) for a in agreement],
            )
        )
    return tuple(rows)


def family_view(
    name: str, cards: Sequence[Mapping[str, Any]], found: Sequence[Difference]
) -> FamilyView:
    """One family across the vendors."""
    entries = [c["families"].get(name) for c in cards]
    headline = ranked_row(name, [family_measure(e) for e in entries])
    key, tables = VIEWS.get(name, generic)(entries)
    summary = Table(
        "Summary",
        "score: passed / graded cases, with its 95% Wilson interval; over each API when a "
        "vendor ran the family over more than chat",
        (
            Row("verdict and score", headline.cells, headline.higher_is_better),
            info_row("cases", [_cases(e) for e in entries]),
            *api_rows(entries),
        ),
    )
    examples = tuple(
        tuple(
            Failure(w["case"], w["code"], w["message"], dict(w.get("evidence") or {}))
            for w in (e or {}).get("worst", [])[:SHOWN_FAILURES]
        )
        for e in entries
    )
    return FamilyView(
        name,
        headline,
        key,
        (summary, *tables),
        examples,
        tuple(d for d in found if name in d.families),
    )


def build_comparison(inputs: Sequence[Input]) -> Comparison:
    """The comparison of the inputs' scorecards, in input order."""
    cards = [i.scorecard for i in inputs]
    names = vendor_names(cards, [i.label for i in inputs])
    families = _families(cards)
    found = differences(cards, families)
    return Comparison(
        vendors=tuple(
            Vendor(name, i.path, i.signature, i.scorecard)
            for name, i in zip(names, inputs, strict=True)
        ),
        overall=ranked_row("overall", [verdict_measure(c["verdict"]) for c in cards]),
        families=tuple(family_view(name, cards, found) for name in families),
        differences=tuple(found),
        notes=tuple(notes(cards, names)),
        performance=performance_view(cards),
    )
