"""Conformance and vendor verification for OpenAI-compatible chat-completions endpoints."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
