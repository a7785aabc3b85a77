"""The catalogue of defects and faults the simulated vendor can switch on.

Each defect reproduces a class of real vendor bug. ``--defect NAME`` or
``--defect NAME:PARAM`` switches one on; the option can be repeated.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping

# The longest the fault-timeout fault holds a request before it closes the connection.
HOLD_SECONDS = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class DefectSpec:
    """One entry of the catalogue.

    Args:
        name: the name given to ``--defect``.
        family: the family whose checks must catch it (``transport`` for faults).
        description: what the simulated vendor does wrong.
        param: what the ``:PARAM`` part means, or None when it takes none.
        default: the parameter's value when none is given.
    """

    name: str
    family: str
    description: str
    param: str | None = None
    default: str | None = None


CATALOGUE: dict[str, DefectSpec] = {
    spec.name: spec
    for spec in (
        DefectSpec(
            "ignore-response-format",
            "structured_output",
            "answers response_format requests with free text, as if no format was asked for",
        ),
        DefectSpec(
            "json-in-markdown-fence",
            "structured_output",
            "wraps structured output in a ```json markdown fence",
        ),
        DefectSpec(
            "ignore-keyword",
            "structured_output",
            "accepts json_schema but does not enforce the named JSON-Schema keyword(s)",
            param="KEYWORD[,KEYWORD]",
        ),
        DefectSpec(
            "strict-accepted-not-enforced",
            "structured_output",
            "accepts strict json_schema and answers unconstrained (non-strict is enforced)",
        ),
        DefectSpec(
            "bad-response-format-500",
            "structured_output",
            "answers a malformed response_format with HTTP 500 instead of 400",
        ),
        DefectSpec(
            "truncated-json-finish-stop",
            "structured_output",
            "cuts structured output at max_tokens but says finish_reason stop",
        ),
        DefectSpec(
            "tool-args-not-json",
            "tool_calling",
            "cuts the last character off tool-call arguments, so they are not JSON",
        ),
        DefectSpec(
            "tool-unknown-name", "tool_calling", "calls a tool by a name that was not offered"
        ),
        DefectSpec(
            "tool-args-violate-schema",
            "tool_calling",
            "leaves a required argument out (or adds one the schema forbids)",
        ),
        DefectSpec(
            "tool-finish-reason-stop",
            "tool_calling",
            "says finish_reason stop when it made tool calls",
        ),
        DefectSpec(
            "tool-nondeterministic-args",
            "tool_calling",
            "changes an argument value from request to request at temperature 0",
        ),
        DefectSpec(
            "tool-stream-args-differ",
            "tool_calling",
            "streams different arguments than it returns without streaming",
        ),
        DefectSpec(
            "tool-name-repeated-in-stream",
            "tool_calling",
            "repeats the function name in every streamed delta of a call",
        ),
        DefectSpec(
            "tool-choice-none-ignored", "tool_calling", "calls tools when tool_choice is none"
        ),
        DefectSpec(
            "tool-choice-required-ignored",
            "tool_calling",
            "treats tool_choice required as auto (may answer without a call)",
        ),
        DefectSpec(
            "tool-choice-named-ignored",
            "tool_calling",
            "treats a named tool_choice as auto (may call another tool)",
        ),
        DefectSpec(
            "parallel-tool-calls-ignored",
            "tool_calling",
            "makes several calls in one answer when parallel_tool_calls is false",
        ),
        DefectSpec(
            "tool-markers-in-content",
            "tool_calling",
            "leaks the raw tool-call markup of the chat template into content",
        ),
        DefectSpec(
            "tool-duplicate-call-ids",
            "tool_calling",
            "gives parallel calls one shared id, and a single call an empty id",
        ),
        DefectSpec(
            "tool-call-type-wrong",
            "tool_calling",
            'gives every tool call the type "tool" instead of "function"',
        ),
        DefectSpec("stream-no-usage", "wire", "sends no usage chunk although include_usage is set"),
        DefectSpec(
            "stream-no-role",
            "wire",
            "never sends role: assistant in a stream (no first role delta)",
        ),
        DefectSpec(
            "stream-chunk-id-changes",
            "wire",
            "gives each chunk of a stream its own id (a proxy that re-wraps every chunk)",
        ),
        DefectSpec(
            "stream-empty-delta",
            "wire",
            "sends a chunk with an empty delta and no finish_reason between content chunks",
        ),
        DefectSpec(
            "stream-role-repeated", "wire", "repeats role: assistant in every streamed delta"
        ),
        DefectSpec("stream-no-done", "wire", "ends streams without data: [DONE]"),
        DefectSpec(
            "invalid-request-hang",
            "wire",
            "never answers a request it cannot parse (holds it until the client hangs up)",
        ),
        DefectSpec(
            "stream-content-differs",
            "wire",
            "ends every streamed answer's text with a space the non-stream answer lacks",
        ),
        DefectSpec(
            "stream-usage-unrequested",
            "wire",
            "sends a usage chunk at the end of every stream, include_usage or not",
        ),
        DefectSpec(
            "stream-finish-reason-missing",
            "wire",
            "never sends a streamed choice's finish_reason (no final chunk)",
        ),
        DefectSpec(
            "finish-reason-raw-token",
            "wire",
            "sends the model's raw stop token as finish_reason (stop_163586) instead of stop",
        ),
        DefectSpec("stop-not-honoured", "wire", "ignores the stop parameter"),
        DefectSpec("n-ignored", "wire", "answers one choice whatever n asks for"),
        DefectSpec("invalid-request-500", "wire", "answers invalid requests with HTTP 500"),
        DefectSpec(
            "invalid-request-200", "wire", "answers invalid requests with HTTP 200 as if valid"
        ),
        DefectSpec("usage-total-wrong", "wire", "reports total_tokens one more than the sum"),
        DefectSpec(
            "logprobs-inconsistent",
            "wire",
            "drops the last token's entry from logprobs, so tokens no longer join to the content",
        ),
        DefectSpec(
            "template-drops-system",
            "chat_template",
            "drops system messages before rendering the prompt (needs --profile)",
        ),
        DefectSpec(
            "template-special-token-injection",
            "chat_template",
            "parses special-token text in user content as the special token (needs --profile)",
        ),
        DefectSpec(
            "template-double-bos",
            "chat_template",
            "puts a second BOS token before the rendered prompt (needs --profile)",
        ),
        DefectSpec(
            "template-tools-rendered-differently",
            "chat_template",
            "renders tool declarations without their descriptions (needs --profile)",
        ),
        DefectSpec(
            "template-merges-system",
            "chat_template",
            "joins system messages onto the first user message, as a template without a "
            "system role does (needs --profile)",
        ),
        DefectSpec(
            "template-no-generation-prompt",
            "chat_template",
            "renders prompts without the generation prompt (needs --profile)",
        ),
        DefectSpec(
            "template-drops-reasoning",
            "chat_template",
            "drops reasoning_content from assistant messages before rendering (needs a profile "
            "whose template renders it, such as Kimi K2 Thinking's)",
        ),
        DefectSpec(
            "template-reasoning-in-content",
            "chat_template",
            "moves an assistant message's reasoning_content into its content as "
            "<think>...</think> (needs --profile)",
        ),
        DefectSpec(
            "template-continues-final-assistant",
            "chat_template",
            "continues a final assistant message (llama.cpp's prefill) where the model's "
            "template closes it and opens a new answer (needs --profile)",
        ),
        DefectSpec(
            "prompt-tokens-skew",
            "chat_template",
            "reports usage.prompt_tokens off by a constant",
            param="+N",
            default="+3",
        ),
        DefectSpec(
            "tokenizer-nfkc-normalises-input",
            "tokenizer",
            "NFKC-normalises user text before tokenizing (needs --profile)",
        ),
        DefectSpec(
            "tokenizer-old-vocab",
            "tokenizer",
            "tokenizes with an older vocabulary, without the newest merges (tiktoken profile)",
        ),
        DefectSpec(
            "tokenize-endpoint-disagrees",
            "tokenizer",
            "its /tokenize leaves out the generation prompt that generation adds (needs --profile)",
        ),
        DefectSpec(
            "max-tokens-not-honoured",
            "wire",
            "generates one token more than max_tokens",
        ),
        DefectSpec(
            "completion-tokens-inflated", "wire", "reports twice the completion tokens it generated"
        ),
        DefectSpec(
            "seed-ignored",
            "wire",
            "answers differently to the same seed when temperature is above 0",
        ),
        DefectSpec(
            "thinking-ignored", "wire", "never reasons, whatever the thinking dialect asks for"
        ),
        DefectSpec(
            "sampling-limits-ignored",
            "wire",
            "accepts sampling values outside the profile's limits (needs --profile)",
        ),
        DefectSpec(
            "vision-images-ignored",
            "vision",
            "drops image parts: the model sees no image, and they cost no prompt tokens",
        ),
        DefectSpec(
            "vision-first-image-only",
            "vision",
            "passes the first image in place of every image of a message",
        ),
        DefectSpec(
            "vision-order-swapped", "vision", "gives the model a message's images in reverse order"
        ),
        DefectSpec(
            "vision-stale-cache",
            "vision",
            "caches what images show by the prompt's text, so a new image gets an old answer",
        ),
        DefectSpec(
            "vision-webp-unsupported-silently",
            "vision",
            "accepts WebP images with HTTP 200 and passes the model a blank image",
        ),
        DefectSpec(
            "vision-jpeg-costs-more",
            "vision",
            "charges a JPEG image one token more than the same pixels as PNG",
        ),
        DefectSpec(
            "vision-token-miscount-large",
            "vision",
            "charges images with a side over 512 pixels twice the tokens of its image rule",
        ),
        DefectSpec(
            "vision-invalid-image-500",
            "vision",
            "answers an image it cannot decode (or a text-only model any image) with HTTP 500",
        ),
        DefectSpec(
            "http-500-every-3rd",
            "transport",
            "answers every 3rd chat request with HTTP 500",
        ),
        DefectSpec(
            "http-429-retry-after",
            "transport",
            "answers every 3rd chat request with HTTP 429 and Retry-After (seconds)",
            param="SECONDS",
            default="1",
        ),
        DefectSpec(
            "defect-under-concurrency",
            "structured_output",
            "while N or more chat requests are in flight, answers the later ones as "
            "ignore-response-format does (a batching bug); alone it is clean",
            param="N",
            default="2",
        ),
        DefectSpec(
            "fault-429",
            "transport",
            "answers a share RATE of chat requests with HTTP 429 and Retry-After: 0",
            param="RATE",
        ),
        DefectSpec(
            "fault-500",
            "transport",
            "answers a share RATE of chat requests with HTTP 500",
            param="RATE",
        ),
        DefectSpec(
            "fault-timeout",
            "transport",
            f"holds a share RATE of chat requests without an answer (until the client hangs up, "
            f"at most {HOLD_SECONDS:g}s)",
            param="RATE",
        ),
        DefectSpec(
            "fault-reset",
            "transport",
            "sends status, headers and part of the body of a share RATE of chat answers, "
            "then resets the connection",
            param="RATE",
        ),
        DefectSpec(
            "fault-truncated-stream",
            "transport",
            "ends a share RATE of chat streams after some chunks, without data: [DONE] and "
            "without the end of the HTTP body (non-stream requests are unaffected)",
            param="RATE",
        ),
        DefectSpec(
            "fault-garbage",
            "transport",
            "answers a share RATE of chat requests with HTTP 200, Content-Type "
            "application/json and a body that is not JSON",
            param="RATE",
        ),
        DefectSpec(
            "fault-slow-stream",
            "transport",
            "writes every chat answer's body one byte at a time, flushing each (slow but correct)",
        ),
    )
}

# The seeded transport faults, in the order they are tried on a chat request: at most one
# applies to a request, the first that fires. They hit POST /v1/chat/completions only,
# never /v1/models or the tokenizer routes: the probe and model listing are not under test.
RATE_FAULTS = (
    "fault-429",
    "fault-500",
    "fault-timeout",
    "fault-reset",
    "fault-truncated-stream",
    "fault-garbage",
)


def _rate_problem(text: str) -> str | None:
    """None when `text` is a share of requests in (0, 1], else what is wrong with it."""
    try:
        rate = float(text)
    except ValueError:
        return f"RATE must be a number in (0, 1], given {text!r}"
    if not 0 < rate <= 1:
        return f"RATE must be in (0, 1], given {text!r}"
    return None


def _count_problem(text: str) -> str | None:
    """None when `text` is a request count of 2 or more, else what is wrong with it."""
    if not text.isdigit() or int(text) < 2:
        return f"N must be a whole number of requests, 2 or more, given {text!r}"
    return None


# Parameters checked when the defects are parsed (by the name the catalogue gives them), so
# that a typo stops `verifier simulate` at once instead of surfacing mid-run; each with a
# valid example for the message.
_PARAM_CHECKS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "RATE": (_rate_problem, "0.3"),
    "N": (_count_problem, "2"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Defects:
    """The defects switched on in one simulated vendor, with their parameters."""

    active: Mapping[str, str | None] = dataclasses.field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.active

    def param(self, name: str) -> str | None:
        """The parameter of an active defect (its default when none was given)."""
        return self.active.get(name)

    def names(self) -> list[str]:
        """The active defects as given on the command line."""
        return [name if value is None else f"{name}:{value}" for name, value in self.active.items()]

    def plus(self, name: str) -> Defects:
        """These defects and one more, for a defect that switches another on per request."""
        return Defects({**self.active, name: CATALOGUE[name].default})

    def rates(self) -> list[tuple[str, float]]:
        """The active seeded faults with their rates, in the order they are tried."""
        return [(name, float(self.active[name] or 0)) for name in RATE_FAULTS if name in self]


def parse_defects(values: Iterable[str]) -> Defects:
    """Parse ``--defect`` values.

    Raises:
        ValueError: an unknown name (with the closest known one), a parameter
            given to a defect that takes none, a parameter out of its range (a RATE
            outside (0, 1]), or a repeated defect.
    """
    active: dict[str, str | None] = {}
    for value in values:
        name, sep, param = value.partition(":")
        spec = CATALOGUE.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, CATALOGUE, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown defect {name!r}{hint} (`verifier defects` lists them)")
        if sep and spec.param is None:
            raise ValueError(f"defect {name!r} takes no parameter, given {param!r}")
        if (sep and not param) or (not sep and spec.param and spec.default is None):
            raise ValueError(f"defect {name!r} needs a {spec.param}: {name}:{spec.param}")
        if name in active:
            raise ValueError(f"defect {name!r} is given twice")
        value = param if sep else spec.default
        if value is not None and spec.param in _PARAM_CHECKS:
            check, example = _PARAM_CHECKS[spec.param]
            problem = check(value)
            if problem:
                raise ValueError(f"defect {name!r}: {problem} (for example {name}:{example})")
        active[name] = value
    return Defects(active)
