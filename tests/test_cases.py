"""Loading case files: every line validated, errors name file:line and the JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GOOD_CASE
from verifier import cache
from verifier.cases import corpus as corpus_module
from verifier.cases.corpus import VALIDATED, load_corpus
from verifier.checks import FAMILIES
from verifier.errors import CaseDataError


def write(root: Path, *lines: str) -> Path:
    folder = root / "structured_output"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_the_shipped_corpus_loads_and_every_case_passes_its_family_check() -> None:
    corpus = load_corpus(["structured_output"])
    assert len(corpus.by_family("structured_output")) >= 12
    for case in corpus.cases:
        check = FAMILIES[case.family].check_case
        if check:
            check(case)
    assert len(corpus.digest) == 64


def test_blank_lines_are_skipped_and_digest_follows_content(tmp_path: Path) -> None:
    root = write(tmp_path, json.dumps(GOOD_CASE), "", json.dumps({**GOOD_CASE, "id": "two"}))
    first = load_corpus(["structured_output"], root)
    assert [c.id for c in first.cases] == ["one", "two"]
    assert first.cases[1].source.endswith("a.jsonl:3")
    write(tmp_path, json.dumps(GOOD_CASE))
    assert load_corpus(["structured_output"], root).digest != first.digest


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"a\.jsonl:1: not valid JSON: Expecting property name"),
        (
            json.dumps({**GOOD_CASE, "messages": []}),
            r"a\.jsonl:1: \$\.messages: \[\] should be non-empty",
        ),
        (
            json.dumps({**GOOD_CASE, "messages": [{"role": "bot", "content": "x"}]}),
            r"a\.jsonl:1: \$\.messages\[0\]\.role: 'bot' is not one of",
        ),
        (json.dumps({**GOOD_CASE, "id": "Bad Id"}), r"a\.jsonl:1: \$\.id: 'Bad Id' does not match"),
        (
            json.dumps({k: v for k, v in GOOD_CASE.items() if k != "keyword"}),
            r"a\.jsonl:1: \$: 'keyword' is a required property",
        ),
    ],
)
def test_bad_lines_name_file_line_and_path(tmp_path: Path, line: str, message: str) -> None:
    root = write(tmp_path, line)
    with pytest.raises(CaseDataError, match=message):
        load_corpus(["structured_output"], root)


def test_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    root = write(tmp_path, json.dumps(GOOD_CASE), json.dumps(GOOD_CASE))
    with pytest.raises(
        CaseDataError, match=r"a\.jsonl:2: duplicate case id 'one' \(first at .*a\.jsonl:1\)"
    ):
        load_corpus(["structured_output"], root)


def test_missing_family_folder(tmp_path: Path) -> None:
    with pytest.raises(CaseDataError, match="no such case folder"):
        load_corpus(["structured_output"], tmp_path)


def test_an_invalid_schema_inside_a_case_is_the_case_s_fault(tmp_path: Path) -> None:
    bad = {
        **GOOD_CASE,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "objekt"}},
        },
    }
    root = write(tmp_path, json.dumps(bad))
    case = load_corpus(["structured_output"], root).cases[0]
    check = FAMILIES["structured_output"].check_case
    assert check is not None
    with pytest.raises(
        CaseDataError,
        match=r"a\.jsonl:1: \$\.response_format\.json_schema\.schema\.type: not a valid JSON",
    ):
        check(case)


def test_a_plugin_family_brings_its_folder_and_schema(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "c.jsonl").write_text('{"id": "a", "n": 1}\n{"id": "b", "n": "two"}\n')
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    with pytest.raises(CaseDataError) as error:
        load_corpus(["echo"], tmp_path, folders={"echo": folder}, schemas={"echo": schema})
    assert str(error.value) == f"{folder / 'c.jsonl'}:2: $.n: 'two' is not of type 'integer'"
    (folder / "c.jsonl").write_text('{"id": "a", "n": 1}\n')
    corpus = load_corpus(["echo"], tmp_path, folders={"echo": folder}, schemas={"echo": schema})
    assert [case.key for case in corpus.cases] == ["echo/a"]


def test_a_plugin_family_s_broken_schema_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "echo").mkdir()
    with pytest.raises(CaseDataError) as error:
        load_corpus(["echo"], tmp_path, schemas={"echo": {"type": "integr"}})
    assert str(error.value).startswith("the case schema of family 'echo': not a JSON Schema: ")


def _markers(folder: Path) -> list[str]:
    return sorted(path.name for path in (folder / VALIDATED).glob("*"))


def test_a_validated_file_is_remembered_by_its_bytes_and_only_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    root = write(tmp_path / "cases", json.dumps(GOOD_CASE))
    first = load_corpus(["structured_output"], root)
    assert len(_markers(tmp_path / "cache")) == 1
    validated: list[bool] = []
    parse = corpus_module.parse_line

    def spy(*args: object, validate: bool = True) -> corpus_module.Case:
        validated.append(validate)
        return parse(*args, validate=validate)  # type: ignore[arg-type]

    monkeypatch.setattr(corpus_module, "parse_line", spy)
    again = load_corpus(["structured_output"], root)
    assert validated == [False]
    assert again == first
    # Other bytes are another key: validated, and the error found as without the cache.
    write(tmp_path / "cases", json.dumps({**GOOD_CASE, "messages": []}))
    with pytest.raises(CaseDataError, match=r"\$\.messages: \[\] should be non-empty"):
        load_corpus(["structured_output"], root)
    assert validated == [False, True]
    assert len(_markers(tmp_path / "cache")) == 1


def test_a_file_cached_under_one_schema_is_validated_again_under_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "c.jsonl").write_text('{"id": "a", "n": 1.5}\n')
    loose = {"type": "object", "properties": {"n": {"type": "number"}}}
    strict = {"type": "object", "properties": {"n": {"type": "integer"}}}
    load_corpus(["echo"], tmp_path, schemas={"echo": loose})
    with pytest.raises(CaseDataError, match=r"\$\.n: 1\.5 is not of type 'integer'"):
        load_corpus(["echo"], tmp_path, schemas={"echo": strict})


@pytest.mark.parametrize("where", ["", "unwritable"])
def test_a_cache_turned_off_or_unwritable_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where:
        # A file where the cache folder should be: no folder can be made there.
        (tmp_path / where).write_text("")
        where = str(tmp_path / where / "cache")
    monkeypatch.setenv(cache.CACHE_ENV, where)
    root = write(tmp_path / "cases", json.dumps(GOOD_CASE))
    assert [c.id for c in load_corpus(["structured_output"], root).cases] == ["one"]
    assert [c.id for c in load_corpus(["structured_output"], root).cases] == ["one"]
    # Nothing was kept: no folder (turned off), or none could be made (under a file).
    folder = cache.cache_dir()
    assert folder is None if not where else not folder.exists()


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, "~/elsewhere")
    assert cache.cache_dir() == Path.home() / "elsewhere"
    monkeypatch.delenv(cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/me")
    assert cache.cache_dir() == Path("/var/cache/me/llm-verifier")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "llm-verifier"
    monkeypatch.setenv(cache.CACHE_ENV, "")
    assert cache.cache_dir() is None
