"""What a real server did with each generated request (``--negative``), recorded per case.

A recording (``tests/data/negative/NAME.json``) maps each generated case id to its outcome:
the one code it failed with (a list when several), else its status (``pass``,
``unsupported``), and for a failure that was shrunk the smallest request that failed alike.
A run's generated cases must be recorded, each with exactly that outcome.

``VERIFIER_RECORD_NEGATIVE=1`` writes the run's outcomes over the recording instead (after a
new generator or a new server version); read the diff before committing it: the recording is
what the tests then assert.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).parent / "data" / "negative"
RECORD_ENV = "VERIFIER_RECORD_NEGATIVE"
PREFIX = "negative-"


def generated(outcomes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The generated cases' outcomes (by case id without the family), as recorded."""
    found = {}
    for case_id, outcome in outcomes.items():
        if not case_id.startswith(PREFIX):
            continue
        codes = sorted({f["code"] for f in outcome.get("findings", [])})
        entry: dict[str, Any] = {
            "outcome": codes[0] if len(codes) == 1 else codes or outcome["status"]
        }
        shrunk = (outcome.get("metrics") or {}).get("shrunk")
        if shrunk is not None:
            entry["shrunk"] = shrunk
        found[case_id] = entry
    return found


def hand_written(outcomes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The corpus's own cases' outcomes: every case but the generated ones."""
    return {k: v for k, v in outcomes.items() if not k.startswith(PREFIX)}


def assert_recorded(outcomes: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """Every generated case of `outcomes` has the outcome `name`'s recording gives it.

    Returns the recording. A recording may hold more cases than a run sends (the whole set
    recorded, the default set run).
    """
    path = RECORDINGS / f"{name}.json"
    got = generated(outcomes)
    assert got, "the run sent no generated case"
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
