"""``verifier compare``: scorecards of several vendors side by side, as Markdown or HTML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..compare.inputs import InputError, load_input
from ..compare.tables import SignatureState
from ..compare.views import build_comparison
from ..render.comparison_html import render_comparison_html
from ..render.comparison_markdown import render_comparison_markdown
from ..scorecard.signing import SignatureError, load_public_key

PROG = "verifier compare"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "compare",
        help="compare scorecards of several vendors (Markdown, or a self-contained HTML page)",
        description="Put scorecards (scorecard.json) or signed envelopes (scorecard.dsse.json) "
        "side by side: per family the verdict and score with its 95% interval, key "
        "sub-metrics, drill-downs; cells worse than the best vendor's are marked. Inputs that "
        "differ in corpus, verifier version or settings are flagged as not comparable. "
        "Prints Markdown unless --md or --html is given.",
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="[LABEL=]CARD_OR_ENVELOPE",
        help="a scorecard.json or a scorecard.dsse.json envelope; LABEL= names the vendor "
        "(default: its endpoint URL and model)",
    )
    parser.add_argument("--md", type=Path, metavar="FILE", help="write the Markdown to FILE")
    parser.add_argument("--html", type=Path, metavar="FILE", help="write the HTML page to FILE")
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        type=Path,
        metavar="PUB",
        help="a public key (PEM) to verify envelopes with (repeatable)",
    )
    parser.set_defaults(handler=run)


def labelled(argument: str) -> tuple[str | None, Path]:
    """(label, path) of ``LABEL=PATH``; a file whose own name has ``=`` is taken whole."""
    label, sep, rest = argument.partition("=")
    if not sep or not label or Path(argument).exists():
        return None, Path(argument)
    return label, Path(rest)


def _error(message: str) -> int:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return 2


def run(args: argparse.Namespace) -> int:
    """Read the inputs, build the comparison, write or print it."""
    try:
        keys = [load_public_key(path) for path in args.key]
    except SignatureError as exc:
        return _error(f"--key: {exc}")
    try:
        inputs = [load_input(path, keys, label) for label, path in map(labelled, args.inputs)]
    except InputError as exc:
        return _error(str(exc))
    comparison = build_comparison(inputs)
    invalid = False
    for vendor in comparison.vendors:
        if vendor.signature.state is SignatureState.INVALID:
            # Loud on stderr too, and in the exit status: the report is still written (nothing
            # is lost), but a script must not publish it as if every input were sound.
            sys.stderr.write(f"{PROG}: warning: {vendor.path}: {vendor.signature.text}\n")
            invalid = True
    status = 1 if invalid else 0
    outputs = [
        (path, render(comparison), what)
        for path, render, what in (
            (args.md, render_comparison_markdown, "Markdown"),
            (args.html, render_comparison_html, "HTML"),
        )
        if path is not None
    ]
    if not outputs:
        sys.stdout.write(render_comparison_markdown(comparison))
        return status
    for path, content, what in outputs:
        try:
            path.write_text(content, encoding="utf-8")
        except OSError as exc:
            return _error(f"cannot write {path}: {exc.strerror or exc}")
        sys.stdout.write(f"wrote {what} to {path}\n")
    return status
