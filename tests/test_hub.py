"""--profile hf:ORG/NAME[@REVISION]: a model's files from a hub cache the test writes, offline."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import VerifierRun
from tests.hubcache import KIMI_DIR, commit_of, kimi_files, populate
from verifier import resources
from verifier.errors import ConfigError
from verifier.reference import hub
from verifier.reference.profiles import builtin_for_repo, load_profile
from verifier.simulator.process import SimulatorProcess

KIMI_REPO = "moonshotai/Kimi-K2-Instruct"
KIMI_COMMIT = commit_of(KIMI_REPO)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache that huggingface_hub reads, in offline mode."""
    from huggingface_hub import constants

    folder = tmp_path / "hub"
    folder.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return folder


@pytest.fixture
def small_repo(cache: Path, small_profile_dir: Path) -> str:
    """A repository with a tokenizer.json and no built-in contract, as commit `small` of main."""
    files = {
        n: (small_profile_dir / n).read_bytes() for n in ("tokenizer.json", "tokenizer_config.json")
    }
    populate(cache, "example-org/small-chat", commit_of("small"), files)
    return "example-org/small-chat"


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("hf:org/name", ("org/name", "main")),
        ("hf:Org/Name-2.5@v1.0", ("Org/Name-2.5", "v1.0")),
        (f"hf:org/name@{KIMI_COMMIT}", ("org/name", KIMI_COMMIT)),
    ],
)
def test_parse(spec: str, parsed: tuple[str, str]) -> None:
    assert hub.parse(spec) == parsed


@pytest.mark.parametrize("spec", ["hf:name", "hf:org/name@", "hf:/name", "hf:org/na me"])
def test_parse_rejects_what_is_not_a_repository(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"expected hf:ORG/NAME or hf:ORG/NAME@REVISION"):
        hub.parse(spec)


def test_fetch_resolves_branch_and_commit_alike(small_repo: str, small_profile_dir: Path) -> None:
    by_branch = hub.fetch(small_repo, "main")
    by_commit = hub.fetch(small_repo, commit_of("small"))
    assert by_branch.commit == by_commit.commit == commit_of("small")
    assert (by_branch.revision, by_commit.revision) == ("main", commit_of("small"))
    expected = {
        n: hashlib.sha256((small_profile_dir / n).read_bytes()).hexdigest()
        for n in ("tokenizer.json", "tokenizer_config.json")
    }
    assert by_branch.files == by_commit.files == expected


def test_not_cached_offline_is_one_line_naming_the_fix(cache: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        hub.fetch("example-org/absent", "main")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("--profile hf:example-org/absent@main: not in the hub cache")
    assert "HF_HUB_OFFLINE" in message and "hf download example-org/absent" in message


def test_hf_profile_records_commit_and_digests(small_repo: str) -> None:
    profile = load_profile(f"hf:{small_repo}")
    described = profile.describe()
    assert described["name"] == small_repo
    assert described["builtin"] is False
    assert described["hub"]["commit"] == commit_of("small")
    assert set(described["hub"]["files"]) == {"tokenizer.json", "tokenizer_config.json"}
    assert profile.prompt_ids([{"role": "user", "content": "Hello!"}])


def test_kimi_repository_uses_its_builtin_contract_and_tokenizer_equivalent(cache: Path) -> None:
    """Kimi's tokenizer is remote code; the built-in contract states its tiktoken equivalent."""
    populate(cache, KIMI_REPO, KIMI_COMMIT, kimi_files(), branch=None)
    profile = load_profile(f"hf:{KIMI_REPO}@{KIMI_COMMIT}")
    assert profile.name == "kimi-k2" and profile.builtin
    assert (
        profile.root == cache / "models--moonshotai--Kimi-K2-Instruct" / "snapshots" / KIMI_COMMIT
    )
    # The reference's known count (../shared/reference/README.md).
    assert len(profile.prompt_ids([{"role": "user", "content": "Hello!"}])) == 28
    assert profile.describe()["hub"]["files"]["tiktoken.model"] == (
        "b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103"
    )
    assert "moonshotai/Kimi-K2-Instruct" in profile.settings["served_models"]


def test_remote_code_tokenizer_without_a_builtin_is_refused(cache: Path) -> None:
    populate(cache, "example-org/custom-tokenizer", commit_of("custom"), kimi_files())
    with pytest.raises(ConfigError) as caught:
        load_profile("hf:example-org/custom-tokenizer")
    message = str(caught.value)
    assert "tokenization_kimi.TikTokenTokenizer" in message
    assert "trust_remote_code" in message and "never runs" in message
    assert "\n" not in message


def test_builtin_without_files_reads_its_repository_from_the_cache(cache: Path) -> None:
    """--profile kimi-k2.5 by name: the contract's repository and revision, from the cache."""
    source = json.loads((KIMI_DIR.parent / "kimi-k2.5" / "verifier-profile.json").read_text())[
        "hub"
    ]
    revision = source["revision"]
    commit = revision if len(revision) == 40 else commit_of(source["repo"])
    populate(
        cache, source["repo"], commit, kimi_files(), branch=None if revision == commit else revision
    )
    profile = load_profile("kimi-k2.5")
    assert profile.builtin and profile.name == "kimi-k2.5"
    assert profile.describe()["hub"]["repo"] == source["repo"]
    assert profile.describe()["hub"]["commit"] == commit
    assert builtin_for_repo(source["repo"]) == "kimi-k2.5"


def test_builtin_without_files_offline_and_uncached_says_so(cache: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--profile hf:.*not in the hub cache .*HF_HUB_OFFLINE"):
        load_profile("qwen3")


@pytest.mark.slow
def test_run_with_hf_profile_offline_records_the_snapshot(
    tmp_path: Path, run_verifier: Callable[..., VerifierRun]
) -> None:
    """pytest --endpoint URL --profile hf:ORG/NAME@REV from a populated cache, offline."""
    cache = tmp_path / "hub"
    populate(cache, KIMI_REPO, KIMI_COMMIT, kimi_files(), branch=None)
    vendor = SimulatorProcess(["--profile", "kimi-k2"])
    try:
        run = run_verifier(
            vendor.url,
            "--profile",
            f"hf:{KIMI_REPO}@{KIMI_COMMIT}",
            "--families",
            "chat_template,tokenizer",
            env={"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"},
        )
    finally:
        vendor.stop()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert f"verifier profile: kimi-k2 (hf:{KIMI_REPO} at commit {KIMI_COMMIT[:12]}" in run.stdout
    assert list(resources.validator("scorecard").iter_errors(run.scorecard)) == []
    recorded = run.scorecard["profile"]["hub"]
    assert recorded["commit"] == KIMI_COMMIT
    assert recorded["files"] == {
        name: hashlib.sha256((KIMI_DIR / name).read_bytes()).hexdigest()
        for name in ("tiktoken.model", "tokenizer_config.json", "chat_template.jinja")
    }
    counts = {name: family["counts"] for name, family in run.scorecard["families"].items()}
    assert all(c["fail"] == c["error"] == 0 for c in counts.values()), counts
    # Only the partial probe is unsupported: Kimi K2 Instruct's contract has no partial mode.
    unsupported = {k for k, v in run.outcomes().items() if v["status"] == "unsupported"}
    assert unsupported == {"chat_template/partial-prefill"}


@pytest.mark.slow
def test_served_model_selects_a_builtin_whose_files_come_from_the_cache(
    tmp_path: Path, run_verifier: Callable[..., VerifierRun]
) -> None:
    """An endpoint serving kimi-k2.5 gets that contract, its files read from the hub cache."""
    source = json.loads((KIMI_DIR.parent / "kimi-k2.5" / "verifier-profile.json").read_text())[
        "hub"
    ]
    cache = tmp_path / "hub"
    populate(cache, source["repo"], commit_of(source["repo"]), kimi_files(), source["revision"])
    env = {"HF_HUB_CACHE": str(cache)}
    vendor = SimulatorProcess(["--served-model", "kimi-k2.5", "--profile", "kimi-k2.5"], env=env)
    try:
        run = run_verifier(vendor.url, "--families", "wire", env=env)
        uncached = run_verifier(
            vendor.url, "--families", "wire", env={"HF_HUB_CACHE": str(tmp_path)}
        )
    finally:
        vendor.stop()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "verifier profile: kimi-k2.5 (hf:moonshotai/Kimi-K2.5 at commit" in run.stdout
    assert "chosen because the endpoint serves kimi-k2.5" in run.stdout
    assert run.scorecard["profile"]["contract_version"] == "k2.5-2026-01"
    assert run.scorecard["settings"]["temperature"] is None  # the contract pins it
    # The same endpoint with an empty cache, offline: the run stops and says what to do.
    assert uncached.returncode != 0
    assert re.search(
        r"ERROR: the endpoint serves kimi-k2.5, whose built-in profile is kimi-k2.5: --profile "
        r"hf:moonshotai/Kimi-K2.5@main: not in the hub cache .* \(or run without it: --profile "
        r"none\)",
        uncached.stdout + uncached.stderr,
    ), uncached.stdout[-2000:] + uncached.stderr[-2000:]
