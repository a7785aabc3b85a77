"""Hand-made scorecards for the comparison and rendering tests (valid against the schema)."""

from __future__ import annotations

import copy
from typing import Any

from verifier.scorecard.build import verdict
from verifier.stats import rate, wilson_interval

FAMILIES = ("tool_calling", "structured_output", "chat_template", "tokenizer", "vision", "wire")


def family(
    passed: int = 10,
    failed: int = 0,
    error: int = 0,
    unsupported: int = 0,
    *,
    metrics: dict[str, Any] | None = None,
    codes: dict[str, int] | None = None,
    worst: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A family entry with consistent counts, score, interval and verdict."""
    counts = {"pass": passed, "fail": failed, "error": error, "unsupported": unsupported}
    graded = passed + failed
    interval = wilson_interval(passed, graded)
    answers = graded + error
    return {
        "verdict": verdict(counts),
        "cases": sum(counts.values()),
        "counts": counts,
        "score": passed / graded if graded else None,
        "interval": list(interval) if interval else None,
        "codes": codes if codes is not None else ({"value_mismatch": failed} if failed else {}),
        "errors": {"timeout": error} if error else {},
        "metrics": {
            "requests": answers,
            "shapes": {"answers": answers, "violations": 0, "codes": {}, "examples": []},
            **(metrics or {}),
        },
        "worst": worst or [],
    }


def tool_metrics(passed: int, trials: int) -> dict[str, Any]:
    """tool_calling metrics where pass^k and accuracy are passed/trials."""
    return {
        "pass_k": rate(passed, trials),
        "identical_calls": rate(trials, trials),
        "stream_parity": rate(trials, trials),
        "request_validity": rate(2 * passed, 2 * trials),
        "accuracy": {
            "overall": rate(passed, trials),
            "by_category": {"single": rate(passed, trials)},
            "codes": {},
        },
        "decisions": {"single-weather": ["get_weather"]},
    }


def keyword_row(cases: int, accepted: int, valid: int) -> dict[str, Any]:
    """A structured_output keyword (or mode) row."""
    return {
        "cases": cases,
        "accepted": accepted,
        "rejected": cases - accepted,
        "valid": valid,
        "silent": accepted - valid,
        "declared_coverage": rate(accepted, cases),
        "empirical_coverage": rate(valid, accepted),
        "silent_acceptance": rate(accepted - valid, accepted),
    }


def structured_metrics(max_items_valid: int = 3, *, pattern_accepted: int = 3) -> dict[str, Any]:
    """structured_output metrics: maxItems may be silently accepted, pattern rejected."""
    keywords = {
        "maxItems": keyword_row(3, 3, max_items_valid),
        "pattern": keyword_row(3, pattern_accepted, pattern_accepted),
    }
    silent = 3 - max_items_valid
    return {
        "keywords": keywords,
        "modes": {
            "strict": keyword_row(6, 3 + pattern_accepted, max_items_valid + pattern_accepted)
        },
        "silent_acceptance": [{"keyword": "maxItems", "cases": silent}] if silent else [],
        "violated_keywords": {"maxItems": silent} if silent else {},
        "malformed": {
            "cases": 2,
            "rejected_4xx": 2,
            "accepted": 0,
            "server_error": 0,
            "no_error_object": 0,
        },
        "truncation": {"cases": 1, "passed": 1, "without_length": 0},
    }


def scorecard(
    url: str = "http://vendor-a.test/v1",
    model: str = "kimi-k2",
    *,
    families: dict[str, dict[str, Any]] | None = None,
    run_id: str = "run-a",
    corpus: str = "a",
    version: str = "0.1.0",
    repeats: int | dict[str, int] | None = 2,
    seed: int = 1234,
) -> dict[str, Any]:
    """A whole scorecard; `corpus` is one hex digit repeated into every digest."""
    families = copy.deepcopy(families if families is not None else {"wire": family()})
    verdicts = {f["verdict"] for f in families.values()}
    overall = next((v for v in ("fail", "inconclusive", "pass") if v in verdicts), "unsupported")
    return {
        "schema_version": 1,
        "verifier": {"name": "llm-endpoint-verifier", "version": version},
        "run": {
            "id": run_id,
            "started": "2026-01-02T03:04:05.000+00:00",
            "finished": "2026-01-02T03:14:05.000+00:00",
            "sessions": 1,
        },
        "endpoint": {"url": url, "model": model},
        "settings": {"families": list(families), "repeats": repeats, "seed": seed, "model": None},
        "corpus": {"digest": corpus * 64, "families": {name: corpus * 64 for name in families}},
        "profile": None,
        "verdict": overall,
        "families": families,
        "transcript": {"sha256": "f" * 64, "records": 10},
    }
