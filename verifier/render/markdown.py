"""Markdown primitives: escaping, code spans and blocks, tables."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Underscores inside words and pipes outside tables are literal in GFM (tables escape pipes);
# a bracket only matters where it could close a link, so intervals stay readable.
_SPECIAL = re.compile(r"([\\`*<>]|\](?=[(\[:]))")
_BACKTICKS = re.compile(r"`+")


def escape(text: str) -> str:
    """Text that Markdown shows as written, on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def code(text: str) -> str:
    """An inline code span that survives backticks in the text, on one line."""
    text = " ".join(text.split())
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text: str, language: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside."""
    fence = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GFM table; cells are Markdown already (pipes are escaped here, even in code)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") or " " for c in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header)), *(line(r) for r in rows)])
