"""``verifier simulate``: run the simulated vendor until stopped."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from ..cases.rotation import Rotation, from_environment
from ..errors import VerifierError
from ..reference.profiles import Profile, load_profile
from ..simulator.defects import Defects, parse_defects
from ..simulator.pace import Pace
from ..simulator.rules import MODEL_ID
from ..simulator.server import SimulatorServer


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the subcommand."""
    parser = commands.add_parser(
        "simulate",
        help="serve the simulated vendor (a test double: a tiny deterministic model)",
        description="Serve an OpenAI-compatible endpoint of our own with a tiny deterministic "
        "model and switchable defects. Prints its base URL as the first line of stdout.",
    )
    # The groups are added in this order because --help lists the options as added.
    _add_listen_options(parser)
    _add_defect_options(parser)
    _add_timing_options(parser)
    _add_noise_options(parser)
    _add_auth_options(parser)
    _add_model_options(parser)
    parser.set_defaults(handler=run)


def _add_listen_options(parser: argparse.ArgumentParser) -> None:
    """Add --host and --port, where the server listens."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: 0, a free one)")


def _add_defect_options(parser: argparse.ArgumentParser) -> None:
    """Add --defect and --fault-seed, which defects are on and which requests they hit."""
    parser.add_argument(
        "--defect",
        action="append",
        default=[],
        metavar="NAME[:PARAM]",
        help="switch on a defect from `verifier defects` (repeatable)",
    )
    parser.add_argument(
        "--fault-seed",
        type=int,
        default=0,
        metavar="N",
        help="seed deciding which chat requests the fault-* defects hit, and the "
        "--logit-noise each request gets (default: 0)",
    )


def _add_timing_options(parser: argparse.ArgumentParser) -> None:
    """Add the options that pace the answers: latency, first token, decode rate."""
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="milliseconds to wait before each answer"
    )
    parser.add_argument(
        "--ttft-ms",
        type=float,
        default=0.0,
        metavar="T",
        help="milliseconds before each answer's first token (default: 0)",
    )
    parser.add_argument(
        "--tokens-per-second",
        type=float,
        default=None,
        metavar="R",
        help="the decode rate after the first token (default: as fast as it can)",
    )


def _add_noise_options(parser: argparse.ArgumentParser) -> None:
    """Add --timing-jitter and --logit-noise, the per-request variation seeded by --fault-seed."""
    parser.add_argument(
        "--timing-jitter",
        type=float,
        default=0.0,
        metavar="J",
        help="multiply each wait of --ttft-ms and --tokens-per-second by a factor drawn from "
        "[1-J, 1+J], seeded by --fault-seed and the request's number (default: 0)",
    )
    parser.add_argument(
        "--logit-noise",
        type=float,
        default=0.0,
        metavar="SIGMA",
        help="add N(0, SIGMA) noise to every logit, drawn anew for each request (seeded by "
        "--fault-seed and the request's number), as batch-dependent kernels do: the text is "
        "unchanged, its logprobs differ from request to request (default: 0, none)",
    )


def _add_auth_options(parser: argparse.ArgumentParser) -> None:
    """Add --require-key-env, the API key the server demands."""
    parser.add_argument(
        "--require-key-env",
        metavar="NAME",
        help="require the key held in this environment variable as a Bearer token",
    )


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    """Add the options that shape the served model: profile, tokenizer API, id, vision."""
    parser.add_argument(
        "--profile",
        metavar="NAME|hf:ORG/NAME[@REV]|PATH|NAME:PATH|gguf:PATH",
        help="render and count prompts with this model profile, e.g. kimi-k2 (as the plugin's "
        "--profile)",
    )
    parser.add_argument(
        "--tokenizer-api",
        choices=("vllm", "llamacpp", "none"),
        default="vllm",
        help="tokenizer endpoints a profiled vendor offers (default: vllm)",
    )
    parser.add_argument(
        "--served-model",
        default=MODEL_ID,
        metavar="ID",
        help=f"the model id to serve (default: {MODEL_ID}); a built-in profile's id makes "
        "the verifier choose that profile",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="N",
        help="the context window served, in tokens, stated in /v1/models as max_model_len "
        "(default: the profile's, the release's; none without a profile)",
    )
    parser.add_argument(
        "--no-vision",
        action="store_true",
        help="serve a text-only model: image parts are refused with HTTP 400",
    )
    parser.add_argument(
        "--chat-only",
        action="store_true",
        help="serve chat completions alone: /v1/messages and /v1/responses answer 404",
    )
    parser.add_argument(
        "--redact-thinking",
        action="store_true",
        help="over /v1/messages, give every thinking block as a redacted_thinking block (its "
        "thinking sealed in data, taken up again when sent back), as Anthropic's API may",
    )
    parser.add_argument(
        "--rotate",
        metavar="SECRET_ENV",
        help="know the calls of the rotated twins the secret in this environment variable "
        "derives (the verifier's --rotate), as a model that generalises would",
    )


def run(args: argparse.Namespace) -> int:
    """Start the server, print its URL, serve until SIGINT or SIGTERM."""
    try:
        defects = parse_defects(args.defect)
    except ValueError as exc:
        sys.stderr.write(f"verifier simulate: error: --defect: {exc}\n")
        return 2
    if not 0 <= args.logit_noise < float("inf"):
        sys.stderr.write(
            f"verifier simulate: error: --logit-noise must be a finite number >= 0, "
            f"given {args.logit_noise}\n"
        )
        return 2
    api_key = None
    if args.require_key_env:
        api_key = os.environ.get(args.require_key_env)
        if not api_key:
            sys.stderr.write(
                f"verifier simulate: error: --require-key-env: ${args.require_key_env} is not set\n"
            )
            return 2
    profile = None
    if args.profile:
        try:
            profile = load_profile(args.profile)
        except VerifierError as exc:
            sys.stderr.write(f"verifier simulate: error: {exc}\n")
            return 2
    rotation = None
    if args.rotate:
        try:
            rotation = from_environment(args.rotate, os.environ)
        except VerifierError as exc:
            sys.stderr.write(f"verifier simulate: error: {exc}\n")
            return 2
    server = _bind(args, defects, api_key, profile, rotation)
    if server is None:
        return 2
    _serve(server, defects, args.fault_seed)
    return 0


def _bind(
    args: argparse.Namespace,
    defects: Defects,
    api_key: str | None,
    profile: Profile | None,
    rotation: Rotation | None,
) -> SimulatorServer | None:
    """Pace the answers and bind the server; on a bad option or port, report it, return None."""
    if args.window is not None and args.window < 1:
        sys.stderr.write(f"verifier simulate: error: --window must be >= 1, given {args.window}\n")
        return None
    rate = args.tokens_per_second
    if rate is not None and not 0 < rate < float("inf"):
        sys.stderr.write(
            f"verifier simulate: error: --tokens-per-second must be a number > 0, given {rate}\n"
        )
        return None
    try:
        pace = Pace(
            args.ttft_ms / 1000, 1 / rate if rate else 0.0, args.timing_jitter, args.fault_seed
        )
        return SimulatorServer(
            (args.host, args.port),
            defects=defects,
            latency=args.latency_ms / 1000,
            api_key=api_key,
            profile=profile,
            tokenizer_api=args.tokenizer_api,
            vision=not args.no_vision,
            chat_only=args.chat_only,
            redact_thinking=args.redact_thinking,
            rotation=rotation,
            window=args.window,
            served_model=args.served_model,
            fault_seed=args.fault_seed,
            logit_noise=args.logit_noise,
            pace=pace,
        )
    except ValueError as exc:
        sys.stderr.write(f"verifier simulate: error: {exc}\n")
        return None
    except OSError as exc:
        sys.stderr.write(
            f"verifier simulate: error: cannot listen on {args.host}:{args.port}: {exc.strerror}\n"
        )
        return None


def _serve(server: SimulatorServer, defects: Defects, fault_seed: int) -> None:
    """Print the base URL and the defects on, then serve until SIGINT or SIGTERM."""

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    sys.stdout.write(server.base_url + "\n")
    if defects.active:
        seeded = f" (fault seed {fault_seed})" if defects.rates() else ""
        sys.stdout.write(f"defects: {', '.join(defects.names())}{seeded}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
