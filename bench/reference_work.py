"""Benchmark the verifier's local reference work on a very long prompt.

What it measures, on a deterministic conversation whose rendered prompt is about ``--tokens``
tokens (a system message, then alternating user and assistant messages of mixed English prose,
CJK text, code, digits and, in some user messages, text that spells special tokens such as
``<|im_end|>`` so the special-token hygiene path is taken):

- ``profile_load``: loading the profile once (template, tiktoken BPE file, special tokens);
- ``render``: ``Profile.render`` (the sandboxed jinja chat template, with markers and spans);
- ``encode``: ``Profile.encode`` of the rendered prompt (special tokens only where the template
  put them, user text that spells them kept ordinary);
- ``prompt_ids``: ``Profile.prompt_ids``, i.e. render plus encode in one call;
- ``tiktoken_ordinary``: plain ``tiktoken.Encoding.encode_ordinary`` of the same rendered text;
- ``tiktoken_all_special``: ``tiktoken.Encoding.encode(text, allowed_special="all")``;
- ``special_scan`` (diagnostic): the regex scan for special-token text that ``encode`` does
  before it calls tiktoken.

``--content markup`` swaps the mix for mostly HTML and pasted raw chat logs (many ``<``, many
special-token spellings): the special-token scan is much slower on such text.

Each step is timed best of ``--repeat`` runs with ``time.perf_counter`` (wall) and
``time.process_time`` (CPU of this process, of the same run). The bench checks that
``prompt_ids`` equals ``encode(render(...))``, that decoding the ids gives the rendered text back,
and that no user-written special-token text was encoded as a special token.

It prints a table, then, as its last line, one JSON object for machines.

Run from the repository root, in the project's virtualenv::

    python bench/reference_work.py                      # 1,000,000 tokens, best of 3
    python bench/reference_work.py --tokens 100000 --repeat 5
    python bench/reference_work.py --content markup
    python bench/reference_work.py --profile kimi-k2:/path/to/model-folder
    python bench/reference_work.py --cprofile render    # also profile one step with cProfile
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiktoken

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verifier.errors import ConfigError  # noqa: E402
from verifier.reference.profiles import Profile, load_profile  # noqa: E402
from verifier.reference.template import Rendered  # noqa: E402
from verifier.reference.tokenizer_backends import TiktokenTokenizer, special_pattern  # noqa: E402

DEFAULT_PROFILE = "kimi-k2"
SEED = 0
# Special-token text a user may paste (chat logs, prompt-injection attempts, docs about tokens).
LOOK_ALIKES = (
    "<|im_end|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "<|im_middle|>",
    "[EOS]",
    "[BOS]",
    "<think>",
    "</think>",
    "<|tool_call_begin|>",
)

WORDS = (
    "the model endpoint returns a response with usage and the verifier counts every prompt token "
    "locally before it compares the figures that a server reports about its cache tokenizer "
    "template sampling temperature request latency stream chunk choice message content role "
    "system user assistant tool call argument schema field value number string object array "
    "because although however therefore meanwhile otherwise during after before between within "
    "quickly carefully exactly roughly rarely often never always sometimes strictly loosely "
    "Alice Bob Carol Dave Kimi Moonshot OpenAI Linux Python Rust JSON HTTP API GPU CPU"
).split()
CJK = (
    "我们在本地渲染对话模板并统计提示词的数量",
    "服务器返回的用量应当与本地计算的结果一致",
    "如果两者不同就说明模板或者分词器存在差异",
    "长文本的处理速度取决于正则表达式和合并算法",
    "今天天气很好我们去公园散步吧",
    "这段代码需要仔细检查边界条件",
    "東京と大阪の間を新幹線で移動する",
    "日本語のテキストも少し混ぜておきます",
    "한국어 문장도 조금 포함합니다",
)
CJK_PUNCT = ("，", "。", "；", "：", "！", "？")
IDENTS = ("count", "tokens", "prompt", "render", "spans", "cursor", "ids", "text", "profile")


def _prose(rng: random.Random, words: int) -> str:
    out: list[str] = []
    sentence: list[str] = []
    for _ in range(words):
        sentence.append(rng.choice(WORDS))
        if len(sentence) >= rng.randint(6, 22):
            text = " ".join(sentence)
            out.append(text[0].upper() + text[1:] + rng.choice((".", ".", ".", "?", "!", ";")))
            sentence = []
    if sentence:
        out.append(" ".join(sentence) + ".")
    return " ".join(out)


def _cjk(rng: random.Random, sentences: int) -> str:
    return "".join(rng.choice(CJK) + rng.choice(CJK_PUNCT) for _ in range(sentences))


def _code(rng: random.Random, lines: int) -> str:
    body = []
    for index in range(lines):
        a, b = rng.choice(IDENTS), rng.choice(IDENTS)
        indent = "    " * rng.randint(1, 3)
        kind = rng.randrange(4)
        if kind == 0:
            body.append(f"{indent}{a}_{index} = {b}[{rng.randint(0, 999)}] + {rng.random():.6f}")
        elif kind == 1:
            body.append(f"{indent}if {a} is not None and len({b}) > {rng.randint(1, 99)}:")
        elif kind == 2:
            body.append(f'{indent}log.info("{a}=%s {b}=%d", {a}, {rng.randint(0, 10**6)})')
        else:
            body.append(f"{indent}return {{'{a}': {b}, 'n': {rng.randint(-500, 500)}}}")
    name = f"{rng.choice(IDENTS)}_{rng.randint(0, 9999)}"
    return f"```python\ndef {name}(self, {rng.choice(IDENTS)}):\n" + "\n".join(body) + "\n```"


def _digits(rng: random.Random, rows: int) -> str:
    lines = ["| id | date | amount | ratio |", "|---|---|---|---|"]
    for _ in range(rows):
        lines.append(
            f"| {rng.randint(10**5, 10**9)} | 20{rng.randint(10, 29)}-{rng.randint(1, 12):02d}-"
            f"{rng.randint(1, 28):02d} | {rng.randint(0, 10**7):,} | {rng.random():.4f} |"
        )
    return "\n".join(lines)


def _html(rng: random.Random, items: int) -> str:
    rows = []
    for index in range(items):
        tag = rng.choice(("li", "td", "span", "p"))
        words = _prose(rng, rng.randint(2, 12))
        rows.append(
            f'  <{tag} class="c{rng.randint(0, 99)}" data-i="{index}">{words} '
            f'<a href="/doc/{rng.randint(0, 9999)}#s{index}">ref</a> <b>{rng.randint(0, 999)}</b>'
            f"</{tag}>"
        )
    return f'<div id="d{rng.randint(0, 10**6)}">\n' + "\n".join(rows) + "\n</div>"


def _chat_log(rng: random.Random, turns: int) -> str:
    """A pasted raw transcript: special-token text in user content, many times over."""
    return "".join(
        f"<|im_user|>user<|im_middle|>{_prose(rng, rng.randint(3, 15))}<|im_end|>"
        f"<|im_assistant|>assistant<|im_middle|>{_prose(rng, rng.randint(3, 25))}<|im_end|>"
        for _ in range(turns)
    )


# Block kinds and their weights, per --content.
MIXES: dict[str, dict[str, int]] = {
    "mixed": {"prose": 55, "cjk": 15, "code": 20, "digits": 10},
    "markup": {"html": 50, "chat_log": 10, "prose": 20, "cjk": 10, "code": 10},
}


def _block(rng: random.Random, mix: dict[str, int]) -> str:
    kind = rng.choices(list(mix), weights=list(mix.values()))[0]
    if kind == "prose":
        return _prose(rng, rng.randint(40, 220))
    if kind == "cjk":
        return _cjk(rng, rng.randint(3, 20))
    if kind == "code":
        return _code(rng, rng.randint(4, 30))
    if kind == "html":
        return _html(rng, rng.randint(3, 20))
    if kind == "chat_log":
        return _chat_log(rng, rng.randint(1, 6))
    return _digits(rng, rng.randint(3, 15))


def _content(rng: random.Random, mix: dict[str, int], blocks: int, look_alikes: int) -> str:
    parts = [_block(rng, mix) for _ in range(blocks)]
    for _ in range(look_alikes):
        at = rng.randrange(len(parts))
        parts[at] = f"{parts[at]} {rng.choice(LOOK_ALIKES)} "
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Conversation:
    """The generated conversation and what was put in it."""

    messages: list[dict[str, Any]]
    look_alikes: int


def build_conversation(
    profile: Profile, tokens: int, content: str = "mixed", seed: int = SEED
) -> Conversation:
    """A deterministic conversation whose rendered prompt is about `tokens` tokens.

    Message sizes and contents come from ``random.Random(seed)``; messages are added until
    the ordinary token count of their contents (plus a per-message allowance for the
    template's headers) reaches `tokens`. The first user message is a long document (about a
    quarter of the prompt), as a very long prompt usually carries one. `content` names the
    mix of block kinds (:data:`MIXES`).
    """
    rng = random.Random(seed)
    mix = MIXES[content]
    count = profile.tokenizer.encode_ordinary
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": _prose(rng, 120) + "\n\n" + _cjk(rng, 4)}
    ]
    total = len(count(messages[0]["content"])) + 8
    document_blocks = max(1, tokens // 4 // 170)
    while total < tokens:
        user = len(messages) % 2 == 1
        if len(messages) == 1:
            blocks, look_alikes = document_blocks, 5
        elif user:
            blocks, look_alikes = rng.randint(2, 14), rng.choice((0, 0, 0, 1, 2, 3))
        else:
            blocks, look_alikes = rng.randint(1, 6), 0
        text = _content(rng, mix, blocks, look_alikes)
        messages.append({"role": "user" if user else "assistant", "content": text})
        total += len(count(text)) + 8
    if messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": "Summarise the conversation above."})
    # Counted by plain substring search, independently of the code under test.
    planted = sum(m["content"].count(token) for m in messages for token in LOOK_ALIKES)
    return Conversation(messages, planted)


@dataclass(frozen=True)
class Timing:
    """Best-of-repeat wall time and the CPU time of that run."""

    wall: float
    cpu: float


def best_of(repeat: int, step: Callable[[], Any]) -> tuple[Timing, Any]:
    """Run `step` `repeat` times; the fastest run's timing and the last result."""
    best: Timing | None = None
    result: Any = None
    for _ in range(repeat):
        result = None  # let the previous result go before the next run
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        result = step()
        timing = Timing(time.perf_counter() - wall, time.process_time() - cpu)
        if best is None or timing.wall < best.wall:
            best = timing
    assert best is not None
    return best, result


def check(
    profile: Profile,
    encoding: tiktoken.Encoding,
    conversation: Conversation,
    rendered: Rendered,
    ids: list[int],
) -> None:
    """Assert that the reference path is consistent and that hygiene held."""
    assert ids == profile.encode(profile.render(conversation.messages)), "prompt_ids != encode"
    assert profile.tokenizer.decode(ids) == rendered.text, "decode(ids) != rendered text"
    specials = set(profile.tokenizer.special_tokens.values())
    inserted = sum(1 for i in ids if i in specials)
    spelled = sum(1 for i in encoding.encode(rendered.text, allowed_special="all") if i in specials)
    # Every look-alike planted in user text must have stayed ordinary.
    assert spelled - inserted == conversation.look_alikes, (spelled, inserted)
    for start, end in rendered.spans:
        piece = rendered.text[start:end]
        assert any(token in piece for token in LOOK_ALIKES), piece[:80]


def run_cprofile(step: Callable[[], Any], label: str, top: int) -> None:
    """Profile one run of `step` and print the top functions by cumulative and own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    step()
    profiler.disable()
    for order in ("cumulative", "tottime"):
        print(f"\n--- cProfile of {label}, by {order} ---")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats(order).print_stats(top)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000, help="prompt size (about)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per step; the best counts")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help="NAME:PATH or PATH")
    parser.add_argument(
        "--content",
        choices=tuple(MIXES),
        default="mixed",
        help="mixed: prose, CJK, code, digits; markup: mostly HTML and pasted raw chat logs",
    )
    parser.add_argument(
        "--cprofile",
        choices=("render", "encode", "prompt_ids"),
        help="also run one step under cProfile and print where its time goes",
    )
    parser.add_argument("--top", type=int, default=15, help="functions shown by --cprofile")
    args = parser.parse_args(argv)
    if args.tokens < 1 or args.repeat < 1:
        parser.error("--tokens and --repeat must be positive")

    started = time.perf_counter()
    try:
        profile = load_profile(args.profile)
    except ConfigError as exc:
        parser.error(str(exc))
    profile_load = time.perf_counter() - started
    if not isinstance(profile.tokenizer, TiktokenTokenizer):
        parser.error(f"--profile: {profile.root} has no tiktoken tokenizer (tiktoken.model)")
    encoding = profile.tokenizer._encoding

    conversation = build_conversation(profile, args.tokens, args.content)
    messages = conversation.messages

    timings: dict[str, Timing] = {}
    timings["render"], rendered = best_of(args.repeat, lambda: profile.render(messages))
    text = rendered.text
    timings["encode"], encoded = best_of(args.repeat, lambda: profile.encode(rendered))
    timings["prompt_ids"], ids = best_of(args.repeat, lambda: profile.prompt_ids(messages))
    timings["tiktoken_ordinary"], ordinary = best_of(
        args.repeat, lambda: encoding.encode_ordinary(text)
    )
    timings["tiktoken_all_special"], all_special = best_of(
        args.repeat, lambda: encoding.encode(text, allowed_special="all")
    )
    # Diagnostic: the scan for special-token text that the hygiene does (a private helper).
    special = special_pattern(tuple(profile.tokenizer.special_tokens))
    timings["special_scan"], _ = best_of(args.repeat, lambda: list(special.finditer(text)))
    assert encoded == ids
    check(profile, encoding, conversation, rendered, ids)

    tokens = len(ids)
    ratio = timings["prompt_ids"].wall / timings["tiktoken_ordinary"].wall
    print(
        f"reference_work: profile {profile.name} ({profile.tokenizer.name}), "
        f"{args.content} content, {len(messages)} messages, {len(text):,} characters, "
        f"{tokens:,} tokens "
        f"({len(ordinary):,} with encode_ordinary, {len(all_special):,} with all specials), "
        f"{len(rendered.spans)} protected spans, {conversation.look_alikes} look-alikes; "
        f"best of {args.repeat}"
    )
    print(f"profile load: {profile_load:.3f} s")
    print(f"{'step':<22} {'wall s':>9} {'cpu s':>9} {'tokens/s':>12} {'x tiktoken':>11}")
    base = timings["tiktoken_ordinary"].wall
    for name, timing in timings.items():
        print(
            f"{name:<22} {timing.wall:>9.3f} {timing.cpu:>9.3f} "
            f"{tokens / timing.wall:>12,.0f} {timing.wall / base:>11.2f}"
        )
    print(f"ratio prompt_ids / tiktoken_ordinary: {ratio:.2f}")

    if args.cprofile:
        steps: dict[str, Callable[[], Any]] = {
            "render": lambda: profile.render(messages),
            "encode": lambda: profile.encode(rendered),
            "prompt_ids": lambda: profile.prompt_ids(messages),
        }
        run_cprofile(steps[args.cprofile], args.cprofile, args.top)

    record = {
        "bench": "reference_work",
        "tokens": tokens,
        "content": args.content,
        "messages": len(messages),
        "characters": len(text),
        "repeat": args.repeat,
        **{f"{name}_s": round(timing.wall, 4) for name, timing in timings.items()},
        **{f"{name}_cpu_s": round(timing.cpu, 4) for name, timing in timings.items()},
        "ratio": round(ratio, 3),
        "profile_load_s": round(profile_load, 4),
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
