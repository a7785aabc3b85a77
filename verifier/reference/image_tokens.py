"""Image-token rules: how many prompt tokens an image of W x H pixels costs a model.

A profile names its rule in ``verifier-profile.json``::

    "images": {"rule": "kimi-k25", "patch_size": 14, "merge": 2,
               "min_tokens": 4, "max_tokens": 4096, "extra_tokens": 2, "max_side": 4096}

- ``kimi-k25``: Kimi K2.5's resize as llama.cpp implements it. With a = patch x merge,
  W' = max(a, round(W/a)*a) (halves away from zero), the same for H'; above max tokens
  the image is scaled down (floor), below min tokens scaled up (ceil); the cost is
  (W'/a)(H'/a) merged patches plus ``extra_tokens`` (the media begin and end tokens).
- ``tiles``: ceil(W/tile) x ceil(H/tile) tiles plus ``extra_tokens`` (the simulated
  vendor's rule when it has no profile).
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from typing import Any


def _round_half_away(value: float) -> int:
    return int(decimal.Decimal(value).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


def kimi_k25(width: int, height: int, rule: Mapping[str, Any]) -> int:
    """Tokens of an image under Kimi K2.5's resize rule."""
    a = int(rule["patch_size"]) * int(rule.get("merge", 2))
    low, high = int(rule.get("min_tokens", 4)), int(rule["max_tokens"])
    w = max(a, _round_half_away(width / a) * a)
    h = max(a, _round_half_away(height / a) * a)
    if w * h > high * a * a:
        scale = math.sqrt(width * height / (high * a * a))
        w = max(a, math.floor(width / scale / a) * a)
        h = max(a, math.floor(height / scale / a) * a)
    if w * h < low * a * a:
        scale = math.sqrt(low * a * a / (width * height))
        w = math.ceil(width * scale / a) * a
        h = math.ceil(height * scale / a) * a
    return (w // a) * (h // a) + int(rule.get("extra_tokens", 2))


def tiles(width: int, height: int, rule: Mapping[str, Any]) -> int:
    """Tokens of an image as tiles of ``tile`` pixels."""
    tile = int(rule.get("tile", 32))
    return math.ceil(width / tile) * math.ceil(height / tile) + int(rule.get("extra_tokens", 2))


RULES = {"kimi-k25": kimi_k25, "tiles": tiles}


def image_tokens(width: int, height: int, rule: Mapping[str, Any]) -> int:
    """Tokens of an image under a profile's rule.

    Raises:
        KeyError: the rule is not one this version knows.
    """
    return RULES[str(rule["rule"])](width, height, rule)
