"""Build the scorecard from the journal: counts, rates with intervals, verdicts.

The scorecard is a pure function of the journal's header and records, the
transcript digest and the finish time, so that it can be rebuilt, compared and
(later) signed as a predicate unchanged.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .. import __version__
from ..outcome import CaseRecord, Summarize
from ..protocol.apis import API_NAMES
from ..stats import wilson_interval
from .gate import evaluate
from .rotated import comparison as rotation_comparison

SCHEMA_VERSION = 1
# Above this share of transport errors among attempted cases a family is inconclusive.
MAX_ERROR_RATE = 0.10
WORST_FAILURES = 5
STATUSES = ("pass", "fail", "error", "unsupported")


def verdict(counts: Mapping[str, int], max_error_rate: float = MAX_ERROR_RATE) -> str:
    """pass, fail, inconclusive or unsupported, from a family's counts.

    - unsupported: nothing was attempted (every case unsupported);
    - inconclusive: nothing was graded, or errors exceed `max_error_rate` of attempts:
      a flaky transport never passes a family;
    - fail: at least one graded case failed;
    - pass: otherwise.
    """
    graded = counts["pass"] + counts["fail"]
    attempted = graded + counts["error"]
    if attempted == 0:
        return "unsupported"
    if graded == 0 or counts["error"] / attempted > max_error_rate:
        return "inconclusive"
    return "fail" if counts["fail"] else "pass"


def _shapes(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """The shape checks every answer got, over the family's cases."""
    shapes: dict[str, Any] = {"answers": 0, "violations": 0, "codes": Counter(), "examples": []}
    for record in records:
        seen = record.outcome.metrics.get("shapes")
        if seen:
            shapes["answers"] += seen["answers"]
            shapes["violations"] += seen["violations"]
            shapes["codes"].update(seen["codes"])
            if seen.get("first") and len(shapes["examples"]) < 3:
                shapes["examples"].append({"case": record.case, "message": seen["first"]})
    shapes["codes"] = _by_count(shapes["codes"])
    return shapes


def _accounting(records: Iterable[CaseRecord]) -> dict[str, int] | None:
    """Output accounting over the family's answers (None without a profile: nothing counted)."""
    total: Counter[str] = Counter()
    seen = False
    for record in records:
        figures = record.outcome.metrics.get("accounting")
        if figures:
            seen = True
            total.update({k: int(v) for k, v in figures.items()})
    if not seen:
        return None
    keys = ("answers", "exact", "bounded", "unaccounted", "billed", "delivered")
    return {key: total[key] for key in keys}


def _by_count(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def _failures(records: Iterable[CaseRecord]) -> tuple[Counter[str], list[dict[str, Any]]]:
    """The codes of the failed cases, and the first failures."""
    codes: Counter[str] = Counter()
    worst: list[dict[str, Any]] = []
    for record in records:
        outcome = record.outcome
        if record.status != "fail":
            continue
        found = {outcome.code} | {f.code for f in outcome.findings}
        codes.update(str(code) for code in found)
        if len(worst) < WORST_FAILURES:
            worst.append(
                {
                    "case": record.case,
                    "code": outcome.code,
                    "message": outcome.message,
                    "evidence": dict(outcome.evidence),
                }
            )
    return codes, worst


def summarize_family(
    records: Iterable[CaseRecord],
    baseline: Mapping[str, Any] | None = None,
    summarize: Summarize | None = None,
) -> dict[str, Any]:
    """The scorecard entry of one family from its (latest) outcome records.

    Args:
        records: the latest outcome record of each of its cases.
        baseline: the same family's entry in a baseline scorecard, if one was given.
        summarize: the family's own sub-metrics (see ``Family.summarize``), if it has any.
            Its ``rulings`` (a list, possibly empty) are decisions over all the cases
            together, each with a ``verdict`` and, when it fails, a ``code``: they go into
            the entry's ``rulings`` and can make the family's verdict worse. Its
            ``recorded`` counts cases answered soundly and recorded with nothing to compare
            them with (each unsupported, code ``recorded``): a family with no graded case and
            some recorded has the verdict ``recorded``, never ``pass``.
    """
    records = list(records)
    counts = dict.fromkeys(STATUSES, 0)
    errors: Counter[str] = Counter()
    for record in records:
        counts[record.status] += 1
        if record.status == "error":
            errors[record.outcome.code or "error"] += 1
    codes, worst = _failures(records)
    graded = counts["pass"] + counts["fail"]
    interval = wilson_interval(counts["pass"], graded)
    metrics = _metrics(records, baseline, summarize)
    rulings = metrics.pop("rulings", None)
    family_verdict = verdict(counts)
    if family_verdict == "unsupported" and metrics.get("recorded"):
        # Cases answered soundly and recorded, with nothing to compare them with.
        family_verdict = "recorded"
    for ruling in rulings or ():
        family_verdict = worse(family_verdict, ruling["verdict"])
        if ruling.get("code"):
            codes[ruling["code"]] += 1
    entry = {
        "verdict": family_verdict,
        "cases": sum(counts.values()),
        "counts": counts,
        "score": counts["pass"] / graded if graded else None,
        "interval": list(interval) if interval else None,
        "codes": _by_count(codes),
        "errors": _by_count(errors),
        "metrics": metrics,
        "worst": worst,
    }
    if rulings is not None:
        entry["rulings"] = rulings
    return entry


def _metrics(
    records: list[CaseRecord], baseline: Mapping[str, Any] | None, summarize: Summarize | None
) -> dict[str, Any]:
    """A family's metrics: requests, shapes, accounting, its own, the rotation comparison.

    The comparison's ruling joins the family's own rulings.
    """
    requests = sum(int(r.outcome.metrics.get("requests", 0) or 0) for r in records)
    metrics: dict[str, Any] = {"requests": requests, "shapes": _shapes(records)}
    accounting = _accounting(records)
    if accounting is not None:
        metrics["accounting"] = accounting
    if summarize is not None:
        metrics.update(summarize(records, baseline))
    rotated = rotation_comparison(records)
    if rotated:
        metrics["rotation"] = rotated["rotation"]
        if rotated["rulings"]:
            metrics["rulings"] = [*(metrics.get("rulings") or ()), *rotated["rulings"]]
    return metrics


# A ruling over all of a family's cases can only make a family's verdict worse, in this order.
_SEVERITY = ("unsupported", "pass", "inconclusive", "fail")
# The run's verdict is its families' worst, in this order; a family that only recorded, or
# was unsupported, never makes a run pass.
_OVERALL = ("fail", "inconclusive", "pass", "recorded", "unsupported")


def worse(verdict: str, decided: str) -> str:
    """The worse of a family's verdict from its cases and a decision over all of them.

    A family none of whose cases was graded stays unsupported (or recorded): a decision over
    no case decides nothing.
    """
    if verdict in ("unsupported", "recorded"):
        return verdict
    return max(verdict, decided, key=_SEVERITY.index)


def overall_verdict(families: Mapping[str, Mapping[str, Any]]) -> str:
    """The families' worst verdict: fail, inconclusive, pass, then recorded, unsupported."""
    verdicts = {f["verdict"] for f in families.values()}
    return next((v for v in _OVERALL if v in verdicts), "unsupported")


@dataclasses.dataclass(frozen=True, slots=True)
class TranscriptSummary:
    """What the scorecard says of the run's transcript.

    Args:
        sha256: digest of the merged transcript file.
        records: number of records in it.
        seen: served models and system fingerprints of every answer in it, and its
            transport faults by kind (see ``provenance.seen_in_transcript``).
    """

    sha256: str
    records: int
    seen: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def build_scorecard(
    header: Mapping[str, Any],
    records: Mapping[str, Mapping[str, Any]],
    *,
    finished: str,
    transcript: TranscriptSummary,
    sessions: int = 1,
    baseline: Mapping[str, Any] | None = None,
    summarizers: Mapping[str, Summarize] | None = None,
    budget: Mapping[str, Any] | None = None,
    gate: tuple[Mapping[str, Mapping[str, Any]], str] | None = None,
    performance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The scorecard of a run, complete: built once, never edited after.

    Args:
        header: the journal's run header.
        records: the latest outcome record of each case, by case key.
        finished: when the session that writes this scorecard ended (ISO 8601).
        transcript: the transcript's digest, size and what it saw.
        sessions: how many sessions the run took (more than 1 after --resume).
        baseline: a scorecard of a reference endpoint to compare with (``--baseline``).
        summarizers: each family's own sub-metrics function, by family name.
        budget: what ``--budget auto`` did (``run.budget.summary``), when it was on.
        gate: the gate's thresholds and their source, when ``--gate`` applies.
        performance: speed and spend (``performance.measure``), when measured.
    """
    settings = header["settings"]
    typed = [CaseRecord.from_dict(record) for record in records.values()]
    families = _families(settings["families"], typed, baseline, summarizers or {})
    seen = transcript.seen
    card: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "verifier": {"name": "llm-endpoint-verifier", "version": __version__},
        "run": {
            "id": header["run_id"],
            "started": header["started"],
            "finished": finished,
            "sessions": sessions,
        },
        "endpoint": _endpoint(settings, header.get("capabilities", {}), seen),
        "settings": {k: v for k, v in settings.items() if k != "endpoint"},
        "corpus": header["corpus"],
        "profile": header.get("profile"),
        "verdict": overall_verdict(families),
        "families": families,
        "transcript": {
            "sha256": transcript.sha256,
            "records": transcript.records,
            **({"faults": dict(seen["faults"])} if "faults" in seen else {}),
        },
        **({"baseline": baseline_identity(baseline)} if baseline is not None else {}),
        **({"budget": dict(budget)} if budget is not None else {}),
        **({"performance": _with_length(performance, families)} if performance is not None else {}),
    }
    if gate is not None:
        card["gate"] = evaluate(card, *gate)
    return card


def _with_length(
    performance: Mapping[str, Any], families: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The performance section, with the context family's speed at length where it ran.

    Prefill rate by prompt length, where the first token stops growing in proportion, and
    the first token cold and hot: figures of the endpoint's speed, beside the others.
    """
    metrics = (families.get("context") or {}).get("metrics") or {}
    if not metrics.get("speed") and not metrics.get("cache"):
        return dict(performance)
    length = {
        "prefill": metrics.get("speed") or {},
        "ttft_linear_until": metrics.get("ttft_linear_until"),
        "cache": metrics.get("cache") or {},
    }
    return {**performance, "at_length": length}


def _families(
    names: Iterable[str],
    records: Iterable[CaseRecord],
    baseline: Mapping[str, Any] | None,
    summarizers: Mapping[str, Summarize],
) -> dict[str, dict[str, Any]]:
    """The entry of every family that has an outcome, in the run's order of families."""
    by_family: dict[str, list[CaseRecord]] = {name: [] for name in names}
    for record in records:
        by_family.setdefault(record.family, []).append(record)
    baseline_families = (baseline or {}).get("families", {})
    families = {}
    for name, items in by_family.items():
        if not items:
            continue
        entry = summarize_family(items, baseline_families.get(name), summarizers.get(name))
        by_api = _by_api(items)
        if len(by_api) == 1 and "chat" not in by_api:
            # One API, not chat: say which (the gate's API tables read it).
            entry["api"] = next(iter(by_api))
        if len(by_api) > 1:
            # The family over all its APIs above; each API's own entry beside it.
            entry["apis"] = {
                api: summarize_family(
                    chosen,
                    baseline_families.get(name) if api == "chat" else None,
                    summarizers.get(name),
                )
                for api, chosen in by_api.items()
            }
        families[name] = entry
    return families


def _by_api(records: Iterable[CaseRecord]) -> dict[str, list[CaseRecord]]:
    """Records by the API their requests went through, in the order of API_NAMES."""
    found: dict[str, list[CaseRecord]] = {api: [] for api in API_NAMES}
    for record in records:
        found.setdefault(record.api, []).append(record)
    return {api: chosen for api, chosen in found.items() if chosen}


def _endpoint(
    settings: Mapping[str, Any], capabilities: Mapping[str, Any], seen: Mapping[str, Any]
) -> dict[str, Any]:
    """What the scorecard says of the endpoint: as configured, as probed, as seen answering."""
    return {
        "url": settings["endpoint"],
        "requested_model": settings.get("model"),
        "model": capabilities.get("model", settings.get("model")),
        "served_model": capabilities.get("served_model"),
        "system_fingerprint": capabilities.get("system_fingerprint"),
        "served_models": dict(seen.get("served_models", {})),
        "system_fingerprints": dict(seen.get("system_fingerprints", {})),
        "server": capabilities.get("server", {}),
        "models": capabilities.get("models", []),
        "tokenizer_endpoints": capabilities.get("tokenizer_endpoints"),
        "vision": capabilities.get("vision"),
        "apis": capabilities.get("apis", ["chat"]),
    }


def baseline_identity(baseline: Mapping[str, Any]) -> dict[str, Any]:
    """What the scorecard says about the baseline it was compared with."""
    return {
        "run": baseline.get("run", {}).get("id"),
        "endpoint": baseline.get("endpoint", {}).get("url"),
        "model": baseline.get("endpoint", {}).get("model"),
        "corpus": baseline.get("corpus", {}).get("digest"),
    }
