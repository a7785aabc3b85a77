"""Speed and spend, from the transcript: what each family's requests took and cost (pure).

Every attempt the client made is a transcript record with its latency, and an answered one
with when its headers and (streamed) the chunks that carry a token arrived (``timing``, see
:func:`verifier.endpoint.client.timing_record`; the stream accumulator decides which chunks
carry one). From those:

- **time to first token** (TTFT): a streamed answer's first chunk that carries a token
  (content, reasoning or a tool call's piece); the first reasoning token's time apart.
  Non-stream answers give no TTFT (their first byte is their last);
- **inter-token latency**: the gaps between consecutive token-carrying chunks of a stream;
- **output tokens/s**: a stream's decode rate, ``(completion_tokens - 1)`` over the time from
  its first to its last token (``usage``, else one token a chunk);
- **end-to-end latency** of every answered request;
- **error and retry rates**: requests whose last attempt was still a fault, attempts that
  were retried;
- **tokens spent** (prompt, cached prompt, completion, reasoning) from every answer's
  ``usage``, and their cost at ``--price``; with a profile, also the tokens **delivered**: the
  profile tokenizer's count of the text the answers carried (content, reasoning, tool calls'
  names and arguments), beside what usage bills (special tokens such as end-of-turn and
  tool-call markers are billed but not delivered, so ``completion`` is a little above it);
- with ``--load``, the same per concurrency level of the load probe, with the level's
  throughput (completion tokens over the level's span) and the knee (:func:`load_curve`).
  The load probe's requests count in no family and not in the overall figures.

Percentiles are nearest-rank with a distribution-free 95% interval
(:func:`verifier.stats.quantile_interval`). The figures hold at the run's concurrency and
corpus only; the reference deployment's requests (``target: reference``) are not counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..endpoint.client import fault_end
from ..protocol.answers import ChatResult
from ..protocol.apis import ROUTES, protocol_of
from ..protocol.labels import Label
from ..stats import quantile_interval, rate

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def _api(record: Mapping[str, Any]) -> str:
    """The API whose route the record's request went to (chat completions otherwise)."""
    path = urlsplit(str(record.get("url") or "")).path
    return next((api for api, route in ROUTES.items() if path.endswith(route)), "chat")


def read(record: Mapping[str, Any]) -> ChatResult:
    """The record's answer, read again by its API's own parser: chat-shaped usage and choices.

    Messages' and Responses' usage name their counts otherwise (``input_tokens``, the cache's
    reads apart); read as chat's, their tokens would not be counted at all.
    """
    status = record.get("status")
    return protocol_of(_api(record)).read_recorded(
        record.get("response"),
        status=status if isinstance(status, int) else 0,
        stream=bool(record.get("stream")),
    )


def _count(usage: Mapping[str, Any] | None, *path: str) -> int:
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def delivered_texts(result: ChatResult) -> list[str]:
    """The texts an answer (:func:`read`) delivered, each to be counted in tokens as a whole.

    Per choice: its content, its reasoning and each tool call's name and arguments, as the
    one stream accumulator joins a stream's pieces (a token split across chunks counts once).
    """
    texts = []
    for choice in result.choices:
        texts += [choice.content or "", choice.reasoning or ""]
        texts += [(call.name or "") + (call.arguments or "") for call in choice.tool_calls]
    return [text for text in texts if text]


class _Tally:
    """The figures of a group of requests (a family's, a load level's, all), as they are read."""

    def __init__(self, count_tokens: Callable[[str], int] | None = None) -> None:
        self.count_tokens = count_tokens
        self.attempts = 0
        self.retried = 0
        self.gave_up = 0
        self.ttft: list[float] = []
        self.first_reasoning: list[float] = []
        self.gaps: list[float] = []
        self.tps: list[float] = []
        self.e2e: list[float] = []
        kinds = ("prompt", "cached", "completion", "reasoning")
        self.tokens = dict.fromkeys((*kinds, "delivered") if count_tokens else kinds, 0)
        # When the first attempt started and the last ended (epoch seconds).
        self.span: list[float] = []

    def add(self, record: Mapping[str, Any]) -> None:
        self.attempts += 1
        _extend(self.span, record)
        end = fault_end(record)
        if end == "retried":
            self.retried += 1
        elif end == "gave_up":
            self.gave_up += 1
        status = record.get("status")
        if not isinstance(status, int) or not 200 <= status < 300 or record.get("fault"):
            return
        if isinstance(record.get("latency_ms"), int | float):
            self.e2e.append(float(record["latency_ms"]))
        result = read(record)
        usage = result.usage
        self.tokens["prompt"] += _count(usage, "prompt_tokens")
        self.tokens["cached"] += _count(usage, "prompt_tokens_details", "cached_tokens")
        self.tokens["completion"] += _count(usage, "completion_tokens")
        self.tokens["reasoning"] += _count(usage, "completion_tokens_details", "reasoning_tokens")
        if self.count_tokens is not None:
            self.tokens["delivered"] += sum(map(self.count_tokens, delivered_texts(result)))
        timing = record.get("timing") or {}
        if isinstance(timing.get("first_reasoning_ms"), int | float):
            self.first_reasoning.append(float(timing["first_reasoning_ms"]))
        times = timing.get("tokens_ms")
        if record.get("stream") and isinstance(times, list) and times:
            self._stream(times, _count(usage, "completion_tokens"))

    def _stream(self, times: Sequence[float], completion: int) -> None:
        """A stream's token-chunk arrivals (ms): its TTFT, its gaps, its decode rate."""
        self.ttft.append(times[0])
        self.gaps += [b - a for a, b in zip(times, times[1:], strict=False)]
        tokens = completion or len(times)
        if tokens > 1 and times[-1] > times[0]:
            self.tps.append((tokens - 1) / ((times[-1] - times[0]) / 1000))

    def merge(self, other: _Tally) -> None:
        for name in ("attempts", "retried", "gave_up"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("ttft", "first_reasoning", "gaps", "tps", "e2e"):
            getattr(self, name).extend(getattr(other, name))
        for key, value in other.tokens.items():
            self.tokens[key] = self.tokens.get(key, 0) + value

    def summary(self, prices: Mapping[str, float] | None) -> dict[str, Any]:
        requests = self.attempts - self.retried
        found: dict[str, Any] = {
            "requests": requests,
            "streamed": len(self.ttft),
            "ttft_ms": _quantiles(self.ttft),
            "first_reasoning_ms": _quantiles(self.first_reasoning),
            "inter_token_ms": _quantiles(self.gaps),
            "output_tokens_per_second": _quantiles(self.tps),
            "e2e_ms": _quantiles(self.e2e),
            "error_rate": rate(self.gave_up, requests),
            "retry_rate": rate(self.retried, self.attempts),
            "tokens": dict(self.tokens),
        }
        if prices is not None:
            found["cost_usd"] = cost(self.tokens, prices)
        return found


def _extend(span: list[float], record: Mapping[str, Any]) -> None:
    """Widen `span` ([first start, last end]) to take in the attempt `record`."""
    try:
        start = datetime.fromisoformat(str(record.get("time"))).timestamp()
    except ValueError:
        return
    latency = record.get("latency_ms")
    end = start + (float(latency) / 1000 if isinstance(latency, int | float) else 0.0)
    if not span:
        span.extend((start, end))
    else:
        span[0], span[1] = min(span[0], start), max(span[1], end)


def load_curve(levels: Mapping[int, _Tally]) -> dict[str, Any]:
    """The load probe's figures per concurrency level, and the knee where latency rises.

    The knee is the first level whose TTFT p50 is more than twice the lowest level's (None
    when none is, or a level has no TTFT).
    """
    rows = []
    for level in sorted(levels):
        figures = levels[level]
        row = {"concurrency": level, **figures.summary(None)}
        span = figures.span[1] - figures.span[0] if figures.span else 0.0
        row["throughput_tokens_per_second"] = (
            round(figures.tokens["completion"] / span, 2) if span > 0 else None
        )
        rows.append(row)
    knee = None
    if rows and all(r["ttft_ms"] for r in rows):
        ttfts = [float(r["ttft_ms"]["p50"]["value"]) for r in rows]
        knee = next(
            (r["concurrency"] for r, t in zip(rows, ttfts, strict=True) if t > 2 * ttfts[0]), None
        )
    return {
        "levels": rows,
        "knee": knee,
        "knee_rule": "the first level whose TTFT p50 is more than twice the lowest level's",
    }


def _quantiles(values: Sequence[float]) -> dict[str, Any] | None:
    """p50, p90 and p99 of `values`, each with its interval; None for none."""
    if not values:
        return None
    found: dict[str, Any] = {"n": len(values)}
    for name, q in QUANTILES:
        point, low, high = quantile_interval(values, q) or (None, None, None)
        found[name] = {"value": _round(point), "interval": [_round(low), _round(high)]}
    return found


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def cost(tokens: Mapping[str, int], prices: Mapping[str, float]) -> float:
    """What `tokens` cost at `prices` (USD per million): cached prompt tokens at their price."""
    cached = tokens["cached"] if "cached" in prices else 0
    spent = (
        (tokens["prompt"] - cached) * prices["input"]
        + cached * prices.get("cached", 0.0)
        + tokens["completion"] * prices["output"]
    )
    return round(spent / 1e6, 6)


def measure(
    records: Iterable[Mapping[str, Any]],
    families: Sequence[str],
    *,
    concurrency: int,
    prices: Mapping[str, float] | None = None,
    tokenizer: tuple[str, Callable[[str], int]] | None = None,
) -> dict[str, Any]:
    """The performance section: per family and overall (see the module).

    Args:
        records: the endpoint's transcript records (:func:`.provenance.endpoint_records`):
            the reference deployment's requests do not count.
        families: the run's families; the probe's requests count in the overall figures.
        concurrency: the cases in flight at once per process (the figures hold at it).
        prices: USD per million tokens, when given.
        tokenizer: the profile tokenizer's name and a function counting the tokens of a
            text, when there is a profile: the tokens delivered are counted with it.
    """
    count = tokenizer[1] if tokenizer else None
    by_family: dict[str, _Tally] = defaultdict(lambda: _Tally(count))
    by_level: dict[int, _Tally] = defaultdict(lambda: _Tally(count))
    for record in records:
        label = Label.parse(str(record.get("label", "")))
        level = label.load_level
        if level is not None:
            by_level[level].add(record)
            continue
        by_family[label.group].add(record)
    overall = _Tally(count)
    for figures in by_family.values():
        overall.merge(figures)
    section: dict[str, Any] = {
        "concurrency": concurrency,
        "comparable": "only with runs of the same corpus at the same concurrency",
        "overall": overall.summary(prices),
        "families": {n: by_family[n].summary(prices) for n in families if n in by_family},
    }
    if by_level:
        section["load"] = load_curve(by_level)
    if prices is not None:
        section["prices_usd_per_mtok"] = dict(prices)
    if tokenizer is not None:
        section["delivered_counted_with"] = tokenizer[0]
    return section
