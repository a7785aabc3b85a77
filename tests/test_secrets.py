"""Secrets never leave the process: not the API key, not credentials in the endpoint URL.

Each run is the whole plugin as a user runs it, against a simulated vendor with a defect (so
that failure reports, with their evidence, are printed and written), with every output on:
--out (journal, transcript, scorecard.json and .md, the signed envelope, previous/),
--junitxml and -vv. Every byte of all of it is searched for each secret, as written and
base64-encoded at every alignment (the signed envelope's payload is base64).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import KIMI_PROFILE, VerifierRun, fake_key, with_userinfo

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
API_KEY = fake_key("VERIFIER-SECRET-7f3a9c41d2e8b605")
DEFECT = ("--defect", "json-in-markdown-fence")


def encodings(secret: str) -> set[bytes]:
    """The secret as bytes, and every run of base64 that encodes it inside a longer text."""
    raw = secret.encode()
    forms = {raw}
    for skip in range(3):
        # Whatever precedes the secret, one of three alignments puts its byte `skip` at the
        # start of a base64 group; the whole groups after that are always encoded the same.
        part = raw[skip:]
        part = part[: len(part) - len(part) % 3]
        forms |= {base64.b64encode(part), base64.urlsafe_b64encode(part)}
    return forms


def leaks(run: VerifierRun, extra: list[Path], secrets: list[str]) -> list[str]:
    """Where any of the secrets shows up: output files, extra files, stdout and stderr."""
    places = {str(p): p.read_bytes() for p in run.out.rglob("*") if p.is_file()}
    places |= {str(p): p.read_bytes() for p in extra}
    places |= {"stdout": run.stdout.encode(), "stderr": run.stderr.encode()}
    envelope = run.out / "scorecard.dsse.json"
    if envelope.exists():
        places["decoded payload"] = base64.b64decode(json.loads(envelope.read_bytes())["payload"])
    return [
        f"{secret!r} in {where}"
        for secret in secrets
        for where, data in places.items()
        if any(form in data for form in encodings(secret))
    ]


def outputs(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}


EXPECTED = {"journal.jsonl", "transcript.jsonl", "scorecard.json", "scorecard.md"}
SIGNED = EXPECTED | {"scorecard.dsse.json"}


def test_the_api_key_is_in_no_output_of_a_whole_failing_run(
    simulator: Start, run_verifier: Run, tmp_path: Path, sign_key: Path
) -> None:
    url = simulator(
        "--require-key-env", "SIM_KEY", "--profile", KIMI_PROFILE, *DEFECT, env={"SIM_KEY": API_KEY}
    )
    out = tmp_path / "out"
    env = {"VENDOR_KEY": API_KEY}
    junit = [tmp_path / "whole.xml", tmp_path / "again.xml"]
    options = ("--api-key-env", "VENDOR_KEY", "--sign-key", str(sign_key), "-vv")
    whole = run_verifier(
        url, *options, "--profile", KIMI_PROFILE, "--junitxml", str(junit[0]), out=out, env=env
    )
    # A second run moves the whole one to previous/; it only needs to fail too. It goes
    # through every API: over Messages the key also travels in x-api-key.
    again = run_verifier(
        url,
        *options,
        "--families",
        "structured_output",
        "--api",
        "chat,messages,responses",
        "--junitxml",
        str(junit[1]),
        out=out,
        env=env,
    )
    for run in (whole, again):
        assert run.returncode == 1, run.stdout[-2000:] + run.stderr
        assert "fenced_json: the JSON is wrapped in a markdown fence" in run.stdout
    assert "fenced_json" in junit[0].read_text()
    assert outputs(out) == SIGNED | {f"previous/{name}" for name in SIGNED}
    card = json.loads((out / "previous" / "scorecard.json").read_text())
    # The key was really sent: the vendor refuses every request without it.
    assert card["families"]["chat_template"]["verdict"] == "pass"
    assert card["families"]["structured_output"]["verdict"] == "fail"
    assert leaks(whole, junit, [API_KEY]) == []
    assert leaks(again, junit, [API_KEY]) == []
    assert json.loads((out / "scorecard.json").read_text())["endpoint"]["apis"] == [
        "chat",
        "messages",
        "responses",
    ]


USER = "alice-USER-4d2c"
PASSWORD = "PASSWORD-9e8d"
QUERY_SECRET = "QUERY-SECRET-5b6c7d8e"


def test_credentials_in_the_endpoint_url_are_in_no_output(
    simulator: Start, run_verifier: Run, tmp_path: Path, sign_key: Path
) -> None:
    url = simulator(*DEFECT)
    junit = tmp_path / "junit.xml"
    run = run_verifier(
        with_userinfo(url, USER, PASSWORD),
        "--families",
        "structured_output,wire",
        "--sign-key",
        str(sign_key),
        "--junitxml",
        str(junit),
        "-vv",
        env={"OPENAI_API_KEY": API_KEY},
    )
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr
    assert outputs(run.out) == SIGNED
    assert run.scorecard["endpoint"]["url"] == url
    basic = f"{USER}:{PASSWORD}"
    assert leaks(run, [junit], [USER, PASSWORD, basic, API_KEY]) == []


def test_a_credential_in_the_endpoint_query_is_in_no_output(
    simulator: Start, run_verifier: Run, tmp_path: Path
) -> None:
    url = simulator(*DEFECT)
    junit = tmp_path / "junit.xml"
    run = run_verifier(
        f"{url}?api_key={QUERY_SECRET}",
        "--families",
        "wire",
        "--junitxml",
        str(junit),
        "-vv",
    )
    # The run went through (the wire family does not see the fence defect): every output
    # was written, and none holds the secret.
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert outputs(run.out) == EXPECTED and junit.exists()
    assert leaks(run, [junit], [QUERY_SECRET]) == []


def test_userinfo_in_the_url_does_not_replace_the_key(simulator: Start, run_verifier: Run) -> None:
    url = simulator("--require-key-env", "SIM_KEY", env={"SIM_KEY": API_KEY})
    run = run_verifier(
        with_userinfo(url, USER, PASSWORD),
        "--families",
        "wire",
        "-k",
        "usage",
        env={"OPENAI_API_KEY": API_KEY},
    )
    # The key from the environment was sent (not the URL's user and password), so the
    # vendor that requires it answered.
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
