"""The scorecard's canonical JSON form, checked against its schema before it is written."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions

from .. import resources


def scorecard_json(card: Mapping[str, Any]) -> bytes:
    """The scorecard as canonical JSON bytes (sorted keys, UTF-8, final newline).

    Raises:
        ValueError: the scorecard does not validate against
            ``schemas/scorecard.schema.json`` (a verifier bug, never the endpoint's).
    """
    error = jsonschema_exceptions.best_match(resources.validator("scorecard").iter_errors(card))
    if error is not None:
        raise ValueError(
            f"scorecard does not match its schema at {error.json_path}: {error.message}"
        )
    return (json.dumps(card, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode("utf-8")
