"""The gate's verdict as people read it: the terminal's lines and the texts the summary uses.

The verdict itself is decided in :mod:`verifier.scorecard.gate`; here it is only written out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..compare.measures import paired_text
from ..scorecard.gate import GateVerdict


def accuracy_text(ruling: Mapping[str, Any]) -> str:
    """``FAIL: -0.135 [-0.198, -0.084], 21 lost and 0 gained of 155 cases, McNemar p 9.5e-07``."""
    verdict = "NO VERDICT" if ruling["verdict"] is None else str(ruling["verdict"]).upper()
    if "why" in ruling:
        return f"{verdict}: {ruling['why']}"
    return f"{verdict}: {paired_text(ruling)}"


def actual_text(actual: Any) -> str:
    """What a missed threshold found, as people read it."""
    if isinstance(actual, Mapping) and "verdict" in actual:
        return accuracy_text(actual)
    if isinstance(actual, Mapping):
        low, high = ("unbounded" if b is None else b for b in actual["interval"])
        return f"{actual['value']}, 95% interval [{low}, {high}] over {actual['n']}"
    return repr(actual)


def summary_lines(gate: GateVerdict) -> list[str]:
    """The gate's verdict for the terminal: one line overall, one per threshold missed.

    An accuracy comparison the gate ran says its verdict even when it passed: a PASS on
    accuracy is a finding of its own (the drop is shown to be within the margin).
    """
    lines = [f"gate ({gate['source']}): {'PASS' if gate['passed'] else 'FAIL'}"]
    for name, result in gate["families"].items():
        for missed in result["missed"]:
            lines.append(
                f"  {name}: {missed['threshold']} {missed['limit']!r} missed "
                f"(actual {actual_text(missed['actual'])})"
            )
        lines += [
            f"  {name}: max_accuracy_drop {ruling['category']} {ruling['margin']!r} met "
            f"({accuracy_text(ruling)})"
            for ruling in result.get("accuracy", ())
            if ruling["verdict"] == "pass"
        ]
        if not result["gated"] and result["passed"]:
            lines.append(f"  {name}: not gated ({result['why']})")
        lines += [
            f"  {name}: {api} not gated ({api_result['why']})"
            for api, api_result in result.get("apis", {}).items()
            if not api_result["gated"]
        ]
    return lines
