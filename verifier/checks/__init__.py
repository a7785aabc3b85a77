"""The check families, one module each, and their registry.

FAMILIES imports a built-in family's module the first time it is asked for that family, so a
run imports only the families it runs.
"""

from __future__ import annotations

from .registry import FAMILIES, Family

__all__ = ["FAMILIES", "Family"]
