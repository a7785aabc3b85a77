"""The built-in model contracts: each loads, validates, cites a source for every fact at every
depth, states what its model's own chat template does, and its checks pass a vendor that honours
it and fail one that does not, with exactly their codes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, VerifierRun, kimi_thinking_folder
from tests.hubcache import KIMI_DIR, KIMI_FILES
from verifier import resources
from verifier.cases.corpus import load_corpus
from verifier.reference.profiles import (
    BUILTIN_DIR,
    PROFILE_FILE,
    builtin_names,
    citation_errors,
    facts,
    model_key,
    profile_for_model,
)
from verifier.reference.template import ChatTemplate
from verifier.simulator.process import SimulatorProcess

CONTRACTS = builtin_names()


def check_of(case: Any) -> str:
    """The contract check a case belongs to (its check, probe or tool-calling category)."""
    return str(case.data.get("check") or case.data.get("probe") or case.data.get("category"))


def _thinks(c: dict[str, Any]) -> bool:
    return "thinking" in c or bool(c.get("reasoning", {}).get("always_on"))


# The checks a contract drives (wire checks, the chat_template partial probe, the reasoning
# family's checks), and what each needs the contract to state.
CONTRACT_CHECKS = {
    "partial": lambda c: bool(c.get("features", {}).get("partial_prefill")),
    "served_model": lambda c: bool(c.get("served_models")),
    "sampling_pins": lambda c: any(
        "fixed" in p or "values" in p for p in c.get("sampling", {}).values()
    ),
    "sampling_limits": lambda c: any(
        "min" in p or "max" in p for p in c.get("sampling", {}).values()
    ),
    "thinking_on": _thinks,
    "thinking_off": lambda c: "thinking" in c and not c.get("reasoning", {}).get("always_on"),
    "structured": _thinks,
    "agent_loop": _thinks,
    "effort": lambda c: "effort" in c.get("reasoning", {}),
    "invalid_history": lambda c: bool(c.get("reasoning", {}).get("tool_turns_need_reasoning")),
    "generation_defaults": lambda c: bool(c.get("generation_defaults")),
    "dynamic": lambda c: bool(c.get("features", {}).get("dynamic_tools")),
}
# A vendor that answers as another model, accepts every sampling value, never reasons,
# answers a partial message instead of continuing it, samples with the engine's defaults and
# drops tools declared in a system message: the codes each contract's checks give for it,
# written out (not derived from the files).
DEFECTS = (
    "served-model-substituted",
    "sampling-pins-ignored",
    "thinking-ignored",
    "partial-prefill-ignored",
    "generation-defaults-ignored",
    "dynamic-tools-ignored",
)
CODES = {
    "deepseek-v3.2": {"served_model_mismatch", "thinking_not_honoured"},
    "deepseek-v4": {"served_model_mismatch", "thinking_not_honoured"},
    "glm-4.5": {"served_model_mismatch", "thinking_not_honoured"},
    "gpt-oss": {"served_model_mismatch", "thinking_not_honoured"},
    "kimi-k2": {"served_model_mismatch"},
    "kimi-k2-thinking": {"served_model_mismatch", "thinking_not_honoured"},
    "kimi-k2.5": {
        "served_model_mismatch",
        "sampling_pin_violated",
        "thinking_not_honoured",
        "partial_prefill_ignored",
    },
    "kimi-k3": {
        "served_model_mismatch",
        "sampling_pin_violated",
        "thinking_not_honoured",
        "dynamic_tools_ignored",
    },
    # gpt-oss's generation defaults (temperature 1, top_p 1) are the engine's own: a vendor
    # that ignores them samples the same.
    "qwen3": {"served_model_mismatch", "thinking_not_honoured", "defaults_not_applied"},
}
FAMILIES = ("wire", "chat_template", "reasoning", "tool_calling")
ALL_APIS = "chat,messages,responses"
# Of tool calling, the cases a contract drives: its dynamic-tools cases.
SELECTED = "not tool_calling or dynamic"
CASES = [
    c
    for c in load_corpus(list(FAMILIES)).cases
    if c.family != "tool_calling" or check_of(c) == "dynamic"
]


def contract(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BUILTIN_DIR / name / PROFILE_FILE).read_text())
    return data


def test_every_contract_has_its_codes_written_out() -> None:
    assert set(CODES) == set(CONTRACTS)


@pytest.mark.parametrize("name", CONTRACTS)
def test_contract_validates_and_cites_every_fact(name: str) -> None:
    data = contract(name)
    assert list(resources.validator("profile").iter_errors(data)) == []
    assert data["version"] and data["hub"]["repo"] and data["served_models"]
    assert citation_errors(data) == []
    for source in data["sources"].values():
        assert source["what"].strip(), source["url"]


def test_facts_are_every_leaf_and_each_request_fragment_whole() -> None:
    stated = {
        "description": "not a fact",
        "version": "v1",
        "hub": {"repo": "org/model", "revision": "main"},
        "served_models": ["org/model", "model"],
        "thinking": {"on": {"thinking": {"type": "enabled"}}, "off": {"thinking": {"x": 0}}},
        "reasoning": {"tags": {"start": "<think>", "end": "</think>"}, "history": "all"},
        "sampling": {"top_p": {"fixed": 0.95, "off_policy": "reject"}},
        "sources": {"a": {"url": "https://a.invalid", "what": "a"}},
        "cites": {"hub.repo": ["a"]},
    }
    assert facts(stated) == {
        "hub.repo": "org/model",
        "served_models": ["org/model", "model"],
        "thinking.on": {"thinking": {"type": "enabled"}},
        "thinking.off": {"thinking": {"x": 0}},
        "reasoning.tags.start": "<think>",
        "reasoning.tags.end": "</think>",
        "reasoning.history": "all",
        "sampling.top_p.fixed": 0.95,
        "sampling.top_p.off_policy": "reject",
    }


def test_a_nested_fact_without_its_own_source_is_an_error() -> None:
    data = contract("qwen3")
    kept = {path: ids for path, ids in data["cites"].items() if path != "reasoning.history"}
    uncited = {**data, "cites": kept}
    assert citation_errors(uncited) == ["reasoning.history: no source cited"]
    stray = {**data, "cites": {**data["cites"], "reasoning.field": ["qwen3_template"]}}
    assert citation_errors(stray) == ["cites reasoning.field: the contract states no such fact"]
    unknown = {**data, "cites": {**data["cites"], "reasoning.tool_markers": ["nowhere"]}}
    assert citation_errors(unknown) == ["cites reasoning.tool_markers: 'nowhere' is not in sources"]
    extra = {"url": "https://extra.invalid", "what": "states nothing here"}
    orphan = {**data, "sources": {**data["sources"], "extra": extra}}
    assert citation_errors(orphan) == ["sources extra: no fact cites it"]


def test_top_level_cites_do_not_cite_the_facts_beneath_them() -> None:
    """main's form: one list per top-level key, which says nothing of which fact a source states."""
    data = contract("deepseek-v4")
    by_key: dict[str, list[str]] = {}
    for path, ids in data["cites"].items():
        by_key.setdefault(path.split(".")[0], []).extend(ids)
    errors = citation_errors({**data, "cites": by_key})
    nested = [path for path in facts(data) if "." in path]
    assert errors == [
        *(f"{path}: no source cited" for path in nested),
        *(f"cites {key}: the contract states no such fact" for key in ("hub", "thinking")),
        "cites reasoning: the contract states no such fact",
    ]


def rendered_history(template: str) -> str:
    """Which past reasoning `template` renders, as a contract's history rule names it.

    A finished exchange, a new user message, then a tool-call turn of the current loop: ``all``
    renders both turns' reasoning, ``tool_turns`` only the current loop's, ``none`` neither.
    """
    messages = [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "No.", "reasoning_content": "EARLIER-REASONING"},
        {"role": "user", "content": "Weather in Lima?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "CURRENT-REASONING",
            "tool_calls": [
                {
                    "id": "functions.get_weather:0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "19 C"},
    ]
    text = ChatTemplate(template).render(messages).text
    rules = {(True, True): "all", (False, True): "tool_turns", (False, False): "none"}
    return rules[("EARLIER-REASONING" in text, "CURRENT-REASONING" in text)]


# The model releases' own chat templates (in tests/data, or shipped with the built-in), by the
# contract they belong to.
TEMPLATES = {
    "qwen3": REPO / "tests" / "data" / "qwen3" / "chat_template.jinja",
    "kimi-k2-thinking": BUILTIN_DIR / "kimi-k2-thinking" / "chat_template.jinja",
}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_history_rule_is_what_the_models_template_renders(name: str) -> None:
    template = TEMPLATES[name].read_text(encoding="utf-8")
    assert contract(name)["reasoning"]["history"] == rendered_history(template)


def test_served_ids_select_exactly_their_contract() -> None:
    owners: dict[str, str] = {}
    for name in CONTRACTS:
        for served in contract(name)["served_models"]:
            assert owners.setdefault(model_key(served), name) == name, served
            assert profile_for_model(served) == name
            assert profile_for_model(f"accounts/vendor/models/{served.upper()}") == name


def test_a_contract_is_listed_with_its_sources() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "verifier", "profiles"], capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    for name in CONTRACTS:
        data = contract(name)
        assert name in shown.stdout
        assert data["version"] in shown.stdout
        for path, value in facts(data).items():
            shown_value = json.dumps(value, ensure_ascii=False)
            line = f"  {path} = {shown_value}  [{', '.join(data['cites'][path])}]"
            assert line in lines, line
        for source in data["sources"].values():
            assert source["url"] in shown.stdout


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Model files for the contracts' checks, which read no file: Kimi's, in a plain folder.

    The wire checks a contract drives compare answers with the contract (model ids, sampling
    pins, the reasoning dialect); the template and tokenizer only count usage, the same way on
    both sides. Only Kimi's files are at hand offline, so every contract borrows them, and
    Kimi's tokenizer names the special tokens of every contract's reasoning tags as the
    model's own tokenizer does (gpt-oss's ``<|channel|>``): a tag costs its model a token or
    two of ``max_tokens``, never the dozen its text would cost.
    """
    folder = tmp_path_factory.mktemp("stand-in")
    for name in (*KIMI_FILES, "tokenizer_spec.json"):
        shutil.copy(KIMI_DIR / name, folder / name)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    added = config["added_tokens_decoder"]
    named = {entry["content"] for entry in added.values()}
    spec = json.loads((folder / "tokenizer_spec.json").read_text())
    free = (
        str(i)
        for i in range(spec["num_base_tokens"], spec["num_base_tokens"] + 256)
        if str(i) not in added
    )
    for name in CONTRACTS:
        tags = (contract(name).get("reasoning") or {}).get("tags") or {}
        for piece in re.findall(r"<\|[a-z_]+\|>", "".join(tags.values())):
            if piece not in named:
                named.add(piece)
                added[next(free)] = {"content": piece, "special": True}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def graded(run: VerifierRun) -> tuple[set[str], dict[str, str]]:
    """The codes of the run's families, and each case's status."""
    assert list(resources.validator("scorecard").iter_errors(run.scorecard)) == []
    families = run.scorecard["families"]
    codes = {code for family in families.values() for code in family["codes"]}
    outcomes = {k.split("/", 1)[1]: v["status"] for k, v in run.outcomes().items()}
    return codes, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTRACTS)
def test_contract_checks_pass_an_honouring_vendor_and_fail_a_defective_one(
    name: str, stand_in: Path, run_verifier: Callable[..., VerifierRun]
) -> None:
    profile = f"{name}:{stand_in}"
    data = contract(name)
    applies = {check for check, needs in CONTRACT_CHECKS.items() if needs(data)}
    runs = {}
    # The clean vendor over every API (the cases written for Messages and Responses state
    # the switch and effort in those APIs' terms); the defective one over chat.
    for label, defects, apis in (("clean", (), ALL_APIS), ("defective", DEFECTS, "chat")):
        vendor = SimulatorProcess(
            ["--profile", profile, *(a for d in defects for a in ("--defect", d))]
        )
        try:
            runs[label] = run_verifier(
                *(vendor.url, "--profile", profile, "--families", ",".join(FAMILIES)),
                *("-k", SELECTED, "--api", apis),
            )
        finally:
            vendor.stop()
    codes, outcomes = graded(runs["clean"])
    assert codes == set(), runs["clean"].stdout[-3000:]
    for case in CASES:
        if check_of(case) in CONTRACT_CHECKS:
            api = case.data.get("api")
            expected = "pass" if check_of(case) in applies else "unsupported"
            reasoning = data.get("reasoning", {})
            openai_effort = reasoning.get("effort", {}).get("field") == "reasoning_effort"
            if api == "responses" and check_of(case) == "effort":
                # Responses' reasoning.effort is OpenAI's reasoning_effort, no other field.
                expected = "pass" if openai_effort else "unsupported"
            elif api == "responses" and expected == "pass":
                # Nothing else in the Responses reference asks for reasoning: a model that does
                # not always reason has none to send back where its contract states no effort.
                thinks = openai_effort or reasoning.get("always_on")
                expected = "pass" if thinks else "unsupported"
            key = f"{case.id}[{api}]" if api else case.id
            assert outcomes[key] == expected, key
    assert runs["clean"].scorecard["profile"]["contract_version"] == data["version"]
    codes, _ = graded(runs["defective"])
    assert codes == CODES[name], runs["defective"].stdout[-3000:]


@pytest.mark.slow
def test_qwen3_contract_catches_a_vendor_that_drops_the_loops_reasoning(
    tmp_path: Path, run_verifier: Callable[..., VerifierRun]
) -> None:
    """Qwen3's history rule sends the current loop's reasoning back, so dropping it shows.

    Qwen3's own template cannot render the null content of the tool-call turns an agent loop
    sends back ('None' has no attribute 'lstrip'), so Kimi K2 Thinking's stands in: it too
    renders the reasoning of the current tool-call loop only. Under main's rule (none) the loop
    sent no reasoning and this vendor passed. About 2 s.
    """
    profile = f"qwen3:{kimi_thinking_folder(tmp_path / 'files')}"
    vendor = SimulatorProcess(["--profile", profile, "--defect", "template-drops-reasoning"])
    try:
        run = run_verifier(
            vendor.url, "--profile", profile, "--families", "reasoning", "-k", "loop"
        )
    finally:
        vendor.stop()
    codes, outcomes = graded(run)
    assert codes == {"reasoning_history_dropped"}, run.stdout[-3000:]
    loops = {c.id for c in CASES if check_of(c) == "agent_loop" and "api" not in c.data}
    assert {case for case, status in outcomes.items() if status == "fail"} == loops
