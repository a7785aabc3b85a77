"""What an endpoint offers of ``logprobs``, as the probe found it (typed, JSON round-trip).

The probe asks each endpoint (and a ``--reference-endpoint``) how many ``top_logprobs``
alternatives it lists; the parity family decides from both how to compare first tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class LogprobsSupport:
    """The most ``top_logprobs`` alternatives an endpoint lists, or why it lists none.

    Args:
        top: the most alternatives it lists (at most 20), or None.
        why: why it lists none (a refusal, an answer without logprobs), when `top` is None.
    """

    top: int | None
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"top": K}``, or ``{"top": None, "why": ...}``."""
        return {"top": self.top} if self.why is None else {"top": self.top, "why": self.why}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogprobsSupport:
        """The inverse of :meth:`to_dict`."""
        return cls(top=data.get("top"), why=data.get("why"))


@dataclasses.dataclass(frozen=True, slots=True)
class ReferenceEndpoint:
    """The reference deployment a run compares with live: its model and its logprobs."""

    model: str
    logprobs: LogprobsSupport

    def to_dict(self) -> dict[str, Any]:
        """``{"model": ..., "logprobs": {...}}``."""
        return {"model": self.model, "logprobs": self.logprobs.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReferenceEndpoint:
        """The inverse of :meth:`to_dict`."""
        return cls(model=data["model"], logprobs=LogprobsSupport.from_dict(data["logprobs"]))
