"""Every defect of the simulated vendor with the exact codes each of the nine families gives.

One row per catalogue entry: the vendor is started with that defect alone, the verifier runs
every family, and each family's codes must be exactly the row's set (a family the row does not
name must give none). A row that expects more than one code, or a code in a second family,
says why in `why`: a defect that breaks two contracts is reported twice, and nothing else is.

Every row sends two repeats of each tool-calling case (one non-stream, one stream), not five:
four more of the same request prove nothing more about a defect that is not about
determinism; the two determinism rows send four (two of each mode, to compare within one).
The other families send each case once, their default.

Every row runs all nine families (parity against the same vendor without the defect) but
these, whose effect lands on whichever request comes next or costs seconds per request:

- transport faults run tool calling (a non-stream and a stream answer per case) and wire (every
  request shape): a fault hits every chat request alike, whichever family sent it, and a
  Retry-After or a held request costs seconds each, so the other seven families would add
  minutes and prove nothing more (``http-429-retry-after``: wire alone);
- ``invalid-request-poisons`` and ``invalid-request-slows`` run the generated bad requests
  alone, one at a time: the request a refusal poisons or holds is the next one sent, which in
  another family is an unrelated case's (a transport error there, or a delay no check times),
  so only the generated cases, each followed by its own plain request, can attribute it.

:data:`PARTIAL` names them (tests/test_defect_table.py holds the rows to it), and the README
repeats it.
"""

from __future__ import annotations

import dataclasses

from verifier.simulator.defects import CATALOGUE

# The environment variable the rotation rows' secret is in (set for both sides by the row runner).
ROTATION_ENV = "VERIFIER_TEST_ROTATION"
ROTATION_SECRET = "defect-table-rotation-secret"

FAMILIES = (
    "structured_output",
    "tool_calling",
    "chat_template",
    "tokenizer",
    "vision",
    "wire",
    "reasoning",
    "context",
    "parity",
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One defect's expected findings.

    Args:
        defect: the ``--defect`` value (with its parameter where one is needed).
        codes: family -> the exact set of codes it gives; families not named give none.
        profile: the profile both sides use: ``kimi-k2``, ``vision`` (with the test vision
            projector's image rule), ``thinking`` (Kimi K2 Thinking: its contract, its template,
            the Kimi tokenizer) or ``small`` (the small test profile, which declares a
            thinking dialect and sampling policies).
        verifier: verifier options (``--repeats tool_calling=2`` unless they say otherwise).
        why: why a second code or family is right, where there is one.
        families: the families run (all nine but for transport faults; parity compares the
            vendor with itself clean).
        vendor: options of the vendor beside its defect (both sides of parity get them).
    """

    defect: str
    codes: dict[str, frozenset[str]]
    profile: str = "kimi-k2"
    verifier: tuple[str, ...] = ()
    why: str = ""
    families: tuple[str, ...] = FAMILIES
    vendor: tuple[str, ...] = ()


def _row(
    defect: str,
    why: str = "",
    profile: str = "kimi-k2",
    verifier: tuple[str, ...] = (),
    **codes: set[str],
) -> Row:
    return Row(defect, {f: frozenset(c) for f, c in codes.items()}, profile, verifier, why)


TRANSPORT = ("tool_calling", "wire")


def _fault(defect: str, *verifier: str, families: tuple[str, ...] = TRANSPORT) -> Row:
    # Enough retries that a seeded fault never outlives them (0.3 ** 11 per request).
    return Row(defect, {}, verifier=("--max-retries", "10", *verifier), families=families)


ROWS: tuple[Row, ...] = (
    # structured_output
    _row("ignore-response-format", structured_output={"not_json"}),
    _row("json-in-markdown-fence", structured_output={"fenced_json"}),
    _row("ignore-keyword:maxItems", structured_output={"schema_mismatch"}),
    _row("strict-accepted-not-enforced", structured_output={"schema_mismatch"}),
    _row(
        "bad-response-format-500",
        "the default generated wire cases hold malformed response formats too, and get the "
        "same server error",
        structured_output={"malformed_format_5xx"},
        wire={"invalid_request_5xx"},
    ),
    _row("truncated-json-finish-stop", structured_output={"truncated_without_length"}),
    # tool_calling
    _row("tool-args-not-json", tool_calling={"invalid_json"}),
    _row("tool-unknown-name", tool_calling={"unknown_tool"}),
    _row("tool-args-violate-schema", tool_calling={"schema_mismatch"}),
    # Told the secret, the vendor still knows only the published prompts' calls: its twins'
    # calls are valid but inaccurate, which fails no case; the comparison of twins does.
    Row(
        "public-prompts-only",
        {"tool_calling": frozenset({"public_cases_special_cased"})},
        verifier=("--rotate", ROTATION_ENV),
        vendor=("--rotate", ROTATION_ENV),
    ),
    _row("tool-finish-reason-stop", tool_calling={"finish_reason_mismatch"}),
    _row(
        "tool-nondeterministic-args",
        verifier=("--repeats", "tool_calling=4"),
        tool_calling={"nondeterministic_calls"},
    ),
    _row(
        "tool-stream-args-differ",
        verifier=("--repeats", "tool_calling=4"),
        tool_calling={"stream_calls_differ"},
    ),
    _row("tool-name-repeated-in-stream", tool_calling={"tool_call_name_repeated"}),
    _row("tool-choice-none-ignored", tool_calling={"tool_choice_none_ignored"}),
    _row("tool-choice-required-ignored", tool_calling={"tool_choice_required_ignored"}),
    _row("tool-choice-named-ignored", tool_calling={"tool_choice_named_ignored"}),
    # Translation: chat and the API the defect is in, so that chat's cases show it is that
    # API's alone.
    _row(
        "messages-named-tool-choice-lost",
        "the tool called over Messages is not the one chat's twin called for the same request",
        verifier=("--api", "chat,messages"),
        tool_calling={"tool_choice_named_ignored", "cross_api_tool_differs"},
    ),
    _row(
        "responses-named-tool-choice-lost",
        "the tool called over Responses is not the one chat's twin called for the same request",
        verifier=("--api", "chat,responses"),
        tool_calling={"tool_choice_named_ignored", "cross_api_tool_differs"},
    ),
    _row(
        "translated-arguments-escaped",
        "the escaped arguments are longer than the tokens billed for them, so accounting sees "
        "more delivered than billed over the two APIs; and they differ, as JSON values, from "
        "chat's for the same request",
        verifier=("--api", "chat,messages,responses"),
        tool_calling={"completion_tokens_mismatch", "cross_api_arguments_differ"},
    ),
    _row(
        "responses-cut-as-completed",
        "every answer cut at its limit over Responses says it completed: accounting sees it in "
        "every family whose cases hit a limit (chat template's, tokenizer's and vision's "
        "one-token probes, "
        "wire's max_tokens cases, structured output's truncation cases), and structured "
        "output's own "
        "check sees those cut objects end with no length reason besides; the two prefill "
        "probes are left to the bill (an engine may deliver the message it continued, so "
        "their length says nothing of the limit): their one-token answers said completed, "
        "billed one token where the answer and the end of its turn are two, which is "
        "completion_tokens_mismatch; so does the context family's answer cut at the window "
        "(it said completed, and its bill left out the end of its turn), and its agent loop's "
        "16-token answers say they completed",
        verifier=("--api", "chat,responses"),
        context={"completion_tokens_mismatch", "length_not_reported"},
        chat_template={"length_not_reported", "completion_tokens_mismatch"},
        tokenizer={"length_not_reported"},
        structured_output={"length_not_reported", "truncated_without_length"},
        vision={"length_not_reported"},
        wire={"length_not_reported"},
    ),
    _row(
        "messages-stop-sequence-as-end-turn",
        verifier=("--api", "chat,messages"),
        wire={"stop_reason_mismatch"},
    ),
    _row(
        "messages-errors-chat-shaped",
        "every refusal over Messages: wire's bad requests in its terms, and vision's refused "
        "images",
        verifier=("--api", "chat,messages"),
        vision={"error_shape"},
        wire={"error_shape"},
    ),
    _row(
        "messages-max-tokens-defaulted",
        verifier=("--api", "chat,messages"),
        wire={"invalid_request_accepted"},
    ),
    _row(
        "messages-cache-double-counted",
        "every Messages answer bills the prompt and most of it again: the counting route, "
        "which counts the prompt once, disagrees with that bill, and tool calling's twins bill "
        "more than chat's; the context family's agent loop, each turn's history held to the "
        "local count, is billed about twice it",
        verifier=("--api", "chat,messages"),
        context={"prompt_tokens_mismatch"},
        chat_template={"cached_tokens_double_counted", "count_tokens_disagrees"},
        tokenizer={"cached_tokens_double_counted"},
        tool_calling={"cross_api_prompt_tokens_differ"},
    ),
    _row(
        "messages-thinking-unsigned",
        profile="thinking",
        verifier=("--api", "chat,messages"),
        reasoning={"thinking_signature_missing"},
    ),
    _row(
        "messages-thinking-history-rejected",
        profile="thinking",
        verifier=("--api", "chat,messages"),
        reasoning={"thinking_history_rejected"},
    ),
    _row(
        "responses-reasoning-items-rejected",
        profile="thinking",
        verifier=("--api", "chat,responses"),
        reasoning={"thinking_history_rejected"},
    ),
    _row(
        "responses-encrypted-content-empty",
        profile="thinking",
        verifier=("--api", "chat,responses"),
        reasoning={"encrypted_content_missing"},
    ),
    _row(
        "messages-redacted-thinking-empty",
        "an empty redacted block takes nothing back: the turn that answers the call then has "
        "no reasoning before it, which K2 Thinking's contract requires with thinking on, and "
        "the vendor's own chat layer refuses it",
        profile="thinking",
        verifier=("--api", "chat,messages"),
        reasoning={"redacted_thinking_data_missing", "thinking_history_rejected"},
    ),
    _row(
        "messages-redacted-thinking-rejected",
        profile="thinking",
        verifier=("--api", "chat,messages"),
        reasoning={"thinking_history_rejected"},
    ),
    _row(
        "messages-text-normalised",
        verifier=("--api", "chat,messages"),
        tokenizer={"input_normalised"},
    ),
    _row(
        "messages-thinking-history-dropped",
        profile="thinking",
        verifier=("--api", "chat,messages"),
        reasoning={"reasoning_history_dropped"},
    ),
    _row(
        "responses-reasoning-items-dropped",
        profile="thinking",
        verifier=("--api", "chat,responses"),
        reasoning={"reasoning_history_dropped"},
    ),
    _row(
        "messages-thinking-dropped",
        profile="small",
        verifier=("--api", "chat,messages"),
        reasoning={"thinking_not_honoured"},
    ),
    # Without its effort the small model does not reason at all: no level gives reasoning,
    # which the effort test names thinking_not_honoured (an order needs lengths to compare).
    _row(
        "responses-effort-dropped",
        profile="small",
        verifier=("--api", "chat,responses"),
        reasoning={"thinking_not_honoured"},
    ),
    _row(
        "messages-cache-creation-omitted",
        verifier=("--api", "chat,messages"),
        wire={"cache_usage_missing"},
    ),
    _row(
        "messages-blocks-overlap",
        "a stream of one block has nothing to overlap: K2 Thinking's answers stream a thinking "
        "block, then the text; the thinking block left open never gets its signature, so the "
        "streamed answer's thinking is unsigned and, sent back, refused",
        profile="thinking",
        verifier=("--api", "chat,messages"),
        reasoning={"thinking_signature_missing", "thinking_history_rejected"},
        wire={"content_block_not_stopped", "content_block_stop_mismatch"},
    ),
    _row(
        "responses-stream-unindexed",
        "the events break the event schema, which requires the fields, as well as the grammar",
        verifier=("--api", "chat,responses"),
        wire={"chunk_shape", "sequence_number_missing", "output_index_missing"}
        | {"content_index_missing"},
    ),
    _row("parallel-tool-calls-ignored", tool_calling={"parallel_tool_calls_ignored"}),
    _row("tool-markers-in-content", tool_calling={"markers_in_content"}),
    _row("tool-duplicate-call-ids", tool_calling={"bad_call_id"}),
    _row("tool-call-id-format", tool_calling={"tool_call_id_format"}),
    _row("tool-call-type-wrong", tool_calling={"bad_call_type"}),
    _row("dynamic-tools-rejected", profile="small", tool_calling={"dynamic_tools_rejected"}),
    _row("dynamic-tools-ignored", profile="small", tool_calling={"dynamic_tools_ignored"}),
    # wire
    _row("stream-no-usage", wire={"usage_missing"}),
    _row("stream-role-repeated", wire={"role_repeated"}),
    _row("stream-no-role", wire={"role_missing"}),
    _row("stream-chunk-id-changes", wire={"chunk_id_changed"}),
    _row("stream-empty-delta", wire={"empty_delta"}),
    _row("stream-no-done", wire={"done_missing"}),
    _row("stream-usage-unrequested", wire={"usage_unrequested"}),
    _row("stream-content-differs", wire={"stream_content_differs"}),
    _row(
        "stream-finish-reason-missing",
        "finish_reason is a contract of three families: a streamed tool call must end with "
        "tool_calls, and an answer cut by max_tokens must say length",
        structured_output={"truncated_without_length"},
        tool_calling={"finish_reason_missing"},
        wire={"finish_reason_missing"},
    ),
    _row("finish-reason-raw-token", wire={"finish_reason_invalid"}),
    _row("stop-not-honoured", wire={"stop_not_honoured"}),
    _row("n-ignored", wire={"n_ignored"}),
    _row(
        "invalid-request-500",
        "the vendor answers every request it cannot parse with a 500: a malformed "
        "response_format, an undecodable image and a prompt past the window are such requests "
        "too",
        structured_output={"malformed_format_5xx"},
        context={"over_window_server_error"},
        vision={"invalid_image_5xx"},
        wire={"invalid_request_5xx"},
    ),
    _row(
        "invalid-request-200",
        "the vendor answers every request it cannot parse with a 200: a malformed "
        "response_format and an undecodable image are such requests too, and so is "
        "top_logprobs above the maximum, answered without the logprobs it asked for",
        structured_output={"malformed_format_accepted"},
        vision={"invalid_image_accepted"},
        wire={"invalid_request_accepted", "logprobs_missing"},
    ),
    Row(
        "invalid-request-poisons",
        {"wire": frozenset({"server_degraded"})},
        # The generated bad requests alone (-k), one at a time: each is followed by its own
        # plain request, which the poison fails through every retry (4 attempts by default).
        verifier=("--negative", "40", "-k", "negative and not invalid", "--concurrency", "1"),
        families=("wire",),
    ),
    Row(
        "invalid-request-slows",
        {"wire": frozenset({"server_degraded"})},
        # Twelve generated cases alone (-k), one at a time: the plain request after each
        # refused one is held 3 s, against milliseconds just before it.
        verifier=("--negative", "12", "-k", "negative and not invalid", "--concurrency", "1"),
        families=("wire",),
    ),
    # Every refusal names 'prompt': the generated bad requests grade error.param; the other
    # families' refusals (malformed formats, invalid images, invalid requests) grade the status
    # and the shape only.
    _row("error-param-wrong", wire={"error_param_wrong"}),
    # Every generated case, so that the edge request with non-ASCII property names is one.
    # structured_output's two cases with non-ASCII property names are refused too: a schema
    # refused with a 4xx is that family's declared coverage (unsupported), not a failure.
    _row(
        "non-ascii-properties-rejected",
        verifier=("--negative", "1000"),
        wire={"valid_request_rejected"},
    ),
    _row(
        "invalid-request-hang",
        "the vendor holds every request it cannot parse: a malformed response_format, an "
        "undecodable image and a prompt past the window are such requests too",
        # Each held request costs the whole timeout, once (no retry): 10 s, so that a valid
        # request on a loaded machine (a 4096-pixel image took 0.26 s idle) never times out
        # (one did at 2 s, under CI's load), with 32 cases in flight to wait on them together
        # (at 8, the default generated set's held requests took 117 s; at 32, 35 s).
        verifier=("--timeout", "10", "--max-retries", "0", "--concurrency", "32"),
        structured_output={"malformed_format_hang"},
        context={"over_window_hang"},
        vision={"invalid_image_hang"},
        wire={"invalid_request_hang"},
    ),
    _row("usage-total-wrong", wire={"usage_total_wrong"}),
    # Billed but not delivered: output accounting holds every answer's bill to its delivery,
    # in whichever family got the answer.
    _row("tool-calls-dropped", tool_calling={"undelivered_tokens"}),
    _row(
        "content-cut",
        "every family whose answers carry text longer than a token bills the whole of it; a "
        "JSON answer cut in half is cut JSON, an image's answer cut in half is the wrong answer",
        structured_output={"truncated_json", "undelivered_tokens"},
        tool_calling={"undelivered_tokens"},
        vision={"answer_mismatch", "undelivered_tokens"},
        wire={"undelivered_tokens"},
        parity={"undelivered_tokens"},
        context={"undelivered_tokens"},
    ),
    _row(
        "reasoning-dropped",
        "an answer with thinking on and no reasoning did not think as asked, while usage still "
        "counts reasoning tokens it does not deliver (the other families' requests do not switch "
        "thinking on: nothing to drop)",
        profile="small",
        reasoning={"undelivered_tokens", "thinking_not_honoured", "reasoning_tokens_mismatch"},
    ),
    _row("logprobs-inconsistent", wire={"logprobs_inconsistent"}),
    # Parity compares by sampled first tokens instead (--parity-method auto, the default), and
    # the sampled distribution is the clean vendor's; with --parity-method logprobs every prompt
    # is logprobs_unavailable, unsupported (tests/test_parity_e2e.py).
    _row("logprobs-unavailable", wire={"logprobs_missing"}),
    # Parity asks for as many alternatives as its probe saw listed: one (cut), whose top-1 lists
    # agree with the reference's, or none (zeroed), so it samples first tokens instead, and the
    # sampled distribution is the clean vendor's.
    _row("logprobs-alternatives-cut", wire={"top_logprobs_count_wrong"}),
    _row("logprobs-zeroed", wire={"top_logprobs_count_wrong"}),
    _row(
        "top-logprobs-duplicated",
        "parity sums a token listed twice into one: the likeliest alternative's mass doubled "
        "is a distribution the reference does not give (distribution_shift)",
        wire={"top_logprobs_duplicated"},
        parity={"distribution_shift"},
    ),
    _row(
        "logprobs-as-probabilities",
        "the answer schemas, written from the OpenAI reference, bound every logprob at 0, so "
        "the shape checks name the same values (response_shape, and chunk_shape in a stream); "
        "parity reads probabilities as logprobs, a distribution far from the reference's",
        wire={"logprob_positive", "response_shape", "chunk_shape"},
        parity={"distribution_shift"},
    ),
    _row(
        "chosen-entry-differs",
        "parity reads the chosen token's mass from its entry among the alternatives, 0.5 "
        "below the reference's (distribution_shift)",
        wire={"chosen_logprob_differs"},
        parity={"distribution_shift"},
    ),
    _row(
        "top-logprobs-limit-cut",
        "the generated bad request of top_logprobs far above the range (10**9) is accepted "
        "too: invalid_request_accepted; the wire case one above the maximum sees the cut",
        wire={"top_logprobs_limit_not_enforced", "invalid_request_accepted"},
    ),
    # Every streamed logprob 0.01 lower moves parity's first (streamed) answer by less than
    # its tolerance of 0.01 total variation.
    _row("stream-logprobs-differ", wire={"stream_logprobs_differ"}),
    _row(
        "max-tokens-not-honoured",
        "the answer near the window is capped there: one token past max_tokens is one past "
        "the window",
        wire={"max_tokens_not_honoured"},
        context={"answer_past_window"},
    ),
    _row(
        "completion-tokens-inflated",
        "every answer of more than a few tokens is billed twice its delivery, whichever family "
        "asked (the one-token answers of chat_template and tokenizer stay within the bound a "
        "max_tokens cut allows)",
        structured_output={"undelivered_tokens"},
        tool_calling={"undelivered_tokens"},
        vision={"undelivered_tokens"},
        wire={"undelivered_tokens"},
        parity={"undelivered_tokens"},
        context={"undelivered_tokens"},
    ),
    _row("seed-ignored", wire={"seed_not_reproducible"}),
    _row("sampling-limits-ignored", profile="small", wire={"sampling_limit_not_enforced"}),
    _row("sampling-pins-ignored", profile="small", wire={"sampling_pin_violated"}),
    _row("sampling-pins-refused", profile="small", wire={"sampling_pin_violated"}),
    _row("served-model-substituted", wire={"served_model_mismatch"}),
    _row("generation-defaults-ignored", profile="small", wire={"defaults_not_applied"}),
    # chat_template and tokenizer
    _row("template-drops-system", chat_template={"system_dropped"}),
    _row(
        "template-special-token-injection",
        "the tokenizer family compares the prompt's ids too, and the same ids are wrong there",
        chat_template={"special_token_injection"},
        tokenizer={"special_token_injection"},
    ),
    _row(
        "template-double-bos",
        "the tokenizer family compares the prompt's ids too, and the same ids are wrong there",
        chat_template={"double_bos"},
        tokenizer={"double_bos"},
    ),
    _row("template-tools-rendered-differently", chat_template={"tools_rendered_differently"}),
    _row("template-merges-system", chat_template={"system_merged"}),
    _row(
        "template-no-generation-prompt",
        "the tokenizer family compares the prompt's ids too, and the same ids are wrong there",
        chat_template={"generation_prompt_missing"},
        tokenizer={"generation_prompt_missing"},
    ),
    _row(
        "template-drops-reasoning",
        "the reasoning family's agent loops replay the model's reasoning, which K2 Thinking's "
        "template renders for the current loop: their follow-ups are short by it too; so is "
        "each turn of the context family's agent loop, whose tool calls go back with their "
        "reasoning, a few tokens a turn (a count other than the release's, no more: its "
        "cause is chat_template's to name)",
        profile="thinking",
        chat_template={"reasoning_history_dropped"},
        reasoning={"reasoning_history_dropped"},
        context={"prompt_tokens_mismatch"},
    ),
    _row("template-reasoning-in-content", chat_template={"reasoning_in_content"}),
    _row("template-continues-final-assistant", chat_template={"assistant_prefill"}),
    _row("partial-prefill-ignored", profile="small", chat_template={"partial_prefill_ignored"}),
    _row("prompt-tokens-skew:+3", chat_template={"prompt_tokens_skew"}),
    _row(
        "count-tokens-drops-tools",
        verifier=("--api", "chat,messages,responses"),
        chat_template={"count_tokens_disagrees"},
    ),
    _row("tokenizer-nfkc-normalises-input", tokenizer={"input_normalised"}),
    _row(
        "tokenizer-old-vocab",
        "an old vocabulary encodes text to other ids (token_ids_mismatch) and cannot decode "
        "the release's newest ids (detokenize_mismatch); chat prompts then count differently, "
        "and no rendering cause explains the counts (prompt_tokens_mismatch); its answers "
        "are billed in the old vocabulary's tokens, more than the release's tokenizer counts "
        "in what they delivered (undelivered_tokens); a long prompt's filler counts more "
        "tokens than the release's count (prompt_tokens_mismatch), and the prompt that fills "
        "the window by the release's count is over it by the vendor's (refused_within_window)",
        chat_template={"prompt_tokens_mismatch"},
        tokenizer={"token_ids_mismatch", "detokenize_mismatch"},
        tool_calling={"undelivered_tokens"},
        wire={"undelivered_tokens"},
        context={"prompt_tokens_mismatch", "refused_within_window"},
    ),
    _row("tokenize-endpoint-disagrees", tokenizer={"tokenize_endpoint_disagrees"}),
    # vision
    _row(
        "vision-images-ignored",
        "an answer that never saw the image is wrong, and the prompt counts no image tokens",
        vision={"answer_mismatch", "image_tokens_mismatch"},
    ),
    _row("vision-first-image-only", vision={"only_first_image_used"}),
    _row("vision-order-swapped", vision={"image_order_swapped"}),
    _row(
        "vision-stale-cache",
        "the cache is keyed by the prompt's text, so a later case asking the same question "
        "of another image is answered from the first (answer_mismatch) besides the cases "
        "that repeat one image to catch the cache (stale_image_cache)",
        vision={"answer_mismatch", "stale_image_cache"},
    ),
    _row("vision-webp-unsupported-silently", vision={"format_not_seen"}),
    _row("vision-jpeg-costs-more", vision={"image_tokens_inconsistent"}),
    _row("vision-token-miscount-large", profile="vision", vision={"image_tokens_mismatch"}),
    _row(
        "vision-invalid-image-500",
        "the default generated wire cases hold invalid images too, and get the same server error",
        vision={"invalid_image_5xx"},
        wire={"invalid_request_5xx"},
    ),
    # A defect switched on only under load: the verifier's own concurrency triggers it.
    _row(
        "defect-under-concurrency:2",
        verifier=("--concurrency", "4"),
        structured_output={"not_json"},
    ),
    # reasoning: the small profile declares a thinking switch, raw tags, effort levels, a
    # history rule and the refusal of a tool-call turn without its reasoning.
    _row("thinking-ignored", profile="small", reasoning={"thinking_not_honoured"}),
    _row("thinking-off-ignored", profile="small", reasoning={"thinking_not_honoured"}),
    _row("thinking-off-answer-in-reasoning", profile="small", reasoning={"content_in_reasoning"}),
    _row("reasoning-swallows-answer", profile="small", reasoning={"reasoning_only_response"}),
    _row("reasoning-parser-off", profile="small", reasoning={"reasoning_markers_in_content"}),
    _row("tool-markup-in-reasoning", profile="small", reasoning={"markers_in_reasoning"}),
    _row("reasoning-field-renamed", profile="small", reasoning={"reasoning_field_mismatch"}),
    _row("json-in-reasoning", profile="small", reasoning={"structured_output_in_reasoning"}),
    _row("json-ends-thinking", profile="small", reasoning={"thinking_mode_overridden"}),
    _row("stream-reasoning-after-content", profile="small", reasoning={"reasoning_after_content"}),
    _row(
        "stream-drops-tool-calls-after-thinking",
        profile="small",
        reasoning={"stream_split_differs"},
    ),
    _row("effort-ignored", profile="small", reasoning={"effort_not_honoured"}),
    _row("thinking-switch-rejected", profile="small", reasoning={"thinking_switch_rejected"}),
    _row("effort-rejected", profile="small", reasoning={"effort_rejected"}),
    _row("reasoning-tokens-miscounted", profile="small", reasoning={"reasoning_tokens_mismatch"}),
    # The follow-up defects over all three APIs: the loops written for Messages and Responses
    # grade their follow-ups as chat's do.
    _row(
        "empty-followup",
        profile="small",
        verifier=("--api", "chat,messages,responses"),
        reasoning={"empty_followup"},
    ),
    _row(
        "followup-calls-unknown-tool",
        profile="small",
        verifier=("--api", "chat,messages,responses"),
        reasoning={"followup_call_invalid"},
    ),
    _row("missing-reasoning-accepted", profile="small", reasoning={"invalid_history_accepted"}),
    _row("reasoning-history-rejected", profile="small", reasoning={"history_rejected"}),
    _row("missing-reasoning-500", profile="small", reasoning={"invalid_history_5xx"}),
    _row(
        "missing-reasoning-hang",
        profile="small",
        # The one held request costs the whole timeout, once, while the others go on.
        verifier=("--timeout", "10", "--max-retries", "0", "--concurrency", "8"),
        reasoning={"invalid_history_hang"},
    ),
    _row(
        "response-format-ignored-when-thinking",
        profile="small",
        reasoning={"structured_output_invalid"},
    ),
    # context: the vendor's window is the profile's (Kimi K2 Instruct's 131,072 tokens), which
    # its model list states as max_model_len.
    # The prompt past the window, the prompt near it and the rung that fills it are each
    # refused as past half the stated window.
    _row("window-smaller-than-stated", context={"window_smaller_than_stated"}),
    _row("prompt-truncated-front", context={"prompt_truncated"}),
    _row("context-shift", context={"answer_past_window"}),
    _row("cached-tokens-unreported", context={"cached_tokens_unreported"}),
    # The ladder's rungs ask their later needles of a cached prefix too: those answers change
    # as well, which is retrieval (accuracy), not a failure.
    _row("cached-prefix-changes-answer", context={"cache_changes_answer"}),
    # The same prompt twice passes (the cache-hot check); after a sibling it does not.
    _row("prefix-cache-collision", context={"cache_changes_answer"}),
    _row("history-compacted", context={"history_compacted"}),
    _row("over-window-500", context={"over_window_server_error"}),
    _row(
        "over-window-hang",
        # The one held request costs the whole timeout, once, while the others go on.
        verifier=("--timeout", "10", "--max-retries", "0", "--concurrency", "8"),
        context={"over_window_hang"},
    ),
    # parity: the vendor against itself clean (check_row starts the reference).
    _row("weights-perturbed", parity={"distribution_shift"}),
    _row("kv-cache-divergence", parity={"kv_cache_divergence"}),
    _row(
        "logprobs-not-top-choice",
        "the wire family's logprobs cases are greedy too: the chosen token below an "
        "alternative is chosen_not_top there",
        parity={"logprobs_inconsistent_with_choice"},
        wire={"chosen_not_top"},
    ),
    # Transport faults: retried and absorbed, never a vendor's conformance code.
    _fault("http-500-every-3rd"),
    # Each third request waits its Retry-After second: the wire family alone, eight cases in
    # flight so that the waits overlap (94 s one at a time, 14 s so).
    _fault("http-429-retry-after", "--concurrency", "8", families=("wire",)),
    _fault("fault-429:0.3"),
    _fault("fault-500:0.3"),
    _fault("fault-timeout:0.02", "--timeout", "2"),
    _fault("fault-reset:0.3"),
    _fault("fault-truncated-stream:0.3"),
    _fault("fault-garbage:0.3"),
    _fault("fault-slow-stream"),
)


# The rows that run some families or cases only (see the module's docstring), besides the
# transport faults.
PARTIAL = ("invalid-request-poisons", "invalid-request-slows")


def catalogue_family(row: Row) -> str:
    """The family the simulated vendor's catalogue files the row's defect under."""
    return CATALOGUE[row.defect.partition(":")[0]].family
