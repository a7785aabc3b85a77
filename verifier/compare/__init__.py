"""Comparing scorecards of several vendors: reading the inputs and building the comparison.

Modules: ``inputs`` (scorecards and signed envelopes, signature status), ``tables`` (the
comparison's data and how cells are ranked), ``measures`` (scorecard values as measures),
``families`` (key sub-metrics and drill-downs per family), ``views`` (the whole comparison).
Rendering lives in ``verifier.render``.
"""

from __future__ import annotations

from .inputs import Input, InputError, load_input
from .views import build_comparison

__all__ = ["Input", "InputError", "build_comparison", "load_input"]
