"""Per family: the key sub-metrics and drill-down tables, from what its ``metrics`` hold.

Each function takes the family's scorecard entry per vendor (None where a vendor did
not run it) and returns (key sub-metric rows, drill-down tables). Metrics a scorecard
lacks are shown as missing, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .measures import (
    MISSING,
    count_measure,
    counted_rate,
    paired_text,
    rate_measure,
    status_counts_measure,
)
from .tables import Cell, Measure, Row, State, Table, info_row, ranked_row

Entry = Mapping[str, Any] | None
Entries = Sequence[Entry]
View = tuple[tuple[Row, ...], tuple[Table, ...]]

# Per-case disagreements listed before "and N more".
SHOWN_CASES = 20


def _metrics(entries: Entries) -> list[Mapping[str, Any] | None]:
    return [None if e is None else e.get("metrics", {}) for e in entries]


def _dig(value: Any, *path: str) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _union(mappings: Iterable[Any]) -> list[str]:
    keys: set[str] = set()
    for mapping in mappings:
        if isinstance(mapping, Mapping):
            keys.update(mapping)
    return sorted(keys)


def _per_vendor(
    metrics: Sequence[Mapping[str, Any] | None], measure: Callable[[Mapping[str, Any]], Measure]
) -> list[Measure]:
    return [MISSING if m is None else measure(m) for m in metrics]


def _names(metrics: Sequence[Mapping[str, Any] | None], field: str) -> list[str]:
    """The names under `field` in any vendor's metrics, sorted."""
    return _union(m.get(field) for m in metrics if m is not None)


def _rows_per_name(
    metrics: Sequence[Mapping[str, Any] | None],
    names: Iterable[str],
    measure: Callable[[Mapping[str, Any], str], Measure],
) -> tuple[Row, ...]:
    """A ranked row per name: each vendor's `measure` of that name."""
    return tuple(ranked_row(name, _per_vendor(metrics, _of_name(measure, name))) for name in names)


def _of_name(
    measure: Callable[[Mapping[str, Any], str], Measure], name: str
) -> Callable[[Mapping[str, Any]], Measure]:
    """`measure` of one name, as a function of a vendor's metrics."""
    return lambda metrics: measure(metrics, name)


def _rate_at(path: str) -> Callable[[Mapping[str, Any]], Measure]:
    """The rate at a dotted `path` of a vendor's metrics."""
    return lambda metrics: rate_measure(_dig(metrics, *path.split(".")))


def _code_counts(entry: Mapping[str, Any], path: Sequence[str]) -> Mapping[str, Any]:
    counts = _dig(entry, *path)
    return counts if isinstance(counts, Mapping) else {}


def codes_table(entries: Entries, extra: Sequence[tuple[str, Sequence[str]]] = ()) -> Table:
    """Failing cases per failure code, transport errors per code; fewer is better.

    Args:
        entries: the family per vendor.
        extra: (label prefix, path in the family entry) of further code counts
            (tool_calling's accuracy codes).
    """
    rows = []
    for prefix, path in (("", ("codes",)), *extra, ("transport error: ", ("errors",))):
        counts = [None if e is None else _code_counts(e, path) for e in entries]
        for code in _union(counts):
            measures = [
                MISSING if c is None else count_measure(int(c.get(code, 0))) for c in counts
            ]
            rows.append(ranked_row(f"{prefix}{code}", measures, higher_is_better=False))
    return Table(
        "Failure codes",
        "cases failing with each code (a case may carry several codes); fewer is better",
        tuple(rows),
        empty="No failures and no transport errors.",
    )


def answers_table(entries: Entries) -> Table:
    """Answers checked against their API's answer and event schemas, and requests sent."""
    metrics = _metrics(entries)
    shapes = ranked_row(
        "shape violations",
        _per_vendor(
            metrics,
            # A count, not a rate: one answer may break its schema in several places.
            lambda m: count_measure(
                violations := int(_dig(m, "shapes", "violations") or 0),
                f"{violations} in {int(_dig(m, 'shapes', 'answers') or 0)} answers",
            ),
        ),
        higher_is_better=False,
    )
    requests = info_row(
        "requests sent", [None if m is None else str(m.get("requests", "–")) for m in metrics]
    )
    return Table(
        "Answers",
        "every answer of the family checked against its API's answer and event schemas; "
        "fewer violations is better",
        (shapes, requests),
    )


def disagreements(
    title: str, values: Sequence[Mapping[str, Any] | None], show: Callable[[Any], str]
) -> Table | None:
    """Cases whose recorded value differs between vendors; None with fewer than two vendors."""
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return None
    rows = []
    for case in _union(present):
        texts = [None if v is None or case not in v else show(v[case]) for v in values]
        if len(set(texts)) > 1:
            rows.append(info_row(case, texts))
    return Table(
        title,
        "cases where the vendors' recorded values differ (– : not recorded); not ranked",
        tuple(rows[:SHOWN_CASES]),
        omitted=max(0, len(rows) - SHOWN_CASES),
        empty="The vendors agree on every case.",
    )


def _status_table(title: str, entries: Entries, key: str) -> Table:
    """Cases by status of each check (or category) under `key`."""
    metrics = _metrics(entries)
    return Table(
        title,
        "cases by status; ranked by the pass share of graded cases",
        _rows_per_name(
            metrics,
            _names(metrics, key),
            lambda m, name: status_counts_measure((m.get(key) or {}).get(name)),
        ),
    )


def _failing(metrics: Sequence[Mapping[str, Any] | None], key: str, label: str) -> Row:
    """How many checks (or categories) have a failing case; fewer is better."""

    def measure(m: Mapping[str, Any]) -> Measure:
        groups = m.get(key)
        if not isinstance(groups, Mapping):
            return MISSING
        failing = [
            f"{name} ({counts['fail']})" for name, counts in groups.items() if counts.get("fail")
        ]
        return count_measure(len(failing), ", ".join(failing) if failing else "none")

    return ranked_row(label, _per_vendor(metrics, measure), higher_is_better=False)


PAIRED = "accuracy vs baseline (paired)"
PAIRED_TITLE = "Accuracy against the baseline, paired"
PAIRED_NOTE = (
    "accuracy minus the accuracy of the vendor's own --baseline (the reference) over the cases "
    "both graded, with its 95% interval (Newcombe, paired), the cases lost and gained, and the "
    "exact McNemar p-value; each vendor against its own baseline, so not ranked; – : run "
    "without a baseline"
)


def _paired_measure(metrics: Mapping[str, Any], group: str | None) -> Measure:
    """The paired difference of the family (group None) or a category, as an info cell."""
    paired = _dig(metrics, "accuracy", "paired")
    if not isinstance(paired, Mapping):
        return MISSING
    if "unavailable" in paired:
        return Measure(f"not compared: {paired['unavailable']}", State.INFO)
    compared = paired["all"] if group is None else _dig(paired, "by_category", group)
    if not isinstance(compared, Mapping):
        return MISSING
    return Measure(paired_text(compared), State.INFO)


def _cells(metrics: Sequence[Mapping[str, Any] | None], group: str | None) -> tuple[Cell, ...]:
    return tuple(Cell(m) for m in _per_vendor(metrics, lambda m: _paired_measure(m, group)))


def paired_view(metrics: Sequence[Mapping[str, Any] | None]) -> View:
    """The paired accuracy difference: the family's key row, and a table by category.

    Neither shows when no vendor was run with a baseline.
    """
    if not any(_dig(m, "accuracy", "paired") for m in metrics):
        return (), ()
    key = Row(PAIRED, _cells(metrics, None))
    categories = _union(_dig(m, "accuracy", "paired", "by_category") for m in metrics)
    rows = (Row("all cases", key.cells), *(Row(name, _cells(metrics, name)) for name in categories))
    return (key,), (Table(PAIRED_TITLE, PAIRED_NOTE, rows),)


TOOL_RATES = (
    ("pass^k", "pass_k"),
    ("accuracy", "accuracy.overall"),
    ("stream parity", "stream_parity"),
    ("identical calls", "identical_calls"),
    ("request validity", "request_validity"),
)
TOOL_KEY = ("pass^k", "accuracy", "stream parity")


def tool_calling(entries: Entries) -> View:
    """pass^k, accuracy, determinism, stream parity; accuracy per category; decisions."""
    metrics = _metrics(entries)
    rates = tuple(
        ranked_row(label, _per_vendor(metrics, _rate_at(path))) for label, path in TOOL_RATES
    )
    compared = next((m["compared"] for m in metrics if m and m.get("compared")), None)
    categories = _union(_dig(m, "accuracy", "by_category") for m in metrics)
    paired, paired_table = paired_view(metrics)
    tables = [
        Table(
            "Rates",
            "pass^k: every repeat of a case passed; accuracy: the expected tools and "
            "arguments, where the case knows them; stream parity: streamed and non-streamed "
            "calls agree; identical calls: every repeat made the same calls; request "
            "validity: answers whose calls honour the tools' schemas"
            + (f". Compared: {compared}" if compared else ""),
            rates,
        ),
        Table(
            "Accuracy by category",
            "the expected tools and arguments, per kind of case",
            _rows_per_name(
                metrics,
                categories,
                lambda m, category: rate_measure(_dig(m, "accuracy", "by_category", category)),
            ),
        ),
        *paired_table,
        codes_table(entries, extra=(("accuracy: ", ("metrics", "accuracy", "codes")),)),
        answers_table(entries),
    ]
    decided = disagreements(
        "Tool decisions that differ",
        [None if m is None else m.get("decisions") for m in metrics],
        lambda called: ", ".join(called) if called else "no call",
    )
    if decided is not None:
        tables.append(decided)
    return (*(r for r in rates if r.label in TOOL_KEY), *paired), tuple(tables)


def _keyword_measure(row: Mapping[str, Any] | None) -> Measure:
    """A keyword's (or mode's) cases: accepted, valid, silently accepted, rejected."""
    if not row or not row.get("cases"):
        return MISSING
    cases, accepted = int(row["cases"]), int(row.get("accepted", 0))
    valid, silent = int(row.get("valid", 0)), int(row.get("silent", 0))
    if accepted == 0:
        return Measure(
            f"UNSUPPORTED (rejected {row.get('rejected', cases)}/{cases})", State.UNSUPPORTED
        )
    parts = [f"{accepted}/{cases} accepted", f"{valid}/{accepted} valid"]
    if silent:
        parts.append(f"{silent} silently accepted")
    measure = counted_rate(valid, cases)
    return Measure(", ".join(parts), State.GRADED, measure.value, measure.interval)


def _totals(m: Mapping[str, Any]) -> dict[str, int]:
    """Cases, accepted, valid, silent and rejected, summed over the modes (else the keywords)."""
    rows = m.get("modes") or m.get("keywords")
    total = {"cases": 0, "accepted": 0, "valid": 0, "silent": 0, "rejected": 0}
    for row in rows.values() if isinstance(rows, Mapping) else ():
        for key in total:
            total[key] += int(row.get(key, 0))
    return total


def _silent_acceptance(m: Mapping[str, Any]) -> Measure:
    """Accepted schemas whose output violated them, naming the keywords; fewer is better."""
    total = _totals(m)
    measure = counted_rate(total["silent"], total["accepted"], label="accepted")
    keywords = ", ".join(f"{s['keyword']} ({s['cases']})" for s in m.get("silent_acceptance", []))
    if measure.state is not State.GRADED or not keywords:
        return measure
    return Measure(f"{measure.text}: {keywords}", State.GRADED, measure.value, measure.interval)


def _declared_coverage(m: Mapping[str, Any]) -> Measure:
    """Schemas the endpoint accepted, of those sent."""
    total = _totals(m)
    return counted_rate(total["accepted"], total["cases"], label="schemas")


_MATRIX_NOTE = (
    "accepted: the schema was taken (declared coverage); valid: the output validated "
    "(empirical coverage); silently accepted: taken, then violated. Ranked by the share "
    "of cases with valid output"
)


def _keyword_matrix(metrics: Sequence[Mapping[str, Any] | None], title: str, field: str) -> Table:
    """A row per keyword (or mode) under `field`: accepted, valid, silently accepted."""
    return Table(
        title,
        _MATRIX_NOTE,
        _rows_per_name(
            metrics, _names(metrics, field), lambda m, name: _keyword_measure(_dig(m, field, name))
        ),
    )


def _malformed_row(
    metrics: Sequence[Mapping[str, Any] | None], field: str, label: str, *, better: bool
) -> Row:
    """Malformed response_format cases counted under `field`: a rate if more is better."""

    def measure(m: Mapping[str, Any]) -> Measure:
        seen = m.get("malformed") or {}
        if not seen.get("cases"):
            return MISSING
        if better:
            return counted_rate(int(seen.get(field, 0)), int(seen["cases"]))
        return count_measure(int(seen.get(field, 0)))

    return ranked_row(label, _per_vendor(metrics, measure), higher_is_better=better)


def _malformed_table(metrics: Sequence[Mapping[str, Any] | None]) -> Table:
    """How the endpoint answered invalid schemas."""
    return Table(
        "Malformed response_format",
        "invalid schemas should be refused with a 4xx and an OpenAI error object",
        (
            _malformed_row(metrics, "rejected_4xx", "rejected with a 4xx", better=True),
            _malformed_row(metrics, "accepted", "accepted", better=False),
            _malformed_row(metrics, "server_error", "server error (5xx)", better=False),
            _malformed_row(
                metrics, "no_error_object", "refused without an error object", better=False
            ),
        ),
    )


def _truncation_table(metrics: Sequence[Mapping[str, Any] | None]) -> Table:
    """Output cut by max_tokens that ended as it must."""
    handled = ranked_row(
        "handled",
        _per_vendor(
            metrics,
            lambda m: counted_rate(
                int(_dig(m, "truncation", "passed") or 0), int(_dig(m, "truncation", "cases") or 0)
            ),
        ),
    )
    return Table(
        "Truncation",
        "output cut by max_tokens must end with finish_reason length",
        (handled,),
    )


def structured_output(entries: Entries) -> View:
    """Silent acceptance and declared coverage; the per-keyword and per-mode matrices."""
    metrics = _metrics(entries)
    key = (
        ranked_row(
            "silent acceptance", _per_vendor(metrics, _silent_acceptance), higher_is_better=False
        ),
        ranked_row("declared coverage", _per_vendor(metrics, _declared_coverage)),
    )
    paired, paired_table = paired_view(metrics)
    tables = (
        Table("Key rates", "silent acceptance: fewer is better", key),
        *paired_table,
        _keyword_matrix(metrics, "Per JSON-Schema keyword", "keywords"),
        _keyword_matrix(metrics, "Per mode", "modes"),
        _malformed_table(metrics),
        _truncation_table(metrics),
        codes_table(entries),
        answers_table(entries),
    )
    return (*key, *paired), tables


def chat_template(entries: Entries) -> View:
    """prompt_tokens against the reference template: exact cases and offsets."""
    metrics = _metrics(entries)

    def exact(m: Mapping[str, Any]) -> Measure:
        offsets = m.get("offsets") or {}
        return counted_rate(int(m.get("exact", 0)), sum(int(n) for n in offsets.values()))

    def offsets(m: Mapping[str, Any] | None) -> str | None:
        if m is None:
            return None
        seen = m.get("offsets") or {}
        return ", ".join(f"{int(k):+d} ×{n}" for k, n in seen.items()) or "none"

    key = (ranked_row("exact prompt_tokens", _per_vendor(metrics, exact)),)
    tables = [
        Table(
            "prompt_tokens against the reference",
            "usage.prompt_tokens minus the reference template's count, per case",
            (info_row("offsets seen (tokens × cases)", [offsets(m) for m in metrics]),),
        ),
        codes_table(entries),
        answers_table(entries),
    ]
    counts = disagreements(
        "prompt_tokens that differ",
        [None if m is None else m.get("prompt_tokens") for m in metrics],
        str,
    )
    if counts is not None:
        tables.append(counts)
    return key, tuple(tables)


def tokenizer(entries: Entries) -> View:
    """Agreement with the reference tokenizer per category; the tokenizer API used."""
    metrics = _metrics(entries)
    key = (_failing(metrics, "categories", "failing categories"),)
    methods = info_row(
        "tokenizer endpoint used (cases)",
        [
            None
            if m is None
            else ", ".join(f"{k} ×{n}" for k, n in (m.get("methods") or {}).items()) or "none"
            for m in metrics
        ],
    )
    tables = (
        _status_table("Per category", entries, "categories"),
        Table("Method", "how token ids were obtained; not ranked", (methods,)),
        codes_table(entries),
        answers_table(entries),
    )
    return key, tables


def vision(entries: Entries) -> View:
    """Cases per check; probe answers that differ between vendors."""
    metrics = _metrics(entries)
    key = (_failing(metrics, "checks", "failing checks"),)
    tables = [
        _status_table("Per check", entries, "checks"),
        codes_table(entries),
        answers_table(entries),
    ]
    answers = disagreements(
        "Probe results that differ", [None if m is None else m.get("answers") for m in metrics], str
    )
    if answers is not None:
        tables.append(answers)
    return key, tuple(tables)


def wire(entries: Entries) -> View:
    """Cases per check, and the answers' shape violations."""
    metrics = _metrics(entries)
    answers = answers_table(entries)
    key = (_failing(metrics, "checks", "failing checks"), answers.rows[0])
    tables = (
        _status_table("Per check", entries, "checks"),
        codes_table(entries),
        answers,
    )
    return key, tables


def _followup_table(metrics: Sequence[Mapping[str, Any] | None]) -> Table:
    """Good follow-ups to a tool result, by the turn they came at."""
    turns = sorted(
        _union(_dig(m, "followups", "by_turn") for m in metrics if m is not None), key=int
    )
    return Table(
        "Follow-ups by turn",
        "follow-ups to a tool result that were a non-empty answer or a valid next call, "
        "by the loop's turn",
        tuple(
            ranked_row(f"turn {turn}", _per_vendor(metrics, _rate_at(f"followups.by_turn.{turn}")))
            for turn in turns
        ),
        empty="No agent loop reached a follow-up.",
    )


def reasoning(entries: Entries) -> View:
    """Reasoning-only answers, follow-up success over turns, effort ordering; cases per check."""
    metrics = _metrics(entries)
    key = (
        ranked_row(
            "reasoning-only answers",
            _per_vendor(metrics, _rate_at("reasoning_only")),
            higher_is_better=False,
        ),
        ranked_row("good follow-ups", _per_vendor(metrics, _rate_at("followups.all"))),
        ranked_row("effort ordered", _per_vendor(metrics, _rate_at("effort_ordered"))),
        _failing(metrics, "checks", "failing checks"),
    )
    tables = (
        _status_table("Per check", entries, "checks"),
        _followup_table(metrics),
        codes_table(entries),
        answers_table(entries),
    )
    return key, tables


def ruling_text(ruling: Mapping[str, Any]) -> str:
    """``different after 12 prompts (60 requests)``: a ruling as it reads in a cell or line.

    A ruling by sampling says so, with its p-value and the shift it resolves; one across APIs
    says how many of its twin pairs differ (``different: 3 of 120 twin pairs differ across
    chat, messages``).
    """
    outcome = "not enough evidence" if ruling["outcome"] == "undecided" else ruling["outcome"]
    if "twins" in ruling:
        return (
            f"{outcome}: {ruling['differing']} of {ruling['pairs']} cases right as published "
            f"and wrong rotated (one-sided exact McNemar p {ruling['p_value']:.2g})"
        )
    if "across" in ruling:
        return (
            f"{outcome}: {ruling['differing']} of {ruling['pairs']} twin pairs differ across "
            f"{', '.join(ruling['across'])}"
        )
    text = (
        f"{outcome} after {ruling.get('prompts', 0)} prompts ({ruling.get('requests', 0)} requests)"
    )
    if ruling.get("method") == "sampling":
        resolution = ruling.get("resolution")
        power = (
            f"95% power at a shift of TV {resolution}"
            if resolution is not None
            else "under 95% power at every shift up to TV 0.5"
        )
        text += f" by sampled first tokens, a weaker test (p {ruling.get('p_value')}; {power})"
    return text


def _ruling(entry: Entry, name: str) -> Mapping[str, Any] | None:
    rulings = entry.get("rulings") if entry is not None else None
    return next((r for r in rulings or () if r.get("name") == name), None)


def _divergence(metrics: Mapping[str, Any]) -> Measure:
    """The mean per-position TV lower bound plus chosen-token shift, with its interval."""
    divergence = metrics.get("divergence")
    if not isinstance(divergence, Mapping) or divergence.get("mean") is None:
        return MISSING
    interval = divergence.get("interval")
    low, high = (float(interval[0]), float(interval[1])) if interval else (None, None)
    text = f"{divergence['mean']:.2e}" + (f" [{low:.2e}, {high:.2e}]" if interval else "")
    text += f"; floor {divergence.get('floor_mean', 0):.2e}"
    return Measure(
        text,
        State.GRADED,
        float(divergence["mean"]),
        (low, high) if low is not None and high is not None else None,
    )


def parity(entries: Entries) -> View:
    """The rulings on distribution and KV cache, divergence, agreement; codes and answers."""
    metrics = _metrics(entries)
    rulings = []
    for name, label in (("distribution", "same distribution"), ("kv_cache", "KV cache")):
        found = [_ruling(e, name) for e in entries]
        rulings.append(info_row(label, [None if r is None else ruling_text(r) for r in found]))
        rulings.append(
            ranked_row(
                f"{label}: prompts beyond the reference's noise floor",
                [MISSING if r is None else rate_measure(r.get("exceeded")) for r in found],
                higher_is_better=False,
            )
        )
    key = (
        *rulings,
        ranked_row(
            "divergence (mean TV lower bound + chosen-token |Δ logprob|)",
            _per_vendor(metrics, _divergence),
            higher_is_better=False,
        ),
        ranked_row("top-1 agreement", _per_vendor(metrics, _rate_at("top1_agreement"))),
        ranked_row(
            "continuation agreement", _per_vendor(metrics, _rate_at("continuation_agreement"))
        ),
    )
    return key, (codes_table(entries), answers_table(entries))


def _window_text(metrics: Mapping[str, Any] | None) -> str | None:
    window = (metrics or {}).get("window") or {}
    if not window:
        return None
    stated = window.get("stated")
    release = window.get("release")
    held = f"{stated:,} ({window.get('stated_by')})" if stated else "not stated"
    return f"{held}; release {release:,}" if release else held


def _retrieval_at(metrics: Mapping[str, Any], length: str) -> Measure:
    row = _dig(metrics, "retrieval", length) or {}
    return counted_rate(int(row.get("found") or 0), int(row.get("graded") or 0))


def _tokens_text(tokens: Any) -> str | None:
    return f"{tokens:,} tokens" if isinstance(tokens, int) else None


def _cache_text(metrics: Mapping[str, Any]) -> str | None:
    cache = metrics.get("cache") or {}
    if cache.get("ttft_cold") is None or cache.get("ttft_hot") is None:
        return None
    return (
        f"{cache['ttft_cold']:.2f} s, {cache['ttft_hot']:.2f} s ({cache['tokens']:,} tokens; "
        f"{cache.get('cached_tokens')} said cached)"
    )


def _speed_table(metrics: Sequence[Mapping[str, Any] | None]) -> Table:
    """Each rung's first token, cold, and the prompt tokens computed per second of it."""
    lengths = sorted(_union(m.get("speed") for m in metrics if m is not None), key=int)
    return Table(
        "Speed at length",
        "each rung's first question, streamed cold: its first token, and the prompt tokens "
        "per second of it (the prefill rate); not ranked",
        tuple(
            info_row(
                f"{int(n):,} tokens",
                [
                    None
                    if (row := _dig(m, "speed", n)) is None
                    else f"{row['ttft']:.3f} s, {row['prefill_rate']:,.0f} tokens/s"
                    for m in metrics
                ],
            )
            for n in lengths
        ),
        empty="No rung was timed.",
    )


def context(entries: Entries) -> View:
    """The window stated against the release's; retrieval by length and depth; speed there."""
    metrics = _metrics(entries)
    key = (
        info_row("window", [None if m is None else _window_text(m) for m in metrics]),
        ranked_row("retrieval", _per_vendor(metrics, _rate_at("retrieval_all"))),
        info_row(
            "first token linear in the prompt up to",
            [None if m is None else _tokens_text(m.get("ttft_linear_until")) for m in metrics],
        ),
        info_row("first token cold, hot", [None if m is None else _cache_text(m) for m in metrics]),
        _failing(metrics, "checks", "failing checks"),
    )
    lengths = sorted(_union(m.get("retrieval") for m in metrics if m is not None), key=int)
    by_length = Table(
        "Retrieval by length",
        "needles read back from a prompt of that many tokens (those the model reads from a "
        "512-token prompt); accuracy, not graded as failures",
        tuple(
            ranked_row(f"{int(n):,} tokens", _per_vendor(metrics, _of_name(_retrieval_at, n)))
            for n in lengths
        ),
        empty="No rung was graded.",
    )
    depths = _names(metrics, "retrieval_by_depth")
    by_depth = Table(
        "Retrieval by depth",
        "needles read back at each depth of the prompt, over every length",
        _rows_per_name(
            metrics, depths, lambda m, d: rate_measure(_dig(m, "retrieval_by_depth", d))
        ),
        empty="No rung was graded.",
    )
    tables = (
        by_length,
        by_depth,
        _speed_table(metrics),
        _status_table("Per check", entries, "checks"),
        codes_table(entries),
        answers_table(entries),
    )
    return key, tables


def generic(entries: Entries) -> View:
    """A family this version does not know: failure codes and answers only."""
    return (), (codes_table(entries), answers_table(entries))


VIEWS: dict[str, Callable[[Entries], View]] = {
    "tool_calling": tool_calling,
    "structured_output": structured_output,
    "chat_template": chat_template,
    "tokenizer": tokenizer,
    "vision": vision,
    "wire": wire,
    "reasoning": reasoning,
    "context": context,
    "parity": parity,
}
