"""The check families. Importing this package registers every family in FAMILIES."""

from __future__ import annotations

from . import structured_output, tool_calling, wire
from .registry import FAMILIES, Family

__all__ = ["FAMILIES", "Family", "structured_output", "tool_calling", "wire"]
