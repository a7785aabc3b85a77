"""The commands the README shows a newcomer, run as written from an empty folder.

Each command is kept here as the README spells it, and the test first checks that the README
still does: a change to either shows here. They run through the shell with this environment's
`verifier` and `pytest` on PATH, default options and relative paths. Only the one-time set-up
(`python3 -m venv ... && pip install -e .`) is left out, and the port the simulated vendor
listens on is a free one instead of 8111, so that a vendor a developer keeps running there does
not answer in its place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REPO, child_env
from tests.hubcache import commit_of, kimi_files, populate
from tests.server_process import free_port
from verifier.cases.corpus import load_corpus
from verifier.config import DEFAULT_FAMILIES
from verifier.reference.profiles import builtin_names
from verifier.simulator.process import SimulatorProcess

pytestmark = pytest.mark.slow

README = (REPO / "README.md").read_text()
SET_UP = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
MAIN = (
    "(verifier simulate --profile kimi-k2-thinking --port 8111 > /dev/null &) && sleep 5 && "
    "pytest --endpoint http://127.0.0.1:8111 --profile kimi-k2-thinking"
)
DEMO = "verifier demo"
KEYGEN = "verifier keygen --out signer.key"
SIGNED = "pytest --endpoint URL --sign-key signer.key"
VERIFY = (
    "verifier verify verifier-out/scorecard.dsse.json --key signer.key.pub "
    "--transcript verifier-out/transcript.jsonl"
)
PROFILES = "verifier profiles"
PACK = "verifier pack private-v1"
OVER_APIS = [
    f"pytest --endpoint http://127.0.0.1:8111 --api {api} --families tool_calling,structured_output"
    for api in ("messages", "responses")
]
HUB = (
    "HF_HUB_OFFLINE=1 pytest --endpoint http://127.0.0.1:8000 "
    "--profile hf:moonshotai/Kimi-K2-Instruct@COMMIT"
)
COMPARE = (
    "verifier compare --key signer.key.pub --html comparison.html \\\n"
    "    vendor-a=runs/a/scorecard.dsse.json vendor-b=runs/b/scorecard.dsse.json "
    "runs/c/scorecard.json"
)


def shell(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`command` through bash in `cwd`, in its own session; whatever it left running is killed.

    Output goes to files, not pipes: the main command's background vendor keeps its stderr
    open after the command ends, and a pipe would never reach its end.
    """
    env = child_env({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=timeout)
        finally:
            # The background vendor of the main command shares the shell's process group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())


def test_the_readme_still_shows_these_commands() -> None:
    for command in (SET_UP + MAIN, DEMO, KEYGEN, SIGNED, VERIFY, COMPARE, PROFILES, HUB, PACK):
        assert command in README, command
    for command in OVER_APIS:
        assert command in README, command


def test_the_runs_over_messages_and_responses_pass_the_clean_vendor(tmp_path: Path) -> None:
    vendor = SimulatorProcess([])
    try:
        for command in OVER_APIS:
            done = shell(command.replace("http://127.0.0.1:8111", vendor.url), tmp_path)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
            card = json.loads((tmp_path / "verifier-out" / "scorecard.json").read_text())
            api = command.split("--api ")[1].split()[0]
            assert card["endpoint"]["apis"] == [api]
            assert {name: family["verdict"] for name, family in card["families"].items()} == {
                "tool_calling": "pass",
                "structured_output": "pass",
            }
            # Over one API the family's entry is that API's: no breakdown beside it.
            assert all("apis" not in family for family in card["families"].values())
    finally:
        vendor.stop()


def test_the_main_command_grades_every_family_and_passes(tmp_path: Path) -> None:
    port = str(free_port())
    done = shell(MAIN.replace("8111", port), tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    card = json.loads((tmp_path / "verifier-out" / "scorecard.json").read_text())
    assert (card["profile"]["name"], card["profile"]["builtin"]) == ("kimi-k2-thinking", True)
    # Every family but parity (which needs a reference) graded and passed, reasoning included.
    verdicts = {name: family["verdict"] for name, family in card["families"].items()}
    assert verdicts == dict.fromkeys(set(DEFAULT_FAMILIES) - {"parity"}, "pass")
    # No case is unsupported for lack of a profile or of its files: those left ask for what
    # Kimi K2 Thinking's contract rules out (thinking off: it always reasons; a tool-call turn
    # without its reasoning, which its lab's API refuses) or does not state (partial mode,
    # dynamic tools, generation defaults, sampling limits and pins, effort levels, an image
    # size limit), and two logprob cases whose few max_tokens all go on reasoning.
    # Tool calling and structured output run over the three APIs the vendor serves (chat,
    # Anthropic Messages, OpenAI Responses): their twins are unsupported for the same reasons,
    # and the structured-output cases the other APIs have no words for (a json_object format,
    # a malformed response_format built for chat's validation) say so.
    journal = (tmp_path / "verifier-out" / "journal.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in journal if '"outcome"' in line]
    unsupported = Counter(
        (r.get("api", "chat"), r["outcome"]["message"])
        for r in records
        if r["outcome"]["status"] == "unsupported"
    )
    refused = "rejected with HTTP 400: thinking is enabled but reasoning_content is missing in "
    always = "unsupported: the model always reasons: its contract has no way to turn thinking off"
    chat_logprobs = (
        "unsupported: max_tokens ran out in the reasoning: no content token to read logprobs of"
    )
    tools = {
        "unsupported: the model's contract documents no tools declared in messages": 2,
        f"unsupported: tools {refused}assistant tool call message at index 1": 21,
        f"unsupported: tools {refused}assistant tool call message at index 2": 1,
    }
    chat = {
        "unsupported: the model's contract documents no partial mode": 1,
        "unsupported: the model's contract states no generation defaults": 1,
        "unsupported: the profile declares no sampling limits": 1,
        "unsupported: the profile pins no sampling value": 1,
        "unsupported: the profile documents no image size limit": 1,
        "unsupported: the profile declares no reasoning effort levels": 1,
        always: 2,
        chat_logprobs: 2,
        f"unsupported: the conversation was {refused}assistant tool call message at index 1": 3,
        # The context ladder's rungs that K2 Thinking's window of 262,144 tokens cannot hold.
        **{
            f"unsupported: {n:,} tokens and an answer do not fit the window of 262,144 "
            "(GET /v1/models max_model_len)": 1
            for n in (262_144, 524_288, 1_048_576)
        },
    }
    messages = "unsupported: the case cannot be sent through Anthropic Messages: "
    responses = "unsupported: the case cannot be sent through OpenAI Responses: "
    assert unsupported == {
        **{("chat", m): n for m, n in {**chat, **tools}.items()},
        **{(api, m): n for api in ("messages", "responses") for m, n in tools.items()},
        ("messages", f"{messages}the Messages API has no response_format 'json_object'"): 7,
        ("messages", f"{messages}a json_schema response_format without a schema object"): 2,
        ("messages", f"{messages}the Messages API has no response_format 'json_schemaa'"): 1,
        (
            "responses",
            f"{responses}the response_format 'json_schema' has no Responses counterpart",
        ): 1,
        (
            "responses",
            f"{responses}the response_format 'json_schemaa' has no Responses counterpart",
        ): 1,
        # Wire's cases over the other APIs: those they have no words for, and a logprobs
        # case whose few max_tokens all go on reasoning, as over chat.
        ("messages", f"{messages}the Messages API has no logprobs (logprobs=True)"): 1,
        ("responses", f"{responses}the Responses API has no stop sequences"): 4,
        ("responses", chat_logprobs): 1,
        # Chat template's probes over the other APIs: those chat leaves out too (partial
        # mode; a tool-call turn without its reasoning), a prefill Messages cannot say, and
        # histories whose reasoning neither API takes back without what it returned with it
        # (the context family's agent loop among them: K2 Thinking's tool calls go back with
        # their reasoning).
        **{
            (api, message): n
            for api in ("messages", "responses")
            for message, n in {
                "unsupported: the model's contract documents no partial mode": 1,
                f"unsupported: the conversation was {refused}"
                "assistant tool call message at index 1": 3,
            }.items()
        },
        ("messages", f"{messages}a conversation that ends with an assistant message"): 2,
        (
            "messages",
            f"{messages}an assistant message's reasoning_content "
            "(a thinking block needs its signature)",
        ): 6,
        (
            "responses",
            f"{responses}an assistant message's reasoning cannot be given back to the "
            "Responses API",
        ): 6,
        # Vision's cases over the other APIs: the size limit the profile leaves out, as over
        # chat, and an image detail Messages has no word for.
        **{
            (api, "unsupported: the profile documents no image size limit"): 1
            for api in ("messages", "responses")
        },
        ("messages", f"{messages}the Messages API has no image detail ('high')"): 2,
        ("messages", f"{messages}the Messages API has no image detail ('low')"): 3,
        # Reasoning's cases written for the other APIs: thinking switched off over Messages,
        # and effort over Responses, are ruled out as over chat.
        ("messages", always): 1,
        ("responses", "unsupported: the profile declares no reasoning effort levels"): 1,
    }
    by_api = Counter(r.get("api", "chat") for r in records)
    assert by_api == {"chat": 688, "messages": 637, "responses": 633}
    assert card["endpoint"]["apis"] == ["chat", "messages", "responses"]
    for name in (
        "chat_template",
        "tool_calling",
        "structured_output",
        "vision",
        "wire",
        "tokenizer",
    ):
        per_api = card["families"][name]["apis"]
        assert {api: entry["verdict"] for api, entry in per_api.items()} == {
            "chat": "pass",
            "messages": "pass",
            "responses": "pass",
        }
    # The same request gives the same answer through every API: each case's twins agree.
    markdown = (tmp_path / "verifier-out" / "scorecard.md").read_text()
    for name, pairs in (("tool_calling", 300), ("structured_output", 211)):
        family = card["families"][name]
        assert {r["name"]: r["differing"] for r in family["rulings"]} == {
            f"cross_api {kind}": 0 for kind in family["metrics"]["cross_api"]["by_kind"]
        }
        assert family["metrics"]["cross_api"]["pairs"] == pairs
        assert (
            f"- across APIs (chat, messages, responses): the same answer in 1.000 "
            f"[{family['metrics']['cross_api']['agreement']['interval'][0]:.3f}, 1.000] of "
            f"{pairs} twin pairs\n"
        ) in markdown
    # The gate passes the clean vendor too, with the profile and without one (over chat
    # alone: the gate reads each family's entry, whatever the APIs it ran over).
    with_profile = shell(MAIN.replace("8111", port) + " --api chat --gate --out gated", tmp_path)
    assert with_profile.returncode == 0, with_profile.stdout[-3000:]
    assert "gate (defaults): PASS" in with_profile.stdout
    vendor = SimulatorProcess([])
    try:
        without = shell(f"pytest --endpoint {vendor.url} --api chat --gate --out bare", tmp_path)
    finally:
        vendor.stop()
    assert without.returncode == 0, without.stdout[-3000:]
    assert "gate (defaults): PASS" in without.stdout
    bare = json.loads((tmp_path / "bare" / "scorecard.json").read_text())
    assert bare["families"]["chat_template"]["verdict"] == "unsupported"


def test_profiles_lists_every_builtin_with_its_sources(tmp_path: Path) -> None:
    done = shell(PROFILES, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in builtin_names():
        assert f"{name}  (contract " in done.stdout


def test_pack_prints_what_the_readme_shows(tmp_path: Path) -> None:
    """The README's pack, written as it describes it, gives the lines it shows (its digest
    any 64 hex digits)."""
    shown = README.split(f"$ {PACK}\n", 1)[1].split("```", 1)[0].splitlines()
    corpus = {c.id: c.data for c in load_corpus(["tool_calling", "structured_output"]).cases}
    single = [data for key, data in corpus.items() if key.startswith("single-")][:2]
    schema = next(data for key, data in corpus.items() if key.startswith("basic-"))
    files = {
        "tool_calling/mine.jsonl": [{**d, "id": f"mine-{n}"} for n, d in enumerate(single)],
        "structured_output/json_schema.jsonl": [{**schema, "id": "mine-schema"}],
    }
    for name, cases in files.items():
        path = tmp_path / "private-v1" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    done = shell(PACK, tmp_path)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert re.fullmatch(
        re.escape(shown[0]).replace("<64\\ hex\\ digits>", "[0-9a-f]{64}"), printed[0]
    )
    assert printed[1:] == shown[1:]


def test_the_hub_profile_command_runs_offline_from_the_cache(tmp_path: Path) -> None:
    """The README's hf: command, with a hub cache the test writes in place of the user's."""
    commit = commit_of("readme")
    cache = tmp_path / "hub"
    populate(cache, "moonshotai/Kimi-K2-Instruct", commit, kimi_files(), branch=None)
    vendor = SimulatorProcess(["--profile", "kimi-k2"])
    try:
        command = HUB.replace("http://127.0.0.1:8000", vendor.url).replace("COMMIT", commit)
        done = shell(f"HF_HUB_CACHE={cache} {command}", tmp_path)
    finally:
        vendor.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    card = json.loads((tmp_path / "verifier-out" / "scorecard.json").read_text())
    assert card["profile"]["hub"]["commit"] == commit
    assert set(card["families"]) == set(DEFAULT_FAMILIES)


def test_the_demo_runs_with_its_defaults(tmp_path: Path) -> None:
    done = shell(DEMO, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "verifier-demo" / "comparison.html").is_file()
    assert f"comparison: {tmp_path / 'verifier-demo' / 'comparison.html'}" in done.stdout


def test_keygen_sign_verify_and_compare_as_written(tmp_path: Path) -> None:
    assert shell(KEYGEN, tmp_path).returncode == 0
    assert (tmp_path / "signer.key").stat().st_mode & 0o777 == 0o600
    vendor = SimulatorProcess([])
    try:
        # One family keeps it short; signing does not depend on which ran.
        signed = shell(SIGNED.replace("URL", vendor.url) + " --families wire", tmp_path)
    finally:
        vendor.stop()
    assert signed.returncode == 0, signed.stdout[-3000:]
    verified = shell(VERIFY, tmp_path)
    assert verified.returncode == 0, verified.stderr
    runs = tmp_path / "runs"
    for name in ("a", "b", "c"):
        (runs / name).mkdir(parents=True)
        for file in ("scorecard.dsse.json", "scorecard.json"):
            (runs / name / file).write_bytes((tmp_path / "verifier-out" / file).read_bytes())
    compared = shell(COMPARE, tmp_path)
    assert compared.returncode == 0, compared.stderr
    page = (tmp_path / "comparison.html").read_text()
    assert "vendor-a" in page and "vendor-b" in page
