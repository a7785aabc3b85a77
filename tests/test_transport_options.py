"""--concurrency, --insecure and redirects, end to end over loopback."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import VerifierRun, fake_key, serve_in_thread
from verifier.run.journal import resume_mismatch
from verifier.simulator.defects import parse_defects
from verifier.simulator.server import SimulatorServer

pytestmark = pytest.mark.slow

Run = Callable[..., VerifierRun]
Start = Callable[..., str]
FAMILIES = ("--families", "structured_output,tool_calling,wire")


def graded(run: VerifierRun) -> dict[str, tuple[str, str | None]]:
    """Each case's status and code."""
    return {key: (o["status"], o.get("code")) for key, o in run.outcomes().items()}


def max_in_flight(out: Path) -> int:
    """The most chat requests the transcript shows in flight at one moment."""
    events: list[tuple[float, int]] = []
    for line in (out / "transcript.jsonl").read_text().splitlines():
        record = json.loads(line)
        if not record.get("label", "").startswith(("structured_output/", "tool_calling/")):
            continue
        start = dt.datetime.fromisoformat(record["time"]).timestamp()
        # The start time has millisecond precision: shrink each interval by a little more,
        # so that requests sent one after the other never count as overlapping.
        events += [(start + 0.002, 1), (start + record["latency_ms"] / 1000 - 0.002, -1)]
    most = current = 0
    for _, step in sorted(events):
        current += step
        most = max(most, current)
    return most


@pytest.mark.parametrize("defect", [None, "ignore-keyword:maxItems", "tool-args-violate-schema"])
def test_concurrency_changes_no_outcome(
    simulator: Start, run_verifier: Run, defect: str | None
) -> None:
    url = simulator(*(["--defect", defect] if defect else []))
    serial = run_verifier(url, *FAMILIES)
    concurrent = run_verifier(url, *FAMILIES, "--concurrency", "8")
    across_workers = run_verifier(url, *FAMILIES, "--concurrency", "4", "-n", "2")
    assert serial.returncode == (0 if defect is None else 1), serial.stdout[-2000:]
    assert graded(concurrent) == graded(serial)
    assert graded(across_workers) == graded(serial)
    assert concurrent.scorecard["settings"]["concurrency"] == 8
    assert summary(concurrent) == summary(serial)


def summary(run: VerifierRun) -> dict[str, Any]:
    """The families' figures; of the worst failures, which case and code (the evidence
    holds ids the simulated vendor numbers by arrival)."""
    return {
        name: {
            **{k: v for k, v in family.items() if k != "worst"},
            "worst": [(w["case"], w["code"]) for w in family.get("worst", [])],
        }
        for name, family in run.scorecard["families"].items()
    }


def test_concurrency_keeps_that_many_requests_in_flight(
    simulator: Start, run_verifier: Run
) -> None:
    url = simulator("--latency-ms", "60")
    one = run_verifier(url, "--families", "structured_output")
    six = run_verifier(url, "--families", "structured_output", "--concurrency", "6")
    # pytest-xdist workers multiply it: each starts ahead the items it was sent.
    workers = run_verifier(url, "--families", "structured_output", "--concurrency", "3", "-n", "2")
    assert one.returncode == six.returncode == workers.returncode == 0
    assert max_in_flight(one.out) == 1
    assert 3 <= max_in_flight(six.out) <= 6
    assert 4 <= max_in_flight(workers.out) <= 6


def test_a_resumed_run_may_change_concurrency_but_not_the_seed() -> None:
    old = {"settings": {"seed": 1, "concurrency": 1}, "corpus": {"digest": "x"}, "profile": None}
    faster = {"settings": {"seed": 1, "concurrency": 16}, "corpus": {"digest": "x"}}
    other = {"settings": {"seed": 2, "concurrency": 1}, "corpus": {"digest": "x"}}
    assert resume_mismatch(old, {**faster, "profile": None}) is None
    assert resume_mismatch(old, {**other, "profile": None}) == "seed: 1 then, 2 now"


def test_bad_concurrency_is_one_line(run_verifier: Run) -> None:
    run = run_verifier("http://127.0.0.1:9", "--concurrency", "0")
    assert run.returncode == 4
    assert "--concurrency" in run.stderr and "Traceback" not in run.stderr


# -- TLS -----------------------------------------------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no authority signed, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_simulator(tmp_path: Path) -> Iterator[str]:
    """The simulated vendor behind TLS with a self-signed certificate."""
    server = SimulatorServer(("127.0.0.1", 0), defects=parse_defects([]))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed(tmp_path))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    serve_in_thread(server)
    yield f"https://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_tls_is_verified_unless_insecure_and_insecure_is_recorded(
    tls_simulator: str, run_verifier: Run
) -> None:
    refused = run_verifier(tls_simulator, "--families", "wire", "--max-retries", "0")
    assert refused.returncode == 4
    errors = [line for line in refused.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, refused.stderr
    assert "tls certificate not trusted (self-signed certificate)" in errors[0]
    assert "--insecure" in errors[0]
    trusted = run_verifier(tls_simulator, "--families", "structured_output", "--insecure")
    assert trusted.returncode == 0, trusted.stdout[-2000:]
    assert trusted.scorecard["settings"]["insecure"] is True
    assert refused.out.joinpath("scorecard.json").exists() is False


# -- redirects ------------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Answers everything with 200 and remembers the headers it was sent."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self.seen.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": [{"id": "stolen"}]}')

    do_POST = do_GET  # noqa: N815 - http.server naming

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet."""


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    return server


def test_a_redirect_to_another_server_is_never_followed(run_verifier: Run) -> None:
    Recorder.seen = []
    elsewhere = serve(Recorder)
    # Another server on loopback (tests talk to 127.0.0.1 only): following would reach it.
    target = f"http://127.0.0.1:{elsewhere.server_address[1]}/v1/models?token=abc123secret"

    class Redirecting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            self.send_response(307)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    redirecting = serve(Redirecting)
    try:
        run = run_verifier(
            f"http://127.0.0.1:{redirecting.server_address[1]}/v1",
            env={"OPENAI_API_KEY": fake_key("must-not-travel")},
        )
    finally:
        for server in (redirecting, elsewhere):
            server.shutdown()
            server.server_close()
    assert run.returncode == 4
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, run.stderr
    assert f"redirects to http://127.0.0.1:{elsewhere.server_address[1]}/" in errors[0]
    assert "HTTP 307" in errors[0]
    assert "abc123secret" not in run.stderr + run.stdout
    assert Recorder.seen == [], "nothing reached the other host"
