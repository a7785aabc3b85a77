"""Running one row of the defect table: the vendor with that defect, every family graded.

The parity family compares the vendor with a reference: the same vendor, clean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tests.conftest import VerifierRun
from tests.defect_table import ROTATION_ENV, ROTATION_SECRET, Row
from verifier import resources
from verifier.simulator.process import SimulatorProcess


def check_row(
    row: Row, run_verifier: Callable[..., VerifierRun], profiles: Mapping[str, str]
) -> None:
    """Run the row's families against the vendor with its defect; assert their exact codes.

    `profiles` is the ``defect_profiles`` fixture: the ``--profile`` of each row profile name.
    """
    profile = profiles[row.profile]
    env = {ROTATION_ENV: ROTATION_SECRET}
    # One vendor per row, stopped at once: dozens of idle vendors would hold memory all session.
    vendor = SimulatorProcess(["--profile", profile, "--defect", row.defect, *row.vendor], env)
    # Parity compares with a reference: the same vendor without the defect.
    reference = (
        SimulatorProcess(["--profile", profile, *row.vendor], env)
        if "parity" in row.families
        else None
    )
    try:
        options = ("--families", ",".join(row.families), "--repeats", "tool_calling=2")
        if reference is not None:
            options += ("--reference-endpoint", reference.url)
        options += row.verifier
        run = run_verifier(vendor.url, "--profile", profile, *options, env=env, timeout=900)
    finally:
        vendor.stop()
        if reference is not None:
            reference.stop()
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    families = run.scorecard["families"]
    assert set(families) == set(row.families)
    got = {name: set(family["codes"]) for name, family in families.items()}
    assert got == {name: set(row.codes.get(name, ())) for name in row.families}, run.stdout[-3000:]
    # A defect is graded, never left as transport errors: every case of every family ended.
    transport = {name: family["counts"]["error"] for name, family in families.items()}
    assert transport == dict.fromkeys(row.families, 0), run.stdout[-3000:]
    assert run.returncode == (1 if row.codes else 0), run.stdout[-3000:]
