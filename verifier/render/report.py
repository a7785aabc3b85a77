"""Text for people: how a failing case explains itself, and the end-of-run summary."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..cases.corpus import Case
from ..compare.families import ruling_text
from ..compare.measures import paired_text
from ..compare.origins import cases_text
from ..outcome import Finding, Outcome, Status
from .performance_section import performance_line

MAX_FINDINGS_SHOWN = 8


def _compact(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more]"


def _difference(finding: Finding) -> list[str]:
    # Imported here: deepdiff (and numpy, which it loads) cost 0.1 s at every run's start,
    # and a run that fails nothing never needs them.
    from deepdiff import DeepDiff

    diff = DeepDiff(finding.expected, finding.actual, ignore_order=False, verbose_level=2)
    if not diff:
        return []
    return ["difference (expected -> actual):"] + [
        f"  {line}" for line in diff.pretty().splitlines()[:MAX_FINDINGS_SHOWN]
    ]


def render_outcome(case: Case, outcome: Outcome) -> str:
    """The explanation of a failed or errored case, as shown by pytest."""
    lines = [f"{outcome.code}: {outcome.message}"]
    for finding in outcome.findings[:MAX_FINDINGS_SHOWN]:
        where = f" [{finding.attempt}]" if finding.attempt else ""
        lines.append(f"  - {finding.code}: {finding.message}{where}")
    if len(outcome.findings) > MAX_FINDINGS_SHOWN:
        lines.append(f"  ... and {len(outcome.findings) - MAX_FINDINGS_SHOWN} more findings")
    if outcome.findings:
        first = outcome.findings[0]
        if first.compare:
            lines.extend(_difference(first))
        else:
            if first.expected is not None:
                lines.append(f"expected: {_compact(first.expected)}")
            if first.actual is not None:
                lines.append(f"actual:   {_compact(first.actual)}")
    for key, value in outcome.evidence.items():
        lines.append(f"{key}: {_compact(value) if not isinstance(value, str) else value}")
    if outcome.status is Status.ERROR:
        lines.append(
            "this is a transport fault, not a verdict on the endpoint's behaviour: "
            "the case counts as an error"
        )
    lines.append(f"case: {case.source}")
    return "\n".join(lines)


def _interval(family: Mapping[str, Any]) -> str:
    if family["score"] is None:
        return "score -"
    low, high = family["interval"]
    return f"score {family['score']:.3f} [{low:.3f}, {high:.3f}]"


def summary_lines(card: Mapping[str, Any]) -> list[str]:
    """One line per family (verdict, counts, score with its interval, top codes)."""
    lines = []
    width = max((len(name) for name in card["families"]), default=0)
    for name, family in card["families"].items():
        counts = family["counts"]
        codes = ", ".join(f"{code} x{n}" for code, n in list(family["codes"].items())[:3])
        if family["verdict"] == "recorded":
            lines.append(
                f"{name:<{width}}  {'RECORDED':<12} {family['metrics'].get('recorded', 0)} "
                "recorded, nothing compared: not graded, not passed (a later run's --baseline "
                "compares with them)"
            )
            continue
        lines.append(
            f"{name:<{width}}  {family['verdict'].upper():<12} "
            f"{counts['pass']} pass, {counts['fail']} fail, {counts['error']} error, "
            f"{counts['unsupported']} unsupported  {_interval(family)}"
            + (f"  ({codes})" if codes else "")
        )
        detail = _sub_metrics(family.get("metrics", {}))
        if detail:
            lines.append(f"{'':<{width}}  {detail}")
        lines += [f"{'':<{width}}  {line}" for line in paired_lines(family.get("metrics", {}))]
        for ruling in family.get("rulings") or ():
            exceeded = _rate_text("beyond the noise floor", ruling.get("exceeded"))
            lines.append(
                f"{'':<{width}}  {ruling['name']}: {ruling_text(ruling)}"
                + (f", {exceeded}" if exceeded else "")
            )
    faults = faults_text(card.get("transcript", {}).get("faults") or {})
    if faults:
        lines.append(faults)
    speed = performance_line(card.get("performance"))
    if speed:
        lines.append(speed)
    corpus = card.get("corpus") or {}
    for pack in corpus.get("packs") or ():
        alone = "" if corpus.get("public") else ", without the public corpus"
        lines.append(
            f"private pack {pack['name']}: {pack['cases']} cases, sha256 {pack['digest']}{alone}"
        )
    if corpus:
        lines.append(f"cases: {cases_text(corpus)}")
    lines.append(f"overall: {card['verdict'].upper()}")
    return lines


def faults_text(faults: Mapping[str, int]) -> str | None:
    """One line on the transport faults met, by kind, or None when there were none."""
    kinds = {k: n for k, n in faults.items() if k not in ("retried", "gave_up") and n}
    if not kinds:
        return None
    listed = ", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return (
        f"transport faults: {listed}; {faults.get('retried', 0)} retried, "
        f"{faults.get('gave_up', 0)} gave up"
    )


def _rate_text(label: str, rate: Mapping[str, Any] | None) -> str | None:
    if not rate or rate.get("rate") is None:
        return None
    low, high = rate["interval"]
    return f"{label} {rate['rate']:.3f} [{low:.3f}, {high:.3f}]"


def _sub_metrics(metrics: Mapping[str, Any]) -> str:
    """The family's headline sub-metrics, where it has them."""
    parts = [
        _rate_text("accuracy", metrics.get("accuracy", {}).get("overall")),
        _rate_text("pass^k", metrics.get("pass_k")),
        _rate_text("identical", metrics.get("identical_calls")),
        _rate_text("stream parity", metrics.get("stream_parity")),
        _rate_text("reasoning-only", metrics.get("reasoning_only")),
        _rate_text("good follow-ups", (metrics.get("followups") or {}).get("all")),
        _rate_text("effort ordered", metrics.get("effort_ordered")),
    ]
    baseline = metrics.get("baseline")
    if baseline and baseline.get("trigger_f1") is not None:
        parts.append(f"trigger F1 vs baseline {baseline['trigger_f1']:.3f}")
    return "  ".join(p for p in parts if p)


def paired_lines(metrics: Mapping[str, Any]) -> list[str]:
    """Accuracy against the --baseline's, paired: the family, then each category that moved."""
    paired = (metrics.get("accuracy") or {}).get("paired")
    if not isinstance(paired, Mapping):
        return []
    if "unavailable" in paired:
        return [f"accuracy vs baseline: not compared: {paired['unavailable']}"]
    lines = [f"accuracy vs baseline (paired): {paired_text(paired['all'])}"]
    lines += [
        f"  {category}: {paired_text(compared)}"
        for category, compared in paired["by_category"].items()
        if compared["lost"] or compared["gained"]
    ]
    return lines


def budget_lines(budget: Mapping[str, Any]) -> list[str]:
    """One terminal line per family the budget stopped early."""
    lines = []
    for family, entry in budget["families"].items():
        if entry["decided"] and entry["sent"] < entry["cases"]:
            low, high = entry["interval"]
            lines.append(
                f"budget: {family} stopped after {entry['sent']} of {entry['cases']} cases "
                f"(pass rate 95% interval [{low:.2f}, {high:.2f}] {entry['decided']} "
                f"min_score {entry['min_score']:g})"
            )
    return lines
