"""Build the scorecard from the journal: counts, rates with intervals, verdicts.

The scorecard is a pure function of the journal's header and records, the
transcript digest and the finish time, so that it can be rebuilt, compared and
(later) signed as a predicate unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .. import __version__
from ..checks import FAMILIES
from ..stats import wilson_interval

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


def summarize_family(
    name: str, records: Iterable[Mapping[str, Any]], baseline: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The scorecard entry of one family from its (latest) outcome records.

    Args:
        name: the family.
        records: the latest outcome record of each of its cases.
        baseline: the same family's entry in a baseline scorecard, if one was given.
    """
    records = list(records)
    counts = dict.fromkeys(STATUSES, 0)
    codes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    requests = 0
    worst: list[dict[str, Any]] = []
    shapes: dict[str, Any] = {"answers": 0, "violations": 0, "codes": Counter(), "examples": []}
    for record in records:
        outcome = record["outcome"]
        status = outcome["status"]
        counts[status] += 1
        requests += int(outcome.get("metrics", {}).get("requests", 0) or 0)
        seen = outcome.get("metrics", {}).get("shapes")
        if seen:
            shapes["answers"] += seen["answers"]
            shapes["violations"] += seen["violations"]
            shapes["codes"].update(seen["codes"])
            if seen.get("first") and len(shapes["examples"]) < 3:
                shapes["examples"].append({"case": record["case"], "message": seen["first"]})
        if status == "fail":
            quality = set(outcome.get("metrics", {}).get("quality", []))
            found = {outcome["code"]} | {f["code"] for f in outcome.get("findings", [])}
            codes.update(found - quality)
            if len(worst) < WORST_FAILURES:
                worst.append(
                    {
                        "case": record["case"],
                        "code": outcome["code"],
                        "message": outcome["message"],
                        "evidence": outcome.get("evidence", {}),
                    }
                )
        elif status == "error":
            errors[outcome.get("code") or "error"] += 1
    graded = counts["pass"] + counts["fail"]
    interval = wilson_interval(counts["pass"], graded)
    shapes["codes"] = dict(sorted(shapes["codes"].items(), key=lambda kv: (-kv[1], kv[0])))
    metrics: dict[str, Any] = {"requests": requests, "shapes": shapes}
    summarize = FAMILIES[name].summarize if name in FAMILIES.names() else None
    if summarize is not None:
        metrics.update(summarize(records, baseline))
    return {
        "verdict": verdict(counts),
        "cases": sum(counts.values()),
        "counts": counts,
        "score": counts["pass"] / graded if graded else None,
        "interval": list(interval) if interval else None,
        "codes": dict(sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "errors": dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
        "metrics": metrics,
        "worst": worst,
    }


def overall_verdict(families: Mapping[str, Mapping[str, Any]]) -> str:
    """Fail if any family fails, else inconclusive if any is, else pass (unsupported ignored)."""
    verdicts = [f["verdict"] for f in families.values()]
    if "fail" in verdicts:
        return "fail"
    if "inconclusive" in verdicts:
        return "inconclusive"
    if "pass" in verdicts:
        return "pass"
    return "unsupported"


def build_scorecard(
    header: Mapping[str, Any],
    records: Mapping[str, Mapping[str, Any]],
    *,
    finished: str,
    transcript_sha256: str,
    transcript_records: int,
    sessions: int = 1,
    baseline: Mapping[str, Any] | None = None,
    seen: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The scorecard of a run.

    Args:
        header: the journal's run header.
        records: the latest outcome record of each case, by case key.
        finished: when the session that writes this scorecard ended (ISO 8601).
        transcript_sha256: digest of the merged transcript file.
        transcript_records: number of records in it.
        sessions: how many sessions the run took (more than 1 after --resume).
        baseline: a scorecard of a reference endpoint to compare with (``--baseline``).
        seen: served models and system fingerprints of every answer in the transcript,
            and its transport faults by kind (see ``provenance.seen_in_transcript``).
    """
    settings = header["settings"]
    by_family: dict[str, list[Mapping[str, Any]]] = {name: [] for name in settings["families"]}
    for record in records.values():
        by_family.setdefault(record["family"], []).append(record)
    baseline_families = (baseline or {}).get("families", {})
    families = {
        name: summarize_family(name, items, baseline_families.get(name))
        for name, items in by_family.items()
        if items
    }
    capabilities = header.get("capabilities", {})
    transcript: dict[str, Any] = {"sha256": transcript_sha256, "records": transcript_records}
    if seen and "faults" in seen:
        transcript["faults"] = dict(seen["faults"])
    return {
        "schema_version": SCHEMA_VERSION,
        "verifier": {"name": "llm-endpoint-verifier", "version": __version__},
        "run": {
            "id": header["run_id"],
            "started": header["started"],
            "finished": finished,
            "sessions": sessions,
        },
        "endpoint": {
            "url": settings["endpoint"],
            "requested_model": settings.get("model"),
            "model": capabilities.get("model", settings.get("model")),
            "served_model": capabilities.get("served_model"),
            "system_fingerprint": capabilities.get("system_fingerprint"),
            "served_models": dict((seen or {}).get("served_models", {})),
            "system_fingerprints": dict((seen or {}).get("system_fingerprints", {})),
            "server": capabilities.get("server", {}),
            "models": capabilities.get("models", []),
            "tokenizer_endpoints": capabilities.get("tokenizer_endpoints"),
            "vision": capabilities.get("vision"),
        },
        "settings": {k: v for k, v in settings.items() if k != "endpoint"},
        "corpus": header["corpus"],
        "profile": header.get("profile"),
        "verdict": overall_verdict(families),
        "families": families,
        "transcript": transcript,
        **({"baseline": baseline_identity(baseline)} if baseline is not None else {}),
    }


def baseline_identity(baseline: Mapping[str, Any]) -> dict[str, Any]:
    """What the scorecard says about the baseline it was compared with."""
    return {
        "run": baseline.get("run", {}).get("id"),
        "endpoint": baseline.get("endpoint", {}).get("url"),
        "model": baseline.get("endpoint", {}).get("model"),
        "corpus": baseline.get("corpus", {}).get("digest"),
    }
