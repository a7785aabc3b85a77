"""Bad input stops the run before any request, with one line that names the thing to fix.

Each command-line case runs the plugin as a user does, against a stand-in endpoint that
records every request it receives: "before any request" is checked on the server's side.
The packaged corpus's case files are checked on the loader itself; a private pack's
(``--cases DIR``) on the command line too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GOOD_CASE, VerifierRun, fake_key, serve_in_thread
from verifier.cases.corpus import load_corpus
from verifier.config import FAMILY_NAMES
from verifier.errors import CaseDataError
from verifier.reference.profiles import BUILTIN_DIR

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
KIMI_FOLDER = BUILTIN_DIR / "kimi-k2"
VENDOR_MODEL = "vendor-model"


class RecordingVendor(ThreadingHTTPServer):
    """A stand-in endpoint: answers every request with one status, and records each request.

    With status 200 it lists one model and answers anything else with 404, so that a run
    that got past its checks by mistake stops at once (and shows in `requests`).
    """

    daemon_threads = True

    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), _VendorHandler)
        self.status = status
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        """The API base URL."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _VendorHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RecordingVendor

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: `requests` is the record."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.requests.append(f"{self.command} {self.path}")
        status = self.server.status
        if status == 200 and self.path == "/v1/models":
            body: dict[str, Any] = {"object": "list", "data": [{"id": VENDOR_MODEL}]}
        else:
            status = 404 if status == 200 else status
            body = {"error": {"message": "no", "type": "invalid_request_error", "code": None}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer  # noqa: N815 - http.server naming


@pytest.fixture
def vendor() -> Iterator[Callable[[int], RecordingVendor]]:
    """Start recording vendors that answer with a given status; stopped after the test."""
    started: list[RecordingVendor] = []

    def start(status: int) -> RecordingVendor:
        server = RecordingVendor(status)
        serve_in_thread(server)
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def the_error_line(run: VerifierRun) -> str:
    """The run's only output: one ``ERROR:`` line on stderr, with no traceback anywhere."""
    assert run.returncode == 4, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert "INTERNALERROR" not in run.stdout + run.stderr
    assert run.stdout.strip() == ""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("ERROR: ")
    return lines[0]


def profile_with_template(folder: Path, template: str) -> Path:
    """A copy of the built-in Kimi profile (by symlinks) whose chat template is `template`."""
    folder.mkdir()
    for source in KIMI_FOLDER.iterdir():
        if source.name != "chat_template.jinja":
            (folder / source.name).symlink_to(source)
    (folder / "chat_template.jinja").write_text(template, encoding="utf-8")
    return folder


def read_only_folder(tmp_path: Path) -> Path:
    """A folder in which nothing can be created, even by root."""
    if os.geteuid() == 0:
        # Root writes through file modes; sysfs refuses new entries to everyone.
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    return folder


@dataclasses.dataclass(frozen=True)
class BadInput:
    """Options that must stop the run, and the one line (a regex) that must say why."""

    args: list[str]
    line: str


def _template(template: str, line: str) -> Callable[[Path], BadInput]:
    def build(tmp: Path) -> BadInput:
        folder = profile_with_template(tmp / "model", template)
        where = re.escape(str(folder / "chat_template.jinja"))
        return BadInput(["--profile", str(folder)], f"ERROR: --profile: {where}: {line}")

    return build


def _garbage_tokenizer(tmp: Path) -> BadInput:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "chat_template.jinja").write_text("{{ messages[0].content }}")
    (folder / "tokenizer.json").write_text("this is not a tokenizer")
    return BadInput(
        ["--profile", str(folder)],
        rf"ERROR: --profile: the tokenizer in {re.escape(str(folder))} does not load: .+",
    )


def _sign_key_garbage(tmp: Path) -> BadInput:
    key = tmp / "signer.key"
    key.write_bytes(b"\x00\x01 not a key \xff")
    return BadInput(
        ["--sign-key", str(key)], f"ERROR: --sign-key: {re.escape(str(key))} is not a PEM key file"
    )


def _sign_key_missing(tmp: Path) -> BadInput:
    key = tmp / "no-such.key"
    return BadInput(
        ["--sign-key", str(key)],
        f"ERROR: --sign-key: cannot read private key {re.escape(str(key))}: "
        "No such file or directory",
    )


def _out_is_a_file(tmp: Path) -> BadInput:
    out = tmp / "results"
    out.write_text("not a folder")
    return BadInput(
        ["--out", str(out)], f"ERROR: --out: '{re.escape(str(out))}' is a file, not a folder"
    )


def _out_under_a_file(tmp: Path) -> BadInput:
    blocker = tmp / "results"
    blocker.write_text("not a folder")
    out = blocker / "run"
    return BadInput(
        ["--out", str(out)],
        f"ERROR: --out: cannot write to '{re.escape(str(out))}': Not a directory",
    )


def _out_read_only(tmp: Path) -> BadInput:
    out = read_only_folder(tmp) / "verifier-out"
    return BadInput(
        ["--out", str(out)],
        f"ERROR: --out: cannot write to '{re.escape(str(out))}': "
        "(Permission denied|Operation not permitted|Read-only file system)",
    )


def _pack(tmp: Path, files: dict[str, str], name: str = "pack") -> Path:
    folder = tmp / name
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def _pack_bad_line(tmp: Path) -> BadInput:
    folder = _pack(tmp, {"wire/mine.jsonl": '{"id": "x", "check": \n'})
    where = re.escape(str(folder / "wire" / "mine.jsonl"))
    return BadInput(
        ["--cases", str(folder)],
        rf"ERROR: --cases {where}:1: not valid JSON: Expecting value \(column 22\)",
    )


def _pack_public_id(tmp: Path) -> BadInput:
    line = json.dumps(load_corpus(["wire"]).cases[0].data)
    folder = _pack(tmp, {"wire/mine.jsonl": line + "\n"})
    where = re.escape(str(folder / "wire" / "mine.jsonl"))
    return BadInput(
        ["--cases", str(folder)],
        rf"ERROR: --cases {where}:1: duplicate case id '[^']+' \(first at .+\.jsonl:1\)",
    )


def _pack_no_family(tmp: Path) -> BadInput:
    folder = _pack(tmp, {"wizard/mine.jsonl": "{}\n"})
    return BadInput(
        ["--cases", str(folder)],
        rf"ERROR: --cases {re.escape(str(folder))}: 'wizard' is no family \(a pack holds "
        rf"<family>/\*\.jsonl, as cases/ does; families: {re.escape(', '.join(FAMILY_NAMES))}\)",
    )


CHOICES = re.escape(", ".join(FAMILY_NAMES))
BAD_INPUT: dict[str, Callable[[Path], BadInput]] = {
    "families-unknown": lambda tmp: BadInput(
        ["--families", "nope"], f"ERROR: --families: unknown family 'nope'; choose from: {CHOICES}"
    ),
    "profile-missing": lambda tmp: BadInput(
        ["--profile", "/nonexistent"],
        r"ERROR: --profile: '/nonexistent' is not a folder \(expected PATH or NAME:PATH\)",
    ),
    "profile-not-a-repository": lambda tmp: BadInput(
        ["--profile", "hf:kimi-k2"],
        r"ERROR: --profile: 'hf:kimi-k2' is not a hub repository "
        r"\(expected hf:ORG/NAME or hf:ORG/NAME@REVISION\)",
    ),
    # The tests run offline (tests/conftest.py): a repository not in the cache is not fetched.
    "profile-not-in-hub-cache": lambda tmp: BadInput(
        ["--profile", "hf:example-org/absent@v1"],
        r"ERROR: --profile hf:example-org/absent@v1: not in the hub cache \(.+\) and offline "
        r"mode is on \(HF_HUB_OFFLINE\): fetch it once online \(hf download example-org/absent "
        r"--revision v1\) or point HF_HUB_CACHE at a cache that holds it",
    ),
    "template-syntax-error": _template(
        "{{ bos_token }}\n{% for message in messages %}{{ message.content }",
        "the chat template does not parse: line 2: .+",
    ),
    "template-raises": _template(
        "{{ raise_exception('this template\ntakes no user turns') }}",
        "the chat template failed: this template takes no user turns",
    ),
    "template-crashes": _template(
        "{{ messages | length / 0 }}",
        "the chat template failed: ZeroDivisionError: division by zero",
    ),
    "tokenizer-garbage": _garbage_tokenizer,
    "sign-key-garbage": _sign_key_garbage,
    "sign-key-missing": _sign_key_missing,
    "out-is-a-file": _out_is_a_file,
    "out-under-a-file": _out_under_a_file,
    "out-read-only": _out_read_only,
    "cases-missing": lambda tmp: BadInput(
        ["--cases", "/nonexistent"],
        r"ERROR: --cases /nonexistent: no such folder \(a pack holds <family>/\*\.jsonl, as "
        r"cases/ does\)",
    ),
    "cases-only-without-cases": lambda tmp: BadInput(
        ["--cases-only"],
        "ERROR: --cases-only needs --cases DIR: it runs those packs' cases alone",
    ),
    "rotate-unset": lambda tmp: BadInput(
        ["--rotate", "VERIFIER_UNSET_ROTATION"],
        "ERROR: --rotate VERIFIER_UNSET_ROTATION: the environment variable "
        "VERIFIER_UNSET_ROTATION is not set",
    ),
    "cases-bad-line": _pack_bad_line,
    "cases-public-id": _pack_public_id,
    "cases-no-family": _pack_no_family,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_bad_input_is_one_line_before_any_request(
    run_verifier: Run, vendor: Callable[[int], RecordingVendor], tmp_path: Path, name: str
) -> None:
    bad = BAD_INPUT[name](tmp_path)
    endpoint = vendor(200)
    # An --out among the bad options comes after the helper's own: the last one counts.
    run = run_verifier(endpoint.url, *bad.args)
    assert re.fullmatch(bad.line, the_error_line(run)), the_error_line(run)
    assert endpoint.requests == [], "nothing may be sent before the options are checked"
    assert not (run.out / "transcript.d").exists() and not (run.out / "journal.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "args", "env", "line"),
    [
        (
            401,
            [],
            {"VENDOR_KEY": fake_key("wrong")},
            r"ERROR: the endpoint rejected the key in \$VENDOR_KEY \(401\)",
        ),
        (
            403,
            [],
            {"VENDOR_KEY": fake_key("wrong")},
            r"ERROR: the endpoint rejected the key in \$VENDOR_KEY \(403\)",
        ),
        (
            401,
            [],
            {},
            r"ERROR: the endpoint requires a key \(401\) and \$VENDOR_KEY is not set: "
            "export it, or name another variable with --api-key-env",
        ),
        (
            200,
            ["--model", "kimi-k3"],
            {},
            r"ERROR: model 'kimi-k3' is not served by http://127\.0\.0\.1:\d+/v1; "
            f"it serves: {VENDOR_MODEL}",
        ),
    ],
    ids=["key-rejected-401", "key-rejected-403", "key-missing-401", "unknown-model"],
)
def test_an_endpoint_that_cannot_be_used_stops_at_the_model_list(
    run_verifier: Run,
    vendor: Callable[[int], RecordingVendor],
    status: int,
    args: list[str],
    env: dict[str, str],
    line: str,
) -> None:
    endpoint = vendor(status)
    # The parent's environment must not supply the variable the no-key case leaves unset.
    env = {"VENDOR_KEY": "", **env}
    run = run_verifier(endpoint.url, "--api-key-env", "VENDOR_KEY", *args, env=env)
    assert re.fullmatch(line, the_error_line(run)), the_error_line(run)
    assert endpoint.requests == ["GET /v1/models"], "no chat request after the model list"
    assert "sk-wrong" not in run.stderr


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_a_run_that_stops_at_the_probe_leaves_out_as_it_was(
    simulator: Start, run_verifier: Run, tmp_path: Path, refused_port: int
) -> None:
    out = tmp_path / "out"
    quick = ("--families", "structured_output", "-k", "enum")
    run_verifier(simulator(), *quick, out=out)
    run_verifier(simulator(), *quick, out=out)
    before = snapshot(out)
    assert "scorecard.json" in before and "previous/scorecard.json" in before
    stopped = run_verifier(f"http://127.0.0.1:{refused_port}", "--max-retries", "0", out=out)
    assert "ERROR: cannot reach" in the_error_line(stopped)
    after = snapshot(out)
    assert sorted(after) == sorted(before), "no file moved, removed or added"
    assert after == before


def good_line(case_id: str) -> str:
    return json.dumps({**GOOD_CASE, "id": case_id})


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [good_line("one"), good_line("two"), '{"id": "three", "keyword": '],
            r"cases\.jsonl:3: not valid JSON: Expecting value \(column 28\)",
        ),
        (
            [good_line("one"), json.dumps({**GOOD_CASE, "id": "two", "messages": []})],
            r"cases\.jsonl:2: \$\.messages: \[\] should be non-empty",
        ),
        (
            [good_line("one"), "[1, 2]"],
            r"cases\.jsonl:2: \$: \[1, 2\] is not of type 'object'",
        ),
        (
            [good_line("one"), json.dumps({**GOOD_CASE, "id": "two", "keyword": 7})],
            r"cases\.jsonl:2: \$\.keyword: 7 is not of type 'string'",
        ),
        (
            ["\ufeff" + good_line("one")],
            r"cases\.jsonl:1: not valid JSON: Unexpected UTF-8 BOM .+",
        ),
        (
            [good_line("one"), '{"id": "two", "n": ' + "9" * 5000 + "}"],
            r"cases\.jsonl:2: not valid JSON: Exceeds the limit \(4300 digits\) .+",
        ),
        (
            [good_line("one"), "[" * 100_000 + "]" * 100_000],
            r"cases\.jsonl:2: not valid JSON: maximum recursion depth exceeded.*",
        ),
    ],
    ids=["bad-json", "schema-violation", "not-an-object", "wrong-type", "bom", "huge-int", "deep"],
)
def test_a_bad_case_line_names_file_line_and_what(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    folder = tmp_path / "structured_output"
    folder.mkdir()
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CaseDataError) as raised:
        load_corpus(["structured_output"], tmp_path)
    text = str(raised.value)
    assert re.fullmatch(rf".*structured_output/{message}", text), text
    assert "\n" not in text


def test_a_case_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "structured_output"
    folder.mkdir()
    (folder / "cases.jsonl").write_bytes(good_line("one").encode() + b"\n\xff\xfe\n")
    with pytest.raises(CaseDataError, match=r"structured_output/cases\.jsonl: not UTF-8 text"):
        load_corpus(["structured_output"], tmp_path)


def test_a_simulated_vendor_that_cannot_listen_says_so_in_one_line() -> None:
    """A port already taken: one line naming the address, exit status 2, no traceback."""
    import socket
    import subprocess
    import sys

    from verifier.simulator.process import child_env

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = subprocess.run(
            [sys.executable, "-m", "verifier", "simulate", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env=child_env(),
        )
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"verifier simulate: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
