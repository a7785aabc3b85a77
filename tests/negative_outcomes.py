"""What a real server did with each case, recorded per case: the generated requests
(``--negative``), and the runs over the other APIs.

A recording (``tests/data/negative/NAME.json``, ``tests/data/apis/NAME.json``) maps each case
id to its outcome: the one code it failed with (a list when several), else its status
(``pass``, ``unsupported``), and for a failure that was shrunk the smallest request that failed
alike. A run's cases must be recorded, each with exactly that outcome.

``VERIFIER_RECORD_NEGATIVE=1`` writes the run's outcomes over the recording instead (after a
new generator, a new server version or a new rule); read the diff before committing it: the
recording is what the tests then assert.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).parent / "data" / "negative"
RECORD_ENV = "VERIFIER_RECORD_NEGATIVE"
PREFIX = "negative-"


def entry(outcome: dict[str, Any]) -> dict[str, Any]:
    """A case's outcome as recorded: its one code (a list when several), else its status."""
    codes = sorted({f["code"] for f in outcome.get("findings", [])})
    found: dict[str, Any] = {"outcome": codes[0] if len(codes) == 1 else codes or outcome["status"]}
    shrunk = (outcome.get("metrics") or {}).get("shrunk")
    if shrunk is not None:
        found["shrunk"] = shrunk
    return found


def generated(outcomes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The generated cases' outcomes (by case id without the family), as recorded."""
    return {k: entry(v) for k, v in outcomes.items() if k.startswith(PREFIX)}


def every_case(outcomes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every case's outcome, as recorded."""
    return {k: entry(v) for k, v in outcomes.items()}


def hand_written(outcomes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The corpus's own cases' outcomes: every case but the generated ones."""
    return {k: v for k, v in outcomes.items() if not k.startswith(PREFIX)}


def assert_recorded(
    outcomes: dict[str, dict[str, Any]],
    name: str,
    pick: Callable[[dict[str, dict[str, Any]]], dict[str, dict[str, Any]]] = generated,
    folder: Path = RECORDINGS,
) -> dict[str, Any]:
    """Every case `pick` takes of `outcomes` has the outcome `name`'s recording gives it.

    Returns the recording. A recording may hold more cases than a run sends (the whole set
    recorded, the default set run).
    """
    path = folder / f"{name}.json"
    got = pick(outcomes)
    assert got, "the run sent no case to compare with the recording"
    if os.environ.get(RECORD_ENV):
        kept = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**kept, **got}, indent=1, sort_keys=True, ensure_ascii=False))
    recorded = json.loads(path.read_text())
    differ = {
        case: (recorded.get(case), entry)
        for case, entry in got.items()
        if recorded.get(case) != entry
    }
    assert differ == {}, json.dumps(differ, indent=1, ensure_ascii=False)[:6000]
    return recorded
