"""Finding JSON inside text: the first value an answer or a prompt spells out."""

from __future__ import annotations

import json
import re
from typing import Any

_OPENING = re.compile(r"[{\[]")


def first_json(text: str) -> tuple[int, int, Any] | None:
    """The first object or array in `text` that parses, with where it starts and ends."""
    decoder = json.JSONDecoder()
    for match in _OPENING.finditer(text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return match.start(), end, value
    return None
