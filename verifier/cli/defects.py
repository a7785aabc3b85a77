"""``verifier defects``: list the simulated vendor's defect catalogue."""

from __future__ import annotations

import argparse
import sys

from ..simulator.defects import CATALOGUE


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "defects", help="list the defects the simulated vendor can switch on"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print one line per defect: name[:PARAM], family, description."""
    specs = sorted(CATALOGUE.values(), key=lambda s: (s.family, s.name))
    names = [s.name + (f":{s.param}" if s.param else "") for s in specs]
    width = max(len(n) for n in names)
    family_width = max(len(s.family) for s in specs)
    for name, spec in zip(names, specs, strict=True):
        default = f" (default {spec.default})" if spec.default else ""
        sys.stdout.write(
            f"{name:<{width}}  {spec.family:<{family_width}}  {spec.description}{default}\n"
        )
    return 0
