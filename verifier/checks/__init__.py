"""The check families. Importing this package registers every family in FAMILIES."""

from __future__ import annotations

from . import (
    chat_template,
    parity,
    reasoning,
    structured_output,
    tokenizer,
    tool_calling,
    vision,
    wire,
)
from .registry import FAMILIES, Family

__all__ = [
    "FAMILIES",
    "Family",
    "chat_template",
    "parity",
    "reasoning",
    "structured_output",
    "tokenizer",
    "tool_calling",
    "vision",
    "wire",
]
