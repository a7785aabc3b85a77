"""Real servers under --rotate: each twin must be judged as its case is.

A twin goes through the same request path as its case, so an engine that serves every
prompt alike gives each twin its case's status and code, and each family's comparison of
public cases with their twins is ``alike``. What a twin's answer says may differ (a greedy
model answers other words otherwise); the verdicts may not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.conftest import VerifierRun
from verifier.cases.rotation import SUFFIX

ENV = "VERIFIER_REALSERVER_ROTATION"
SECRET = "real-server-rotation-secret-01"


def pairs(run: VerifierRun) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each case with a twin: (its outcome, its twin's), by case key."""
    found = run.outcomes()
    return {
        key: (outcome, found[key + SUFFIX])
        for key, outcome in found.items()
        if not key.endswith(SUFFIX) and key + SUFFIX in found
    }


Judged = tuple[str, str | None]


def judged_alike(
    run: VerifierRun,
    families: tuple[str, ...],
    differ: Mapping[str, tuple[Judged, Judged]] | None = None,
) -> None:
    """Every twin's status and code are its case's, but those `differ` names (case key: the
    case's status and code, the twin's), each a behaviour of the engine its test explains;
    every family's comparison alike."""
    both = pairs(run)
    assert {key.split("/", 1)[0] for key in both} == set(families), run.stdout[-3000:]
    found = {
        key: ((case["status"], case["code"]), (twin["status"], twin["code"]))
        for key, (case, twin) in both.items()
        if (case["status"], case["code"]) != (twin["status"], twin["code"])
    }
    assert found == dict(differ or {}), found
    for name in families:
        (ruling,) = [r for r in run.family(name)["rulings"] if r.get("twins") == "rotated"]
        assert ruling["outcome"] == "alike", (name, run.family(name)["metrics"]["rotation"])
