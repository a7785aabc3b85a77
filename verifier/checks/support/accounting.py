"""Output accounting: what ``usage.completion_tokens`` bills against what the answer delivered.

With a profile, each delivered assistant message is rendered the way the model itself would
have generated it: the chat template renders the conversation with the message appended, and
the part after the generation prompt is the model's output (content, reasoning where the
template writes it, tool calls in the model's own markup, and the token the template closes
the turn with). That text, counted with the profile's tokenizer, is what a correct engine
bills, exactly, wherever the template determines it.

Where it does not, the comparison allows a stated bound (:data:`BOUNDS`):

- ``length``: an answer cut by ``max_tokens`` is counted up to its last delivered string
  (no closing tag, call markup or end token was generated after it; where the strings are
  not found in the template's order, without its end token), and its last tokens may
  be pieces of a character the text cannot show whole (byte tokens, sent as nothing or as a
  replacement character that re-encodes otherwise): 3 tokens either way; an answer with no
  ``finish_reason`` is counted the same way (nothing says it ended);
- ``stop``: a stop sequence the request gave is generated and billed but not delivered: up to
  its tokens more billed (the longest of them), and no end token;
- ``reasoning``: reasoning the template does not write back (its history rule drops it) is
  counted in the contract's dialect, between its tags;
- ``grammar``: a request that makes the engine decode under a grammar (a ``json_schema`` or
  ``json_object`` format, ``tool_choice`` required or named) may be answered in tokens the
  tokenizer would merge (the grammar refuses the merged token and takes its pieces): up to
  one token per byte of the ordinary text more;
- ``untemplated``: the template cannot render the message after the conversation (it raises,
  or the rendering does not extend the generation prompt): the content and reasoning are
  counted as text, one token fewer or two more billed (and a cut answer's bound besides),
  and an answer with tool calls is not accounted; nor is one whose calls the template does
  not write (a release without a tool format).

More billed than delivered beyond the bound is ``undelivered_tokens`` (the engine generated
tokens the answer lost: a tool call dropped, reasoning swallowed, content cut); less billed
is ``completion_tokens_mismatch``. Both carry the counts and the rendered text.

An answer that says it ended on its own (chat's ``finish_reason`` ``stop``, Messages'
``end_turn``, a Responses ``completed`` status) but whose rendering, end token included, is
longer than the request's token limit cannot have ended on its own: when its bill is what
the answer cut at the limit would bill, that is what happened, and the misreported end is
``length_not_reported`` (the bill is then accounted as the cut answer's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ...outcome import Finding, Outcome, Status
from ...protocol.answers import ChatResult, Choice
from ...reference.dialect import DEFAULT_FIELD
from ...reference.output import model_output
from ...reference.profiles import Profile
from ...reference.tokenizer_backends import encode_prompt
from .common import excerpt

# How far billing may stray from the rendered count where the template does not decide it:
# reason -> (fewer billed allowed, more billed allowed).
BOUNDS: dict[str, tuple[int, int]] = {
    "length": (3, 3),
    "untemplated": (1, 2),
    "reasoning": (1, 1),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Delivered:
    """What an answer delivered, in the model's tokens.

    Args:
        tokens: the delivered messages (every choice) rendered and counted.
        low: the fewest tokens a correct engine may bill for them.
        high: the most tokens a correct engine may bill for them.
        reasons: why the count is not exact (keys of :data:`BOUNDS`, or ``stop``); empty
            when the template determines it.
        text: the first choice's rendering (what the model generated, as text).
    """

    tokens: int
    low: int
    high: int
    reasons: tuple[str, ...]
    text: str

    @property
    def exact(self) -> bool:
        """The template determines the count: billing must equal it."""
        return not self.reasons


def assistant_message(choice: Choice, field: str, first_call: int | None = None) -> dict[str, Any]:
    """The delivered choice as an assistant message the chat template renders.

    With `first_call`, the calls get the model's own ids (``functions.NAME:IDX``, IDX counting
    the conversation's calls from `first_call`), as a contract whose ids name the function
    states the model writes them, whatever ids the vendor sent.
    """
    message: dict[str, Any] = {"role": "assistant", "content": choice.content or ""}
    if choice.reasoning:
        message[field] = choice.reasoning
    if choice.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{call.index}"
                if first_call is None
                else f"functions.{call.name}:{first_call + position}",
                "type": "function",
                "function": {"name": call.name or "", "arguments": call.arguments or ""},
            }
            for position, call in enumerate(choice.tool_calls)
        ]
    return message


def _first_call(profile: Profile, request: Mapping[str, Any]) -> int | None:
    """Where the answer's calls count from, when the contract's ids name the function."""
    if not (profile.policies.tool_call_id or {}).get("names_function"):
        return None
    return sum(
        len(m.get("tool_calls") or [])
        for m in request.get("messages") or []
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    )


def constrained(request: Mapping[str, Any]) -> bool:
    """The request makes the engine decode under a grammar: a JSON format, a forced call."""
    response_format = request.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    choice = request.get("tool_choice")
    return (
        kind in ("json_schema", "json_object")
        or choice == "required"
        or isinstance(choice, Mapping)
    )


def _most_tokens(profile: Profile, text: str, ids: Sequence[int]) -> int:
    """The most tokens `text` can be made of: its special tokens, and a token per other byte."""
    names = {v: k for k, v in profile.tokenizer.special_tokens.items()}
    special = [names[i] for i in ids if i in names]
    return len(special) + len(text.encode()) - sum(len(t.encode()) for t in special)


def _end_tokens(profile: Profile, text: str) -> int:
    """How many tokens at the end of `text` are the turn's closing special token (0 or 1)."""
    return int(any(text.endswith(token) for token in profile.tokenizer.special_tokens))


def _choice_count(
    profile: Profile, request: Mapping[str, Any], choice: Choice
) -> tuple[int, int, int, tuple[str, ...], str] | None:
    """One choice: (count, low, high, reasons, text); None when nothing can be counted."""
    dialect = profile.dialect
    field = dialect.history_field if dialect is not None else DEFAULT_FIELD
    message = assistant_message(choice, field, _first_call(profile, request))
    generated = model_output(profile, request, message)
    reasons: list[str] = []
    tokenizer = profile.tokenizer
    # An answer without a finish_reason may have been cut: it is counted as one.
    unfinished = choice.finish_reason in ("length", None)
    if generated is not None and not _writes_calls(generated.text, choice):
        # A template without a tool format renders no call: nothing says how the model wrote
        # them (SmolLM2's release, whose vLLM deployment takes tools through another template).
        return None
    if generated is None:
        if choice.tool_calls:
            return None
        text = (choice.reasoning or "") + (choice.content or "")
        count = len(tokenizer.encode_ordinary(text)) if text else 0
        low, high = BOUNDS["untemplated"]
        if not unfinished:
            return count, count - low, count + high, ("untemplated",), text
        # Cut as well: its last tokens may be pieces of a character, as any cut answer's.
        reason = "length" if choice.finish_reason else "no finish_reason"
        low, high = low + BOUNDS["length"][0], high + BOUNDS["length"][1]
        return count, count - low, count + high, ("untemplated", reason), text
    cut = None
    if unfinished:
        strings = [choice.reasoning or "", choice.content or ""]
        cut = generated.cut([*strings, *(call.arguments or "" for call in choice.tool_calls)])
    counted = generated if cut is None else cut
    text = counted.text
    ids = encode_prompt(tokenizer, text)
    count = len(ids)
    low = high = 0
    if constrained(request):
        # A grammar may refuse the token that merges text and take its pieces: at most one
        # token per byte of the ordinary text.
        reasons.append("grammar")
        high += _most_tokens(profile, text, ids) - count
    if generated.reasoning_added:
        reasons.append("reasoning")
        low, high = low + BOUNDS["reasoning"][0], high + BOUNDS["reasoning"][1]
    if unfinished:
        if cut is None:
            # Where the strings cannot be found, the end token is all that is left out.
            count -= _end_tokens(profile, text)
        reasons.append("length" if choice.finish_reason else "no finish_reason")
        low, high = low + BOUNDS["length"][0], high + BOUNDS["length"][1]
    elif choice.finish_reason == "stop" and _stops(request):
        # A stop sequence ended it: billed, not delivered, and no end token after it.
        count -= _end_tokens(profile, text)
        longest = max(len(tokenizer.encode_ordinary(s)) for s in _stops(request))
        reasons.append("stop")
        high += longest
    return count, count - low, count + high, tuple(reasons), text


def _writes_calls(text: str, choice: Choice) -> bool:
    """The rendering of `choice` names each of its tool calls' functions."""
    return all((call.name or "") in text for call in choice.tool_calls)


def _stops(request: Mapping[str, Any]) -> list[str]:
    """The request's stop sequences."""
    stop = request.get("stop")
    stops: Sequence[Any] = (
        [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    )
    return [s for s in stops if isinstance(s, str) and s]


def delivered(profile: Profile, request: Mapping[str, Any], result: ChatResult) -> Delivered | None:
    """Every choice of `result` rendered as the model generated it and counted (pure).

    None when there is nothing to count: no choice, a choice with tool calls that the
    template cannot render or does not write, or one whose reasoning came redacted.
    """
    if not result.choices or any(choice.redacted for choice in result.choices):
        return None
    counted = [_choice_count(profile, request, choice) for choice in result.choices]
    if any(c is None for c in counted):
        return None
    parts = [c for c in counted if c is not None]
    reasons = tuple(dict.fromkeys(r for part in parts for r in part[3]))
    return Delivered(
        tokens=sum(p[0] for p in parts),
        low=sum(p[1] for p in parts),
        high=sum(p[2] for p in parts),
        reasons=reasons,
        text=parts[0][4],
    )


def billed(result: ChatResult) -> int | None:
    """``usage.completion_tokens`` when it is a count, else None."""
    value = (result.usage or {}).get("completion_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def accounting_findings(
    found: Delivered, used: int, choices: int, attempt: str | None = None
) -> list[Finding]:
    """The bill against the delivery: ``undelivered_tokens`` or ``completion_tokens_mismatch``."""
    if found.low <= used <= found.high:
        return []
    more = used > found.high
    within = (
        "exactly"
        if found.exact
        else f"between {found.low} and {found.high} ({', '.join(found.reasons)})"
    )
    of = f" over {choices} choices" if choices > 1 else ""
    return [
        Finding(
            "undelivered_tokens" if more else "completion_tokens_mismatch",
            f"completion_tokens {used}, but the answer delivered {found.tokens} tokens{of} "
            f"rendered as the model generates them (billing must be {within}): "
            + (f"{used - found.high} more billed than delivered" if more else "billed too few"),
            "$.usage.completion_tokens",
            expected={"tokens": found.tokens, "rendered": excerpt(found.text, 400)},
            actual=used,
            attempt=attempt,
        )
    ]


# Where each API says an answer ended on its own, and how.
_ENDED = {
    "chat": ("$.choices[0].finish_reason", "finish_reason 'stop'"),
    "messages": ("$.stop_reason", "stop_reason 'end_turn'"),
    "responses": ("$.status", "status 'completed'"),
}


def _limit(request: Mapping[str, Any]) -> int | None:
    """The request's token limit, if it gives one."""
    value = request.get("max_completion_tokens", request.get("max_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _continues(request: Mapping[str, Any]) -> bool:
    """The request's conversation ends with an assistant message (a prefill)."""
    messages = request.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    return isinstance(last, Mapping) and last.get("role") == "assistant"


def _cut_unreported(
    profile: Profile,
    request: Mapping[str, Any],
    result: ChatResult,
    found: Delivered,
    used: int,
    attempt: str | None,
) -> tuple[Delivered, Finding] | None:
    """The answer cut at the limit, and ``length_not_reported``, when that is what happened.

    That is: one choice says it ended on its own (no stop sequence asked), what it delivered
    with its end token is more than the limit allowed, and its bill, within the limit, is
    the cut answer's (a bill past the limit is the limit not honoured: wire's to judge).
    A request that ends with an assistant message is left out: an engine that continues it
    may deliver the prefill with the continuation (llama-server does), so what it delivered
    is not what it generated, and an answer that ended at once looks cut.
    """
    limit = _limit(request)
    if limit is None or len(result.choices) != 1 or _stops(request) or _continues(request):
        return None
    if not used <= limit < found.low:
        return None
    choice = result.choices[0]
    if choice.finish_reason != "stop":
        return None
    cut_choice = dataclasses.replace(choice, finish_reason="length")
    cut = delivered(profile, request, dataclasses.replace(result, choices=[cut_choice]))
    if cut is None or not cut.low <= used <= cut.high:
        return None
    where, said = _ENDED.get(result.api, _ENDED["chat"])
    return cut, Finding(
        "length_not_reported",
        f"the answer says it ended on its own ({said}), but what it delivered is "
        f"{found.tokens} tokens with the end of its turn, more than the limit of {limit}: "
        f"it was cut at the limit (it billed {used})",
        where,
        expected={"limit": limit, "tokens": found.tokens},
        actual=said,
        attempt=attempt,
    )


def account(
    profile: Profile, request: Mapping[str, Any], result: ChatResult, attempt: str | None = None
) -> tuple[Delivered | None, list[Finding]]:
    """One answer's accounting: what it delivered and the findings on its bill (pure).

    No finding without evidence: an answer without usage.completion_tokens or without a
    countable choice is not accounted (its Delivered is None or its findings empty).
    """
    used = billed(result)
    found = delivered(profile, request, result)
    if found is None or used is None:
        return found, []
    unreported = _cut_unreported(profile, request, result, found, used, attempt)
    if unreported is not None:
        cut, finding = unreported
        return cut, [finding]
    return found, accounting_findings(found, used, len(result.choices), attempt)


def account_answers(
    profile: Profile, asked: Sequence[tuple[Mapping[str, Any], ChatResult]]
) -> tuple[dict[str, Any], list[Finding]]:
    """A case's answers accounted: the ``accounting`` metric and the findings (pure).

    The metric counts the answers accounted exactly, within a bound, and not at all (no
    usage, no choice, a call the template cannot render), with the tokens billed and
    delivered over those accounted.
    """
    metric = {"answers": 0, "exact": 0, "bounded": 0, "unaccounted": 0, "billed": 0, "delivered": 0}
    findings: list[Finding] = []
    for request, result in asked:
        if not result.ok:
            continue
        metric["answers"] += 1
        found, more = account(profile, request, result, result.label)
        used = billed(result)
        if found is None or used is None:
            metric["unaccounted"] += 1
            continue
        metric["exact" if found.exact else "bounded"] += 1
        metric["billed"] += used
        metric["delivered"] += found.tokens
        findings += more
    return metric, findings


def with_accounting(
    outcome: Outcome, metric: Mapping[str, Any], findings: Sequence[Finding]
) -> Outcome:
    """`outcome` with the accounting metric; its findings fail a graded case (pure).

    A case that passed fails on them; a failed case gets them after its own. A case that
    was not graded (unsupported, an error) keeps its status: the figures still show.
    """
    metrics = {**outcome.metrics, "accounting": dict(metric)}
    if not findings or outcome.status not in (Status.PASS, Status.FAIL):
        return dataclasses.replace(outcome, metrics=metrics)
    if outcome.status is Status.FAIL:
        return dataclasses.replace(
            outcome, findings=(*outcome.findings, *findings), metrics=metrics
        )
    return Outcome.from_findings(findings, metrics=metrics, evidence=outcome.evidence)
