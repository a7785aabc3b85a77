"""Long context: the window an endpoint states, honoured to its last token and refused past it.

The window is read twice: from the model's release (the profile's ``limits.context_tokens``,
its ``config.json`` or GGUF file, with any RoPE scaling) and from the endpoint (its model
list's ``max_model_len``, ``context_length`` or ``meta.n_ctx``, llama-server's ``/props``; see
:mod:`verifier.protocol.window`). The endpoint's figure is the one it is held to; without
one, the release's. Every prompt is counted with the profile's own template and tokenizer.

Checks (a case's ``check``):

- ``window``: the stated window against the release's: ``window_below_release`` (a serving
  window configured smaller than the model's), ``window_above_release``;
- ``over_window``: a prompt 64 tokens past the window must be refused with a 4xx:
  ``over_window_server_error`` (a 5xx), ``over_window_hang`` (no answer), ``prompt_truncated``
  (answered, its ``prompt_tokens`` short of the prompt and within the window: tokens were
  dropped to fit, without a word),
  ``over_window_accepted`` (answered whole: the window is not the one stated),
  ``over_window_refusal_unclear`` (a 4xx whose error does not say the request is too long),
  and ``window_smaller_than_stated`` when the refusal names a smaller window than the one
  stated;
- ``output_past_window``: a prompt 48 tokens short of the window asking for a long answer must
  be refused, or end with ``finish_reason`` ``length`` at the window: ``answer_past_window``
  (prompt and the text delivered together run past the window, so the model no longer saw
  the whole prompt when it wrote the last tokens: a context shift does that),
  ``length_not_reported`` (stopped at the window, its count broken off, yet said to have
  ended on its own), and the two above for errors;
- ``needles``: a ladder rung. A prompt of about ``tokens`` tokens (``window``: the window less
  room for the answer) with needles at 10%, 50% and 90% of its depth, each asked for by its
  own question. ``prompt_tokens`` must grow from a 512-token prompt of the same needles by
  exactly what the local count grows (a hidden system prompt or a constant skew cancel; they
  are chat_template's): ``prompt_tokens_mismatch``, or ``prompt_truncated`` when the count is
  short and the first needle was lost while a later one was read. A refusal within the window
  that names a smaller one is ``window_smaller_than_stated`` (``window_below_release`` when
  only the release states one); one that does not is ``refused_within_window`` (a smaller
  window, or a count other than the release's: the evidence cannot tell). Retrieval is
  accuracy, as tool calling's choices are: each needle's answer is graded exactly (its code,
  as a number of its own) and reported in the family's table by length and depth with
  intervals, never as a rung's failure, since a small model loses needles with length by
  itself (SmolLM2-135M does past 1k tokens on every vendor). A needle the model misses in the
  512-token prompt too is the model's limit and is left out of the table.

- ``cache_hot``: the same long prompt (131,072 tokens, or what the window allows), begun with
  a nonce no earlier request had, streamed twice: the repeat must answer as the first
  (``cache_changes_answer``), and where its first token came much sooner (a third of the time,
  50 ms less at least) its usage must say what the cache served (``cached_tokens_unreported``,
  once a third prompt as long, with a nonce of its own, came as slowly as the first: one slow
  moment of the endpoint is not a cache). With neither cached tokens nor a quicker repeat, no
  prefix cache is seen: unsupported.
- ``agent_loop``: an agent harness's history replayed turn by turn (tool calls and long tool
  results, past 32k tokens): every turn's ``prompt_tokens`` must grow from the task alone's
  by the local count (:mod:`.support.agent_loop`: ``history_compacted``, or
  ``prompt_tokens_mismatch``); each turn's cached tokens and first token are reported.
- ``shared_prefix``: two prompts sharing all but their questions (16,384 tokens, or what the
  window allows), in both orders: each order sends one prompt alone (its own nonce: cold), then
  its sibling, then the first again, streamed. The first prompt's answer after its sibling must
  be its answer alone (``cache_changes_answer``: a cache that keys blocks by too short a prefix
  serves one prompt the other's). The same prompt is compared with itself, so nothing but the
  cache differs between the two answers. Without a sign of a cache (cached tokens, or a
  quicker repeat in both orders): unsupported, as above.

Each rung's prompt begins with a nonce too, and its first question is streamed alone: its first
token times the prompt's computing, cold. The summary gives the prefill rate by length (prompt
tokens per second of first token), the longest prompt up to which that time grew in
proportion (``ttft_linear_until``), and the cache check's first tokens cold and hot.

The checks of what an API says for itself (the refusal, the answer cut at the window, the
cache's field, the tool history) go through every API the run speaks; the ladder, the window
and the shared prefix are the engine's, and go once, over chat completions.

Rungs past the window, and any prompt past ``--max-context``, are unsupported, saying which.
The haystack and needles are drawn from the run's seed (``--rotate`` gives it from the
secret).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import EndpointTimeout
from ..outcome import CaseRecord, Finding
from ..protocol import window as stated_windows
from ..protocol.answers import ChatResult
from ..protocol.apis import API_NAMES
from ..protocol.requests import Chat, Exchange, Get, Request, together
from ..protocol.window import StatedWindow
from ..stats import rate, wilson_interval
from .registry import QUICK, family
from .support import agent_loop, haystack
from .support.common import excerpt, hang_finding
from .support.evidence import NO_PROMPT_TOKENS, cached_tokens, counted, evidence_findings
from .support.subchecks import Graded, SubCheck, Unsupported, run_checks, status_counts

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from ..config import RunConfig
    from ..reference.profiles import Profile
    from .registry import Contextualise, RunContext

# How far past the window the over-window prompt reaches.
PAST = 64
# How far short of the window the output-past-window prompt stops, and what it asks for.
SHORT_OF = 48
PAST_OUTPUT = 256
# The room a rung leaves for its answer, and the answer's cap (a code is a few tokens).
ANSWER_ROOM = 64
ANSWER_TOKENS = 16
# The short prompt of the same needles a rung's counts and misses are compared with.
ANCHOR = 512
# The cache check's prompt (a shorter window or --max-context shortens it).
CACHE_TOKENS = 131072
# The shared-prefix check's prompts (as short, where the cache check's is).
SHARED_TOKENS = 16384
# The agent loop's last turn, past 32k tokens, and its tool results (as short, where the cache
# check's is).
AGENT_TOKENS = 36864
AGENT_TURNS = 6
# A rung whose prompt tokens per second of first token fall below this share of the best
# shorter rung's: its first token no longer comes in time linear in the prompt's length.
LINEAR = 0.5
# A first token sooner than this times the request, not the prompt's computing.
TIMED = 0.05
_NO_PROFILE = "no profile: prompts are counted with the model's own template and tokenizer"


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """The window the endpoint is held to, and where it comes from.

    Args:
        stated: what the endpoint states, or None.
        release: what the model's release states (tokens), or None.
        original: the release's original training length, where RoPE scaling stretches it
            to `release` (retrieval past it relies on the scaling being applied).
    """

    stated: StatedWindow | None
    release: int | None
    original: int | None = None

    @property
    def tokens(self) -> int | None:
        """The endpoint's own figure, else the release's."""
        return self.stated.tokens if self.stated is not None else self.release

    @property
    def source(self) -> str:
        """Where the window held comes from."""
        return self.stated.where if self.stated is not None else "the release"

    def metrics(self) -> dict[str, Any]:
        """The window's figures, for the outcome."""
        return {
            "window": self.tokens,
            "stated": None if self.stated is None else self.stated.tokens,
            "stated_by": None if self.stated is None else self.stated.where,
            "release": self.release,
            "release_original": self.original,
        }


def _profile(ctx: RunContext) -> Profile:
    if ctx.profile is None:
        raise Unsupported(_NO_PROFILE)
    return ctx.profile


def _window(ctx: RunContext, profile: Profile) -> Generator[Request, ChatResult, Window]:
    """What the endpoint states (its model list, then /props) beside the release's figure."""
    models = yield Get("/models", "models", api=True)
    stated = stated_windows.from_models(models.body, ctx.model) if models.ok else None
    if stated is None:
        props = yield Get("/props", "props")
        stated = stated_windows.from_props(props.body) if props.ok else None
    original = (profile.rope_scaling or {}).get("original_context_tokens")
    return Window(stated, profile.window, original if isinstance(original, int) else None)


def _known(window: Window) -> int:
    if window.tokens is None:
        raise Unsupported(
            "neither the endpoint (its model list, /props) nor the release states a window"
        )
    return window.tokens


def _within_cap(tokens: int, cap: int | None) -> None:
    if cap is not None and tokens > cap:
        raise Unsupported(f"a prompt of {tokens:,} tokens is past --max-context {cap:,}")


def window_findings(window: Window) -> list[Finding]:
    """The stated window against the release's (pure)."""
    stated, release = window.stated, window.release
    if stated is None or release is None or stated.tokens == release:
        return []
    below = stated.tokens < release
    return [
        Finding(
            "window_below_release" if below else "window_above_release",
            f"{stated.where} states a window of {stated.tokens:,} tokens; the release's is "
            f"{release:,}",
            expected=release,
            actual=stated.tokens,
        )
    ]


def _check_window(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    window = yield from _window(ctx, profile)
    if window.stated is None:
        _known(window)
        raise Unsupported(
            f"the endpoint states no window (its model list, /props); the release's is "
            f"{window.release:,} tokens"
        )
    if window.release is None:
        raise Unsupported(
            f"the release states no window to compare with; {window.stated.where} states "
            f"{window.stated.tokens:,} tokens"
        )
    return window_findings(window), window.metrics()


def refusal_findings(result: ChatResult, window: Window, what: str) -> list[Finding]:
    """What an answer that must be a refusal got wrong, given it is not a 2xx (pure)."""
    error = result.error_object
    said = f": {(error or {}).get('message', '')!s:.200}" if error else ""
    if result.status >= 500:
        return [
            Finding(
                "over_window_server_error",
                f"{what} got HTTP {result.status}, a server error, not a 4xx{said}",
                expected="4xx",
                actual=result.status,
            )
        ]
    named = stated_windows.from_refusal(error)
    if window.stated is not None and named is not None and named < window.stated.tokens:
        return [_smaller(window, f"{what} was refused as past a window of {named:,} tokens")]
    if not stated_windows.says_length(error):
        return [
            Finding(
                "over_window_refusal_unclear",
                f"{what} was refused with HTTP {result.status}, but the refusal does not say the "
                f"request is too long{said or ' (no error object)'}",
                expected="an error saying the context is exceeded",
                actual=(error or {}).get("message"),
            )
        ]
    return []


def _smaller(window: Window, how: str) -> Finding:
    assert window.tokens is not None
    if window.stated is None:
        return Finding(
            "window_below_release",
            f"{how}, within the release's window of {window.tokens:,} tokens",
            expected=window.tokens,
        )
    return Finding(
        "window_smaller_than_stated",
        f"{how}, within the {window.tokens:,} tokens {window.stated.where} states",
        expected=window.tokens,
    )


def within_window_refusal(result: ChatResult, window: Window, tokens: int) -> Finding:
    """A prompt the release counts within the window was refused (pure).

    A refusal that names a smaller window than the one held to says the window is smaller;
    one that names none, or the same, leaves two readings: a smaller window, or a count of the
    prompt other than the release's (``refused_within_window``, the message says both).
    """
    named = stated_windows.from_refusal(result.error_object)
    how = f"a prompt of {tokens:,} tokens was refused (HTTP {result.status}"
    if named is not None and window.tokens is not None and named < window.tokens:
        return _smaller(window, f"{how}, as past a window of {named:,} tokens)")
    assert window.tokens is not None
    said = f", as past a window of {named:,} tokens" if named is not None else ""
    return Finding(
        "refused_within_window",
        f"{how}{said}) within the {window.tokens:,} tokens {window.source} gives: its window is "
        "smaller, or it counts the prompt otherwise than the release (see chat_template and "
        "tokenizer)",
        expected=f"an answer to {tokens:,} prompt tokens",
        actual=result.status,
    )


def _truncated(prompt: int, local: int, what: str) -> Finding:
    return Finding(
        "prompt_truncated",
        f"{what} was answered with prompt_tokens {prompt:,}, short of its {local:,} tokens: "
        f"{local - prompt:,} were dropped without a word",
        "$.usage.prompt_tokens",
        expected=local,
        actual=prompt,
    )


def _ask(hay: haystack.Haystack, question: str, ctx: RunContext, max_tokens: int) -> dict[str, Any]:
    return ctx.request(messages=hay.messages(question), max_tokens=max_tokens)


def _sent_long(
    body: dict[str, Any], name: str, what: str, window: Window, metrics: dict[str, Any]
) -> Generator[Request, ChatResult, tuple[ChatResult | None, list[Finding]]]:
    """A request that may be refused: its answer, or None and what its refusal got wrong.

    A hang and a server error are findings; the status and a refusal's words go in `metrics`.
    """
    try:
        result = yield Chat(body, name, keep_persistent_5xx=True)
    except EndpointTimeout as exc:
        return None, [hang_finding(exc, what, "over_window")]
    metrics["status"] = result.status
    if result.ok:
        return result, []
    metrics["refusal"] = excerpt(str((result.error_object or {}).get("message", "")), 200)
    return None, refusal_findings(result, window, what)


def _check_over_window(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    window = yield from _window(ctx, profile)
    limit = _known(window)
    _within_cap(limit + PAST, ctx.max_context)
    question = haystack.SUMMARY_QUESTION
    hay, local = haystack.build(profile, limit + PAST, ctx.seed, (), question)
    if local <= limit:
        raise Unsupported(f"no prompt past the window could be built ({local:,} tokens)")
    metrics = {**window.metrics(), "tokens": local}
    what = f"a prompt of {local:,} tokens, past the window of {limit:,} ({window.source})"
    body = _ask(hay, question, ctx, ANSWER_TOKENS)
    result, refused = yield from _sent_long(body, "past-window", what, window, metrics)
    if result is None:
        return refused, metrics
    prompt = counted(result, "past-window")
    metrics["prompt_tokens"] = prompt
    # Short of the prompt and within the window: what dropping tokens to fit gives.
    if prompt is not None and prompt < local and prompt <= limit:
        return [_truncated(prompt, local, what)], metrics
    return [
        Finding(
            "over_window_accepted",
            f"{what} was answered (HTTP {result.status}, prompt_tokens {prompt}), not refused: "
            "the endpoint does not hold to the window",
            expected="4xx",
            actual=result.status,
        )
    ], metrics


def window_end_findings(
    what: str, text: str, finish: str | None, made: int, used: int, limit: int
) -> list[Finding]:
    """How an answer asked for past the window ended, given `used` tokens in all (pure).

    Past the window: ``answer_past_window``. At it, its count (1 to 5000) broken off, yet said
    to have ended on its own: ``length_not_reported``.
    """
    if used > limit:
        return [
            Finding(
                "answer_past_window",
                f"{what} was answered with {made:,} tokens of text after a prompt of "
                f"{used - made:,}: {used - limit:,} past the window, so the model no "
                "longer saw the whole prompt when it wrote the last of them (as a context "
                "shift does, dropping the oldest tokens to make room)",
                "$.choices[0].message.content",
                expected=f"at most {limit:,} tokens in all",
                actual=used,
            )
        ]
    text = text.strip()
    if finish != "length" and used >= limit and not text.endswith(haystack.COUNT_END):
        # Cut at the window mid-count, yet said to have ended by itself.
        last = text.rsplit("\n", 1)[-1]
        return [
            Finding(
                "length_not_reported",
                f"{what} stopped at the window, its count broken off at {last!r} after {made:,} "
                f"tokens, yet its finish_reason is {finish!r}: it says it ended on its own",
                "$.choices[0].finish_reason",
                expected="length",
                actual=finish,
            )
        ]
    return []


def _check_output_past_window(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    window = yield from _window(ctx, profile)
    limit = _known(window)
    _within_cap(limit, ctx.max_context)
    question = haystack.COUNT_QUESTION
    hay, local = haystack.build(profile, limit - SHORT_OF, ctx.seed, (), question)
    metrics = {**window.metrics(), "tokens": local, "max_tokens": PAST_OUTPUT}
    what = (
        f"a prompt of {local:,} tokens with max_tokens {PAST_OUTPUT}, past the window of "
        f"{limit:,} ({window.source}) together"
    )
    body = _ask(hay, question, ctx, PAST_OUTPUT)
    result, refused = yield from _sent_long(body, "to-window", what, window, metrics)
    if result is None:
        return refused, metrics
    prompt = counted(result, "to-window")
    if prompt is None:
        raise Unsupported(NO_PROMPT_TOKENS, metrics)
    assert result.choice is not None
    finish = result.choice.finish_reason
    # The text delivered, counted by the release's tokenizer: the bill is output accounting's.
    made = len(profile.tokenizer.encode_ordinary(result.choice.content or ""))
    # Either count of the prompt may be the right one (a skewed bill, a vendor that renders
    # fewer tokens): the answer is held to the smaller, so neither error makes it run over.
    used = min(prompt, local) + made
    metrics.update(prompt_tokens=prompt, delivered_tokens=made, finish_reason=finish)
    findings = window_end_findings(what, result.choice.content or "", finish, made, used, limit)
    if findings:
        return findings, metrics
    if finish != "length" and used < limit:
        raise Unsupported(
            f"the answer ended by itself ({finish}) {limit - used:,} tokens short of the "
            "window: nothing shows what the endpoint does there",
            metrics,
        )
    return [], metrics


def _rung(case: Case, window: Window, cap: int | None) -> int:
    """The rung's length, or Unsupported saying why it is skipped."""
    limit = _known(window)
    wanted = case.data["tokens"]
    top = limit - ANSWER_ROOM
    if wanted == "window":
        if cap is not None and cap < limit:
            raise Unsupported(f"--max-context {cap:,} is below the window ({limit:,} tokens)")
        return top
    if wanted > top:
        raise Unsupported(
            f"{wanted:,} tokens and an answer do not fit the window of {limit:,} ({window.source})"
        )
    _within_cap(wanted, cap)
    return int(wanted)


@dataclasses.dataclass(frozen=True, slots=True)
class Asked:
    """One question of a rung: the needle, the prompt's local count, and its answer."""

    needle: haystack.Needle
    local: int
    result: ChatResult


def _nonce() -> str:
    """A haystack's first words, which no earlier request had: its prefix is in no cache.

    Twelve digits: a number every tokenizer splits the same way whatever its digits, so the
    prompt's length does not change from run to run.
    """
    return f"Archive {secrets.randbelow(9 * 10**11) + 10**11}."


def _questions(
    profile: Profile,
    ctx: RunContext,
    tokens: int,
    needles: Sequence[haystack.Needle],
    name: str,
    lead: str = "",
) -> Generator[Request, ChatResult, list[Asked]]:
    """Each needle's question asked of one haystack of about `tokens` tokens.

    With a `lead` (a nonce), the first question is streamed and sent alone, so that its first
    token times the whole prompt's computing, cold; the others, whose prefix it leaves in any
    cache, go together.
    """
    hay, _ = haystack.build(profile, tokens, ctx.seed, needles, needles[0].question, lead)
    bodies = [_ask(hay, n.question, ctx, ANSWER_TOKENS) for n in needles]
    chats = [Chat(b, f"{name}-{n.depth:.0%}") for b, n in zip(bodies, needles, strict=True)]
    if lead:
        sent = [dataclasses.replace(chats[0], stream=True), *together(chats[1:])]
    else:
        sent = together(chats)
    asked: list[Asked] = []
    for request, needle in zip(sent, needles, strict=True):
        result = yield request
        asked.append(Asked(needle, haystack.count(profile, hay, needle.question), result))
    return asked


def _answer(result: ChatResult) -> str | None:
    return result.choice.content if result.choice is not None else None


def count_findings(
    long: Asked, anchor: Asked, prompt: int, anchor_prompt: int, front_lost: bool
) -> list[Finding]:
    """A long prompt's count against the anchor's, by difference (pure).

    Fewer tokens than the text has are dropped tokens only where the retrieval says so too
    (`front_lost`: the first needle lost, a later one read): ``prompt_truncated``. Otherwise the
    counts disagree and no more is known (a tokenizer that splits the filler otherwise would
    do the same): ``prompt_tokens_mismatch``.
    """
    want, got = long.local - anchor.local, prompt - anchor_prompt
    if got == want:
        return []
    what = (
        f"the prompt of {long.local:,} tokens (needle at {long.needle.depth:.0%}) costs "
        f"{got:,} prompt tokens more than the {anchor.local:,}-token one; the local count says "
        f"{want:,}"
    )
    if got < want and front_lost:
        return [
            Finding(
                "prompt_truncated",
                f"{what}: {want - got:,} were dropped without a word, the first needle with "
                "them (a later one was read)",
                "$.usage.prompt_tokens",
                expected=want,
                actual=got,
            )
        ]
    return [
        Finding(
            "prompt_tokens_mismatch",
            what,
            "$.usage.prompt_tokens",
            expected=want,
            actual=got,
        )
    ]


def _check_needles(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    window = yield from _window(ctx, profile)
    tokens = _rung(case, window, ctx.max_context)
    needles = haystack.needles(ctx.seed)
    metrics: dict[str, Any] = {**window.metrics(), "rung": case.data["tokens"]}
    long = yield from _questions(profile, ctx, tokens, needles, "long", _nonce())
    metrics["tokens"] = long[0].local
    refused = [a for a in long if not a.result.ok]
    if refused:
        metrics["status"] = refused[0].result.status
        return [within_window_refusal(refused[0].result, window, long[0].local)], metrics
    findings = [f for a in long for f in evidence_findings(a.result, f"long-{a.needle.depth:.0%}")]
    if findings:
        return findings, metrics
    anchors = {needles[0]: (yield from _questions(profile, ctx, ANCHOR, needles[:1], "short"))[0]}
    anchor = anchors[needles[0]]
    if not anchor.result.ok:
        raise Unsupported(f"the {ANCHOR}-token prompt was refused (HTTP {anchor.result.status})")
    anchor_prompt = counted(anchor.result, "short-10%")
    prompts = [counted(a.result, f"long-{a.needle.depth:.0%}") for a in long]
    if anchor_prompt is None or None in prompts:
        raise Unsupported(NO_PROMPT_TOKENS, metrics)
    metrics["prompt_tokens"] = prompts
    metrics["ttft"] = _first_token(long[0].result)
    retrieval: list[dict[str, Any]] = []
    for asked in long:
        found = asked.needle.found_in(_answer(asked.result))
        control = anchors.get(asked.needle)
        if not found and control is None:
            control = (yield from _questions(profile, ctx, ANCHOR, [asked.needle], "short"))[0]
        short = None if control is None else control.needle.found_in(_answer(control.result))
        # A needle the model misses in the short prompt too is past what it can do anywhere.
        graded = found or bool(short)
        retrieval.append(
            {"depth": asked.needle.depth, "found": found if graded else None, "short": short}
        )
    metrics["needles"] = retrieval
    front_lost = retrieval[0]["found"] is False and retrieval[-1]["found"] is True
    for asked, prompt in zip(long, prompts, strict=True):
        assert prompt is not None
        findings += count_findings(asked, anchor, prompt, anchor_prompt, front_lost)
    return findings, metrics


def _cache_length(window: Window, cap: int | None) -> int:
    """The cache check's prompt: CACHE_TOKENS, or what the window and --max-context allow."""
    limit = _known(window) - ANSWER_ROOM
    return min(CACHE_TOKENS, limit, cap if cap is not None else limit)


def _first_token(result: ChatResult) -> float | None:
    """Seconds to a streamed answer's first token (its headers, without one)."""
    return result.token_arrivals[0] if result.token_arrivals else result.first_byte


def quicker(cold: ChatResult, hot: ChatResult) -> bool:
    """The hot answer's first token came in a third of the time, 50 ms sooner at least (pure).

    A sign of a cache, not proof: one slow moment of a loaded endpoint or client makes it too,
    so a finding that rests on it wants a second cold prompt as slow as the first.
    """
    cold_at, hot_at = _first_token(cold), _first_token(hot)
    return (
        cold_at is not None
        and hot_at is not None
        and cold_at >= 3 * hot_at
        and cold_at - hot_at >= 0.05
    )


def cache_findings(
    cold: ChatResult, hot: ChatResult, compare_text: bool
) -> tuple[list[Finding], dict[str, Any]]:
    """The same long prompt answered cold, then hot (pure).

    The hot answer must be the cold one (greedy), and a cache that made the hot one
    :func:`quicker` must say what it served (``cached_tokens``), where it has a usage to say
    it in.
    """
    timing = [_first_token(cold), _first_token(hot)]
    served = cached_tokens(hot)
    metrics: dict[str, Any] = {
        "ttft_cold": timing[0],
        "ttft_hot": timing[1],
        "cached_tokens": served,
    }
    findings: list[Finding] = []
    texts = [_answer(cold), _answer(hot)]
    if compare_text and texts[0] != texts[1]:
        findings.append(
            Finding(
                "cache_changes_answer",
                "the same prompt, answered greedily, got another answer the second time, when "
                f"its prefix was cached: {excerpt(texts[0], 80)!r}, then {excerpt(texts[1], 80)!r}",
                "$.choices[0].message.content",
                expected=texts[0],
                actual=texts[1],
                compare=True,
            )
        )
    cold_at, hot_at = timing
    metrics["quicker"] = sooner = quicker(cold, hot)
    # An answer without usage says nothing either way: that is wire's usage_missing.
    if not served and sooner and hot.usage is not None:
        assert cold_at is not None and hot_at is not None
        findings.append(
            Finding(
                "cached_tokens_unreported",
                f"the repeat's first token came in {hot_at * 1000:.0f} ms against "
                f"{cold_at * 1000:.0f} ms cold, so its prompt came from a cache, but its usage "
                f"says {served!r} cached tokens (prompt_tokens_details.cached_tokens)",
                "$.usage.prompt_tokens_details.cached_tokens",
                expected="the tokens served from the cache",
                actual=served,
            )
        )
    return findings, metrics


def _check_cache_hot(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    window = yield from _window(ctx, profile)
    needles = haystack.needles(ctx.seed)
    # A prefix no earlier request can have cached: the run's own, drawn afresh.
    hay, local = haystack.build(
        profile,
        _cache_length(window, ctx.max_context),
        ctx.seed,
        needles,
        needles[1].question,
        lead=_nonce(),
    )
    metrics: dict[str, Any] = {**window.metrics(), "tokens": local}
    body = _ask(hay, needles[1].question, ctx, ANSWER_TOKENS)
    cold = yield Chat(body, "cold", stream=True)
    hot = yield Chat(body, "hot", stream=True)
    refused = [r for r in (cold, hot) if not r.ok]
    if refused:
        return [within_window_refusal(refused[0], window, local)], metrics
    broken = evidence_findings(cold, "cold") + evidence_findings(hot, "hot")
    if broken:
        return broken, metrics
    findings, seen = cache_findings(cold, hot, not ctx.sampled)
    if any(f.code == "cached_tokens_unreported" for f in findings):
        # Quicker with nothing said: a prompt as long with a nonce of its own must be as slow
        # as the first, or that first was only a slow moment of the endpoint (or the client).
        other, _ = haystack.build(
            profile, local, ctx.seed, needles, needles[1].question, lead=_nonce()
        )
        control = yield Chat(
            _ask(other, needles[1].question, ctx, ANSWER_TOKENS), "control", stream=True
        )
        seen["ttft_control"] = _first_token(control)
        if not (control.ok and quicker(control, hot)):
            findings = [f for f in findings if f.code != "cached_tokens_unreported"]
            seen["quicker"] = False
    metrics.update(seen)
    if not findings and hot.usage is None:
        # What the cache served cannot be read: no verdict on it (wire's usage_missing).
        raise Unsupported("the repeat's answer has no usage to say what its cache served", metrics)
    if not findings and not seen["cached_tokens"] and not seen["quicker"]:
        raise Unsupported(
            "no sign of a prefix cache: the repeat reports no cached tokens and its first token "
            "came no sooner",
            metrics,
        )
    return findings, metrics


@dataclasses.dataclass(frozen=True, slots=True)
class Order:
    """One order of the shared-prefix check: a prompt alone, its sibling after it, it again.

    `alone` and `again` are the same prompt, asking `needle`'s question; `sibling` (asked
    between them) shares all of it but the question.
    """

    needle: haystack.Needle
    other: haystack.Needle
    alone: ChatResult
    sibling: ChatResult
    again: ChatResult


def shared_findings(orders: Sequence[Order]) -> list[Finding]:
    """Each prompt's answer after its sibling against its answer alone, greedy (pure)."""
    findings: list[Finding] = []
    for order in orders:
        first, then = _answer(order.alone), _answer(order.again)
        if first == then:
            continue
        findings.append(
            Finding(
                "cache_changes_answer",
                f"the prompt asking for the {order.needle.name} vault's code, sent again after "
                f"the one asking for the {order.other.name} vault's (the same but for the "
                f"question), was answered {excerpt(then, 80)!r}; sent alone, "
                f"{excerpt(first, 80)!r}",
                "$.choices[0].message.content",
                expected=first,
                actual=then,
                compare=True,
            )
        )
    return findings


def _check_shared_prefix(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    if ctx.sampled:
        raise Unsupported("sampled answers differ by themselves: the check needs greedy ones")
    window = yield from _window(ctx, profile)
    needles = haystack.needles(ctx.seed)
    pair = (needles[0], needles[-1])
    length = min(SHARED_TOKENS, _cache_length(window, ctx.max_context))
    metrics: dict[str, Any] = {**window.metrics()}
    orders: list[Order] = []
    sent: list[ChatResult] = []
    for needle, other in (pair, pair[::-1]):
        # Each order's own prefix, which neither the other order nor any earlier run has.
        hay, local = haystack.build(profile, length, ctx.seed, needles, needle.question, _nonce())
        metrics["tokens"] = local
        asked = (needle, other, needle)
        results = []
        for step, question in zip(("alone", "sibling", "again"), asked, strict=True):
            body = _ask(hay, question.question, ctx, ANSWER_TOKENS)
            results.append((yield Chat(body, f"{needle.depth:.0%}-{step}", stream=True)))
        refused = [r for r in results if not r.ok]
        if refused:
            return [within_window_refusal(refused[0], window, local)], metrics
        sent += results
        orders.append(Order(needle, other, *results))
    broken = [f for r in sent for f in evidence_findings(r, "shared")]
    if broken:
        return broken, metrics
    metrics["cached_tokens"] = [cached_tokens(r) for r in sent]
    findings = shared_findings(orders)
    # Quicker in both orders: one slow moment of the endpoint is not a cache.
    cached = any(metrics["cached_tokens"]) or all(quicker(o.alone, o.again) for o in orders)
    if not findings and not cached:
        raise Unsupported(
            "no sign of a prefix cache: no answer reports cached tokens and no repeat's first "
            "token came sooner",
            metrics,
        )
    return findings, metrics


def _check_agent_loop(case: Case, ctx: RunContext) -> Graded:
    profile = _profile(ctx)
    if not agent_loop.writes_tool_turns(profile):
        raise Unsupported(
            "the release's template writes no tool calls or results: a loop's history cannot "
            "be counted"
        )
    window = yield from _window(ctx, profile)
    length = min(AGENT_TOKENS, _cache_length(window, ctx.max_context))
    loop = agent_loop.build(profile, length, AGENT_TURNS, ctx.seed, _nonce())
    metrics: dict[str, Any] = {**window.metrics(), "tokens": list(loop.counts)}
    results: list[ChatResult] = []
    # One turn after another, as a harness sends them: each turn's prefix is the one before.
    for turn, messages in enumerate(loop.turns):
        body = ctx.request(
            messages=[dict(m) for m in messages],
            tools=[agent_loop.TOOL],
            max_tokens=ANSWER_TOKENS,
        )
        result = yield Chat(body, f"turn-{turn + 1}", stream=True)
        if not result.ok:
            return [within_window_refusal(result, window, loop.counts[turn])], metrics
        results.append(result)
    broken = [f for n, r in enumerate(results) for f in evidence_findings(r, f"turn-{n + 1}")]
    if broken:
        return broken, metrics
    prompts = [counted(r, f"turn-{n + 1}") for n, r in enumerate(results)]
    metrics["cached_tokens"] = [cached_tokens(r) for r in results]
    metrics["ttft"] = [_first_token(r) for r in results]
    billed = [p for p in prompts if p is not None]
    if len(billed) < len(prompts):
        raise Unsupported(NO_PROMPT_TOKENS, metrics)
    metrics["prompt_tokens"] = billed
    return agent_loop.history_findings(loop.counts, billed), metrics


RUNS: dict[str, SubCheck] = {
    "window": _check_window,
    "over_window": _check_over_window,
    "output_past_window": _check_output_past_window,
    "needles": _check_needles,
    "cache_hot": _check_cache_hot,
    "shared_prefix": _check_shared_prefix,
    "agent_loop": _check_agent_loop,
}


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """The window's figures, and retrieval by length and depth with intervals (pure)."""
    window: dict[str, Any] = {}
    retrieval: dict[str, dict[str, Any]] = {}
    depths: dict[str, list[bool]] = {}
    speed: dict[int, float] = {}
    cache: dict[str, Any] = {}
    for record in records:
        metrics = record.outcome.metrics
        for key in ("window", "stated", "stated_by", "release", "release_original"):
            if metrics.get(key) is not None:
                window.setdefault(key, metrics[key])
        if metrics.get("check") == "cache_hot" and metrics.get("ttft_cold") is not None:
            cache = {k: metrics[k] for k in ("tokens", "ttft_cold", "ttft_hot", "cached_tokens")}
        if metrics.get("check") != "needles" or "needles" not in metrics:
            continue
        if isinstance(metrics.get("ttft"), float) and metrics["ttft"] > 0:
            speed[int(metrics["tokens"])] = metrics["ttft"]
        graded = [n for n in metrics["needles"] if n["found"] is not None]
        found = sum(1 for n in graded if n["found"])
        for needle in graded:
            depths.setdefault(f"{needle['depth']:.0%}", []).append(needle["found"])
        interval = wilson_interval(found, len(graded))
        retrieval[str(metrics["tokens"])] = {
            "by_depth": {f"{n['depth']:.0%}": n["found"] for n in metrics["needles"]},
            "found": found,
            "graded": len(graded),
            "interval": None if interval is None else [round(x, 3) for x in interval],
        }
    ordered = dict(sorted(retrieval.items(), key=lambda item: int(item[0])))
    every = [found for row in depths.values() for found in row]
    return {
        "window": window,
        "retrieval_all": rate(sum(every), len(every)),
        "retrieval": ordered,
        "retrieval_by_depth": {depth: rate(sum(v), len(v)) for depth, v in sorted(depths.items())},
        "speed": {
            str(tokens): {"ttft": ttft, "prefill_rate": tokens / ttft}
            for tokens, ttft in sorted(speed.items())
        },
        "ttft_linear_until": linear_until(speed),
        "cache": cache,
        "checks": status_counts(records),
    }


def linear_until(ttft: Mapping[int, float]) -> int | None:
    """The longest prompt up to which the first token's time grew in proportion (pure).

    Prompt tokens per second of first token rise over the short rungs (a fixed overhead
    dominates them) and hold while computing is linear in the length; the first rung below
    :data:`LINEAR` of the best rate before it ends that. Rungs answered within :data:`TIMED`
    are left out (a request's own overhead, and a loaded machine's jitter, are that size).
    None without two rungs left.
    """
    timed = {tokens: seconds for tokens, seconds in ttft.items() if seconds >= TIMED}
    if len(timed) < 2:
        return None
    best, last = 0.0, None
    for tokens, seconds in sorted(timed.items()):
        rate = tokens / seconds
        if best and rate < LINEAR * best:
            return last
        best, last = max(best, rate), tokens
    return last


def cost(case: Case) -> float:
    """The requests a case sends a correct endpoint: the model list, then its answers.

    A rung asks its three questions and the short prompt's; the cache check asks twice, the
    shared-prefix check six times, the agent loop once a turn; the prompt near the window is
    answered; the one past it is refused (answered without generating); the window check
    only reads the model list. (A long prompt takes longer than a short one, but the schedule
    counts requests.)
    """
    check = case.data["check"]
    if check == "over_window":
        return 2 * QUICK
    generating = {
        "window": 0,
        "output_past_window": 1,
        "cache_hot": 2,
        "shared_prefix": 6,
        "agent_loop": AGENT_TURNS + 1,
    }
    return generating.get(check, 4) + QUICK


def before_run(run: RunConfig, baseline: Mapping[str, Any] | None) -> Contextualise:
    """The ladder's cap (``--max-context``)."""
    return lambda probed: {"max_context": run.max_context}


# The checks of what each API says for itself: its refusal past the window, where an answer
# cut at the window stops, its cache's field, how it carries a tool history. The ladder, the
# window's statement and the shared prefix are the engine's, the same through any API, and are
# sent (and paid for) once, over chat completions.
EVERY_API = frozenset({"over_window", "output_past_window", "cache_hot", "agent_loop"})


def case_apis(case: Case) -> tuple[str, ...]:
    """Every API for what an API says for itself; chat completions for the engine's checks."""
    return API_NAMES if case.data["check"] in EVERY_API else ("chat",)


@family(
    "context",
    summarize=summarize,
    cost=cost,
    before_run=before_run,
    apis=API_NAMES,
    case_apis=case_apis,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """The window stated and honoured: refused past it, every token counted and read up to it."""
    return (yield from run_checks(case, ctx, RUNS))
