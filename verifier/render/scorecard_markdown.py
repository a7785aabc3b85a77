"""``scorecard.md``: one run's scorecard for people, written next to ``scorecard.json``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..compare.families import VIEWS, generic
from ..compare.measures import STATUSES, family_measure, interval_text
from ..compare.origins import cases_text, profile_text, settings_text, timestamp, when_text
from ..compare.tables import Row, State
from ..compare.views import family_order
from .gate_text import accuracy_text, actual_text
from .markdown import code, code_block, escape, table
from .performance_section import performance_markdown
from .report import _interval as score_text
from .report import budget_lines, faults_text, paired_lines

# Evidence values longer than this (or structured) go into a code block.
INLINE_LIMIT = 80
BLOCK_LIMIT = 1200
# Drill-down tables that only restate counts shown elsewhere in the family's section.
SKIPPED_TABLES = frozenset({"Failure codes", "Answers", "Method"})


def _short_of(row: Row) -> bool:
    """Whether a one-vendor row falls short: below perfect, unsupported or inconclusive."""
    cell = row.cells[0]
    if cell.state in (State.UNSUPPORTED, State.INCONCLUSIVE, State.RECORDED):
        return True
    value = cell.measure.value
    if cell.state is not State.GRADED or value is None:
        return False
    return value < 1.0 if row.higher_is_better else value > 0.0


def _unsupported_groups(metrics: Mapping[str, Any]) -> str:
    """Checks or categories with unsupported cases, where the family counts them so."""
    groups = metrics.get("checks") or metrics.get("categories") or {}
    return ", ".join(
        f"{name} ({counts['unsupported']})"
        for name, counts in groups.items()
        if isinstance(counts, Mapping) and counts.get("unsupported")
    )


def _score(family: Mapping[str, Any]) -> str:
    score, interval = family.get("score"), family.get("interval")
    if score is None:
        return "– (nothing graded)"
    return interval_text(score, tuple(interval) if interval else None)


def _family_lines(name: str, family: Mapping[str, Any]) -> list[str]:
    counts = family.get("counts", {})
    measure = family_measure(family)
    verdict = str(family.get("verdict", "?")).upper()
    lines = [f"### {escape(name)}: {verdict}", ""]
    lines.append(
        f"- {family.get('cases', 0)} cases: "
        + ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)
        + f"; {score_text(family)}"
    )
    unsupported = _unsupported_groups(family.get("metrics", {}))
    if unsupported:
        lines.append(f"- unsupported (not graded): {escape(unsupported)}")
    if measure.state is State.UNSUPPORTED:
        lines.append("- UNSUPPORTED: the endpoint declined every case; nothing was graded")
    elif measure.state is State.INCONCLUSIVE:
        lines.append("- INCONCLUSIVE: too many transport errors, or nothing graded")
    elif measure.state is State.RECORDED:
        lines.append(
            "- RECORDED: the answers were recorded with nothing to compare them with; nothing "
            "was graded or passed (a later run's --baseline compares with the recording)"
        )
    key, tables = VIEWS.get(name, generic)([family])
    lines += [f"- {escape(row.label)}: {escape(row.cells[0].text)}" for row in key]
    # The key row holds the family's paired difference; the categories that moved follow it.
    lines += [f"  - {escape(line.strip())}" for line in paired_lines(family["metrics"])[1:]]
    lines += _cross_api_lines(family.get("metrics", {}).get("cross_api"))
    codes = family.get("codes") or {}
    if codes:
        lines.append("- failure codes: " + ", ".join(f"{code(c)} ×{n}" for c, n in codes.items()))
    errors = family.get("errors") or {}
    if errors:
        lines.append(
            "- transport errors: " + ", ".join(f"{code(c)} ×{n}" for c, n in errors.items())
        )
    short = [
        (drill.title, row)
        for drill in tables
        if drill.title not in SKIPPED_TABLES
        for row in drill.rows
        if row not in key and _short_of(row)
    ]
    if short:
        lines.append("- falls short on:")
        lines += [
            f"  - {escape(title)} › {escape(row.label)}: {escape(row.cells[0].text)}"
            for title, row in short
        ]
    return [*lines, ""]


def _cross_api_lines(compared: Mapping[str, Any] | None) -> list[str]:
    """The agreement of the cases' twins across APIs, and each kind that differs."""
    if not compared:
        return []
    apis = ", ".join(compared["apis"])
    agreement = compared["agreement"]
    if not compared["pairs"]:
        return [f"- across APIs ({escape(apis)}): no twin pair compared"]
    line = (
        f"- across APIs ({escape(apis)}): the same answer in "
        f"{interval_text(agreement['rate'], tuple(agreement['interval']))} of "
        f"{compared['pairs']} twin pairs"
    )
    differ = [
        f"{kind} ×{figures['trials'] - figures['successes']}"
        for kind, figures in compared["by_kind"].items()
        if figures["successes"] < figures["trials"]
    ]
    return [line + (f"; differ in {escape(', '.join(differ))}" if differ else "")]


def _is_inline(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= INLINE_LIMIT and "\n" not in value
    return not isinstance(value, dict | list)


def _block(value: Any) -> str:
    if isinstance(value, str):
        shown, language = value, "text"
    else:
        shown = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        language = "json"
    if len(shown) > BLOCK_LIMIT:
        shown = shown[:BLOCK_LIMIT] + f"... [{len(shown) - BLOCK_LIMIT} more characters]"
    return code_block(shown, language)


def evidence_lines(evidence: Mapping[str, Any]) -> list[str]:
    """Evidence, compactly: short values on one line, the rest in code blocks."""
    if not evidence:
        return ["   (no evidence recorded)"]
    inline = [
        f"{escape(k)} {code(v if isinstance(v, str) else json.dumps(v))}"
        for k, v in evidence.items()
        if _is_inline(v)
    ]
    lines = [f"   {'; '.join(inline)}"] if inline else []
    for key, value in evidence.items():
        if not _is_inline(value):
            lines += ["", f"   {escape(key)}:", ""]
            lines += [f"   {line}" for line in _block(value).splitlines()]
    return lines


def _worst(families: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = ["## Worst failures", ""]
    shown = False
    for name, family in families.items():
        worst = family.get("worst") or []
        if not worst:
            continue
        shown = True
        lines += [f"### {escape(name)}", ""]
        for number, failure in enumerate(worst, 1):
            lines.append(
                f"{number}. {code(failure.get('case', '?'))} {code(failure.get('code', '?'))}: "
                f"{escape(failure.get('message', ''))}"
            )
            lines += evidence_lines(failure.get("evidence") or {})
            lines.append("")
    if not shown:
        lines += ["No case failed.", ""]
    return lines


def _gate(gate: Mapping[str, Any] | None) -> list[str]:
    """The day-0 gate's verdict and every threshold missed (nothing when no gate was asked)."""
    if not gate:
        return []
    lines = [
        f"## Gate: {'PASS' if gate.get('passed') else 'FAIL'}",
        "",
        f"Thresholds from {escape(str(gate.get('source')))}.",
        "",
    ]
    for name, result in gate.get("families", {}).items():
        if not result.get("gated"):
            state = "not gated (unsupported or not run)"
            lines.append(f"- {escape(name)}: {state if result.get('passed') else 'FAIL'}")
        elif not result.get("missed"):
            lines.append(f"- {escape(name)}: meets every threshold")
        for missed in result.get("missed", []):
            lines.append(
                f"- {escape(name)}: {code(str(missed.get('threshold')))} "
                f"{escape(repr(missed.get('limit')))} missed, actual "
                f"{escape(actual_text(missed.get('actual')))}"
            )
        for ruling in result.get("accuracy", []):
            if ruling["verdict"] == "pass":
                lines.append(
                    f"- {escape(name)}: {code('max_accuracy_drop ' + ruling['category'])} "
                    f"{escape(repr(ruling['margin']))} met: {escape(accuracy_text(ruling))}"
                )
    return [*lines, ""]


def _provenance(card: Mapping[str, Any]) -> list[str]:
    run, endpoint = card.get("run", {}), card.get("endpoint", {})
    verifier, corpus = card.get("verifier", {}), card.get("corpus", {})
    transcript = card.get("transcript", {})
    fingerprints = endpoint.get("system_fingerprints") or {}
    lines = [
        "## Provenance",
        "",
        f"- verifier: {escape(str(verifier.get('name')))} {escape(str(verifier.get('version')))}",
        f"- run: {code(str(run.get('id')))}, {when_text(run)} UTC",
        f"- endpoint: {code(str(endpoint.get('url')))}, model {code(str(endpoint.get('model')))}"
        + (
            f", served as {code(str(endpoint['served_model']))}"
            if endpoint.get("served_model")
            else ""
        ),
    ]
    if fingerprints:
        lines.append(
            "- system fingerprints: "
            + ", ".join(f"{code(k)} ×{n}" for k, n in fingerprints.items())
        )
    elif endpoint.get("system_fingerprint"):
        lines.append(f"- system fingerprint: {code(str(endpoint['system_fingerprint']))}")
    lines.append(f"- settings: {escape(settings_text(card.get('settings', {})))}")
    lines.append(f"- corpus digest: {code(str(corpus.get('digest')))}")
    digests = corpus.get("families") or {}
    if digests:
        lines += [f"  - {escape(k)}: {code(str(v))}" for k, v in sorted(digests.items())]
    lines.append(f"- cases sent: {escape(cases_text(corpus))}")
    packs = corpus.get("packs") or []
    if packs:
        which = "the public corpus and" if corpus.get("public") else "only"
        lines.append(f"- cases: {which} {len(packs)} private pack(s), contents not recorded")
        lines += [
            f"  - {escape(str(pack['name']))}: {pack['cases']} cases, sha256 "
            f"{code(str(pack['digest']))}"
            for pack in packs
        ]
    profile = card.get("profile")
    lines.append(f"- profile: {escape(profile_text(profile))}")
    if profile:
        lines += [
            f"  - template sha256: {code(str(profile.get('template_sha256')))}",
            f"  - {escape(str(profile.get('tokenizer')))} sha256: "
            f"{code(str(profile.get('tokenizer_sha256')))}",
        ]
    lines.append(
        f"- transcript: sha256 {code(str(transcript.get('sha256')))}, "
        f"{transcript.get('records')} records"
    )
    baseline = card.get("baseline")
    if isinstance(baseline, Mapping):
        lines.append(
            f"- compared with baseline run {code(str(baseline.get('run')))} of "
            f"{code(str(baseline.get('endpoint')))} (corpus {code(str(baseline.get('corpus')))})"
        )
    return [*lines, ""]


def _families_table(families: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The families table: a row per family, and one per API of a family run over several."""
    rows = [
        [
            escape(label),
            str(family.get("verdict", "?")).upper(),
            *(str(family.get("counts", {}).get(s, 0)) for s in STATUSES),
            _score(family),
        ]
        for name, whole in families.items()
        for label, family in [
            (name, whole),
            *((f"{name} › {api}", entry) for api, entry in whole.get("apis", {}).items()),
        ]
    ]
    return [
        "## Families",
        "",
        table(["Family", "Verdict", *STATUSES, "Score [95% interval]"], rows),
        "",
        "Score: passed / graded (pass + fail) cases; unsupported cases are not graded.",
        *(
            [
                "A family run over several APIs has a row per API (› chat, › messages, "
                "› responses) under its row over all of them."
            ]
            if any("apis" in family for family in families.values())
            else []
        ),
        "",
    ]


def render_scorecard_markdown(scorecard: dict[str, Any]) -> str:
    """The scorecard as Markdown for people (``scorecard.md``).

    The overall verdict comes first, on one line with the endpoint, model and date; then
    each family (verdict, counts, score with its interval, key sub-metrics and what falls
    short); then the worst failures with their evidence; then the provenance.
    """
    endpoint, run = scorecard.get("endpoint", {}), scorecard.get("run", {})
    # Canonical JSON sorts the families by name; people read them in the suite's order.
    order = family_order()
    families = dict(
        sorted(
            scorecard.get("families", {}).items(),
            key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]),
        )
    )
    lines = [
        f"# {str(scorecard.get('verdict', '?')).upper()}: {escape(str(endpoint.get('url')))}, "
        f"model {escape(str(endpoint.get('model')))}, {timestamp(run.get('started'))} UTC",
        "",
    ]
    failing = [n for n, f in families.items() if f.get("verdict") == "fail"]
    if failing:
        lines += [f"Failing: {', '.join(escape(n) for n in failing)}.", ""]
    lines += _families_table(families)
    faults = faults_text(scorecard.get("transcript", {}).get("faults") or {})
    stopped = budget_lines(scorecard["budget"]) if "budget" in scorecard else []
    lines += [f"- {escape(line)}" for line in ([faults] if faults else []) + stopped]
    lines += [""] if faults or stopped else []
    for name, family in families.items():
        lines += _family_lines(name, family)
    lines += performance_markdown(scorecard.get("performance"))
    lines += _gate(scorecard.get("gate"))
    lines += _worst(families)
    lines += _provenance(scorecard)
    return "\n".join(lines).rstrip("\n") + "\n"
