"""Vision: images reach the model, in order, in every format, fresh, priced by the rule.

Images are made locally with Pillow (verifier/reference/images.py). Codes:

- ``answer_mismatch``: the answer does not name what an image shows (a solid colour, a
  large digit: what any vision model gets right, so a miss means the image did not
  arrive as sent); ``image_order_swapped``, ``only_first_image_used`` (later images
  described as the first), ``stale_image_cache`` (the second of two requests with the
  same text but another image got the first image's answer), ``format_not_seen`` (the
  image is seen as PNG but not in another format or detail);
- ``image_tokens_mismatch``: prompt_tokens with the image minus without it differs from
  the profile's image-token rule (without a rule: is not above 0);
  ``image_tokens_inconsistent``: the same image twice does not cost twice, or PNG and
  JPEG of the same pixels cost differently;
- ``invalid_image_accepted`` (200), ``invalid_image_5xx``, ``invalid_image_hang`` (no
  answer at all), ``error_shape``: a broken image,
  a zero-size or oversized one, or a ``file://``/``ftp://`` URL must get a 4xx with an
  error object. A text-only endpoint must refuse images the same way;
- ``image_5xx``: a valid image got a server error (a 4xx instead makes the case
  unsupported: the endpoint says it does not take that image).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..cases.rotation import vision_case
from ..errors import EndpointTimeout
from ..outcome import CaseRecord, Finding, Outcome
from ..protocol.answers import ChatResult
from ..protocol.apis import API_NAMES
from ..protocol.requests import Chat, Exchange
from ..reference.image_tokens import image_tokens
from ..reference.images import image_part, invalid_part
from .registry import QUICK, family
from .support.common import agreement, excerpt, hang_finding, rejection_findings, unsupported
from .support.evidence import NO_PROMPT_TOKENS, Malformed, counted, evidence_findings, prompt_tokens
from .support.shapes import shape_findings
from .support.subchecks import (
    FindingsOnly,
    SubCheck,
    Unsupported,
    counting_requests,
    run_checks,
    status_counts,
)

if TYPE_CHECKING:
    from ..cases.corpus import Case
    from .registry import RunContext

DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_WORDS = re.compile(r"[a-z0-9]+")


def words(text: str | None) -> list[str]:
    """The answer's words, lowercased (digit words become digits)."""
    found = _WORDS.findall((text or "").lower())
    return [str(DIGIT_WORDS.index(w)) if w in DIGIT_WORDS else w for w in found]


def mentions(answer: Sequence[str], acceptable: Sequence[str]) -> list[int]:
    """Positions in the answer's words of any acceptable answer."""
    wanted = {w for a in acceptable for w in words(a)}
    return [i for i, w in enumerate(answer) if w in wanted]


def answer_findings(
    content: str | None, expect: Sequence[Sequence[str]], attempt: str = ""
) -> list[Finding]:
    """Does the answer name each image's content, in order? Names the defect when it can (pure)."""
    answer = words(content)
    hits = [mentions(answer, e) for e in expect]
    if all(hits) and all(hits[i][0] < hits[i + 1][-1] for i in range(len(hits) - 1)):
        return []
    shown = excerpt(content, 120)
    if (
        len(expect) > 1
        and all(hits)
        and [h[0] for h in hits] == sorted((h[0] for h in hits), reverse=True)
    ):
        return [
            Finding(
                "image_order_swapped",
                f"the answer names the images in reverse order: {shown!r}",
                expected=[list(e) for e in expect],
                actual=shown,
                attempt=attempt,
            )
        ]
    if len(expect) > 1 and hits[0] and not any(hits[1:]) and len(hits[0]) >= len(expect):
        return [
            Finding(
                "only_first_image_used",
                f"every image is described as the first: {shown!r}",
                expected=[list(e) for e in expect],
                actual=shown,
                attempt=attempt,
            )
        ]
    missing = [i + 1 for i, h in enumerate(hits) if not h]
    what = f"image(s) {missing} not named" if missing else "images named out of order"
    return [
        Finding(
            "answer_mismatch",
            f"{what}: {shown!r}",
            expected=[list(e) for e in expect],
            actual=shown,
            attempt=attempt,
        )
    ]


def content_parts(
    case_data: Mapping[str, Any], images: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Text before, the images with the text between them, the question after."""
    parts: list[Mapping[str, Any]] = []
    if case_data.get("before"):
        parts.append({"type": "text", "text": case_data["before"]})
    between = case_data.get("between", [])
    for index, image in enumerate(images):
        parts.append(image)
        if index < len(images) - 1 and index < len(between):
            parts.append({"type": "text", "text": between[index]})
    parts.append({"type": "text", "text": case_data["question"]})
    return parts


def _chat(ctx: RunContext, parts: Sequence[Mapping[str, Any]], name: str) -> Chat:
    images = sum(part.get("type") == "image_url" for part in parts)
    # Room to name every image, a sentence each.
    budget = 64 + 32 * images
    request = ctx.request(messages=[{"role": "user", "content": parts}], max_tokens=budget)
    return Chat(request, name, keep_persistent_5xx=True)


def _text_only_count(case: Case, ctx: RunContext) -> Generator[Chat, ChatResult, int | None]:
    request = ctx.request(
        messages=[{"role": "user", "content": [{"type": "text", "text": case.data["question"]}]}],
        max_tokens=1,
    )
    result = yield Chat(request, "no-image")
    return counted(result, "no-image") if result.ok else None


class _Refused(Exception):
    """A valid image was not answered: a 4xx says the endpoint does not take it, a 5xx fails."""

    def __init__(self, result: ChatResult, what: str) -> None:
        super().__init__(what)
        self.result = result
        self.what = what


def _answered(result: ChatResult, what: str = "a valid image") -> str | None:
    if not result.ok:
        raise _Refused(result, what)
    broken = evidence_findings(result, result.label)
    if broken:
        raise Malformed(broken)
    return result.choice.content if result.choice else None


def _run_semantic(case: Case, ctx: RunContext) -> FindingsOnly:
    images = [image_part(spec) for spec in case.data["images"]]
    content = _answered((yield _chat(ctx, content_parts(case.data, images), "semantic")))
    return answer_findings(content, case.data["expect"], "semantic")


def _run_stale_cache(case: Case, ctx: RunContext) -> FindingsOnly:
    findings: list[Finding] = []
    answers = []
    for index, spec in enumerate(case.data["images"]):
        content = _answered(
            (yield _chat(ctx, content_parts(case.data, [image_part(spec)]), f"image-{index + 1}"))
        )
        answers.append(content)
    first, second = case.data["expect"][:2]
    seen = [words(a) for a in answers]
    if mentions(seen[1], first) and not mentions(seen[1], second):
        findings.append(
            Finding(
                "stale_image_cache",
                f"the second image got the first image's answer: {excerpt(answers[1], 80)!r}",
                expected=list(second),
                actual=answers[1],
            )
        )
    else:
        for index, (answer, expect) in enumerate(zip(answers, case.data["expect"], strict=False)):
            findings += answer_findings(answer, [expect], f"image-{index + 1}")
    return findings


def _run_transport(case: Case, ctx: RunContext) -> FindingsOnly:
    spec = case.data["images"][0]
    plain = {k: v for k, v in spec.items() if k not in ("format", "detail")}
    reference = _answered((yield _chat(ctx, content_parts(case.data, [image_part(plain)]), "png")))
    label = "/".join(str(spec[k]) for k in ("format", "detail") if k in spec)
    variant = _answered(
        (yield _chat(ctx, content_parts(case.data, [image_part(spec)]), label)),
        f"the image as {label}",
    )
    if answer_findings(reference, case.data["expect"]):
        return answer_findings(reference, case.data["expect"], "png")
    if answer_findings(variant, case.data["expect"]):
        return [
            Finding(
                "format_not_seen",
                f"the image is seen as PNG but not as {label}: {excerpt(variant, 80)!r}",
                expected=list(case.data["expect"][0]),
                actual=variant,
                attempt=label,
            )
        ]
    return []


def _image_cost(
    case: Case, ctx: RunContext, parts: Sequence[Mapping[str, Any]], name: str
) -> Generator[Chat, ChatResult, int]:
    base = yield from _text_only_count(case, ctx)
    result = yield _chat(ctx, parts, name)
    _answered(result)
    count = prompt_tokens(result)
    if base is None or count is None:
        raise Unsupported(NO_PROMPT_TOKENS, {"requests": len(ctx.observed)})
    return count - base


def _run_tokens(case: Case, ctx: RunContext) -> FindingsOnly:
    rule = (ctx.profile.policies.images if ctx.profile else None) or {}
    spec = case.data["images"][0]
    width, height = spec.get("size", [64, 64])
    cost = yield from _image_cost(
        case, ctx, content_parts(case.data, [image_part(spec)]), "with-image"
    )
    if "rule" not in rule:
        # Without the model's rule, what any rule says: an image costs prompt tokens.
        if cost > 0:
            return []
        return [
            Finding(
                "image_tokens_mismatch",
                f"a {width}x{height} image costs {cost} prompt tokens: it never reached the "
                "prompt (the profile declares no image-token rule to say how many it should)",
                "$.usage.prompt_tokens",
                expected="more than 0",
                actual=cost,
            )
        ]
    expected = image_tokens(width, height, rule)
    if cost == expected:
        return []
    return [
        Finding(
            "image_tokens_mismatch",
            f"a {width}x{height} image ({spec.get('detail', 'no detail')}) "
            f"costs {cost} prompt tokens, the {rule['rule']} rule says {expected}",
            "$.usage.prompt_tokens",
            expected=expected,
            actual=cost,
        )
    ]


def _run_consistency(case: Case, ctx: RunContext) -> FindingsOnly:
    spec = case.data["images"][0]
    if case.data["consistency"] == "twice":
        once = yield from _image_cost(
            case, ctx, content_parts(case.data, [image_part(spec)]), "once"
        )
        twice = yield from _image_cost(
            case, ctx, content_parts(case.data, [image_part(spec)] * 2), "twice"
        )
        if twice == 2 * once:
            return []
        return [
            Finding(
                "image_tokens_inconsistent",
                f"one image costs {once} tokens, the same image twice costs {twice}",
                expected=2 * once,
                actual=twice,
            )
        ]
    png = yield from _image_cost(
        case, ctx, content_parts(case.data, [image_part({**spec, "format": "png"})]), "png"
    )
    jpeg = yield from _image_cost(
        case, ctx, content_parts(case.data, [image_part({**spec, "format": "jpeg"})]), "jpeg"
    )
    if png == jpeg:
        return []
    return [
        Finding(
            "image_tokens_inconsistent",
            f"the same pixels cost {png} tokens as PNG and {jpeg} as JPEG",
            expected=png,
            actual=jpeg,
        )
    ]


def _run_invalid(case: Case, ctx: RunContext) -> FindingsOnly:
    kind = case.data["invalid"]
    limit = (ctx.profile.policies.images or {}).get("max_side") if ctx.profile else None
    if kind == "oversize" and limit is None:
        raise Unsupported("the profile documents no image size limit")
    part = invalid_part(kind, max_side=limit)
    try:
        result = yield _chat(ctx, content_parts(case.data, [part]), kind)
    except EndpointTimeout as exc:
        return [hang_finding(exc, f"an invalid image ({kind})", "invalid_image")]
    wrong = rejection_findings(result, f"an invalid image ({kind})", "invalid_image", kind)
    if wrong:
        return wrong
    return shape_findings(result, kind)


# The checks whose probes have a known answer (compared with a baseline's).
ANSWERED = ("semantic", "stale_cache", "transport")
RUNS: dict[str, SubCheck] = {
    "semantic": counting_requests(_run_semantic),
    "stale_cache": counting_requests(_run_stale_cache),
    "transport": counting_requests(_run_transport),
    "tokens": counting_requests(_run_tokens),
    "consistency": counting_requests(_run_consistency),
    "invalid": counting_requests(_run_invalid),
}


def summarize(records: Iterable[CaseRecord], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Cases by status per check; probe results, and their agreement with a baseline's (pure)."""
    records = list(records)
    answers: dict[str, str | None] = {}
    for record in records:
        check = record.outcome.metrics.get("check", "?")
        if check in ANSWERED and record.status in ("pass", "fail"):
            result = "pass" if record.status == "pass" else record.outcome.code
            answers[record.id] = result
    summary: dict[str, Any] = {"checks": status_counts(records), "answers": answers}
    if baseline is not None:
        summary["baseline"] = agreement(answers, baseline.get("metrics", {}).get("answers", {}))
    return summary


# The requests each check sends (stale_cache: one per image; invalid: refused at once).
REQUESTS = {"semantic": 1, "transport": 2, "tokens": 2, "consistency": 4, "invalid": QUICK}
# Making, sending and decoding a megapixel takes about a tenth of a generated answer's time
# (the simulated vendor answers a 4096x4096 picture in 2.5 times a plain request's 200 ms).
PER_MEGAPIXEL = 0.1


def megapixels(case: Case) -> float:
    """The pixels of a case's images, in millions."""
    sizes: Iterable[Sequence[int]] = (
        image.get("size", [64, 64]) for image in case.data.get("images", [])
    )
    return sum(width * height for width, height in sizes) / 1e6


def cost(case: Case) -> float:
    """The check's requests, and more for large images."""
    check = case.data["check"]
    requests = len(case.data["images"]) if check == "stale_cache" else REQUESTS[check]
    return requests + PER_MEGAPIXEL * megapixels(case)


def prepare(case: Case) -> None:
    """Make the case's images (kept by :func:`~verifier.reference.images.image_part`'s cache)."""
    for spec in case.data.get("images", []):
        image_part(spec)


def _refused_outcome(refused: _Refused, metrics: dict[str, Any]) -> Outcome:
    """A valid image not answered: a 4xx says images are unsupported, a 5xx is a finding."""
    result, error = refused.result, refused.result.error_object or {}
    said = f"HTTP {result.status}: {error.get('message', '')!s:.160}"
    if result.status < 500:
        return unsupported(f"{refused.what} was rejected with {said}", metrics)
    finding = Finding(
        "image_5xx",
        f"{refused.what} got a server error, {said}",
        expected="200, or a 4xx if images are not supported",
        actual=result.status,
    )
    return Outcome.from_findings([finding], metrics=metrics)


@family(
    "vision",
    summarize=summarize,
    cost=cost,
    prepare=prepare,
    needs=lambda run: ("images",),
    apis=API_NAMES,
    rotate=vision_case,
)
def run(case: Case, ctx: RunContext) -> Exchange:
    """Images seen in order and every format, fresh, priced by the rule; bad images refused."""
    check = case.data["check"]
    if ctx.vision is False and check != "invalid":
        return unsupported(
            "the endpoint does not take images (it refused one with a 4xx)",
            {"check": check, "requests": 0},
        )
    try:
        return (yield from run_checks(case, ctx, RUNS))
    except _Refused as refused:
        return _refused_outcome(refused, {"check": check, "requests": len(ctx.observed)})
