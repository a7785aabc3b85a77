"""``verifier pack``: check a private case pack, print its digest and its coverage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cases.packs import load_packs
from ..config import FAMILY_NAMES
from ..errors import VerifierError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "pack",
        help="check private case packs (as --cases takes them): validate every case, print "
        "each pack's digest, which the scorecard of a run with it records, and its cases per "
        "family and category",
    )
    parser.add_argument("folders", nargs="+", metavar="DIR", help="a pack: <family>/*.jsonl")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print each pack's name, case count and digest, then its cases per family and category."""
    try:
        packs = load_packs([Path(folder) for folder in args.folders], FAMILY_NAMES)
    except VerifierError as exc:
        sys.stderr.write(f"verifier pack: error: {exc}\n")
        return 2
    for pack in packs:
        sys.stdout.write(f"{pack.name}: {len(pack.cases)} cases, sha256 {pack.digest}\n")
        coverage = pack.coverage()
        width = max(len(family) for family in coverage)
        for family, categories in coverage.items():
            shown = ", ".join(f"{name} {count}" for name, count in categories.items())
            sys.stdout.write(f"  {family:<{width}}  {sum(categories.values()):>4}  {shown}\n")
    return 0
