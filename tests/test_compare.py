"""verifier compare: inputs, signature status, the comparison model, the command line."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.compare_cards import family, scorecard, structured_metrics, tool_metrics
from tests.conftest import child_env
from verifier.compare.inputs import Input, InputError, load_input
from verifier.compare.origins import settings_text
from verifier.compare.tables import (
    Comparison,
    Measure,
    Signature,
    SignatureState,
    Standing,
    State,
    rank,
)
from verifier.compare.views import build_comparison
from verifier.scorecard import signing
from verifier.stats import rate


def compare(*cards: dict[str, Any]) -> Comparison:
    return build_comparison(
        [Input(f"card{i}.json", c, Signature(SignatureState.UNSIGNED)) for i, c in enumerate(cards)]
    )


def view(comparison: Comparison, name: str) -> Any:
    return next(f for f in comparison.families if f.name == name)


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- ranking -------------------------------------------------------------------------------


def test_rank_marks_worse_and_clearly_worse_against_the_best() -> None:
    best = Measure("1.0", State.GRADED, 1.0, (0.96, 1.0))
    close = Measure("0.97", State.GRADED, 0.97, (0.915, 0.99))
    far = Measure("0.5", State.GRADED, 0.5, (0.4, 0.6))
    cells = rank([best, close, far])
    assert [c.standing for c in cells] == [Standing.NONE, Standing.WORSE, Standing.CLEARLY_WORSE]


def test_rank_lower_is_better_and_ties() -> None:
    cells = rank(
        [Measure("0", value=0.0), Measure("0", value=0.0), Measure("3", value=3.0)],
        higher_is_better=False,
    )
    assert [c.standing for c in cells] == [Standing.NONE, Standing.NONE, Standing.WORSE]


def test_rank_unsupported_is_worse_inconclusive_and_missing_are_never_ranked() -> None:
    cells = rank(
        [
            Measure("PASS", value=1.0),
            Measure("UNSUPPORTED", State.UNSUPPORTED),
            Measure("INCONCLUSIVE", State.INCONCLUSIVE),
            Measure("not run", State.MISSING),
        ]
    )
    assert [c.standing for c in cells] == [
        Standing.NONE,
        Standing.WORSE,
        Standing.NONE,
        Standing.NONE,
    ]
    # Nothing graded anywhere: nothing to be worse than.
    alone = rank([Measure("UNSUPPORTED", State.UNSUPPORTED), Measure("x", State.INCONCLUSIVE)])
    assert {c.standing for c in alone} == {Standing.NONE}
    assert rank([Measure("0.1", value=0.1)])[0].standing is Standing.NONE


# --- the comparison model ------------------------------------------------------------------


def test_family_cells_rank_vendors_and_keep_unsupported_and_inconclusive_apart() -> None:
    a = scorecard(families={"wire": family(100), "vision": family(20)})
    b = scorecard(
        "http://vendor-b.test/v1",
        run_id="run-b",
        families={"wire": family(97, 3), "vision": family(0, 0, 0, 20)},
    )
    c = scorecard(
        "http://vendor-c.test/v1",
        run_id="run-c",
        families={"wire": family(50, 50), "vision": family(8, 0, 4)},
    )
    comparison = compare(a, b, c)
    wire = view(comparison, "wire").headline.cells
    assert [cell.standing for cell in wire] == [
        Standing.NONE,
        Standing.WORSE,
        Standing.CLEARLY_WORSE,
    ]
    assert wire[0].text.startswith("PASS 1.000 [")
    assert wire[1].text.startswith("FAIL 0.970 [")
    vision = view(comparison, "vision").headline.cells
    assert vision[1].state is State.UNSUPPORTED and vision[1].text.startswith("UNSUPPORTED")
    assert vision[1].standing is Standing.WORSE
    assert vision[2].state is State.INCONCLUSIVE and vision[2].text.startswith("INCONCLUSIVE")
    assert vision[2].standing is Standing.NONE
    for cell in (vision[1], vision[2]):
        assert "PASS" not in cell.text
    overall = comparison.overall.cells
    assert [cell.text for cell in overall] == ["PASS", "FAIL", "FAIL"]
    assert not comparison.differences


def test_sub_metrics_rank_pass_k_and_silent_acceptance() -> None:
    a = scorecard(
        families={
            "tool_calling": family(20, metrics=tool_metrics(20, 20)),
            "structured_output": family(6, metrics=structured_metrics()),
        }
    )
    b = scorecard(
        "http://vendor-b.test/v1",
        families={
            "tool_calling": family(5, 15, metrics=tool_metrics(5, 20)),
            "structured_output": family(
                3,
                3,
                metrics=structured_metrics(0, pattern_accepted=0),
                codes={"schema_mismatch": 3},
            ),
        },
    )
    comparison = compare(a, b)
    tools = {row.label: row for row in view(comparison, "tool_calling").key_metrics}
    assert tools["pass^k"].cells[1].standing is Standing.CLEARLY_WORSE
    assert tools["pass^k"].cells[1].text.startswith("0.250 [")
    assert tools["stream parity"].cells[1].standing is Standing.NONE
    structured = view(comparison, "structured_output")
    key = {row.label: row for row in structured.key_metrics}
    silent = key["silent acceptance"]
    assert not silent.higher_is_better
    assert silent.cells[1].standing is not Standing.NONE
    assert "maxItems (3)" in silent.cells[1].text
    keywords = next(t for t in structured.tables if t.title == "Per JSON-Schema keyword")
    rows = {row.label: row for row in keywords.rows}
    assert "3 silently accepted" in rows["maxItems"].cells[1].text
    assert rows["maxItems"].cells[1].standing is not Standing.NONE
    # A keyword the vendor refused is unsupported, not a pass and not silently accepted.
    assert rows["pattern"].cells[1].state is State.UNSUPPORTED
    assert rows["pattern"].cells[1].text.startswith("UNSUPPORTED")
    codes = next(t for t in structured.tables if t.title == "Failure codes")
    assert [r.label for r in codes.rows] == ["schema_mismatch"]
    assert codes.rows[0].cells[1].standing is Standing.WORSE


def test_a_family_over_several_apis_shows_each_api_and_their_agreement() -> None:
    both = family(30, 2)
    both["apis"] = {"chat": family(16), "messages": family(14, 2)}
    both["metrics"]["cross_api"] = {"agreement": rate(15, 16)}
    a = scorecard(families={"tool_calling": both})
    # Another vendor's run over Messages alone.
    alone = {**family(10), "api": "messages"}
    b = scorecard("http://vendor-b.test/v1", families={"tool_calling": alone})
    summary = view(compare(a, b), "tool_calling").tables[0]
    rows = {row.label: row for row in summary.rows}
    assert [label for label in rows if label.startswith(("over ", "same"))] == [
        "over Chat Completions",
        "over Anthropic Messages",
        "same answer across APIs (twin pairs)",
    ]
    assert rows["over Chat Completions"].cells[0].text.startswith("PASS 1.000")
    assert rows["over Chat Completions"].cells[1].text == "not run"
    messages = rows["over Anthropic Messages"].cells
    assert messages[0].text.startswith("FAIL 0.875")
    assert messages[0].standing is not Standing.NONE
    assert messages[1].text.startswith("PASS 1.000")
    assert rows["same answer across APIs (twin pairs)"].cells[0].text.startswith("0.938 [")
    # A chat-only comparison has no API rows.
    plain = view(compare(scorecard(families={"tool_calling": family(5)})), "tool_calling")
    assert [row.label for row in plain.tables[0].rows] == ["verdict and score", "cases"]


def test_incomparable_corpus_marks_only_the_families_whose_cases_differ() -> None:
    families = {"wire": family(), "structured_output": family()}
    a = scorecard(families=families)
    b = scorecard("http://vendor-b.test/v1", families=families)
    b["corpus"]["digest"] = "b" * 64
    b["corpus"]["families"]["structured_output"] = "b" * 64
    comparison = compare(a, b)
    [difference] = comparison.differences
    assert difference.aspect == "corpus digest"
    assert difference.families == ("structured_output",)
    assert difference.values == ("a" * 12, "b" * 12)
    assert not view(comparison, "structured_output").comparable
    assert view(comparison, "wire").comparable


def test_another_reference_makes_only_parity_incomparable() -> None:
    families = {"wire": family(), "parity": family()}
    a = scorecard(families=families)
    b = scorecard("http://vendor-b.test/v1", families=families)
    a["settings"]["reference"] = {"endpoint": "http://lab.test/v1", "model": "m"}
    b["settings"]["reference"] = {"endpoint": "http://other-lab.test/v1", "model": "m"}
    comparison = compare(a, b)
    [difference] = comparison.differences
    assert (difference.aspect, difference.families) == ("settings: reference", ("parity",))
    assert not view(comparison, "parity").comparable
    assert view(comparison, "wire").comparable


def test_another_parity_method_affects_parity_only_and_a_load_probe_nothing() -> None:
    families = {"wire": family(), "parity": family()}
    a = scorecard(families=families)
    b = scorecard("http://vendor-b.test/v1", families=families)
    b["settings"]["parity_method"] = "sampling"
    b["settings"]["load"] = [1, 8]
    comparison = compare(a, b)
    [difference] = comparison.differences
    assert (difference.aspect, difference.families) == ("settings: parity_method", ("parity",))
    assert view(comparison, "wire").comparable


def test_incomparable_version_settings_and_families() -> None:
    a = scorecard(families={"wire": family(), "vision": family()})
    b = scorecard(
        "http://vendor-b.test/v1",
        families={"wire": family()},
        version="0.2.0",
        repeats=5,
        seed=7,
    )
    b["settings"]["model"] = "vendor-specific-name"
    comparison = compare(a, b)
    aspects = {d.aspect: d for d in comparison.differences}
    assert set(aspects) == {
        "verifier version",
        "families run",
        "settings: repeats",
        "settings: seed",
    }
    assert aspects["families run"].families == ("vision",)
    assert aspects["settings: repeats"].families == ("vision", "wire")
    assert view(comparison, "vision").headline.cells[1].text == "not run"
    assert view(comparison, "vision").headline.cells[1].state is State.MISSING


def test_another_reference_profile_affects_the_families_graded_against_it() -> None:
    families = {"tool_calling": family(), "chat_template": family(), "tokenizer": family()}
    a = scorecard(families=families)
    b = scorecard("http://vendor-b.test/v1", families=families)
    b["profile"] = {
        "name": "kimi-k2",
        "template_sha256": "1" * 64,
        "tokenizer": "tiktoken.model",
        "tokenizer_sha256": "2" * 64,
    }
    [difference] = compare(a, b).differences
    assert difference.aspect == "reference profile"
    assert difference.families == ("chat_template", "tokenizer")
    assert difference.values[0] == "none"


def test_families_asked_in_another_order_are_comparable() -> None:
    families = {"wire": family(), "vision": family()}
    a = scorecard(families=families)
    b = scorecard("http://vendor-b.test/v1", families=families)
    b["settings"]["families"] = ["vision", "wire"]
    assert a["settings"]["families"] == ["wire", "vision"]
    assert not compare(a, b).differences


def test_vendor_names_are_made_unique() -> None:
    a = scorecard(run_id="aaaaaaaa-1")
    b = scorecard(run_id="bbbbbbbb-2")
    names = [v.name for v in compare(a, b, a).vendors]
    assert names == [
        "http://vendor-a.test/v1 · kimi-k2 (run aaaaaaaa) #1",
        "http://vendor-a.test/v1 · kimi-k2 (run bbbbbbbb)",
        "http://vendor-a.test/v1 · kimi-k2 (run aaaaaaaa) #2",
    ]
    other = scorecard("http://vendor-b.test/v1", model="other")
    assert [v.name for v in compare(a, other).vendors] == [
        "http://vendor-a.test/v1 · kimi-k2",
        "http://vendor-b.test/v1 · other",
    ]


def test_notes_say_when_models_or_builds_differ() -> None:
    a = scorecard()
    b = scorecard("http://vendor-b.test/v1", model="moonshotai/Kimi-K2")
    b["endpoint"]["system_fingerprints"] = {"fp_1": 5, "fp_2": 1}
    notes = compare(a, b).notes
    assert any("name their model differently" in n for n in notes)
    assert any("2 system fingerprints" in n for n in notes)


# --- inputs --------------------------------------------------------------------------------


def test_input_errors_name_the_file(tmp_path: Path) -> None:
    cases = {
        "missing.json": (None, "cannot read"),
        "text.json": ("not json {", "not JSON"),
        "object.json": ('{"hello": 1}', "not a scorecard"),
        "list.json": ("[1, 2]", "not a scorecard"),
        "envelope.json": ('{"payload": "!", "payloadType": "x", "signatures": []}', "malformed"),
    }
    for name, (content, expected) in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_text(content)
        with pytest.raises(InputError) as raised:
            load_input(path)
        message = str(raised.value)
        assert message.startswith(f"{path}: ") and expected in message
        assert "\n" not in message


@pytest.fixture
def signed(tmp_path: Path) -> dict[str, Any]:
    """A scorecard, its envelope, the signer's public key and a stranger's."""
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(b'{"request": 1}\n')
    card = scorecard()
    card["transcript"]["sha256"] = hashlib.sha256(transcript.read_bytes()).hexdigest()
    key, public = signing.generate_key(tmp_path / "signer")
    _, stranger = signing.generate_key(tmp_path / "stranger")
    envelope = signing.sign_scorecard(card, transcript_path=transcript, key_path=key)
    path = tmp_path / "scorecard.dsse.json"
    path.write_bytes(envelope)
    return {
        "card": card,
        "path": path,
        "envelope": envelope,
        "public": public,
        "stranger": stranger,
        "key_id": signing.key_id(signing.load_public_key(public)),
    }


def tampered(envelope: bytes) -> bytes:
    """The envelope with its scorecard changed (in canonical form) and the signature kept."""
    data = json.loads(envelope)
    statement = json.loads(base64.b64decode(data["payload"]))
    statement["predicate"]["run"]["id"] = "forged"
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data["payload"] = base64.b64encode(payload.encode()).decode()
    return (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode()


def test_signature_status(signed: dict[str, Any], tmp_path: Path) -> None:
    public = signing.load_public_key(signed["public"])
    stranger = signing.load_public_key(signed["stranger"])
    plain = load_input(write(tmp_path / "plain.json", signed["card"]), [public])
    assert plain.signature.text == "unsigned"
    unverified = load_input(signed["path"])
    assert unverified.signature.text == "signed, NOT verified (no matching --key)"
    assert unverified.scorecard == signed["card"]
    assert load_input(signed["path"], [stranger]).signature.state is SignatureState.UNVERIFIED
    verified = load_input(signed["path"], [stranger, public])
    assert verified.signature.text == f"signed, verified ({signed['key_id'][:16]})"
    bad = tmp_path / "tampered.dsse.json"
    bad.write_bytes(tampered(signed["envelope"]))
    invalid = load_input(bad, [public])
    assert invalid.signature.state is SignatureState.INVALID
    assert invalid.signature.text.startswith("INVALID signature: the signature does not verify")
    assert build_comparison([invalid]).invalid[0].path == str(bad)


# --- the command line ----------------------------------------------------------------------


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )


def test_cli_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", scorecard())
    (tmp_path / "broken.json").write_text("{")
    write(tmp_path / "other.json", {"schema_version": 1})
    for bad, expected in (
        (tmp_path / "missing.json", "cannot read"),
        (tmp_path / "broken.json", "not JSON"),
        (tmp_path / "other.json", "not a scorecard"),
    ):
        result = cli(good, bad)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr.startswith(f"verifier compare: error: {bad}: ")
        assert expected in result.stderr and result.stderr.count("\n") == 1
    result = cli(good, "--key", good)
    assert result.returncode == 2
    assert result.stderr.startswith("verifier compare: error: --key: ")
    result = cli(good, "--html", tmp_path / "no-such-dir" / "page.html")
    assert result.returncode == 2 and "cannot write" in result.stderr


def test_cli_prints_markdown_or_writes_files(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", scorecard(families={"wire": family(10)}))
    b = write(
        tmp_path / "b.json",
        scorecard("http://vendor-b.test/v1", families={"wire": family(5, 5)}, seed=9),
    )
    result = cli(a, b)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Comparison of 2 scorecards")
    assert "not comparable on settings: seed" in result.stdout
    md, page = tmp_path / "out.md", tmp_path / "out.html"
    result = cli(a, b, "--md", md, "--html", page)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote Markdown to {md}\nwrote HTML to {page}\n"
    assert md.read_text().startswith("# Comparison of 2 scorecards")
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_cli_shows_invalid_signatures_loudly(signed: dict[str, Any], tmp_path: Path) -> None:
    bad = tmp_path / "tampered.dsse.json"
    bad.write_bytes(tampered(signed["envelope"]))
    result = cli(signed["path"], bad, "--key", signed["public"])
    # The comparison is still printed, but the exit status says an input is not sound.
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"verifier compare: warning: {bad}: INVALID signature: ")
    assert f"INVALID signature on {bad}" in result.stdout
    assert "signed, verified (" in result.stdout


def test_cli_labels_name_the_vendors(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", scorecard(families={"wire": family(10)}))
    odd = write(
        tmp_path / "x=y.json", scorecard("http://vendor-b.test/v1", families={"wire": family(10)})
    )
    result = cli(f"clean={a}", odd)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert any(row.startswith("| clean |") for row in rows)
    # A file whose own name has "=" is taken whole, not as LABEL=PATH.
    assert any(row.startswith("| http://vendor-b.test/v1") for row in rows)


def test_settings_read_as_typed() -> None:
    """Repeats by family show as the option was given, in provenance and in the banner's
    differences alike; null is the default."""
    text = settings_text(
        {"repeats": {"tool_calling": 3, "structured_output": 2}, "seed": 1, "families": ["wire"]}
    )
    assert text == "repeats tool_calling=3,structured_output=2; seed 1; families wire"
    assert settings_text({"repeats": None, "families": []}) == "repeats default; families none"
    comparison = compare(scorecard(repeats={"tool_calling": 3}), scorecard(repeats=None))
    (difference,) = comparison.differences
    assert (difference.aspect, difference.values) == (
        "settings: repeats",
        ("tool_calling=3", "default"),
    )


def test_parity_shows_its_rulings_and_ranks_divergence() -> None:
    def parity(outcome: str, exceeded: int, mean: float) -> dict[str, Any]:
        entry = family(
            12,
            metrics={
                "divergence": {"mean": mean, "interval": [mean / 2, mean * 2], "floor_mean": 0.0}
            },
        )
        entry["rulings"] = [
            {
                "name": name,
                "outcome": o,
                "verdict": "pass" if o == "same" else "fail",
                "code": None,
                "prompts": 12,
                "requests": 36,
                "exceeded": {"rate": e / 12, "interval": [0.0, 1.0], "successes": e, "trials": 12},
            }
            for name, o, e in (("distribution", outcome, exceeded), ("kv_cache", "same", 0))
        ]
        return entry

    a = scorecard(families={"parity": parity("same", 0, 0.0)})
    b = scorecard("http://vendor-b.test/v1", families={"parity": parity("different", 12, 0.4)})
    rows = {row.label: row for row in view(compare(a, b), "parity").key_metrics}
    assert rows["same distribution"].cells[1].text == "different after 12 prompts (36 requests)"
    # Intervals that do not overlap: clearly worse.
    divergence = rows["divergence (mean TV lower bound + chosen-token |Δ logprob|)"]
    assert divergence.cells[1].standing is Standing.CLEARLY_WORSE
    assert rows["KV cache"].cells[0].text == "same after 12 prompts (36 requests)"


def test_shape_violations_are_counted_even_when_answers_break_in_several_places() -> None:
    """One answer may break its schema in several places (a stream's every event): the
    row counts violations beside the answers instead of a rate over them."""
    from verifier.compare.families import answers_table

    entries = [{"metrics": {"shapes": {"violations": 1076, "answers": 688}, "requests": 688}}]
    table = answers_table(entries)
    assert [cell.text for cell in table.rows[0].cells] == ["1076 in 688 answers"]
