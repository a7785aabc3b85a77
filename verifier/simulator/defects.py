"""The catalogue of defects and faults the simulated vendor can switch on.

Each defect reproduces a class of real vendor bug. ``--defect NAME`` or
``--defect NAME:PARAM`` switches one on; the option can be repeated.

Every defect is a :class:`Defect` constant of this module, registered in
:data:`CATALOGUE` by name. The simulator asks ``defects.has(STREAM_NO_ROLE)`` of the
:class:`Defects` switched on, never a name as a string, so that a misspelt defect is a
NameError instead of a test that is silently false. The layers that consult them:
prompt rendering and counting (``prompt.PromptPath``), the model's answer
(``model.respond``), the answer on the wire and its stream (``answers.completion_body``,
``answers.stream_events``), the logprobs' distributions (``answers.logprobs_of``, and
``server.SimulatorServer.perturbation`` for those that depend on the vendor's state),
request validation (``server.Handler._reject``), images (``vision.Eyes``) and transport
faults (``faults.choose_fault``, ``server.Handler._fault``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping

# The longest the fault-timeout fault holds a request before it closes the connection.
HOLD_SECONDS = 60.0
# The model a vendor with served-model-substituted answers as.
SUBSTITUTE_MODEL = "sim-distilled-8b"


@dataclasses.dataclass(frozen=True, slots=True)
class Defect:
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


CATALOGUE: dict[str, Defect] = {}


def _define(
    name: str, family: str, description: str, param: str | None = None, default: str | None = None
) -> Defect:
    """Make a defect and register it in the catalogue under its name."""
    assert name not in CATALOGUE, f"defect {name!r} defined twice"
    defect = Defect(name, family, description, param, default)
    CATALOGUE[name] = defect
    return defect


# structured_output
IGNORE_RESPONSE_FORMAT = _define(
    "ignore-response-format",
    "structured_output",
    "answers response_format requests with free text, as if no format was asked for",
)
JSON_IN_MARKDOWN_FENCE = _define(
    "json-in-markdown-fence",
    "structured_output",
    "wraps structured output in a ```json markdown fence",
)
IGNORE_KEYWORD = _define(
    "ignore-keyword",
    "structured_output",
    "accepts json_schema but does not enforce the named JSON-Schema keyword(s)",
    param="KEYWORD[,KEYWORD]",
)
STRICT_ACCEPTED_NOT_ENFORCED = _define(
    "strict-accepted-not-enforced",
    "structured_output",
    "accepts strict json_schema and answers unconstrained (non-strict is enforced)",
)
BAD_RESPONSE_FORMAT_500 = _define(
    "bad-response-format-500",
    "structured_output",
    "answers a malformed response_format with HTTP 500 instead of 400",
)
TRUNCATED_JSON_FINISH_STOP = _define(
    "truncated-json-finish-stop",
    "structured_output",
    "cuts structured output at max_tokens but says finish_reason stop",
)
DEFECT_UNDER_CONCURRENCY = _define(
    "defect-under-concurrency",
    "structured_output",
    "while N or more chat requests are in flight, answers the later ones as "
    "ignore-response-format does (a batching bug); alone it is clean",
    param="N",
    default="2",
)

# tool_calling
TOOL_ARGS_NOT_JSON = _define(
    "tool-args-not-json",
    "tool_calling",
    "cuts the last character off tool-call arguments, so they are not JSON",
)
TOOL_UNKNOWN_NAME = _define(
    "tool-unknown-name", "tool_calling", "calls a tool by a name that was not offered"
)
PUBLIC_PROMPTS_ONLY = _define(
    "public-prompts-only",
    "tool_calling",
    "makes the right calls only for the published cases' exact prompts: told a rotation's "
    "secret (--rotate), it still knows none of the twins' calls, as a vendor that recognises "
    "the verifier's prompts and serves everything else a cheaper model",
)
TOOL_ARGS_VIOLATE_SCHEMA = _define(
    "tool-args-violate-schema",
    "tool_calling",
    "leaves a required argument out (or adds one the schema forbids)",
)
TOOL_FINISH_REASON_STOP = _define(
    "tool-finish-reason-stop",
    "tool_calling",
    "says finish_reason stop when it made tool calls",
)
TOOL_NONDETERMINISTIC_ARGS = _define(
    "tool-nondeterministic-args",
    "tool_calling",
    "changes an argument value from request to request at temperature 0",
)
TOOL_STREAM_ARGS_DIFFER = _define(
    "tool-stream-args-differ",
    "tool_calling",
    "streams different arguments than it returns without streaming",
)
TOOL_NAME_REPEATED_IN_STREAM = _define(
    "tool-name-repeated-in-stream",
    "tool_calling",
    "repeats the function name in every streamed delta of a call",
)
TOOL_CHOICE_NONE_IGNORED = _define(
    "tool-choice-none-ignored", "tool_calling", "calls tools when tool_choice is none"
)
TOOL_CHOICE_REQUIRED_IGNORED = _define(
    "tool-choice-required-ignored",
    "tool_calling",
    "treats tool_choice required as auto (may answer without a call)",
)
TOOL_CHOICE_NAMED_IGNORED = _define(
    "tool-choice-named-ignored",
    "tool_calling",
    "treats a named tool_choice as auto (may call another tool)",
)
# Translation: what a gateway loses between the other APIs and its chat path (each seen in
# llama-server 11434's translations).
MESSAGES_NAMED_TOOL_CHOICE_LOST = _define(
    "messages-named-tool-choice-lost",
    "tool_calling",
    "over Anthropic Messages, reads a named tool_choice as any tool (chat's required)",
)
RESPONSES_NAMED_TOOL_CHOICE_LOST = _define(
    "responses-named-tool-choice-lost",
    "tool_calling",
    "over OpenAI Responses, leaves a named tool_choice untranslated, so unapplied (auto)",
)
MESSAGES_BLOCKS_OVERLAP = _define(
    "messages-blocks-overlap",
    "wire",
    "streams each Messages content block's start before the previous block's stop, sent last",
)
RESPONSES_STREAM_UNINDEXED = _define(
    "responses-stream-unindexed",
    "wire",
    "streams Responses events without sequence_number, output_index or content_index",
)
RESPONSES_CUT_AS_COMPLETED = _define(
    "responses-cut-as-completed",
    "wire",
    "over OpenAI Responses, says status completed (no incomplete_details) for an answer cut by "
    "max_output_tokens",
)
MESSAGES_STOP_SEQUENCE_AS_END_TURN = _define(
    "messages-stop-sequence-as-end-turn",
    "wire",
    "over Anthropic Messages, says stop_reason end_turn for an answer a stop sequence ended, "
    "naming the sequence in stop_sequence",
)
MESSAGES_ERRORS_CHAT_SHAPED = _define(
    "messages-errors-chat-shaped",
    "wire",
    "over Anthropic Messages, refuses a request with chat completions' error object "
    '({"error": {"message", ...}}), not the Messages error ({"type": "error", "error": '
    '{"type", "message"}})',
)
MESSAGES_CACHE_DOUBLE_COUNTED = _define(
    "messages-cache-double-counted",
    "chat_template",
    "over Anthropic Messages, says every prompt token but the last was read from the cache "
    "(cache_read_input_tokens) and counts them in input_tokens as well, which excludes them",
)
MESSAGES_THINKING_UNSIGNED = _define(
    "messages-thinking-unsigned",
    "reasoning",
    "over Anthropic Messages, gives each thinking block an empty signature, and takes such "
    "blocks back",
)
MESSAGES_THINKING_HISTORY_REJECTED = _define(
    "messages-thinking-history-rejected",
    "reasoning",
    "over Anthropic Messages, refuses a turn that sends a thinking block back (a gateway that "
    "cannot pass it on)",
)
RESPONSES_REASONING_ITEMS_REJECTED = _define(
    "responses-reasoning-items-rejected",
    "reasoning",
    "over OpenAI Responses, refuses an input that gives a reasoning item back",
)
RESPONSES_ENCRYPTED_CONTENT_EMPTY = _define(
    "responses-encrypted-content-empty",
    "reasoning",
    "over OpenAI Responses, gives reasoning items an empty encrypted_content when the request "
    "includes it (as llama-server 11434 does)",
)
MESSAGES_REDACTED_THINKING_EMPTY = _define(
    "messages-redacted-thinking-empty",
    "reasoning",
    "over Anthropic Messages, gives every thinking block as a redacted_thinking block with "
    "empty data, and takes such blocks back (the reasoning is lost)",
)
MESSAGES_REDACTED_THINKING_REJECTED = _define(
    "messages-redacted-thinking-rejected",
    "reasoning",
    "over Anthropic Messages, gives every thinking block as a redacted_thinking block, and "
    "refuses a turn that sends one back (a translation that knows no such block)",
)
MESSAGES_TEXT_NORMALISED = _define(
    "messages-text-normalised",
    "tokenizer",
    "over Anthropic Messages, NFKC-normalises the text of user turns in translation",
)
MESSAGES_THINKING_HISTORY_DROPPED = _define(
    "messages-thinking-history-dropped",
    "reasoning",
    "over Anthropic Messages, takes the thinking blocks a turn sends back and leaves them out "
    "of the model's prompt",
)
RESPONSES_REASONING_ITEMS_DROPPED = _define(
    "responses-reasoning-items-dropped",
    "reasoning",
    "over OpenAI Responses, takes the reasoning items an input gives back and leaves them out "
    "of the model's prompt",
)
MESSAGES_THINKING_DROPPED = _define(
    "messages-thinking-dropped",
    "reasoning",
    "over Anthropic Messages, drops the request's thinking (enabled or disabled) in translation: "
    "the model thinks as it does by default",
)
RESPONSES_EFFORT_DROPPED = _define(
    "responses-effort-dropped",
    "reasoning",
    "over OpenAI Responses, drops the request's reasoning.effort in translation",
)
MESSAGES_CACHE_CREATION_OMITTED = _define(
    "messages-cache-creation-omitted",
    "wire",
    "over Anthropic Messages, leaves cache_creation_input_tokens (required, null when nothing "
    "was cached) out of every answer's usage",
)
MESSAGES_MAX_TOKENS_DEFAULTED = _define(
    "messages-max-tokens-defaulted",
    "wire",
    "over Anthropic Messages, answers a request without max_tokens (which the Messages API "
    "requires) with a default of its own",
)
TRANSLATED_ARGUMENTS_ESCAPED = _define(
    "translated-arguments-escaped",
    "tool_calling",
    "over Anthropic Messages and OpenAI Responses, gives each non-ASCII character of a tool "
    "call's arguments as the literal text \\uXXXX (escaped twice), where chat completions "
    "gives the character",
)
PARALLEL_TOOL_CALLS_IGNORED = _define(
    "parallel-tool-calls-ignored",
    "tool_calling",
    "makes several calls in one answer when parallel_tool_calls is false",
)
TOOL_MARKERS_IN_CONTENT = _define(
    "tool-markers-in-content",
    "tool_calling",
    "leaks the raw tool-call markup of the chat template into content",
)
TOOL_DUPLICATE_CALL_IDS = _define(
    "tool-duplicate-call-ids",
    "tool_calling",
    "gives parallel calls one shared id, and a single call an empty id",
)
TOOL_CALL_ID_FORMAT = _define(
    "tool-call-id-format",
    "tool_calling",
    "gives tool calls OpenAI-style call_ ids where the model's contract documents its own "
    "format (needs a profile that states tool_call_id)",
)
DYNAMIC_TOOLS_REJECTED = _define(
    "dynamic-tools-rejected",
    "tool_calling",
    "refuses a system message that declares tools and has no content, HTTP 400, where the "
    "model's contract documents such messages (needs a contract with dynamic tools)",
)
DYNAMIC_TOOLS_IGNORED = _define(
    "dynamic-tools-ignored",
    "tool_calling",
    "drops the tools a system message declares (its request model has no such field): they "
    "never reach the prompt (needs a contract with dynamic tools)",
)
TOOL_CALL_TYPE_WRONG = _define(
    "tool-call-type-wrong",
    "tool_calling",
    'gives every tool call the type "tool" instead of "function"',
)

# Billed but not delivered: the model generated it, a parser or filter lost it, usage bills it.
TOOL_CALLS_DROPPED = _define(
    "tool-calls-dropped",
    "tool_calling",
    "its tool parser drops the last of several calls the model made in one answer, and "
    "usage bills all of them",
)
REASONING_DROPPED = _define(
    "reasoning-dropped",
    "reasoning",
    "its reasoning parser drops the reasoning the model wrote (the answer alone comes back), "
    "and usage bills it",
)
CONTENT_CUT = _define(
    "content-cut",
    "wire",
    "a filter cuts the second half off every text answer (finish_reason stays stop), and "
    "usage bills the whole answer",
)

# context
WINDOW_SMALLER_THAN_STATED = _define(
    "window-smaller-than-stated",
    "context",
    "states its window in /v1/models (max_model_len) but refuses any prompt past half of it, "
    "as a deployment whose KV-cache budget is smaller than its configured window",
)
PROMPT_TRUNCATED_FRONT = _define(
    "prompt-truncated-front",
    "context",
    "answers a prompt past its window by dropping its first tokens until it fits, without a "
    "word (usage.prompt_tokens counts what it kept)",
)
CONTEXT_SHIFT = _define(
    "context-shift",
    "context",
    "lets an answer run on past the window, discarding the oldest tokens to make room (as "
    "llama-server's --context-shift does), instead of ending it with finish_reason length",
)
CACHED_TOKENS_UNREPORTED = _define(
    "cached-tokens-unreported",
    "context",
    "caches a long prompt's prefix (a repeat's first token comes sooner) but reports no "
    "prompt_tokens_details.cached_tokens",
)
CACHED_PREFIX_CHANGES_ANSWER = _define(
    "cached-prefix-changes-answer",
    "context",
    "answers a long prompt whose prefix it has cached otherwise than the same prompt cold (a "
    "cache that keeps stale or misplaced KV)",
)
PREFIX_CACHE_COLLISION = _define(
    "prefix-cache-collision",
    "context",
    "keys its prefix cache by a long prompt's first blocks alone: a prompt that begins as an "
    "earlier one did is answered from the earlier one's KV, its question and not its own",
)
HISTORY_COMPACTED = _define(
    "history-compacted",
    "context",
    "compacts a long agent history: every tool result but the last four is replaced by a "
    "one-line stub before the model reads it (as a serving layer that trims context does), "
    "billing what it kept",
)
OVER_WINDOW_500 = _define(
    "over-window-500", "context", "answers a prompt past its window with HTTP 500"
)
OVER_WINDOW_HANG = _define(
    "over-window-hang",
    "context",
    "never answers a prompt past its window (holds it until the client hangs up)",
)

# wire
STREAM_NO_USAGE = _define(
    "stream-no-usage", "wire", "sends no usage chunk although include_usage is set"
)
STREAM_NO_ROLE = _define(
    "stream-no-role",
    "wire",
    "never sends role: assistant in a stream (no first role delta)",
)
STREAM_CHUNK_ID_CHANGES = _define(
    "stream-chunk-id-changes",
    "wire",
    "gives each chunk of a stream its own id (a proxy that re-wraps every chunk)",
)
STREAM_EMPTY_DELTA = _define(
    "stream-empty-delta",
    "wire",
    "sends a chunk with an empty delta and no finish_reason between content chunks",
)
STREAM_ROLE_REPEATED = _define(
    "stream-role-repeated", "wire", "repeats role: assistant in every streamed delta"
)
STREAM_NO_DONE = _define("stream-no-done", "wire", "ends streams without data: [DONE]")
INVALID_REQUEST_HANG = _define(
    "invalid-request-hang",
    "wire",
    "never answers a request it cannot parse (holds it until the client hangs up)",
)
STREAM_CONTENT_DIFFERS = _define(
    "stream-content-differs",
    "wire",
    "ends every streamed answer's text with a space the non-stream answer lacks",
)
STREAM_USAGE_UNREQUESTED = _define(
    "stream-usage-unrequested",
    "wire",
    "sends a usage chunk at the end of every stream, include_usage or not",
)
STREAM_FINISH_REASON_MISSING = _define(
    "stream-finish-reason-missing",
    "wire",
    "never sends a streamed choice's finish_reason (no final chunk)",
)
FINISH_REASON_RAW_TOKEN = _define(
    "finish-reason-raw-token",
    "wire",
    "sends the model's raw stop token as finish_reason (stop_163586) instead of stop",
)
STOP_NOT_HONOURED = _define("stop-not-honoured", "wire", "ignores the stop parameter")
N_IGNORED = _define("n-ignored", "wire", "answers one choice whatever n asks for")
INVALID_REQUEST_500 = _define(
    "invalid-request-500", "wire", "answers invalid requests with HTTP 500"
)
INVALID_REQUEST_200 = _define(
    "invalid-request-200", "wire", "answers invalid requests with HTTP 200 as if valid"
)
INVALID_REQUEST_POISONS = _define(
    "invalid-request-poisons",
    "wire",
    "after refusing an invalid request, answers the next N chat requests with HTTP 500 (its "
    "worker restarting)",
    param="N",
    default="4",
)
INVALID_REQUEST_SLOWS = _define(
    "invalid-request-slows",
    "wire",
    "after refusing an invalid request, holds the next chat request S seconds before "
    "answering it (a worker rebuilding its state)",
    param="S",
    default="3",
)
ERROR_PARAM_WRONG = _define(
    "error-param-wrong",
    "wire",
    "names 'prompt' as the param of every error it answers a refused request with, whatever "
    "field was at fault (an error path shared with the legacy completions route)",
)
NON_ASCII_PROPERTIES_REJECTED = _define(
    "non-ascii-properties-rejected",
    "wire",
    "refuses a tool's parameters or a response schema with a non-ASCII property name (as "
    "XGrammar once did)",
)
USAGE_TOTAL_WRONG = _define(
    "usage-total-wrong", "wire", "reports total_tokens one more than the sum"
)
LOGPROBS_INCONSISTENT = _define(
    "logprobs-inconsistent",
    "wire",
    "drops the last token's entry from logprobs, so tokens no longer join to the content",
)
MAX_TOKENS_NOT_HONOURED = _define(
    "max-tokens-not-honoured",
    "wire",
    "generates one token more than max_tokens",
)
COMPLETION_TOKENS_INFLATED = _define(
    "completion-tokens-inflated", "wire", "reports twice the completion tokens it generated"
)
SEED_IGNORED = _define(
    "seed-ignored",
    "wire",
    "answers differently to the same seed when temperature is above 0",
)
SAMPLING_LIMITS_IGNORED = _define(
    "sampling-limits-ignored",
    "wire",
    "accepts sampling values outside the profile's limits (needs --profile)",
)
SAMPLING_PINS_IGNORED = _define(
    "sampling-pins-ignored",
    "wire",
    "accepts values other than the sampling values the model's contract pins, where the "
    "lab's API rejects them (needs a profile that pins one)",
)
SAMPLING_PINS_REFUSED = _define(
    "sampling-pins-refused",
    "wire",
    "refuses values other than the pinned ones, where the lab's API accepts them and uses "
    "the pin (needs a profile with a coerced pin)",
)
GENERATION_DEFAULTS_IGNORED = _define(
    "generation-defaults-ignored",
    "wire",
    "samples with the engine's defaults (temperature 1, top_p 1, no top_k or min_p) where "
    "the client omits a value, not with the model's generation_config (needs a contract "
    "that states generation defaults, such as Qwen3's)",
)
SERVED_MODEL_SUBSTITUTED = _define(
    "served-model-substituted",
    "wire",
    f"answers as another model: every answer's model is {SUBSTITUTE_MODEL!r}",
)

# parity (per-token distributions, compared between two deployments of one model)
WEIGHTS_PERTURBED = _define(
    "weights-perturbed",
    "parity",
    "shifts every logit by N(0, EPS), the same for the same prompt every time, as converted "
    "or quantised weights do (the text is unchanged)",
    param="EPS",
    default="0.05",
)
KV_CACHE_DIVERGENCE = _define(
    "kv-cache-divergence",
    "parity",
    "answers a prompt it has answered before from a warm prefix cache that computes other "
    "logits: a repeated request's logprobs differ from its first (the text is unchanged)",
)
LOGPROBS_NOT_TOP_CHOICE = _define(
    "logprobs-not-top-choice",
    "parity",
    "reports the emitted token's logprob below the best alternative's, as if greedy "
    "decoding had not picked the most likely token",
)
LOGPROBS_UNAVAILABLE = _define(
    "logprobs-unavailable",
    "wire",
    "ignores logprobs and top_logprobs: every choice has logprobs null",
)
LOGPROBS_ALTERNATIVES_CUT = _define(
    "logprobs-alternatives-cut",
    "wire",
    "lists one alternative per token, however many top_logprobs asks for",
)
LOGPROBS_ZEROED = _define(
    "logprobs-zeroed",
    "wire",
    "reports every token's logprob as 0.0 with no alternatives (the text is right), as "
    "llama-server does for the draft tokens speculative decoding accepts",
)
TOP_LOGPROBS_DUPLICATED = _define(
    "top-logprobs-duplicated",
    "wire",
    "lists the likeliest alternative twice, in place of the least likely one",
)
LOGPROBS_AS_PROBABILITIES = _define(
    "logprobs-as-probabilities",
    "wire",
    "reports probabilities (between 0 and 1) where log-probabilities are due",
)
CHOSEN_ENTRY_DIFFERS = _define(
    "chosen-entry-differs",
    "wire",
    "lists the chosen token among the alternatives with a logprob 0.5 below the one its "
    "entry reports, as if the two came from different distributions",
)
TOP_LOGPROBS_LIMIT_CUT = _define(
    "top-logprobs-limit-cut",
    "wire",
    "accepts top_logprobs above the API's maximum of 20 and silently lists 20 alternatives",
)
STREAM_LOGPROBS_DIFFER = _define(
    "stream-logprobs-differ",
    "wire",
    "streams every logprob 0.01 below the non-stream answer's (the same tokens)",
)

# reasoning (a profile with a thinking dialect: its switch, tags, effort and history rule)
THINKING_IGNORED = _define(
    "thinking-ignored", "reasoning", "never reasons, whatever the thinking dialect asks for"
)
THINKING_OFF_IGNORED = _define(
    "thinking-off-ignored", "reasoning", "reasons before its answer even when thinking is off"
)
THINKING_OFF_ANSWER_IN_REASONING = _define(
    "thinking-off-answer-in-reasoning",
    "reasoning",
    "with thinking off, its reasoning parser still takes the output for reasoning: the "
    "answer comes as reasoning and content is empty (vllm#19839)",
)
REASONING_SWALLOWS_ANSWER = _define(
    "reasoning-swallows-answer",
    "reasoning",
    "its reasoning parser misses the end of the reasoning: the whole reply comes as "
    "reasoning, content empty, finish_reason stop (vllm#45736)",
)
REASONING_PARSER_OFF = _define(
    "reasoning-parser-off",
    "reasoning",
    "parses no reasoning: the raw output, thinking tags and all, comes as content",
)
TOOL_MARKUP_IN_REASONING = _define(
    "tool-markup-in-reasoning",
    "reasoning",
    "with thinking on, a call the model writes inside its reasoning stays there as markup "
    "instead of becoming tool_calls",
)
REASONING_FIELD_RENAMED = _define(
    "reasoning-field-renamed",
    "reasoning",
    "returns reasoning under the other field name (reasoning for reasoning_content, or the "
    "reverse) than the model's contract states",
)
JSON_IN_REASONING = _define(
    "json-in-reasoning",
    "reasoning",
    "with thinking on and response_format, the JSON answer comes as reasoning and content is "
    "empty (vllm#41132)",
)
JSON_ENDS_THINKING = _define(
    "json-ends-thinking",
    "reasoning",
    "asking for response_format silently switches thinking off (vllm#47027)",
)
STREAM_REASONING_AFTER_CONTENT = _define(
    "stream-reasoning-after-content",
    "reasoning",
    "streams the last piece of the reasoning after the first content delta",
)
STREAM_DROPS_TOOL_CALLS_AFTER_THINKING = _define(
    "stream-drops-tool-calls-after-thinking",
    "reasoning",
    "on a stream with reasoning, tool calls stay in the reasoning as markup and no "
    "tool_calls delta comes (non-stream answers are right; vllm#53246)",
)
EFFORT_IGNORED = _define(
    "effort-ignored", "reasoning", "reasons the same, whatever effort level is asked for"
)
THINKING_SWITCH_REJECTED = _define(
    "thinking-switch-rejected",
    "reasoning",
    "refuses a request that carries the fields the model's contract turns thinking on or off "
    "with, HTTP 400 (a request model without them)",
)
EFFORT_REJECTED = _define(
    "effort-rejected",
    "reasoning",
    "refuses a request that sets the reasoning effort field the model's contract documents, "
    "HTTP 400",
)
REASONING_TOKENS_MISCOUNTED = _define(
    "reasoning-tokens-miscounted",
    "reasoning",
    "reports every completion token as a reasoning token in "
    "usage.completion_tokens_details.reasoning_tokens",
)
EMPTY_FOLLOWUP = _define(
    "empty-followup",
    "reasoning",
    "with thinking on, answers a conversation that ends with a tool result with an empty "
    "message: no content, no reasoning, no call (MoonshotAI/Kimi-K2#128)",
)
FOLLOWUP_CALLS_UNKNOWN_TOOL = _define(
    "followup-calls-unknown-tool",
    "reasoning",
    "with thinking on, answers a conversation that ends with a tool result with a call to a "
    "tool that was not offered",
)
MISSING_REASONING_ACCEPTED = _define(
    "missing-reasoning-accepted",
    "reasoning",
    "accepts a tool-call turn sent back without its reasoning, which the model's contract "
    "says the lab's API refuses (needs a contract that says so)",
)
MISSING_REASONING_500 = _define(
    "missing-reasoning-500",
    "reasoning",
    "answers a tool-call turn sent back without its reasoning with HTTP 500: its history "
    "check raises where the lab's API refuses with a 400 (needs a contract that says so)",
)
MISSING_REASONING_HANG = _define(
    "missing-reasoning-hang",
    "reasoning",
    "never answers a tool-call turn sent back without its reasoning: it holds the request "
    "until the client hangs up (needs a contract that says the lab's API refuses it)",
)
RESPONSE_FORMAT_IGNORED_WHEN_THINKING = _define(
    "response-format-ignored-when-thinking",
    "reasoning",
    "with thinking on, ignores response_format: its grammar is never switched on once the "
    "reasoning ends, so the answer after the reasoning is free text",
)
REASONING_HISTORY_REJECTED = _define(
    "reasoning-history-rejected",
    "reasoning",
    "refuses any assistant message that carries its reasoning (a request schema without "
    "the field), HTTP 400",
)

# chat_template
PARTIAL_PREFILL_IGNORED = _define(
    "partial-prefill-ignored",
    "chat_template",
    "answers a final assistant message marked partial: true as a closed turn instead of "
    "continuing it (needs a profile whose contract documents partial mode)",
)
TEMPLATE_DROPS_SYSTEM = _define(
    "template-drops-system",
    "chat_template",
    "drops system messages before rendering the prompt (needs --profile)",
)
TEMPLATE_SPECIAL_TOKEN_INJECTION = _define(
    "template-special-token-injection",
    "chat_template",
    "parses special-token text in user content as the special token (needs --profile)",
)
TEMPLATE_DOUBLE_BOS = _define(
    "template-double-bos",
    "chat_template",
    "puts a second BOS token before the rendered prompt (needs --profile)",
)
TEMPLATE_TOOLS_RENDERED_DIFFERENTLY = _define(
    "template-tools-rendered-differently",
    "chat_template",
    "renders tool declarations without their descriptions (needs --profile)",
)
TEMPLATE_MERGES_SYSTEM = _define(
    "template-merges-system",
    "chat_template",
    "joins system messages onto the first user message, as a template without a "
    "system role does (needs --profile)",
)
TEMPLATE_NO_GENERATION_PROMPT = _define(
    "template-no-generation-prompt",
    "chat_template",
    "renders prompts without the generation prompt (needs --profile)",
)
TEMPLATE_DROPS_REASONING = _define(
    "template-drops-reasoning",
    "chat_template",
    "drops reasoning_content from assistant messages before rendering (needs a profile "
    "whose template renders it, such as Kimi K2 Thinking's)",
)
TEMPLATE_REASONING_IN_CONTENT = _define(
    "template-reasoning-in-content",
    "chat_template",
    "moves an assistant message's reasoning_content into its content as "
    "<think>...</think> (needs --profile)",
)
TEMPLATE_CONTINUES_FINAL_ASSISTANT = _define(
    "template-continues-final-assistant",
    "chat_template",
    "continues a final assistant message (llama.cpp's prefill) where the model's "
    "template closes it and opens a new answer (needs --profile)",
)
COUNT_TOKENS_DROPS_TOOLS = _define(
    "count-tokens-drops-tools",
    "chat_template",
    "its token-counting routes (Messages' count_tokens, Responses' input_tokens) count the "
    "prompt without its tools, which the answers bill (needs --profile)",
)
PROMPT_TOKENS_SKEW = _define(
    "prompt-tokens-skew",
    "chat_template",
    "reports usage.prompt_tokens off by a constant",
    param="+N",
    default="+3",
)

# tokenizer
TOKENIZER_NFKC_NORMALISES_INPUT = _define(
    "tokenizer-nfkc-normalises-input",
    "tokenizer",
    "NFKC-normalises user text before tokenizing (needs --profile)",
)
TOKENIZER_OLD_VOCAB = _define(
    "tokenizer-old-vocab",
    "tokenizer",
    "tokenizes with an older vocabulary, without the newest merges (tiktoken profile)",
)
TOKENIZE_ENDPOINT_DISAGREES = _define(
    "tokenize-endpoint-disagrees",
    "tokenizer",
    "its /tokenize leaves out the generation prompt that generation adds (needs --profile)",
)

# vision
VISION_IMAGES_IGNORED = _define(
    "vision-images-ignored",
    "vision",
    "drops image parts: the model sees no image, and they cost no prompt tokens",
)
VISION_FIRST_IMAGE_ONLY = _define(
    "vision-first-image-only",
    "vision",
    "passes the first image in place of every image of a message",
)
VISION_ORDER_SWAPPED = _define(
    "vision-order-swapped", "vision", "gives the model a message's images in reverse order"
)
VISION_STALE_CACHE = _define(
    "vision-stale-cache",
    "vision",
    "caches what images show by the prompt's text, so a new image gets an old answer",
)
VISION_WEBP_UNSUPPORTED_SILENTLY = _define(
    "vision-webp-unsupported-silently",
    "vision",
    "accepts WebP images with HTTP 200 and passes the model a blank image",
)
VISION_JPEG_COSTS_MORE = _define(
    "vision-jpeg-costs-more",
    "vision",
    "charges a JPEG image one token more than the same pixels as PNG",
)
VISION_TOKEN_MISCOUNT_LARGE = _define(
    "vision-token-miscount-large",
    "vision",
    "charges images with a side over 512 pixels twice the tokens of its image rule",
)
VISION_INVALID_IMAGE_500 = _define(
    "vision-invalid-image-500",
    "vision",
    "answers an image it cannot decode (or a text-only model any image) with HTTP 500",
)

# transport
HTTP_500_EVERY_3RD = _define(
    "http-500-every-3rd",
    "transport",
    "answers every 3rd chat request with HTTP 500",
)
HTTP_429_RETRY_AFTER = _define(
    "http-429-retry-after",
    "transport",
    "answers every 3rd chat request with HTTP 429 and Retry-After (seconds)",
    param="SECONDS",
    default="1",
)
FAULT_429 = _define(
    "fault-429",
    "transport",
    "answers a share RATE of chat requests with HTTP 429 and Retry-After: 0",
    param="RATE",
)
FAULT_500 = _define(
    "fault-500",
    "transport",
    "answers a share RATE of chat requests with HTTP 500",
    param="RATE",
)
FAULT_TIMEOUT = _define(
    "fault-timeout",
    "transport",
    f"holds a share RATE of chat requests without an answer (until the client hangs up, "
    f"at most {HOLD_SECONDS:g}s)",
    param="RATE",
)
FAULT_RESET = _define(
    "fault-reset",
    "transport",
    "sends status, headers and part of the body of a share RATE of chat answers, "
    "then resets the connection",
    param="RATE",
)
FAULT_TRUNCATED_STREAM = _define(
    "fault-truncated-stream",
    "transport",
    "ends a share RATE of chat streams after some chunks, without data: [DONE] and "
    "without the end of the HTTP body (non-stream requests are unaffected)",
    param="RATE",
)
FAULT_GARBAGE = _define(
    "fault-garbage",
    "transport",
    "answers a share RATE of chat requests with HTTP 200, Content-Type "
    "application/json and a body that is not JSON",
    param="RATE",
)
FAULT_SLOW_STREAM = _define(
    "fault-slow-stream",
    "transport",
    "writes every chat answer's body one byte at a time, flushing each (slow but correct)",
)


# The seeded transport faults, in the order they are tried on a chat request: at most one
# applies to a request, the first that fires. They hit POST /v1/chat/completions only,
# never /v1/models or the tokenizer routes: the probe and model listing are not under test.
RATE_FAULTS = (
    FAULT_429,
    FAULT_500,
    FAULT_TIMEOUT,
    FAULT_RESET,
    FAULT_TRUNCATED_STREAM,
    FAULT_GARBAGE,
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


def _scale_problem(text: str) -> str | None:
    """None when `text` is a standard deviation (a finite number >= 0), else what is wrong."""
    try:
        scale = float(text)
    except ValueError:
        return f"EPS must be a number >= 0, given {text!r}"
    if not 0 <= scale < float("inf"):
        return f"EPS must be a finite number >= 0, given {text!r}"
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
    "EPS": (_scale_problem, "0.05"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Defects:
    """The defects switched on in one simulated vendor, with their parameters."""

    active: Mapping[Defect, str | None] = dataclasses.field(default_factory=dict)

    def has(self, defect: Defect) -> bool:
        """Whether `defect` is switched on."""
        # A name given as a string would never match: refuse it rather than answer False.
        if not isinstance(defect, Defect):
            raise TypeError(f"Defects.has takes a Defect, given {defect!r}")
        return defect in self.active

    def param(self, defect: Defect) -> str | None:
        """The parameter of an active defect (its default when none was given)."""
        return self.active[defect] if self.has(defect) else None

    def names(self) -> list[str]:
        """The active defects as given on the command line."""
        return [
            defect.name if value is None else f"{defect.name}:{value}"
            for defect, value in self.active.items()
        ]

    def at_position(self, position: int) -> Defects:
        """The defects for a chat request that arrived as the `position`-th in flight.

        Under defect-under-concurrency:N the N-th request in flight and later ones are
        answered as ignore-response-format does; otherwise these defects, unchanged.
        """
        threshold = self.param(DEFECT_UNDER_CONCURRENCY)
        if threshold is None or position < int(threshold):
            return self
        return Defects({**self.active, IGNORE_RESPONSE_FORMAT: IGNORE_RESPONSE_FORMAT.default})

    def rates(self) -> list[tuple[Defect, float]]:
        """The active seeded faults with their rates, in the order they are tried."""
        return [(fault, float(self.active[fault] or 0)) for fault in RATE_FAULTS if self.has(fault)]


def parse_defects(values: Iterable[str]) -> Defects:
    """Parse ``--defect`` values.

    Raises:
        ValueError: an unknown name (with the closest known one), a parameter
            given to a defect that takes none, a parameter out of its range (a RATE
            outside (0, 1]), or a repeated defect.
    """
    active: dict[Defect, str | None] = {}
    for value in values:
        name, sep, param = value.partition(":")
        defect = CATALOGUE.get(name)
        if defect is None:
            close = difflib.get_close_matches(name, CATALOGUE, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown defect {name!r}{hint} (`verifier defects` lists them)")
        if sep and defect.param is None:
            raise ValueError(f"defect {name!r} takes no parameter, given {param!r}")
        if (sep and not param) or (not sep and defect.param and defect.default is None):
            raise ValueError(f"defect {name!r} needs a {defect.param}: {name}:{defect.param}")
        if defect in active:
            raise ValueError(f"defect {name!r} is given twice")
        chosen = param if sep else defect.default
        if chosen is not None and defect.param in _PARAM_CHECKS:
            check, example = _PARAM_CHECKS[defect.param]
            problem = check(chosen)
            if problem:
                raise ValueError(f"defect {name!r}: {problem} (for example {name}:{example})")
        active[defect] = chosen
    return Defects(active)
