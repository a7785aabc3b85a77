"""A family from another plugin (verifier.hookspecs) runs like a built-in one; the public API."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import verifier
from tests.conftest import VerifierRun
from tests.plugins.echo_family import SCHEMA, run
from verifier import Family, Registry, resources

PLUGINS = Path(__file__).parent / "plugins"


def run_echo(run_verifier: Callable[..., VerifierRun], url: str) -> VerifierRun:
    """The verifier with the echo family of tests/plugins/echo_family.py, loaded with -p."""
    env = {"PYTHONPATH": str(PLUGINS)}
    return run_verifier(url, "-p", "echo_family", "--families", "echo,wire", env=env)


def test_a_plugin_family_is_graded_scored_and_journalled(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun]
) -> None:
    run = run_echo(run_verifier, simulator())
    assert run.returncode == 0, run.stdout[-2000:]
    card = run.scorecard
    assert list(resources.validator("scorecard").iter_errors(card)) == []
    assert card["settings"]["families"] == ["wire", "echo"]
    echo = card["families"]["echo"]
    assert echo["counts"] == {"pass": 2, "fail": 0, "error": 0, "unsupported": 0}
    echoed = {key: o["status"] for key, o in run.outcomes().items() if key.startswith("echo/")}
    assert echoed == {"echo/cut-at-one-token": "pass", "echo/short-answer": "pass"}


def test_a_plugin_family_catches_its_defect(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun]
) -> None:
    # The vendor says "stop_163586" where it stopped: the cut answer still says "length".
    run = run_echo(run_verifier, simulator("--defect", "finish-reason-raw-token"))
    echo = run.scorecard["families"]["echo"]
    assert set(echo["codes"]) == {"finish_reason_unexpected"}
    assert run.outcomes()["echo/cut-at-one-token"]["status"] == "pass"
    assert run.outcomes()["echo/short-answer"]["status"] == "fail"
    assert run.returncode == 1


def test_a_plugin_family_takes_the_gate_resume_and_compare(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun], tmp_path: Path
) -> None:
    env = {"PYTHONPATH": str(PLUGINS)}
    options = ("-p", "echo_family", "--families", "echo", "--gate")
    first = run_verifier(simulator(), *options, out=tmp_path / "out", env=env)
    # The gate's default thresholds apply: two cases are fewer than min_graded.
    assert first.scorecard["gate"]["families"]["echo"] == {
        "gated": True,
        "missed": [{"actual": 2, "limit": 10, "threshold": "min_graded"}],
        "passed": False,
    }
    assert first.returncode == 1
    again = run_verifier(simulator(), *options, "--resume", out=tmp_path / "out", env=env)
    assert "verifier resume: 2 cases already graded are not sent again" in again.stdout
    assert again.scorecard["run"]["sessions"] == 2
    shown = subprocess.run(
        [sys.executable, "-m", "verifier", "compare", f"a={tmp_path / 'out' / 'scorecard.json'}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| Vendor | Overall | echo |" in shown


def test_an_unknown_family_is_still_one_line_without_the_plugin(
    simulator: Callable[..., str], run_verifier: Callable[..., VerifierRun]
) -> None:
    run = run_verifier(simulator(), "--families", "echo")
    assert run.returncode != 0
    assert "--families: unknown family 'echo'" in run.stderr + run.stdout


def test_every_public_name_resolves_and_import_stays_light() -> None:
    for name in verifier.__all__:
        assert getattr(verifier, name) is not None
    # `import verifier` (pytest does it for every session through the plugin) loads no client.
    code = (
        "import sys, verifier; "
        "print(sorted(m for m in sys.modules if m.startswith(('openai', 'verifier.'))))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


def test_registering_the_same_family_twice_changes_nothing_another_is_refused() -> None:
    registry = Registry()
    first = Family("echo", run, cases=PLUGINS / "echo_cases" / "echo", case_schema=SCHEMA)
    registry.register(first)
    assert registry.register(Family("echo", run, cases=first.cases, case_schema=SCHEMA)) is first
    with pytest.raises(ValueError, match="a family named 'echo' is already registered"):
        registry.register(Family("echo", run, description="another"))
    assert registry.names() == ("echo",)
