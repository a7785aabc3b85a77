"""Rendering: the comparison as Markdown and HTML, and scorecard.md."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from tests.compare_cards import family, scorecard, structured_metrics, tool_metrics
from verifier import resources
from verifier.checks.support.cross_api import TOOL_KINDS, agreement, calls_answer
from verifier.compare.inputs import Input
from verifier.compare.tables import Comparison, Signature, SignatureState
from verifier.compare.views import build_comparison
from verifier.outcome import CaseRecord, Outcome, Status
from verifier.render.comparison_html import render_comparison_html
from verifier.render.comparison_markdown import render_comparison_markdown
from verifier.render.markdown import code, code_block, escape
from verifier.render.report import summary_lines
from verifier.render.scorecard_markdown import render_scorecard_markdown

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}
SVG_EMPTY = {"line", "circle", "path", "rect"}


def compare(*cards: dict[str, Any], signatures: list[Signature] | None = None) -> Comparison:
    signatures = signatures or [Signature(SignatureState.UNSIGNED)] * len(cards)
    return build_comparison(
        [
            Input(f"card{i}.json", c, s)
            for i, (c, s) in enumerate(zip(cards, signatures, strict=True))
        ]
    )


def vendors() -> tuple[dict[str, Any], ...]:
    a = scorecard(
        families={
            "tool_calling": family(20, metrics=tool_metrics(20, 20)),
            "structured_output": family(6, metrics=structured_metrics()),
            "vision": family(10),
            "wire": family(30),
        }
    )
    b = scorecard(
        "http://vendor-b.test/v1",
        run_id="run-b",
        families={
            "tool_calling": family(5, 15, metrics=tool_metrics(5, 20)),
            "structured_output": family(
                3,
                3,
                metrics=structured_metrics(0),
                codes={"schema_mismatch": 3},
                worst=[
                    {
                        "case": "structured_output/max-items",
                        "code": "schema_mismatch",
                        "message": "$.fruits: too long (keyword 'maxItems')",
                        "evidence": {"attempt": "stream-1", "content": '{"fruits": [1, 2, 3]}'},
                    }
                ],
            ),
            "vision": family(0, 0, 0, 10),
            "wire": family(20, 0, 5),
        },
    )
    return a, b


def table_rows(markdown: str, first_cell: str) -> list[list[str]]:
    """The cells of the table rows starting with `first_cell` (pipes escaped as \\| kept)."""
    rows = []
    for line in markdown.splitlines():
        if line.startswith(f"| {first_cell}"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


# --- Markdown primitives -------------------------------------------------------------------


def test_markdown_primitives() -> None:
    assert escape("a *b* <i>\n[x](y) [0.1, 0.2] (3)") == r"a \*b\* \<i\> [x\](y) [0.1, 0.2] (3)"
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    assert code_block("```\nx", "text").startswith("````text\n")


# --- the comparison as Markdown ------------------------------------------------------------


def test_markdown_table_has_every_vendor_and_family_and_marks_the_worse() -> None:
    a, b = vendors()
    markdown = render_comparison_markdown(compare(a, b))
    assert markdown.startswith("# Comparison of 2 scorecards\n")
    assert "not comparable" not in markdown
    [header] = table_rows(markdown, "Vendor | Overall")
    assert header == [
        "Vendor",
        "Overall",
        "tool_calling",
        "structured_output",
        "vision",
        "wire",
    ]
    [first] = table_rows(markdown, "http://vendor-a.test/v1 · kimi-k2 | PASS")
    second = table_rows(markdown, "http://vendor-b.test/v1 · kimi-k2 | **FAIL** ▼")[0]
    assert first[2].startswith("PASS 1.000 [")
    assert second[2].startswith("**FAIL 0.250 [") and second[2].endswith("** ▼▼")
    # Unsupported and inconclusive are said so, loudly, and never as a pass.
    assert second[4] == "**UNSUPPORTED (all 10 cases)** ▼"
    assert second[5].startswith("**INCONCLUSIVE 1.000 [") and "5 errors" in second[5]
    assert "PASS" not in second[4] + second[5]
    for item in ("▼ worse than the best vendor", "▼▼ worse than the best vendor"):
        assert item in markdown
    assert "## Key sub-metrics" in markdown
    [key] = table_rows(markdown, "http://vendor-b.test/v1 · kimi-k2 | **0.250")
    assert any("maxItems (3)" in cell for cell in key)
    assert "### Per JSON-Schema keyword" in markdown
    assert "3/3 accepted, 0/3 valid, 3 silently accepted" in markdown
    assert "`structured_output/max-items` `schema_mismatch`" in markdown
    assert "## Inputs" in markdown and "unsigned" in markdown


def test_markdown_says_loudly_when_not_comparable_and_marks_columns() -> None:
    a, b = vendors()
    b["corpus"]["digest"] = "b" * 64
    b["corpus"]["families"]["structured_output"] = "b" * 64
    b["settings"]["seed"] = 99
    markdown = render_comparison_markdown(compare(a, b))
    lines = markdown.splitlines()
    assert lines[2].startswith(
        "> **⚠ These scorecards are not comparable on corpus digest, settings: seed:"
    )
    assert "corpus digest (affects structured_output)" in markdown
    [header] = table_rows(markdown, "Vendor | Overall")
    assert "structured_output ⚠" in header and "wire ⚠" in header
    assert "## structured_output ⚠" in markdown


def test_markdown_escapes_table_cells() -> None:
    a = scorecard(model="weird|model *x*")
    markdown = render_comparison_markdown(compare(a, scorecard("http://b.test/v1")))
    row = table_rows(markdown, "http://vendor-a.test/v1")[0]
    assert row[0] == r"http://vendor-a.test/v1 · weird\|model \*x\*"
    assert len(row) == 3


def test_markdown_marks_invalid_signatures() -> None:
    a, b = vendors()
    signatures = [
        Signature(SignatureState.VERIFIED, "ab" * 32),
        Signature(SignatureState.INVALID, "cd" * 32, "the signature does not verify"),
    ]
    markdown = render_comparison_markdown(compare(a, b, signatures=signatures))
    assert "> **⚠ INVALID signature on card1.json (http://vendor-b.test/v1" in markdown
    assert "| **⚠ INVALID SIGNATURE** http://vendor-b.test/v1 · kimi-k2 |" in markdown
    assert "signed, verified (abababababababab)" in markdown


# --- the comparison as HTML ----------------------------------------------------------------


class Checker(HTMLParser):
    """Checks nesting and collects what the tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.attributes: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.style = ""
        self.title = ""
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [(tag, k, v or "") for k, v in attrs]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [(tag, k, v or "") for k, v in attrs]
        if tag not in VOID | SVG_EMPTY:
            self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text += data
        if self.stack and self.stack[-1] == "style":
            self.style += data
        if self.stack and self.stack[-1] == "title" and "svg" not in self.stack:
            self.title += data


def check_html(page: str) -> Checker:
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert checker.errors == []
    assert checker.stack == []
    return checker


def test_html_is_well_formed_self_contained_and_fetches_nothing() -> None:
    a, b = vendors()
    b["endpoint"]["model"] = "<script>alert(1)</script>"
    comparison = compare(a, b)
    page = render_comparison_html(comparison)
    assert page.startswith("<!DOCTYPE html>")
    checker = check_html(page)
    assert "script" not in checker.tags
    assert checker.title == "Scorecard comparison: 2 vendors"
    assert (
        "meta",
        "content",
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
    ) in checker.attributes
    for tag, name, value in checker.attributes:
        if name in ("src", "href", "action", "xlink:href", "srcset", "poster", "data"):
            assert value.startswith("#"), (tag, name, value)
        assert not name.startswith("on"), (tag, name)
    assert "url(" not in checker.style and "@import" not in checker.style
    # URLs appear only in text (the endpoints' own, escaped), never in markup or CSS.
    for scheme in ("http://", "https://"):
        assert page.count(scheme) == checker.text.count(scheme)
    assert checker.text.count("http://") >= 2
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_html_table_charts_and_markers() -> None:
    a, b = vendors()
    page = render_comparison_html(compare(a, b))
    checker = check_html(page)
    row_headers = re.findall(
        r'<th scope="row">(?:<span class="badge">[^<]*</span>)?([^<]*)</th>', page
    )
    assert "http://vendor-a.test/v1 · kimi-k2" in row_headers
    assert "http://vendor-b.test/v1 · kimi-k2" in row_headers
    for name in ("tool_calling", "structured_output", "vision", "wire"):
        assert '<th scope="colgroup" colspan=' in page
        assert f">{name}</th>" in page
        assert f'id="family-{name}"' in page
    # Worse cells: a colour class and a text marker.
    assert re.search(r'<td class="clearly-worse">FAIL 0\.250 [^<]*<span class="mark"', page)
    assert '<td class="worse unsupported">UNSUPPORTED (all 10 cases)<span class="mark"' in page
    assert '<td class="inconclusive">INCONCLUSIVE' in page
    # One chart per family score and per key rate; each with a title and error bars.
    charts = page.count('<svg class="chart" role="img"')
    assert charts >= 4 + 3 + 2
    assert checker.tags.count("svg") == charts
    assert page.count("<title id=") == charts
    assert page.count('<g class="error-bar">') >= 2 * 4
    assert 'class="banner' not in page


def test_html_banner_when_not_comparable_and_invalid_signature() -> None:
    a, b = vendors()
    b["verifier"]["version"] = "9.9.9"
    signatures = [
        Signature(SignatureState.UNSIGNED),
        Signature(SignatureState.INVALID, "cd" * 32, "the envelope was edited"),
    ]
    page = render_comparison_html(compare(a, b, signatures=signatures))
    check_html(page)
    assert '<div class="banner incomparable" role="alert">' in page
    assert "These scorecards are not comparable on verifier version" in page
    assert '<div class="banner invalid-signature" role="alert">' in page
    assert '<tr class="invalid"><th scope="row"><span class="badge">⚠ INVALID SIGNATURE' in page
    assert page.count('class="nc"') >= 4


# --- scorecard.md --------------------------------------------------------------------------


def test_scorecard_markdown_verdict_families_failures_provenance() -> None:
    _, card = vendors()
    card["profile"] = {
        "name": "kimi-k2",
        "template_sha256": "1" * 64,
        "tokenizer": "tiktoken.model",
        "tokenizer_sha256": "2" * 64,
    }
    card["families"]["tool_calling"]["worst"] = [
        {"case": "tool_calling/x", "code": "value_mismatch", "message": "no evidence here"},
        {
            "case": "tool_calling/y",
            "code": "schema_mismatch",
            "message": "bad",
            "evidence": {"expected": {"a": 1}, "actual": "```fenced```\nsecond"},
        },
    ]
    markdown = render_scorecard_markdown(card)
    lines = markdown.splitlines()
    assert lines[0] == "# FAIL: http://vendor-b.test/v1, model kimi-k2, 2026-01-02 03:04:05 UTC"
    sections = [line for line in lines if line.startswith("#")]
    assert sections.index("## Families") < sections.index("## Worst failures")
    assert sections.index("## Worst failures") < sections.index("## Provenance")
    # Families in the suite's order, not the JSON's alphabetical one.
    assert [s for s in sections if s.startswith("### ") and ":" in s][:4] == [
        "### tool_calling: FAIL",
        "### structured_output: FAIL",
        "### vision: UNSUPPORTED",
        "### wire: INCONCLUSIVE",
    ]
    assert "| vision | UNSUPPORTED | 0 | 0 | 0 | 10 | – (nothing graded) |" in markdown
    assert "- UNSUPPORTED: the endpoint declined every case; nothing was graded" in markdown
    assert "- INCONCLUSIVE: too many transport errors, or nothing graded" in markdown
    assert "- pass^k: 0.250 [" in markdown
    assert "- silent acceptance: 0.500 [" in markdown and "maxItems (3)" in markdown
    assert "  - Per JSON-Schema keyword › maxItems: 3/3 accepted, 0/3 valid" in markdown
    assert "   (no evidence recorded)" in markdown
    assert '   attempt `stream-1`; content `{"fruits": [1, 2, 3]}`' in markdown
    assert "   ````text\n   ```fenced```\n   second\n   ````" in markdown
    assert '   ```json\n   {"a": 1}\n   ```' in markdown
    assert f"- corpus digest: `{'a' * 64}`" in markdown
    assert f"  - template sha256: `{'1' * 64}`" in markdown
    assert f"- transcript: sha256 `{'f' * 64}`, 10 records" in markdown
    assert "- settings: model default; repeats 2; seed 1234; families tool_calling" in markdown


def test_scorecard_markdown_of_a_passing_run() -> None:
    a, _ = vendors()
    markdown = render_scorecard_markdown(a)
    assert markdown.startswith("# PASS: http://vendor-a.test/v1, model kimi-k2, ")
    assert "No case failed." in markdown
    assert "falls short" not in markdown


def test_scorecard_markdown_says_what_the_transport_did_and_where_the_budget_stopped() -> None:
    a, _ = vendors()
    assert "transport faults" not in render_scorecard_markdown(a)
    a["transcript"]["faults"] = {"http_429": 3, "timeout": 1, "retried": 4, "gave_up": 0}
    a["budget"] = {
        "mode": "auto",
        "families": {
            "tool_calling": {
                "cases": 172,
                "sent": 10,
                "graded": 10,
                "min_score": 1.0,
                "interval": [0.0, 0.28],
                "decided": "below",
            }
        },
    }
    markdown = render_scorecard_markdown(a)
    assert "- transport faults: http_429 x3, timeout x1; 4 retried, 0 gave up" in markdown
    assert (
        "- budget: tool_calling stopped after 10 of 172 cases (pass rate 95% interval "
        "[0.00, 0.28] below min_score 1)" in markdown
    )


def recording() -> dict[str, Any]:
    """A scorecard whose parity family recorded 24 prompts with nothing to compare them with."""
    parity = family(0, 0, 0, 24, metrics={"mode": "recorded", "recorded": 24, "prompts": 24})
    parity["verdict"] = "recorded"
    parity["rulings"] = []
    card = scorecard(families={"parity": parity})
    card["verdict"] = "recorded"
    return card


def test_a_recording_is_shown_as_recorded_everywhere_and_never_as_a_pass() -> None:
    card = recording()
    assert list(resources.validator("scorecard").iter_errors(card)) == []
    (line, cases, overall) = summary_lines(card)
    assert cases == "cases: published cases only: no --rotate"
    assert line.split()[:3] == ["parity", "RECORDED", "24"]
    assert "nothing compared: not graded, not passed" in line
    assert overall == "overall: RECORDED"
    markdown = render_scorecard_markdown(card)
    assert markdown.startswith("# RECORDED: ")
    assert "### parity: RECORDED" in markdown
    assert "- RECORDED: the answers were recorded with nothing to compare them with" in markdown
    comparison = compare(card, vendors()[0])
    assert "RECORDED (24 recorded, nothing compared)" in render_comparison_markdown(comparison)
    page = render_comparison_html(comparison)
    assert re.search(r'<td class="[^"]*recorded[^"]*"[^>]*>RECORDED \(24 recorded', page), page


def test_scorecard_markdown_says_how_often_the_apis_gave_the_same_answer() -> None:
    _, card = vendors()
    records = [
        CaseRecord(f"tool_calling/a{suffix}", "tool_calling", Outcome(Status.PASS, metrics=m), api)
        for suffix, api, m in (
            ("", "chat", {"answer": calls_answer([("f", {"x": 1})], 10)}),
            ("[messages]", "messages", {"answer": calls_answer([("f", {"x": 2})], 10)}),
        )
    ]
    card["families"]["tool_calling"]["metrics"].update(agreement(records, TOOL_KINDS))
    markdown = render_scorecard_markdown(card)
    assert (
        "- across APIs (chat, messages): the same answer in 0.000 [0.000, 0.793] of 1 twin "
        "pairs; differ in arguments ×1\n"
    ) in markdown
