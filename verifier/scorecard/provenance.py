"""What the transcript says about who answered: served models and system fingerprints seen."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any


def _answers(response: Any) -> Iterable[dict[str, Any]]:
    """The completion objects of a transcript record's response (one, or a stream's chunks)."""
    if isinstance(response, dict):
        yield response
    elif isinstance(response, list):
        yield from (chunk for chunk in response if isinstance(chunk, dict))


def seen_in_transcript(lines: Iterable[bytes]) -> dict[str, dict[str, int]]:
    """Served model names and system fingerprints of every answer, with how often each came.

    A vendor that routes one model name to several builds shows more than one
    fingerprint; lines that are not JSON (a torn last line) are skipped.
    """
    models: Counter[str] = Counter()
    fingerprints: Counter[str] = Counter()
    for line in lines:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(record, dict):
            continue
        for answer in _answers(record.get("response")):
            if isinstance(answer.get("model"), str):
                models[answer["model"]] += 1
            if isinstance(answer.get("system_fingerprint"), str):
                fingerprints[answer["system_fingerprint"]] += 1
    return {
        "served_models": dict(models.most_common()),
        "system_fingerprints": dict(fingerprints.most_common()),
    }
