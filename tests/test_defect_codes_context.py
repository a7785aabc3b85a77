"""Context-window defects: exactly their codes, in every family."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import VerifierRun
from tests.defect_codes import check_row
from tests.defect_table import ROWS, Row, catalogue_family

pytestmark = pytest.mark.slow

CONTEXT = [r for r in ROWS if catalogue_family(r) == "context"]


@pytest.mark.parametrize("row", CONTEXT, ids=lambda row: row.defect)
def test_defect_gives_exactly_its_codes(
    row: Row, run_verifier: Callable[..., VerifierRun], defect_profiles: dict[str, str]
) -> None:
    check_row(row, run_verifier, defect_profiles)
