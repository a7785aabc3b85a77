"""The journal: records written through, fsynced once a second, torn last lines dropped,
damage reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.errors import ConfigError
from verifier.run import journal as journal_module
from verifier.run.journal import Journal, read_journal


def outcome(status: str) -> dict[str, object]:
    return {
        "status": status,
        "code": None,
        "message": "",
        "findings": [],
        "metrics": {},
        "evidence": {},
    }


def test_records_round_trip_and_latest_wins(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal.create(path, {"run_id": "r"})
    journal.append({"case": "f/a", "family": "f", "outcome": outcome("error")})
    journal.append({"case": "f/b", "family": "f", "outcome": outcome("pass")})
    journal.append({"case": "f/a", "family": "f", "outcome": outcome("fail")})
    journal.close()
    contents = read_journal(path)
    assert contents.header is not None and contents.header["run_id"] == "r"
    assert not contents.torn
    latest = contents.latest()
    assert list(latest) == ["f/a", "f/b"]
    assert latest["f/a"]["outcome"]["status"] == "fail"


@pytest.mark.parametrize(
    "tail",
    [b'{"type": "outcome", "case": "f/c"', b'{"type": "outcome", "case": "f/c"}', b"\xff\xfe"],
)
def test_a_torn_last_line_is_dropped_and_cut_on_resume(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal.create(path, {"run_id": "r"})
    journal.append({"case": "f/a", "family": "f", "outcome": outcome("pass")})
    journal.close()
    with path.open("ab") as f:
        f.write(tail)
    contents = read_journal(path)
    assert contents.torn
    assert list(contents.latest()) == ["f/a"]
    resumed = Journal.resume(path, contents, "2026-01-01T00:00:00Z")
    resumed.append({"case": "f/b", "family": "f", "outcome": outcome("pass")})
    resumed.close()
    again = read_journal(path)
    assert not again.torn and again.sessions == 2
    assert list(again.latest()) == ["f/a", "f/b"]


def test_damage_before_the_last_line_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"type": "run", "run_id": "r"}\ngarbage\n{"type": "outcome", "case": "x"}\n')
    with pytest.raises(ConfigError, match=r"journal\.jsonl:2: the journal is damaged"):
        read_journal(path)


def test_records_are_in_the_file_at_once_and_fsynced_at_most_once_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed process loses no record (each is written before append returns); fsync runs
    with the header, then at most once a second, and at close."""
    synced: list[int] = []
    clock = [100.0]
    monkeypatch.setattr(journal_module.os, "fsync", synced.append)
    monkeypatch.setattr(journal_module.time, "monotonic", lambda: clock[0])
    path = tmp_path / "journal.jsonl"
    journal = Journal.create(path, {"run_id": "r"})
    assert len(synced) == 1
    for number in range(20):
        journal.append({"case": f"f/{number}", "family": "f", "outcome": outcome("pass")})
        clock[0] += 0.25
        assert len(read_journal(path).records) == number + 1
    # The header's fsync at 100.0, then the records at 101.0, 102.0, 103.0 and 104.0.
    assert len(synced) == 1 + 4
    journal.close()
    assert len(synced) == 1 + 4 + 1
