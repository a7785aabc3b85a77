"""The defect table itself: one row per catalogue entry, each code documented, extras explained."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.defect_table import FAMILIES, PARTIAL, ROWS, catalogue_family
from verifier.simulator.defects import CATALOGUE

README = (REPO / "README.md").read_text()


def test_every_catalogue_defect_has_exactly_one_row() -> None:
    names = [row.defect.partition(":")[0] for row in ROWS]
    assert sorted(names) == sorted(CATALOGUE)


def test_a_defect_is_caught_by_its_own_family_and_a_fault_by_none() -> None:
    for row in ROWS:
        assert set(row.codes) <= set(FAMILIES), row.defect
        assert all(row.codes.values()), row.defect
        family = catalogue_family(row)
        if family == "transport":
            assert row.codes == {}, row.defect
        else:
            assert row.codes.get(family), row.defect


def test_every_row_runs_every_family_but_those_the_readme_names() -> None:
    partial = {
        row.defect.partition(":")[0]
        for row in ROWS
        if row.families != FAMILIES or "-k" in row.verifier
    }
    faults = {name for name, d in CATALOGUE.items() if d.family == "transport"}
    assert partial == faults | set(PARTIAL)
    # The README says which rows those are.
    said = README[README.index("`tests/defect_table.py` lists") :][:1500]
    assert all(f"`{name}`" in said for name in PARTIAL), said


def test_every_second_code_is_explained() -> None:
    for row in ROWS:
        several = sum(len(codes) for codes in row.codes.values()) > 1
        assert bool(row.why) == several, row.defect


def test_every_code_is_documented_in_the_readme() -> None:
    documented = set(re.findall(r"`([a-z0-9_]+)`", README))
    codes = {code for row in ROWS for family in row.codes.values() for code in family}
    assert codes - documented == set()
