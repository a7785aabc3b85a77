"""The pytest entry point: options, and the verification session when ``--endpoint`` is given.

Without ``--endpoint`` this plugin only adds its options and markers, and
imports nothing heavy: a project's own tests run as usual, at their usual
speed. With it, :mod:`verifier.run.session` takes over the session.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .config import (
    DEFAULT_SEED,
    FAMILY_NAMES,
    PARITY,
    RunConfig,
    api_list,
    check_repeats,
    env_var_name,
    family_list,
    known_families,
    levels,
    non_negative_int,
    normalize_endpoint,
    positive_int,
    positive_seconds,
    prices,
    repeats,
)
from .errors import ConfigError, VerifierError


def _option_type(option: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser so that a bad value is one line naming the option (pytest.UsageError)."""

    def convert(value: str) -> Any:
        try:
            return parse(value)
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"{option}: {exc}") from None

    convert.__name__ = parse.__name__
    return convert


def _option(
    name: str, *, help: str, parse: Callable[[str], Any] | None = None, **attrs: Any
) -> tuple[str, dict[str, Any]]:
    """An option's name and ``addoption`` keywords; `parse` becomes its ``type=``."""
    if parse is not None:
        attrs["type"] = _option_type(name, parse)
    return name, {**attrs, "help": help}


# In the order --help lists them. Only the keywords given are passed: argparse's own
# defaults (False for store_true, None otherwise) stand where none is named.
_OPTIONS = (
    _option(
        "--endpoint",
        metavar="URL",
        parse=normalize_endpoint,
        help="base URL of the API to verify, e.g. http://127.0.0.1:8000/v1 (/v1 is added "
        "when the URL has no path). Without it, no conformance item is collected.",
    ),
    _option(
        "--model",
        metavar="NAME",
        help="model to verify (default: the only model the endpoint lists)",
    ),
    _option(
        "--api-key-env",
        metavar="NAME",
        default="OPENAI_API_KEY",
        parse=env_var_name,
        help="environment variable that holds the API key (default: OPENAI_API_KEY); "
        "the key itself is never an option value",
    ),
    _option(
        "--api",
        metavar="LIST",
        parse=api_list,
        help="comma-separated APIs to verify through: chat (chat completions), messages "
        "(Anthropic Messages), responses (OpenAI Responses); each family runs its cases over "
        "those it can speak (default: every one the endpoint serves)",
    ),
    _option(
        "--families",
        metavar="LIST",
        help="comma-separated families to run (default: every family this version has)",
    ),
    _option(
        "--cases",
        metavar="DIR",
        action="append",
        default=[],
        help="a private pack of cases, laid out as the verifier's cases/ (<family>/*.jsonl), "
        "run beside the public corpus; repeatable. The scorecard names each pack with its "
        "case count and digest, not its contents (verifier pack DIR prints the digest)",
    ),
    _option(
        "--cases-only",
        action="store_true",
        help="run the --cases packs' cases alone, not the public corpus nor generated cases",
    ),
    _option(
        "--rotate",
        metavar="SECRET_ENV",
        parse=env_var_name,
        help="environment variable holding a secret (16 characters or more) that derives a "
        "rotated twin of every case that can vary (other tool, parameter and property names, "
        "numbers, colours, digits, words around the prompt, orders), run interleaved with the "
        "public cases; a family right more often as published than rotated fails with "
        "public_cases_special_cased. The scorecard holds a commitment to the secret; the seed "
        "comes from it unless --seed is given",
    ),
    _option(
        "--repeats",
        metavar="K",
        parse=repeats,
        help="requests per case, for every family (K) or by family (FAMILY=K,...; the "
        "others keep theirs) (default: the family's: tool_calling 5, others 1)",
    ),
    _option(
        "--seed",
        metavar="N",
        parse=non_negative_int,
        help=f"seed sent with every request (default: {DEFAULT_SEED}; with --rotate, one the "
        "secret derives)",
    ),
    _option(
        "--timeout",
        metavar="SECONDS",
        parse=positive_seconds,
        default=60.0,
        help="seconds allowed to connect and between bytes of an answer (default: 60)",
    ),
    _option(
        "--max-retries",
        metavar="N",
        parse=non_negative_int,
        default=3,
        help="retries of a request after a connection error, timeout, 429 or 5xx (default: 3)",
    ),
    _option(
        "--retry-backoff",
        metavar="SECONDS",
        parse=positive_seconds,
        default=0.5,
        help="wait before the first retry, doubled for each further one, jittered (default: 0.5)",
    ),
    _option(
        "--out",
        metavar="DIR",
        default="verifier-out",
        help="folder for the journal, transcript and scorecard (default: verifier-out)",
    ),
    _option(
        "--profile",
        metavar="NAME|hf:ORG/NAME[@REV]|PATH|NAME:PATH|gguf:PATH",
        help="the model's own chat template, tokenizer and contract: a built-in profile "
        "(kimi-k2, qwen3...: verifier profiles lists them), a hub repository's files "
        "(hf:moonshotai/Kimi-K2-Instruct@COMMIT), a model folder, a folder on top of a "
        "built-in (kimi-k2:/models/Kimi-K2), or a GGUF file's own (gguf:model.gguf). "
        "Default: the built-in profile of the model the endpoint serves, if any; none: no profile",
    ),
    _option(
        "--generated",
        metavar="N",
        parse=non_negative_int,
        default=0,
        help="add N structured-output cases drawn from a JSON-Schema strategy (default: 0)",
    ),
    _option(
        "--negative",
        metavar="N",
        parse=non_negative_int,
        help="add N wire cases: bad requests made from the request schema's fields, and valid "
        "edge ones, spread over the fields, seeded by --seed (default: one per field; 0: none)",
    ),
    _option(
        "--generated-seed",
        metavar="S",
        parse=non_negative_int,
        help="seed for --generated (default: --seed); recorded in the scorecard",
    ),
    _option(
        "--baseline",
        metavar="SCORECARD",
        help="scorecard.json of a reference endpoint: families that compare with it report "
        "agreement (tool-call trigger F1, tool choice, prompt token counts, vision answers)",
    ),
    _option(
        "--reference-endpoint",
        metavar="URL",
        parse=normalize_endpoint,
        help="a reference deployment of the same model, asked in the same run: the parity "
        "family compares the endpoint's per-token distributions with its",
    ),
    _option(
        "--reference-model",
        metavar="NAME",
        help="the model at --reference-endpoint (default: the only model it lists)",
    ),
    _option(
        "--reference-api-key-env",
        metavar="NAME",
        parse=env_var_name,
        help="environment variable that holds the reference's key (default: --api-key-env's)",
    ),
    _option(
        "--parity-method",
        choices=("auto", "logprobs", "sampling"),
        default="auto",
        help="how the parity family compares distributions: logprobs, or first tokens "
        "sampled at temperature 1 (weaker; auto: sampling only where either side gives no "
        "logprobs)",
    ),
    _option(
        "--max-context",
        metavar="N",
        parse=positive_int,
        help="the context family's ladder stops at N prompt tokens (default: the window the "
        "endpoint states, else the release's)",
    ),
    _option(
        "--load",
        metavar="C1,C2,...",
        parse=levels,
        help="before the cases, a load probe: the same streamed request at each concurrency "
        "level (twice the level of them, at least 8): TTFT, decode rate and throughput per "
        "level, and the knee where latency rises, in the scorecard's performance section",
    ),
    _option(
        "--price",
        metavar="input=USD,output=USD[,cached=USD]",
        parse=prices,
        help="prices per million tokens: the scorecard's performance section then gives what "
        "the run's tokens cost, per family and in all",
    ),
    _option(
        "--sign-key",
        metavar="PATH",
        help="Ed25519 private key (`verifier keygen`): also write scorecard.dsse.json, the "
        "scorecard signed as an in-toto statement over the transcript and the corpus",
    ),
    _option(
        "--gate",
        action="store_true",
        help="apply the day-0 gate: the exit status is 0 only when every family meets its "
        "thresholds (defaults, the profile's, or --gate-thresholds)",
    ),
    _option(
        "--gate-thresholds",
        metavar="FILE",
        help="TOML file of gate thresholds per family (implies --gate)",
    ),
    _option(
        "--concurrency",
        metavar="N",
        parse=positive_int,
        default=1,
        help="cases, and requests, in flight at once in each process (pytest-xdist's -n "
        "multiplies it); outcomes do not depend on it (default: 1)",
    ),
    _option(
        "--budget",
        choices=("full", "auto"),
        default="full",
        help="auto: stop sending a family's cases (and a case's repeats) once its verdict "
        "against the gate's min_score is statistically decided (default: full)",
    ),
    _option(
        "--insecure",
        action="store_true",
        help="do not verify the endpoint's TLS certificate (recorded in the scorecard)",
    ),
    _option(
        "--resume",
        action="store_true",
        help="continue the run recorded in --out: cases already graded are not sent again",
    ),
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Declare the hooks other plugins implement to extend a run (see :mod:`verifier.hookspecs`)."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the verifier's options (all in one group)."""
    group = parser.getgroup("verifier", "verification of an OpenAI-compatible endpoint")
    for name, attrs in _OPTIONS:
        group.addoption(name, **attrs)


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; with ``--endpoint``, start the verification session."""
    for name in FAMILY_NAMES:
        config.addinivalue_line("markers", f"{name}: conformance cases of the {name} family")
    endpoint = config.getoption("endpoint", None)
    if endpoint is None:
        if config.getoption("resume", False):
            raise pytest.UsageError("--resume needs --endpoint: it continues a verification run")
        return
    _register_families(config)
    try:
        families = _families_option(
            config.getoption("families"),
            reference=config.getoption("reference_endpoint") is not None
            or config.getoption("baseline") is not None,
        )
        run_config = RunConfig(
            endpoint=endpoint,
            model=config.getoption("model"),
            api_key_env=config.getoption("api_key_env"),
            families=families,
            repeats=_repeats_option(config.getoption("repeats")),
            seed=_seed_option(config.getoption("seed"), config.getoption("rotate")),
            timeout=config.getoption("timeout"),
            max_retries=config.getoption("max_retries"),
            retry_backoff=config.getoption("retry_backoff"),
            out_dir=Path(config.getoption("out")),
            resume=config.getoption("resume"),
            baseline=_path_or_none(config.getoption("baseline")),
            generated=config.getoption("generated"),
            profile=config.getoption("profile"),
            generated_seed=config.getoption("generated_seed"),
            negative=_negative_count(config.getoption("negative"), families),
            gate=config.getoption("gate") or config.getoption("gate_thresholds") is not None,
            gate_thresholds=_path_or_none(config.getoption("gate_thresholds")),
            sign_key=_path_or_none(config.getoption("sign_key")),
            concurrency=config.getoption("concurrency"),
            insecure=config.getoption("insecure"),
            budget=config.getoption("budget"),
            reference_endpoint=config.getoption("reference_endpoint"),
            reference_model=config.getoption("reference_model"),
            reference_api_key_env=config.getoption("reference_api_key_env"),
            parity_method=config.getoption("parity_method"),
            prices=config.getoption("price"),
            load=config.getoption("load") or (),
            apis=config.getoption("api"),
            cases=_cases_option(config.getoption("cases"), config.getoption("cases_only")),
            cases_only=config.getoption("cases_only"),
            rotate=config.getoption("rotate"),
            max_context=config.getoption("max_context"),
        )
        from .run.session import start_session

        start_session(config, run_config)
        # A verification session runs no hypothesis test, and hypothesis's plugin imports
        # hypothesis at the end of every session (seconds per process).
        config.pluginmanager.set_blocked("hypothesispytest")
    except VerifierError as exc:
        raise pytest.UsageError(str(exc)) from None


def _negative_count(value: int | None, families: tuple[str, ...]) -> int:
    """--negative as given, else one case per field of the request schema (when wire runs)."""
    if value is not None:
        return value
    if "wire" not in families:
        return 0
    from .cases.negative import default_count

    return default_count()


def _cases_option(folders: list[str], only: bool) -> tuple[Path, ...]:
    """--cases as paths.

    Raises:
        ConfigError: --cases-only without a pack to run.
    """
    if only and not folders:
        raise ConfigError("--cases-only needs --cases DIR: it runs those packs' cases alone")
    return tuple(Path(folder) for folder in folders)


def _seed_option(given: int | None, rotate: str | None) -> int:
    """--seed; without it, the rotation secret's seed under --rotate, else the default.

    Raises:
        ConfigError: --rotate names a variable that holds no usable secret.
    """
    if given is not None:
        return given
    if rotate is None:
        return DEFAULT_SEED
    from .cases.rotation import from_environment

    return from_environment(rotate, os.environ).seed


def _path_or_none(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def _register_families(config: pytest.Config) -> None:
    """Let other plugins add their families, and mark their cases like the built-in ones."""
    from .checks import FAMILIES

    config.hook.pytest_verifier_register_families(registry=FAMILIES)
    for name in FAMILIES.names():
        if name not in FAMILY_NAMES:
            config.addinivalue_line("markers", f"{name}: conformance cases of the {name} family")


def _repeats_option(value: int | dict[str, int] | None) -> int | dict[str, int] | None:
    from .checks import FAMILIES

    check_repeats(value, known_families(FAMILIES.names()))
    return value


def _families_option(value: str | None, *, reference: bool) -> tuple[str, ...]:
    """The families to run: those named, else all but parity, which needs a reference."""
    from .checks import FAMILIES

    known = known_families(FAMILIES.names())
    if value is not None:
        return family_list(value, known)
    return known if reference else tuple(name for name in known if name != PARITY)
