"""What the transcript says about the run: who answered, and what the transport did.

Served models and system fingerprints are counted over every answer; transport
faults over every attempt, by the kind the client recorded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..endpoint.client import FAULT_KINDS, fault_end


def answers_of(response: Any) -> Iterable[dict[str, Any]]:
    """The completion objects of a transcript record's response (one, or a stream's chunks)."""
    if isinstance(response, dict):
        yield response
    elif isinstance(response, list):
        yield from (chunk for chunk in response if isinstance(chunk, dict))


def endpoint_records(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The transcript's records of the endpoint under test, parsed.

    Lines that are not JSON objects (a torn last line) are skipped, and so are the reference
    deployment's records: its answers say nothing of the endpoint.
    """
    for line in lines:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(record, dict) and record.get("target") != "reference":
            yield record


def seen_in_transcript(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Served models, system fingerprints and transport faults, with how often each came.

    A vendor that routes one model name to several builds shows more than one
    fingerprint. `records` are the endpoint's (:func:`endpoint_records`).

    ``faults`` counts attempts by fault kind (``http_429``, ``http_5xx``, ``timeout``,
    ``reset``, ``truncated_stream``, ``non_json_body``, ``unreachable``), every kind
    present, zero included; ``retried`` counts attempts that were followed by another,
    ``gave_up`` requests whose last attempt was still a fault.
    """
    models: Counter[str] = Counter()
    fingerprints: Counter[str] = Counter()
    faults = dict.fromkeys((*FAULT_KINDS, "retried", "gave_up"), 0)
    for record in records:
        for answer in answers_of(record.get("response")):
            if isinstance(answer.get("model"), str):
                models[answer["model"]] += 1
            if isinstance(answer.get("system_fingerprint"), str):
                fingerprints[answer["system_fingerprint"]] += 1
        end = fault_end(record)
        if end is not None:
            faults[record["fault"]] += 1
            faults[end] += 1
    return {
        "served_models": dict(models.most_common()),
        "system_fingerprints": dict(fingerprints.most_common()),
        "faults": faults,
    }
