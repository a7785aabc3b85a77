"""The end of a verification run: journal to scorecard, files, signature, exit status.

Run on the controller (or the only process) once every case has been graded: the transcript
shards are merged, the scorecard is built from the journal and the transcript, each family
that writes files beside it writes them, and the scorecard is written (signed with a key).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..checks import FAMILIES
from ..outcome import CaseRecord
from ..scorecard.build import TranscriptSummary, build_scorecard
from ..scorecard.gate import GateVerdict
from ..scorecard.provenance import endpoint_records, seen_in_transcript
from ..scorecard.request_figures import measure
from .budget import summary as budget_summary
from .journal import JournalContents, read_journal
from .outdir import write_results
from .startup import RunState, now


def finish(state: RunState) -> dict[str, Any]:
    """Close the journal, merge the transcript, write the results; the scorecard written."""
    assert state.journal is not None, "the controller holds the journal"
    state.journal.close()
    state.out.merge_shards()
    contents = read_journal(state.out.journal)
    card = scorecard(state, contents)
    files: dict[str, bytes] = {}
    for name in card["families"]:
        after = FAMILIES[name].after_run
        if after is not None:
            records = [
                CaseRecord.from_dict(r) for r in contents.latest().values() if r["family"] == name
            ]
            files.update(after(records))
    write_results(state.out, card, state.signing_key, files)
    return card


def exit_status(card: dict[str, Any], status: pytest.ExitCode | int) -> pytest.ExitCode | int:
    """The session's exit status once its scorecard is known.

    The gate decides the status of a run that got to grade its cases; an interrupted or
    broken session keeps pytest's own.
    """
    graded = status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    gate: GateVerdict | None = card.get("gate")
    if gate is not None and graded:
        return pytest.ExitCode.OK if gate["passed"] else pytest.ExitCode.TESTS_FAILED
    if status == pytest.ExitCode.OK and any(
        ruling["verdict"] == "fail"
        for family in card["families"].values()
        for ruling in family.get("rulings", ())
    ):
        # Every case passed, but a decision over all of a family's cases did not.
        return pytest.ExitCode.TESTS_FAILED
    return status


def scorecard(state: RunState, contents: JournalContents) -> dict[str, Any]:
    """The run's scorecard, complete, from the journal and the merged transcript."""
    run, out = state.run, state.out
    latest = contents.latest()
    sha, records = out.transcript_digest()
    lines = out.transcript.read_bytes().splitlines() if out.transcript.exists() else []
    attempts = list(endpoint_records(lines))
    seen = seen_in_transcript(attempts) if lines else {}
    performance = measure(
        attempts,
        run.families,
        concurrency=run.concurrency,
        prices=run.prices,
        tokenizer=_token_counter(state),
    )
    budget = None
    if state.grading.budget is not None:
        budget = budget_summary(
            ((r["family"], r["outcome"]["status"]) for r in latest.values()),
            {name: len(state.corpus.by_family(name)) for name in run.families},
            state.grading.thresholds,
        )
    assert contents.header is not None, "the journal starts with its header"
    return build_scorecard(
        contents.header,
        latest,
        finished=now(),
        transcript=TranscriptSummary(sha, records, seen),
        sessions=contents.sessions,
        baseline=state.baseline,
        summarizers=FAMILIES.summarizers(run.families),
        budget=budget,
        gate=state.grading.gate,
        performance=performance,
    )


def _token_counter(state: RunState) -> tuple[str, Callable[[str], int]] | None:
    """The profile tokenizer's name and its count of a text's tokens (no profile: None)."""
    profile = state.grading.profile
    if profile is None:
        return None
    encode = profile.tokenizer.encode_ordinary
    return profile.tokenizer.name, lambda text: len(encode(text))
