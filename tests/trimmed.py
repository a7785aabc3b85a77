"""The trimmed corpus the real-model runs use, and why.

A real model (SmolLM2-135M on 2 CPU cores, about 30 generated and 45 prompt tokens a second
on one thread) writes every answer it is asked for: a tool-calling or structured-output case
costs several seconds per request where the tiny Kimi test model costs milliseconds. The
families whose requests are one token (chat_template, tokenizer) or short (wire) run whole,
but for the three near-limit tokenizer texts: 3,000 to 6,000 characters each, over a minute
of prompt processing apiece, at the edge of the request timeout on a loaded machine (one
timed out in CI), and the Kimi runs already send them through llama.cpp's tokenizer path.
The families that generate run the first cases of every corpus file, so every category stays
represented. Whole-corpus runs against the real model prove nothing more about the serving
layer than these do: the same request paths, parsers and grammars answer them. The context
family is not in the selection: it runs on its own against servers at smaller windows (2,048
and 4,096 tokens), where its longest prompts cost a real model seconds, not minutes.
"""

from __future__ import annotations

from collections import defaultdict

from verifier.cases.corpus import load_corpus

# Reasoning runs whole too: a GGUF profile states no thinking dialect, so each of its cases is
# unsupported at once, without a request.
WHOLE = ("chat_template", "tokenizer", "wire", "reasoning")
# Left out of the whole families (a -k keyword: every case id containing it).
LEFT_OUT = "near_limit"
# Cases kept from each corpus file of the families that generate.
PER_FILE = {"tool_calling": 2, "structured_output": 2, "vision": 2}
# Wire's cases for a real model over Messages and Responses: three, one of each kind the other
# APIs get wrong or right, and wire's bad requests written in each API's own terms.
API_WIRE = (
    "shape-plain",
    "max-tokens-stream",
    "stop-string",
    "invalid-messages",
    "invalid-responses",
)


def kept_cases() -> dict[str, list[str]]:
    """Case ids kept per trimmed family, in corpus order.

    ``-k`` matches substrings, so an id inside another id (``...-oslo`` in ``...-oslo-lima``)
    would select both: such ids are passed over for the next case of their file.
    """
    kept: dict[str, list[str]] = {}
    for family, count in PER_FILE.items():
        cases = load_corpus([family]).cases
        every = [case.id for case in cases]
        by_file: defaultdict[str, list[str]] = defaultdict(list)
        for case in cases:
            if sum(case.id in other for other in every) == 1:
                by_file[case.source.rpartition(":")[0]].append(case.id)
        kept[family] = [case_id for ids in by_file.values() for case_id in ids[:count]]
    return kept


def selection() -> str:
    """A ``-k`` expression selecting the whole families and the kept cases."""
    ids = [case_id for ids in kept_cases().values() for case_id in ids]
    return f"({' or '.join([*WHOLE, *ids])}) and not {LEFT_OUT}"
