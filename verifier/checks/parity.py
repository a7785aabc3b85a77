"""Parity: the endpoint computes the per-token distributions a reference deployment does.

Converted weights (INT4 to NVFP4), speculative decoding, a reused KV cache or another batch
size can change what a model computes while every format check passes. Each prompt of the
corpus is answered greedily with ``logprobs`` and the endpoint's ``top_logprobs`` (up to 20),
and its distributions are compared with the reference's along the shared prefix
(:mod:`verifier.checks.support.distributions`).

A run records: each prompt answered twice (``first``, then ``again``, the second with its
prefix possibly cached) and once streamed; the two non-stream answers are the recording a later
run compares with (``--baseline``), written beside the scorecard as ``parity.json``, whose
sha256 the scorecard holds. With a reference (a recording, or
``--reference-endpoint`` asked in the same run), each prompt gives two signs, each against the
prompt's *threshold*: the reference's own noise floor (its second answer's divergence from its
first: batching and kernel nondeterminism are real), or :data:`TOLERANCE` where that is larger:

- **distribution**: the candidate's first answer is farther from the reference's first than
  the threshold;
- **kv cache**: the candidate's second answer is farther from its first than the threshold.

A sequential sign test (:class:`~verifier.stats.SequentialTest`) reads the prompts in corpus
order and decides "same", "different" (``distribution_shift``, ``kv_cache_divergence``) or,
when the corpus ends first, "not enough evidence". It says "different" of a candidate with
probability at most 1.05% when each of its signs is at most an even chance; that is the
assumption, not a property of the test. It holds for a candidate that computes what the
reference computes where the candidate's first answer and the reference's second are
exchangeable draws of the same noisy computation around the reference's first: the
candidate's is the farther of the two at most half the time (a tie does not count). A
deterministic reference breaks it: llama-server one request at a time gives the same bits on
every request, so its floor is 0, and the same weights under any other numerics (another
thread count or batch shape, parallel slots, another engine's kernels) would exceed it on
nearly every prompt and be called "different". :data:`TOLERANCE` is the floor such a
reference lacks: "same" claims no more than that the candidate's divergence stays within the
reference's noise or the tolerance on most prompts, and a shift below the tolerance at every
prompt is not found. Measured on real servers (bench/parity_engines.py, the README), the same
SmolLM2 weights in parallel slots and on vLLM exceed it on 2 and 8 prompts in a hundred, and
requantised files on nearly every prompt. Where the reference's own floor is
above the tolerance, the tolerance changes nothing.

Per prompt, a chosen token that is not the most likely one listed at temperature 0 is
``logprobs_inconsistent_with_choice``; an endpoint that gives no logprobs is
``logprobs_unavailable`` (unsupported, never a pass).

Where either side gives no logprobs (or ``--parity-method sampling`` asks for it), the family
falls back to sampling: each prompt's first token sampled :data:`~.first_tokens.SAMPLES` times
at temperature 1 on each side, compared by the weaker test of :mod:`.support.first_tokens` (one
"distribution" ruling, no KV-cache ruling: a sample does not show a cached prefix's small
shift). A recording run samples too (with the reference's seeds), so that its recording serves
candidates with or without logprobs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..outcome import CaseRecord, Finding, Outcome, Status
from ..protocol.answers import ChatResult
from ..protocol.requests import Chat, Exchange, together
from ..stats import SequentialTest, bootstrap_mean_interval, rate
from .registry import ParityContext, family
from .support import first_tokens
from .support.common import rejected, unsupported
from .support.distributions import (
    END,
    Trace,
    compare,
    divergence,
    not_top_choice,
    trace_of,
    without_alternatives,
)
from .support.evidence import evidence_findings
from .support.parity_reference import RECORDING_FILE, before_run

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from .registry import RunContext

MAX_TOKENS = 32
# A prompt answered soundly with nothing to compare with: recorded for a later --baseline,
# neither graded nor passed.
RECORDED = "recorded"
RECORDED_MESSAGE = (
    "recorded: nothing to compare with (no --reference-endpoint or --baseline); a later run's "
    "--baseline compares with parity.json"
)
TEST = SequentialTest()
# The least divergence (:func:`~.distributions.divergence`) a prompt must show beyond the
# reference's to count against the candidate: the same weights under other numerics (thread
# counts, parallel slots, another engine's kernels, float32 on CPU) stay below it on nearly
# every prompt, a requantised file passes it on nearly every prompt (bench/parity_engines.py).
TOLERANCE = 0.01
# The reference's recording of a prompt: its two non-stream answers, in the compact form.
Recording = Mapping[str, Any]


def _body(case: Case, ctx: RunContext, model: str, top: int) -> dict[str, Any]:
    data = case.data
    body = ctx.request(
        messages=data["messages"],
        max_tokens=data.get("max_tokens", MAX_TOKENS),
        logprobs=True,
        top_logprobs=top,
    )
    body["model"] = model
    if "tools" in data:
        body["tools"] = data["tools"]
    return body


def _unavailable(message: str, requests: int) -> Outcome:
    return Outcome(
        Status.UNSUPPORTED,
        code="logprobs_unavailable",
        message=f"unsupported: {message}",
        metrics={"requests": requests},
    )


def choice_findings(trace: Trace, attempt: str) -> list[Finding]:
    """Alternatives at every position; the token chosen at temperature 0 the likeliest (pure)."""
    findings = []
    bare = without_alternatives(trace)
    if bare:
        findings.append(
            Finding(
                "logprobs_incomplete",
                f"{len(bare)} of {len(trace.tokens)} positions list no alternative although "
                f"top_logprobs was asked for, or name their token with neither bytes nor "
                f"text; the first at position {bare[0]}: {trace.tokens[bare[0]]!r} with "
                f"logprob {trace.chosen[bare[0]]}",
                f"$.choices[0].logprobs.content[{bare[0]}].top_logprobs",
                attempt=attempt,
            )
        )
    positions = not_top_choice(trace)
    if not positions:
        return findings
    first = positions[0]
    return [
        *findings,
        Finding(
            "logprobs_inconsistent_with_choice",
            f"at temperature 0, {len(positions)} chosen token(s) are less likely than an "
            f"alternative the answer lists; the first at position {first}: "
            f"{trace.tokens[first]!r} at {trace.chosen[first]}, "
            f"listed {list(trace.top[first][:3])}",
            f"$.choices[0].logprobs.content[{first}]",
            attempt=attempt,
        ),
    ]


def compared(
    reference: tuple[Trace, Trace], first: Trace, again: Trace, tolerance: float = TOLERANCE
) -> dict[str, Any]:
    """What one prompt says of the candidate against the reference (pure).

    A difference counts against the candidate when it is larger than the threshold: the
    reference's own noise floor (its second answer's divergence from its first), or
    `tolerance` where that is larger (see the module: a deterministic reference's floor is 0).

    Args:
        reference: the reference's first and second answers.
        first: the candidate's first answer.
        again: the candidate's second answer to the same prompt.
        tolerance: the least threshold, :data:`TOLERANCE` unless given.
    """
    ref_first, ref_again = reference
    floor = divergence(compare(ref_first, ref_again))
    threshold = max(floor, tolerance)
    against = compare(ref_first, first)
    candidate = divergence(against)
    warm = divergence(compare(first, again))
    return {
        "floor": floor,
        "threshold": threshold,
        "divergence": candidate,
        "exceeds": candidate > threshold,
        "warm_divergence": warm,
        "warm_exceeds": warm > threshold,
        "comparison": against.to_json(),
        "continuation_agrees": ref_first.tokens == first.tokens,
    }


def grade(
    answers: Mapping[str, ChatResult], reference: tuple[Trace, Trace] | None, requests: int
) -> Outcome:
    """A prompt's outcome from the endpoint's answers: first, again, stream where given (pure).

    Args:
        answers: the endpoint's answers by name.
        reference: the reference's first and second answers, or None (recording only).
        requests: the requests the prompt cost, the reference's included.
    """
    findings: list[Finding] = []
    traces: dict[str, Trace] = {}
    for name, result in answers.items():
        broken = evidence_findings(result, name)
        if broken:
            findings += broken
            continue
        trace = _trace(result)
        if trace is None:
            return _unavailable(f"the {name} answer has no logprobs", requests)
        traces[name] = trace
        findings += choice_findings(trace, name)
    metrics: dict[str, Any] = {"requests": requests}
    if len(traces) == len(answers):
        metrics["recording"] = {
            "first": traces["first"].to_json(),
            "again": traces["again"].to_json(),
        }
        if "stream" in traces:
            metrics["stream_agrees"] = traces["stream"].tokens == traces["first"].tokens
        if reference is not None:
            metrics["compared"] = compared(reference, traces["first"], traces["again"])
    if reference is None and not findings:
        return recorded(metrics)
    return Outcome.from_findings(findings, metrics=metrics)


def recorded(metrics: Mapping[str, Any]) -> Outcome:
    """A prompt recorded with nothing to compare it with: not graded, not passed."""
    return Outcome(Status.UNSUPPORTED, code=RECORDED, message=RECORDED_MESSAGE, metrics=metrics)


def is_recorded(outcome: Outcome) -> bool:
    """The prompt was answered soundly and recorded, with nothing to compare it with."""
    return outcome.status is Status.UNSUPPORTED and outcome.code == RECORDED


def _sound(record: CaseRecord) -> bool:
    """A prompt whose answers were sound: passed, or recorded with nothing to compare."""
    return record.outcome.status is Status.PASS or is_recorded(record.outcome)


def _trace(result: ChatResult) -> Trace | None:
    choice = result.choice
    if choice is None:
        return None
    return trace_of(choice.logprobs, choice.content, choice.finish_reason)


def _recorded(recording: Recording) -> tuple[Trace, Trace]:
    return Trace.from_json(recording["first"]), Trace.from_json(recording["again"])


def _live_reference(
    case: Case, ctx: RunContext, parity: ParityContext
) -> Generator[Chat, ChatResult, tuple[Trace, Trace] | Outcome]:
    """The reference endpoint's two answers to the prompt, or the outcome that ends the case."""
    assert parity.reference_model is not None and parity.top_logprobs is not None
    body = _body(case, ctx, parity.reference_model, parity.top_logprobs)
    traces = []
    for asked, name in enumerate(("reference-first", "reference-again"), start=1):
        result = yield Chat(body, name, target="reference", observe=False)
        if not result.ok:
            return rejected("the reference's logprobs", result, {"requests": asked})
        if evidence_findings(result, name):
            return unsupported(
                f"the reference's {name} answer cannot be read or has no choice",
                {"requests": asked},
            )
        trace = _trace(result)
        if trace is None:
            return _unavailable("the reference's answer has no logprobs", asked)
        traces.append(trace)
    return traces[0], traces[1]


def recording_bytes(records: Iterable[CaseRecord]) -> bytes:
    """The recorded answers of the graded prompts, by case id, as canonical JSON (pure).

    Sorted keys, compact: the same records always give the same bytes, so the scorecard's
    sha256 names exactly the file written beside it.
    """
    recording = {
        r.id: r.outcome.metrics["recording"]
        for r in records
        if _sound(r) and "recording" in r.outcome.metrics
    }
    return json.dumps(
        {"format": 1, "prompts": recording}, sort_keys=True, separators=(",", ":")
    ).encode("utf-8")


def _decision(name: str, code: str, exceeded: list[bool], requests: list[int]) -> dict[str, Any]:
    outcome, used = TEST.decide(exceeded)
    verdict = {"same": "pass", "different": "fail", "undecided": "inconclusive"}[outcome]
    low, high = TEST.bounds
    return {
        "name": name,
        "outcome": outcome,
        "verdict": verdict,
        "code": code if outcome == "different" else None,
        "prompts": used,
        "requests": sum(requests[:used]),
        "exceeded": rate(sum(exceeded[:used]), used),
        "test": {
            "kind": "sequential sign test (Wald SPRT)",
            "p0": TEST.p0,
            "p1": TEST.p1,
            "false_alarm_rate": round(TEST.false_alarm_rate, 4),
            "minimum_for_same": TEST.minimum,
            "miss_rate": TEST.beta,
            "bounds": [round(low, 4), round(high, 4)],
        },
    }


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """The recording, the comparison's figures and the decisions, prompts in corpus order (pure).

    Corpus order is the order of case ids, which the parity corpus numbers. (The baseline's
    recording is what the cases compared with; its entry adds nothing here.)
    """
    records = list(records)
    sound = [r for r in records if _sound(r)]
    summary: dict[str, Any] = {
        "recording": {
            "file": RECORDING_FILE,
            "sha256": hashlib.sha256(recording_bytes(records)).hexdigest(),
            "prompts": len(sound),
        },
        "prompts": len(sound),
    }
    sampled = _sampled(records)
    if sampled:
        (made,) = rulings(records)
        summary.update(mode="compared", method="sampling", rulings=[made])
        summary["first_token"] = _first_token_figures(made, sampled)
        return summary
    # Every prompt compared shows in the figures; only those whose answers were sound count
    # in the rulings.
    rows = [
        (r, r.outcome.metrics["compared"])
        for r in sorted(records, key=lambda r: r.id)
        if "compared" in r.outcome.metrics
    ]
    if not rows:
        summary["mode"] = "recorded"
        summary["rulings"] = []
        summary["recorded"] = sum(is_recorded(r.outcome) for r in records)
        return summary
    summary.update(mode="compared", method="logprobs", **_logprob_figures(rows))
    summary["rulings"] = rulings(records)
    return summary


def _first_token_figures(
    made: Mapping[str, Any], sampled: Sequence[first_tokens.Stratum]
) -> dict[str, Any]:
    """The sampling comparison's figures: its ruling's statistic and the top tokens' agreement."""
    return {
        "samples_per_prompt": first_tokens.SAMPLES,
        "tv_mean": made["statistic"] / len(sampled),
        "p_value": made["p_value"],
        "resolution": made["resolution"],
        "power": made["test"]["power"],
        "agreement": rate(
            sum(
                Counter(c).most_common(1)[0][0] == Counter(r).most_common(1)[0][0]
                for c, r in sampled
            ),
            len(sampled),
        ),
    }


def _logprob_figures(rows: Sequence[tuple[CaseRecord, Mapping[str, Any]]]) -> dict[str, Any]:
    """The logprob comparison's figures over the prompts compared, in corpus order (pure)."""
    divergences = [row["divergence"] for _, row in rows]
    floors = [row["floor"] for _, row in rows]
    comparisons = [row["comparison"] for _, row in rows]
    positions = sum(c["positions"] for c in comparisons)
    interval = bootstrap_mean_interval(divergences)
    return {
        "divergence": {
            "mean": sum(divergences) / len(rows),
            "interval": list(interval) if interval else None,
            "floor_mean": sum(floors) / len(rows),
            "tv_lower_mean": sum(c["tv_lower"] for c in comparisons) / len(rows),
            "tv_upper_mean": sum(c["tv_upper"] for c in comparisons) / len(rows),
            "bound": "TV over each position's top-K lists, bounded below and above "
            "because the mass outside top-K is unknown",
        },
        "top1_agreement": rate(sum(c["top1_agree"] for c in comparisons), positions),
        "continuation_agreement": rate(
            sum(row["continuation_agrees"] for _, row in rows), len(rows)
        ),
        "first_divergence": [
            {"case": r.id, "position": c["first_divergence"]}
            for (r, _), c in zip(rows, comparisons, strict=True)
            if c["first_divergence"] is not None
        ][:10],
    }


def _sampled(records: Iterable[CaseRecord]) -> list[first_tokens.Stratum]:
    """The sampled first tokens (candidate, reference) of the sound prompts, in id order."""
    return [
        (r.outcome.metrics["sampled"]["candidate"], r.outcome.metrics["sampled"]["reference"])
        for r in sorted(records, key=lambda r: r.id)
        if r.outcome.status is Status.PASS and "sampled" in r.outcome.metrics
    ]


def _sampling_ruling(records: Sequence[CaseRecord]) -> dict[str, Any]:
    """The distribution ruling of the sampling fallback (see :mod:`.support.first_tokens`)."""
    strata = _sampled(records)
    decided = first_tokens.decide(strata)
    outcome = decided["outcome"]
    return {
        "name": "distribution",
        "method": "sampling",
        "outcome": outcome,
        "verdict": {"same": "pass", "different": "fail", "undecided": "inconclusive"}[outcome],
        "code": "distribution_shift" if outcome == "different" else None,
        "prompts": len(strata),
        "requests": sum(
            int(r.outcome.metrics.get("requests", 0))
            for r in records
            if r.outcome.status is Status.PASS and "sampled" in r.outcome.metrics
        ),
        "p_value": decided["p_value"],
        "statistic": decided["statistic"],
        "resolution": decided["resolution"],
        "test": {
            "kind": "stratified permutation test on sampled first tokens (sum of per-prompt "
            "TV); weaker than the logprobs comparison",
            "samples_per_prompt": first_tokens.SAMPLES,
            "rounds": first_tokens.ROUNDS,
            "false_alarm_rate": first_tokens.ALPHA,
            "power": decided["power"],
            "power_against": "every prompt's likeliest first token giving TV s of its mass "
            "to the second likeliest, estimated from the pooled samples",
            "same_needs_resolution": first_tokens.RESOLUTION,
        },
    }


def rulings(records: Iterable[CaseRecord]) -> list[dict[str, Any]]:
    """The distribution and KV-cache rulings over the prompts compared, in id order (pure).

    Only prompts whose answers were sound count; with none compared (a recording run), there
    is no ruling. Compared by sampling, there is one ruling, on the distribution.
    """
    records = list(records)
    if _sampled(records):
        return [_sampling_ruling(records)]
    return _sign_rulings(records)


def _sign_rulings(records: Iterable[CaseRecord]) -> list[dict[str, Any]]:
    """The logprobs comparison's two sequential rulings."""
    seen = [r for r in sorted(records, key=lambda r: r.id) if "compared" in r.outcome.metrics]
    if not seen:
        return []
    sound = [
        (r.outcome.metrics["compared"], int(r.outcome.metrics.get("requests", 0)))
        for r in seen
        if r.outcome.status is Status.PASS
    ]
    requests = [n for _, n in sound]
    return [
        _decision("distribution", "distribution_shift", [r["exceeds"] for r, _ in sound], requests),
        _decision(
            "kv_cache", "kv_cache_divergence", [r["warm_exceeds"] for r, _ in sound], requests
        ),
    ]


def settled(records: Sequence[CaseRecord]) -> str | None:
    """Why the remaining prompts need not be sent, or None (pure).

    Both rulings are decided; or as many prompts as a ruling needs have failed already, so
    that the family fails whatever comes.
    """
    failed = [r for r in records if r.outcome.status is Status.FAIL]
    if len(failed) >= TEST.minimum:
        codes = sorted({f.code for r in failed for f in r.outcome.findings})
        return f"parity: {len(failed)} prompts failed ({', '.join(codes)})"
    # The sampling fallback's test takes every prompt: only the sign tests stop early.
    made = _sign_rulings(records)
    if not made or any(r["outcome"] == "undecided" for r in made):
        return None
    said = ", ".join(f"{r['name']} {r['outcome']}" for r in made)
    return f"parity: decided after {max(r['prompts'] for r in made)} prompts ({said})"


def after_run(records: Sequence[CaseRecord]) -> dict[str, bytes]:
    """The recording, written beside the scorecard (which holds its sha256)."""
    return {RECORDING_FILE: recording_bytes(records)}


@family(
    "parity",
    summarize=summarize,
    cost=lambda case: 3.0,
    settled=settled,
    needs=lambda run: ("logprobs", "reference"),
    before_run=before_run,
    after_run=after_run,
    writes=(RECORDING_FILE,),
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """Per-token distributions against a reference deployment's, with a calibrated decision."""
    parity = ctx.parity
    if parity.top_logprobs is not None:
        outcome = yield from _by_logprobs(case, ctx, parity)
        if not (parity.sampling and parity.recording) or not is_recorded(outcome):
            return outcome
        # A recording run: the first tokens sampled too, for candidates without logprobs.
        got = yield from _samples(case, ctx, "endpoint")
        if isinstance(got, Outcome):
            return got
        metrics = dict(outcome.metrics)
        metrics["recording"] = {**metrics["recording"], "samples": got}
        metrics["requests"] += first_tokens.SAMPLES
        return dataclasses.replace(outcome, metrics=metrics)
    if parity.sampling:
        return (yield from _by_sampling(case, ctx, parity))
    return _unavailable(parity.why_unavailable, 0)


def _by_logprobs(case: Case, ctx: RunContext, parity: ParityContext) -> Exchange:
    """The prompt answered greedily with logprobs: first, streamed, again; compared."""
    assert parity.top_logprobs is not None
    reference: tuple[Trace, Trace] | None = None
    if parity.live:
        got = yield from _live_reference(case, ctx, parity)
        if isinstance(got, Outcome):
            return got
        reference = got
    elif parity.recordings is not None:
        recording = parity.recordings.get(case.id)
        if recording is None or "first" not in recording:
            return unsupported("the reference's recording has no answer to this prompt", {})
        reference = _recorded(recording)
    answers: dict[str, ChatResult] = {}
    body = _body(case, ctx, ctx.model, parity.top_logprobs)
    refused: str | None = None
    for name, stream in (("first", False), ("stream", True), ("again", False)):
        result = yield Chat(body, name, stream=stream)
        if stream and 400 <= result.status < 500:
            # Logprobs on a stream refused (llama-server refuses them with tools): the
            # distributions still compare; the stream's agreement is unknown.
            refused = f"HTTP {result.status}: {(result.error_object or {}).get('message')}"
            continue
        if not result.ok:
            return rejected("logprobs", result, {"requests": len(answers) + 1})
        answers[name] = result
    outcome = grade(answers, reference, requests=3 + (2 if parity.live else 0))
    if refused is None:
        return outcome
    return dataclasses.replace(
        outcome, metrics={**outcome.metrics, "stream_refused": refused[:200]}
    )


def first_token(result: ChatResult) -> str:
    """What a one-token answer sampled: its text, else what it began instead (pure).

    An answer that began reasoning or a tool call is named by that; one that stopped at
    once is :data:`~.distributions.END`.
    """
    choice = result.choice
    assert choice is not None
    if choice.content:
        return choice.content
    if choice.reasoning:
        return f"\x00reasoning:{choice.reasoning}"
    if choice.tool_calls:
        return "\x00tool_call"
    return END if choice.finish_reason == "stop" else ""


def _samples(
    case: Case, ctx: RunContext, target: str, model: str | None = None
) -> Generator[Chat, ChatResult, list[str] | Outcome]:
    """The prompt's first token sampled at temperature 1, once per seed.

    The reference's seeds (a recording run's too) follow the run's seed, the candidate's
    follow those, so that the two sides' samples are independent.
    """
    offset = 0 if target == "reference" or ctx.parity.recording else first_tokens.SAMPLES
    data = case.data
    prefix = "reference-" if target == "reference" else ""
    asked = []
    for i in range(first_tokens.SAMPLES):
        body = ctx.request(
            messages=data["messages"], max_tokens=1, temperature=1.0, seed=ctx.seed + offset + i
        )
        body["model"] = model or ctx.model
        if "tools" in data:
            body["tools"] = data["tools"]
        name = f"{prefix}sample-{i + 1}"
        asked.append(Chat(body, name, target=target, observe=target != "reference"))
    found = []
    for i, chat in enumerate(together(asked)):
        name = chat.name
        result = yield chat
        if not result.ok:
            return rejected(f"{prefix}sampling", result, {"requests": i + 1})
        broken = evidence_findings(result, name)
        if broken:
            return Outcome.from_findings(broken, metrics={"requests": i + 1})
        found.append(first_token(result))
    return found


def _by_sampling(case: Case, ctx: RunContext, parity: ParityContext) -> Exchange:
    """The prompt's first token sampled on both sides (or recorded, with no reference)."""
    reference: list[str] | None = None
    if parity.recordings is not None:
        reference = (parity.recordings.get(case.id) or {}).get("samples")
        if reference is None:
            return unsupported("the reference's recording has no samples of this prompt", {})
    elif parity.live:
        got = yield from _samples(case, ctx, "reference", parity.reference_model)
        if isinstance(got, Outcome):
            return got
        reference = got
    candidate = yield from _samples(case, ctx, "endpoint")
    if isinstance(candidate, Outcome):
        return candidate
    requests = first_tokens.SAMPLES * (2 if parity.live else 1)
    metrics: dict[str, Any] = {"requests": requests}
    if reference is None:
        return recorded({**metrics, "recording": {"samples": candidate}})
    metrics["sampled"] = {"candidate": candidate, "reference": list(reference)}
    return Outcome(Status.PASS, metrics=metrics)
