"""``verifier keygen``: make an Ed25519 key pair for signing scorecards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..scorecard import signing


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "keygen",
        help="make an Ed25519 key pair for signing scorecards",
        description="Write a new Ed25519 private key (unencrypted PKCS#8 PEM, mode 0600) to "
        "PATH and its public key to PATH.pub; prints both paths and the key id.",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="PATH", help="where to write the private key"
    )
    parser.add_argument("--force", action="store_true", help="replace existing PATH and PATH.pub")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Write the key pair; 0 when written, 2 when it cannot be."""
    try:
        private_path, public_path = signing.generate_key(args.out, force=args.force)
        key_id = signing.key_id(signing.load_public_key(public_path))
    except FileExistsError as exc:
        sys.stderr.write(
            f"verifier keygen: error: {exc.filename} already exists (--force replaces it)\n"
        )
        return 2
    except OSError as exc:
        target = exc.filename or args.out
        sys.stderr.write(f"verifier keygen: error: cannot write {target}: {exc.strerror}\n")
        return 2
    except signing.SignatureError as exc:
        sys.stderr.write(f"verifier keygen: error: {exc}\n")
        return 2
    sys.stdout.write(f"private key: {private_path}\npublic key: {public_path}\nkey id: {key_id}\n")
    return 0
