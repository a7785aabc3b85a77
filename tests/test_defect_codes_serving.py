"""Structured-output, tool-calling and transport defects: exactly their codes, in every family."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from tests.defect_codes import check_row
from tests.defect_table import ROWS, Row, catalogue_family

pytestmark = pytest.mark.slow

SERVING = [
    r for r in ROWS if catalogue_family(r) in ("structured_output", "tool_calling", "transport")
]


@pytest.mark.parametrize("row", SERVING, ids=lambda row: row.defect)
def test_defect_gives_exactly_its_codes(
    row: Row, run_verifier: Callable[..., VerifierRun], small_profile_dir: Path
) -> None:
    check_row(row, run_verifier, small_profile_dir)
