"""``verifier demo``: the whole tool on simulated vendors, for a first look without an endpoint.

It serves three simulated vendors of the same tiny model (one clean, two with
defects from the catalogue), each rendering and counting prompts with the built-in
Kimi K2 profile, runs the whole suite against each as a user would
(``pytest --endpoint ... --profile kimi-k2 --sign-key ...``), signs every scorecard
with a throwaway key, and writes the comparison page.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..reference.profiles import load_profile
from ..scorecard.signing import SignatureError, generate_key
from ..simulator.defects import parse_defects
from ..simulator.server import SimulatorServer

# name -> defects. Each defective vendor breaks different families, so that the
# comparison shows which family stands out for whom.
VENDORS: dict[str, tuple[str, ...]] = {
    "clean": (),
    "json-and-tools": ("ignore-keyword:maxItems", "tool-args-violate-schema"),
    "stream-and-vision": ("stream-no-usage", "vision-order-swapped"),
}
# The model profile every vendor serves and the suite grades with (built in).
PROFILE = "kimi-k2"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "demo",
        help="try the verifier on three SIMULATED vendors (no endpoint needed)",
        description="Serve three simulated vendors (one clean, two with defects), run the "
        "suite against each, sign the scorecards with a throwaway key and write a comparison "
        "page. Nothing here is a real vendor.",
    )
    parser.add_argument(
        "--out",
        default="verifier-demo",
        type=Path,
        help="folder for the runs and the comparison (default: verifier-demo)",
    )
    parser.set_defaults(handler=run)


@contextlib.contextmanager
def serving(defects: tuple[str, ...]) -> Iterator[SimulatorServer]:
    """A simulated vendor on a free loopback port, for the duration of the block."""
    server = SimulatorServer(
        ("127.0.0.1", 0), defects=parse_defects(defects), profile=load_profile(PROFILE)
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _suite(url: str, out: Path, key: Path, ini: Path) -> list[str]:
    """The command a user types, with a config file of our own so that no project's applies."""
    return [
        *(sys.executable, "-m", "pytest", "-c", str(ini), "-p", "no:cacheprovider", "-q"),
        *("--endpoint", url, "--out", str(out), "--sign-key", str(key)),
        *("--profile", PROFILE, "--repeats", "2"),
    ]


def run(args: argparse.Namespace) -> int:
    """Serve, verify, sign, compare; print where everything is."""
    # The runs start in `out`: a relative --out must not be joined to it twice.
    out: Path = args.out.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        ini = out / "demo-pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")
        key, public = generate_key(out / "demo-signing.key", force=True)
    except (OSError, SignatureError) as exc:
        sys.stderr.write(f"verifier demo: error: cannot prepare {str(out)!r}: {exc}\n")
        return 2
    _say("verifier demo: the three vendors below are SIMULATED (verifier simulate), not real.")
    for name, defects in VENDORS.items():
        _say(f"  {name:18} {'no defect' if not defects else 'defects: ' + ', '.join(defects)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        processes = {}
        for name, defects in VENDORS.items():
            server = stack.enter_context(serving(defects))
            (out / name).mkdir(exist_ok=True)
            log = stack.enter_context((out / name / "pytest.log").open("w", encoding="utf-8"))
            command = _suite(server.base_url, out / name / "run", key, ini)
            processes[name] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=out, env=env
            )
        statuses = {name: process.wait() for name, process in processes.items()}
    _say(f"ran the suite against each in {time.monotonic() - started:.0f} s")
    envelopes = [out / name / "run" / "scorecard.dsse.json" for name in VENDORS]
    missing = [str(p) for p in envelopes if not p.exists()]
    if missing or statuses["clean"] != 0:
        sys.stderr.write(
            "verifier demo: error: a run did not complete as expected; see "
            + ", ".join(str(out / name / "pytest.log") for name in VENDORS)
            + "\n"
        )
        return 1
    compare = [
        *(sys.executable, "-m", "verifier", "compare"),
        *(f"simulated {name}={path}" for name, path in zip(VENDORS, envelopes, strict=True)),
        *("--key", str(public), "--md", str(out / "comparison.md")),
        *("--html", str(out / "comparison.html")),
    ]
    done = subprocess.run(compare, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.stderr.write(f"verifier demo: error: compare failed: {done.stderr.strip()}\n")
        return 1
    for name in VENDORS:
        verdict = "PASS" if statuses[name] == 0 else "FAIL"
        _say(f"  {name:18} {verdict:5} {out / name / 'run' / 'scorecard.md'}")
    _say(f"signed with a throwaway key: {public}")
    _say(f"comparison: {out / 'comparison.html'} (open it in a browser), {out / 'comparison.md'}")
    return 0
