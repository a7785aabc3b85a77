"""The context family's agent loop: its history built and counted, and its counts judged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.checks.support import agent_loop
from verifier.checks.support.renderings import Conversation, reference
from verifier.reference.profiles import Profile, load_profile

KIMI = load_profile("kimi-k2")


@settings(max_examples=8, deadline=None)
@given(tokens=st.integers(1500, 40000), turns=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_a_loop_is_as_long_as_asked_and_each_turn_extends_the_last(
    tokens: int, turns: int, seed: int
) -> None:
    loop = agent_loop.build(KIMI, tokens, turns, seed, "Archive 123456789012.")
    assert len(loop.turns) == len(loop.counts) == turns + 1
    # The last turn fills what was asked, to within a sentence a result, never over.
    assert tokens - 40 * turns <= loop.counts[-1] <= tokens
    for before, after in zip(loop.turns, loop.turns[1:], strict=False):
        assert after[: len(before)] == before
        # A call, then its result.
        assert [m["role"] for m in after[len(before) :]] == ["assistant", "tool"]
    assert list(loop.counts) == sorted(loop.counts)
    # Every count is the release's own, with the tool declared.
    for messages, count in zip(loop.turns, loop.counts, strict=True):
        conversation = Conversation(messages, (agent_loop.TOOL,))
        assert len(reference(KIMI, conversation).ids) == count


def test_the_results_come_from_the_seed() -> None:
    one = agent_loop.build(KIMI, 4000, 3, 1, "Archive 1.")
    assert one == agent_loop.build(KIMI, 4000, 3, 1, "Archive 1.")
    other = agent_loop.build(KIMI, 4000, 3, 2, "Archive 1.")
    assert one.turns[-1][2]["content"] != other.turns[-1][2]["content"]
    # Each result is a part of its own, not the same text again.
    results = [m["content"] for m in one.turns[-1] if m["role"] == "tool"]
    assert len(set(results)) == 3


def test_a_thinking_model_gets_each_calls_reasoning_back() -> None:
    """Kimi K2 Thinking's contract: a tool-call turn goes back with its reasoning."""
    loop = agent_loop.build(load_profile("kimi-k2-thinking"), 3000, 2, 1, "Archive 1.")
    calls = [m for m in loop.turns[-1] if m["role"] == "assistant"]
    assert [bool(m.get("reasoning_content")) for m in calls] == [True, True]
    assert not any("reasoning_content" in m for m in KIMI_LOOP.turns[-1])


KIMI_LOOP = agent_loop.build(KIMI, 3000, 2, 1, "Archive 1.")


def test_a_template_that_writes_no_tool_calls_has_no_loop_to_count(
    small_profile_dir: Path, small_profile: Profile, tmp_path: Path
) -> None:
    assert agent_loop.writes_tool_turns(KIMI)
    assert agent_loop.writes_tool_turns(small_profile)
    folder = shutil.copytree(small_profile_dir, tmp_path / "no-calls")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    template = config["chat_template"]
    calls = template.index("{% for call in m.get('tool_calls')")
    config["chat_template"] = (
        template[:calls] + template[template.index("{% endfor %}", calls) + 12 :]
    )
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert not agent_loop.writes_tool_turns(load_profile(str(folder)))


LOCAL = [100, 6100, 12100, 18100, 24100, 30100, 36100]


@pytest.mark.parametrize(
    ("prompts", "codes"),
    [
        # Exact, and exact by difference (a hidden system prompt or a constant skew).
        (LOCAL, []),
        ([n + 37 for n in LOCAL], []),
        # From the fifth turn on the old results are stubs: a turn's worth gone at once.
        ([100, 6100, 12100, 18100, 24100, 24140, 24180], ["history_compacted"]),
        # The whole history but the last turn dropped.
        ([100, 6100, 12100, 6150, 6150, 6150, 6150], ["history_compacted"]),
        # Off a little from the first result on: a count other than the release's.
        ([100, 6090, 12080, 18070, 24060, 30050, 36040], ["prompt_tokens_mismatch"]),
        # Too many: nothing was dropped.
        ([100, 6100, 12100, 18100, 24100, 30100, 42000], ["prompt_tokens_mismatch"]),
        # Short at the first result: nothing earlier was counted exactly to compare with.
        ([100, 200, 300, 400, 500, 600, 700], ["prompt_tokens_mismatch"]),
        # A few tokens short late: less than half a turn, no more is known.
        ([100, 6100, 12100, 18100, 24100, 30000, 36000], ["prompt_tokens_mismatch"]),
    ],
)
def test_each_turn_is_counted_as_the_whole_history(prompts: list[int], codes: list[str]) -> None:
    findings = agent_loop.history_findings(LOCAL, prompts)
    assert [f.code for f in findings] == codes
    if codes == ["history_compacted"]:
        assert "dropped or compacted without a word" in findings[0].message
