"""``verifier profiles``: list the built-in model profiles, their contracts and sources."""

from __future__ import annotations

import argparse
import json
import sys

from ..reference.profiles import builtin_contract, builtin_names, facts, ships_files


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "profiles",
        help="list the built-in model profiles (--profile NAME): each model's contract, the "
        "hub repository of its files, and the documents each of its facts comes from",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print each built-in profile: name, contract version, files, each fact with its sources."""
    for name in builtin_names():
        contract = builtin_contract(name)
        hub = contract.get("hub") or {}
        files = "shipped with the verifier" if ships_files(name) else "fetched on first use"
        cites = contract.get("cites") or {}
        sys.stdout.write(
            f"{name}  (contract {contract.get('version', 'unversioned')})\n"
            f"  {contract.get('description', '')}\n"
            f"  files: hf:{hub.get('repo')}@{hub.get('revision')}, {files}\n"
            f"  served as: {', '.join(contract.get('served_models', []))}\n"
        )
        for path, value in facts(contract).items():
            shown = json.dumps(value, ensure_ascii=False)
            sys.stdout.write(f"  {path} = {shown}  [{', '.join(cites.get(path, []))}]\n")
        for source, where in sorted((contract.get("sources") or {}).items()):
            sys.stdout.write(f"    [{source}] {where['url']} ({where['what']})\n")
    return 0
