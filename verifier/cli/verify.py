"""``verifier verify``: check a signed scorecard envelope with the signer's public key."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..scorecard import signing


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "verify",
        help="verify a signed scorecard (a DSSE envelope) with a public key",
        description="Verify a DSSE envelope holding an in-toto Statement about a run: the "
        "Ed25519 signature, the envelope's exact bytes and, with --transcript, that the "
        "transcript is the one the scorecard was made from. Exit status 0: valid; "
        "1: invalid; 2: a file cannot be read or a key cannot be loaded.",
    )
    parser.add_argument("envelope", type=Path, metavar="ENVELOPE", help="the envelope file")
    parser.add_argument(
        "--key", required=True, type=Path, metavar="PUB", help="the signer's public key (PEM)"
    )
    parser.add_argument(
        "--transcript",
        type=Path,
        metavar="FILE",
        help="the run's transcript.jsonl, checked against the signed digest",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Verify the envelope; 0 valid, 1 invalid, 2 unreadable input."""
    try:
        public_key = signing.load_public_key(args.key)
    except signing.SignatureError as exc:
        return _error(str(exc))
    try:
        envelope = args.envelope.read_bytes()
        transcript = args.transcript.read_bytes() if args.transcript is not None else None
    except OSError as exc:
        return _error(f"cannot read {exc.filename}: {exc.strerror}")
    try:
        signed = signing.verify_envelope(envelope, public_key, transcript=transcript)
    except signing.SignatureError as exc:
        sys.stderr.write(f"verifier verify: invalid: {args.envelope}: {exc}\n")
        return 1
    parts = [f"valid: signed by {signing.key_id(public_key)}", *_summary(signed["predicate"])]
    if args.transcript is not None:
        parts.append(f"transcript {args.transcript} matches")
    sys.stdout.write("; ".join(parts) + "\n")
    return 0


def _error(message: str) -> int:
    sys.stderr.write(f"verifier verify: error: {message}\n")
    return 2


def _summary(scorecard: dict[str, Any]) -> list[str]:
    """What the signed scorecard says, as far as it says it."""
    endpoint = scorecard.get("endpoint")
    endpoint = endpoint if isinstance(endpoint, dict) else {}
    run = scorecard.get("run")
    run = run if isinstance(run, dict) else {}
    parts = []
    for label, value in (
        ("verdict", scorecard.get("verdict")),
        ("endpoint", endpoint.get("url")),
        ("model", endpoint.get("model")),
        ("run", run.get("id")),
    ):
        if isinstance(value, str):
            text = value.upper() if label == "verdict" else value
            parts.append(f"{label} {text if text.isprintable() else repr(text)}")
    families = scorecard.get("families")
    if isinstance(families, dict):
        parts.append(f"{len(families)} families")
    return parts
