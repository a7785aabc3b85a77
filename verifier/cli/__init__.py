"""The ``verifier`` command: one module per subcommand, this one dispatches."""

from __future__ import annotations

import argparse
import enum
import sys
from collections.abc import Sequence

from .. import __version__
from . import compare, defects, demo, keygen, pack, profiles, simulate, verify


class ExitCode(enum.IntEnum):
    """Exit statuses of the ``verifier`` command."""

    OK = 0
    FAILED = 1
    USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="verifier",
        description="Tools around the verifier's pytest plugin (run the suite with "
        "`pytest --endpoint URL`).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, simulate, defects, profiles, keygen, verify, compare, pack):
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return int(ExitCode.OK)
    except BrokenPipeError:
        sys.stderr.close()
        return int(ExitCode.OK)
