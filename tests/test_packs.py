"""Private case packs: loaded and validated as the corpus is, run beside it or alone, and
named in the scorecard by digest, never by content."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from verifier.cases.corpus import load_corpus
from verifier.cases.packs import load_pack, load_packs
from verifier.cli import main
from verifier.config import FAMILY_NAMES
from verifier.errors import CaseDataError, ConfigError

Run = Callable[..., VerifierRun]
Start = Callable[..., str]


def public(family: str, number: int) -> dict[str, object]:
    """The public corpus's case `number` of `family`, as a line a pack may copy."""
    return dict(load_corpus([family]).cases[number].data)


def write_pack(folder: Path, files: dict[str, list[dict[str, object]]]) -> Path:
    """A pack at `folder`: each ``family/file.jsonl`` with its cases, one per line."""
    for name, cases in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return folder


def private(family: str, number: int, new_id: str) -> dict[str, object]:
    """A public case under a private id (what a pack's own case looks like to the loader)."""
    return {**public(family, number), "id": new_id}


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return write_pack(
        tmp_path / "private-v1",
        {
            "tool_calling/mine.jsonl": [
                private("tool_calling", 0, "p-one"),
                private("tool_calling", 1, "p-two"),
            ],
            "structured_output/schemas.jsonl": [private("structured_output", 0, "p-schema")],
        },
    )


def test_a_pack_loads_with_its_digest_and_coverage(pack: Path, tmp_path: Path) -> None:
    loaded = load_pack(pack, FAMILY_NAMES)
    assert loaded.name == "private-v1"
    assert [c.key for c in loaded.cases] == [
        "structured_output/p-schema",
        "tool_calling/p-one",
        "tool_calling/p-two",
    ]
    # A tool-calling case states its category; a structured-output one is its file's.
    stated = Counter(str(c.data["category"]) for c in loaded.cases_of(["tool_calling"]))
    assert loaded.coverage() == {
        "structured_output": {"schemas": 1},
        "tool_calling": dict(stated),
    }
    # The digest is the content's: the same files elsewhere give it, one byte more does not.
    copy = write_pack(
        tmp_path / "elsewhere" / "private-v1",
        {
            str(p.relative_to(pack)): [json.loads(line) for line in p.read_text().splitlines()]
            for p in pack.rglob("*.jsonl")
        },
    )
    assert load_pack(copy, FAMILY_NAMES).digest == loaded.digest
    with (copy / "tool_calling" / "mine.jsonl").open("a") as file:
        file.write("\n")
    assert load_pack(copy, FAMILY_NAMES).digest != loaded.digest


def test_a_bad_pack_is_one_line_that_names_it(pack: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope: no such folder \(a pack holds"):
        load_pack(tmp_path / "nope", FAMILY_NAMES)
    (tmp_path / "odd" / "wizard").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"'wizard' is no family \(.*families: tool_calling"):
        load_pack(tmp_path / "odd", FAMILY_NAMES)
    (tmp_path / "empty" / "wire").mkdir(parents=True)
    with pytest.raises(ConfigError, match="empty: no case in it"):
        load_pack(tmp_path / "empty", FAMILY_NAMES)
    broken = write_pack(tmp_path / "broken", {"wire/a.jsonl": [{"id": "x"}]})
    with pytest.raises(CaseDataError, match=r"a\.jsonl:1: \$: 'check' is a required property"):
        load_pack(broken, FAMILY_NAMES)
    twin = write_pack(tmp_path / "other" / "private-v1", {"wire/a.jsonl": [public("wire", 0)]})
    with pytest.raises(ConfigError, match="another pack is named 'private-v1'"):
        load_packs([pack, twin], FAMILY_NAMES)


def test_verifier_pack_prints_the_digest_a_run_records(
    pack: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["pack", str(pack)]) == 0
    out = capsys.readouterr().out.splitlines()
    digest = load_pack(pack, FAMILY_NAMES).digest
    assert out[0] == f"private-v1: 3 cases, sha256 {digest}"
    assert out[1].split() == ["structured_output", "1", "schemas", "1"]
    assert out[2].split()[:2] == ["tool_calling", "2"]
    assert main(["pack", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("verifier pack: error: ") and err.count("\n") == 1, err


@pytest.mark.slow
def test_a_pack_runs_beside_the_public_corpus_or_alone(
    simulator: Start, run_verifier: Run, pack: Path
) -> None:
    """Beside: the public cases and the pack's; alone (--cases-only): the pack's only. The
    scorecard names the pack, its case count and the digest ``verifier pack`` prints, and
    nothing of its contents. About 5 s."""
    url, digest = simulator(), load_pack(pack, FAMILY_NAMES).digest
    families = ("--families", "tool_calling,structured_output", "--api", "chat")
    beside = run_verifier(url, *families, "--cases", str(pack), "-k", "p- or single-weather")
    alone = run_verifier(url, *families, "--cases", str(pack), "--cases-only")
    for run, also_public in ((beside, True), (alone, False)):
        assert run.returncode == 0, run.stdout[-2000:]
        corpus = run.scorecard["corpus"]
        assert corpus["packs"] == [{"name": "private-v1", "cases": 3, "digest": digest}]
        assert corpus["public"] is also_public
        assert corpus["families"]["pack:private-v1"] == digest
        keys = set(run.outcomes())
        assert {"tool_calling/p-one", "tool_calling/p-two", "structured_output/p-schema"} <= keys
        assert any(not key.split("/")[1].startswith("p-") for key in keys) is also_public
        markdown = (run.out / "scorecard.md").read_text()
        assert f"private-v1: 3 cases, sha256 `{digest}`" in markdown
        said = "" if also_public else ", without the public corpus"
        assert f"private pack private-v1: 3 cases, sha256 {digest}{said}\n" in run.stdout
    assert set(alone.outcomes()) == {
        "tool_calling/p-one",
        "tool_calling/p-two",
        "structured_output/p-schema",
    }
