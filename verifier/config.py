"""RunConfig: every option of a verification run, validated once, frozen.

:func:`normalize_endpoint`, :func:`env_var_name`, :func:`positive_int`,
:func:`non_negative_int`, :func:`positive_seconds` and :func:`repeats` are the ``type=`` callables
of command-line options: each raises ``argparse.ArgumentTypeError`` with a
message that says what is valid and names the bad value, except
:func:`env_var_name` (the value may be the key itself) and
:func:`normalize_endpoint`, which removes an http(s) URL's credentials first.
The plugin turns the error into a one-line usage error naming the option.
:func:`family_list` and :func:`check_repeats` run later, once the registered families are
known, and raise :class:`~verifier.errors.ConfigError` like the other checks here.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .endpoint.redaction import redact_url
from .errors import ConfigError
from .protocol.apis import API_NAMES
from .protocol.requests import TEMPERATURE

FAMILY_NAMES = (
    "tool_calling",
    "structured_output",
    "chat_template",
    "tokenizer",
    "vision",
    "wire",
    "reasoning",
    "context",
    "parity",
)
# The family that needs a reference to compare with: without one, it runs only when named.
PARITY = "parity"
# The built-in families a run without --families runs when it has no reference.
DEFAULT_FAMILIES = tuple(name for name in FAMILY_NAMES if name != PARITY)
# The seed sent with every request, and the generated sets' seed, when --seed is not given.
DEFAULT_SEED = 1234

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_Number = TypeVar("_Number", int, float)


def normalize_endpoint(value: str) -> str:
    """The base URL of the API, ending in ``/v1`` unless it already names a path.

    ``http://host:8000`` and ``http://host:8000/`` become ``http://host:8000/v1``;
    ``http://host:8000/v1/`` becomes ``http://host:8000/v1``; a URL with another
    path (``https://host/openai/v1beta``) is kept as given, without a trailing slash.
    """
    text = value.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(
            f"must be an http:// or https:// URL such as http://127.0.0.1:8000/v1, given: {value!r}"
        )
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"has no host name, given: {redact_url(text)!r}")
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"has an invalid port, given: {redact_url(text)!r}"
        ) from None
    path = parts.path.rstrip("/")
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def env_var_name(value: str) -> str:
    """An environment variable name (the key itself is never an option value)."""
    if not _ENV_NAME.match(value):
        hint = ""
        if value.startswith(("sk-", "Bearer")) or len(value) > 40:
            hint = "; it looks like a key: put the key in an environment variable and name that"
        raise argparse.ArgumentTypeError(
            f"must name an environment variable such as OPENAI_API_KEY{hint}"
        )
    return value


def positive_int(value: str) -> int:
    """A whole number >= 1."""
    return _number(value, int, lambda n: n >= 1, "a whole number >= 1")


def non_negative_int(value: str) -> int:
    """A whole number >= 0."""
    return _number(value, int, lambda n: n >= 0, "a whole number >= 0")


def positive_seconds(value: str) -> float:
    """A number of seconds > 0 (not infinite, not NaN)."""
    return _number(value, float, lambda n: 0 < n < math.inf, "a number of seconds > 0")


def levels(value: str) -> tuple[int, ...]:
    """The ``--load`` value: concurrency levels ``C1,C2,...``, each a whole number >= 1."""
    found = tuple(positive_int(part.strip()) for part in value.split(",") if part.strip())
    if not found:
        raise argparse.ArgumentTypeError("give one or more concurrency levels, e.g. 1,8,32")
    return tuple(sorted(set(found)))


def api_list(value: str) -> tuple[str, ...]:
    """The ``--api`` value: APIs among ``chat,messages,responses``, in that order."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in API_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"must be one or more of {','.join(API_NAMES)}, given: {value!r}"
        )
    return tuple(n for n in API_NAMES if n in names)


PRICES = ("input", "output", "cached")


def prices(value: str) -> dict[str, float]:
    """The ``--price`` value: ``input=USD,output=USD[,cached=USD]``, per million tokens."""
    found: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        name, sep, amount = part.partition("=")
        if not sep or name not in PRICES:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not NAME=USD_PER_MTOK with NAME one of {', '.join(PRICES)} "
                "(e.g. input=0.6,output=2.5)"
            )
        found[name] = _number(amount, float, lambda n: 0 <= n < math.inf, "a number >= 0")
    missing = [n for n in ("input", "output") if n not in found]
    if missing:
        raise argparse.ArgumentTypeError(
            f"give the {' and '.join(missing)} price too (e.g. input=0.6,output=2.5)"
        )
    return found


def repeats(value: str) -> int | dict[str, int]:
    """The ``--repeats`` value: ``K`` or ``FAMILY=K[,FAMILY=K...]``.

    ``K`` applies to every family; named families take theirs and the others keep their
    default. Each K is a whole number >= 1.
    """
    if "=" not in value:
        return positive_int(value)
    counts: dict[str, int] = {}
    for part in value.split(","):
        name, _, count = (p.strip() for p in part.partition("="))
        if not name or not count:
            raise argparse.ArgumentTypeError(
                f"must be K or FAMILY=K[,FAMILY=K...], given: {value!r}"
            )
        if name in counts:
            raise argparse.ArgumentTypeError(f"{name} is given twice, in {value!r}")
        try:
            counts[name] = positive_int(count)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{name}: {exc}") from None
    return counts


def _number(
    value: str, convert: Callable[[str], _Number], valid: Callable[[_Number], bool], expected: str
) -> _Number:
    """`value` converted with `convert`, when that succeeds and the number is `valid`.

    Raises:
        argparse.ArgumentTypeError: ``must be {expected}, given: {value!r}``, for a value
            that is no number and for one out of range alike.
    """
    try:
        number = convert(value)
        if valid(number):
            return number
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be {expected}, given: {value!r}")


def known_families(registered: Iterable[str]) -> tuple[str, ...]:
    """The registered families: the built-in ones in their documented order, then the others."""
    names = list(registered)
    return (
        *(name for name in FAMILY_NAMES if name in names),
        *(name for name in names if name not in FAMILY_NAMES),
    )


def family_list(value: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated family names, each one of `known`, in the order of `known`.

    Raises:
        ConfigError: naming the unknown family and the closest known one.
    """
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"--families is empty; choose from: {', '.join(known)}")
    _check_known("--families", names, known)
    return tuple(n for n in known if n in names)


def check_repeats(value: int | dict[str, int] | None, known: tuple[str, ...]) -> None:
    """Raise :class:`ConfigError` when ``--repeats FAMILY=K`` names an unknown family."""
    if isinstance(value, dict):
        _check_known("--repeats", value, known)


def _check_known(option: str, names: Iterable[str], known: tuple[str, ...]) -> None:
    """Raise :class:`ConfigError` naming the first of `names` not in `known`, and the closest."""
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            if name in FAMILY_NAMES:
                hint = " (this family has no checks in this version yet)"
            raise ConfigError(
                f"{option}: unknown family {name!r}{hint}; choose from: {', '.join(known)}"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a verification run needs to know, fixed before the first request.

    The API key is deliberately not a field: only the name of the environment
    variable that holds it travels; the client reads the value when it is built.
    """

    endpoint: str
    model: str | None
    api_key_env: str
    families: tuple[str, ...]
    repeats: int | dict[str, int] | None
    seed: int
    timeout: float
    max_retries: int
    retry_backoff: float
    out_dir: Path
    resume: bool
    baseline: Path | None = None
    generated: int = 0
    generated_seed: int | None = None
    negative: int = 0
    profile: str | None = None
    gate: bool = False
    gate_thresholds: Path | None = None
    sign_key: Path | None = None
    concurrency: int = 1
    insecure: bool = False
    budget: str = "full"
    reference_endpoint: str | None = None
    reference_model: str | None = None
    reference_api_key_env: str | None = None
    parity_method: str = "auto"
    prices: dict[str, float] | None = None
    load: tuple[int, ...] = ()
    apis: tuple[str, ...] | None = None
    cases: tuple[Path, ...] = ()
    cases_only: bool = False
    rotate: str | None = None
    max_context: int | None = None

    @property
    def endpoint_display(self) -> str:
        """The endpoint URL as it may be printed and recorded: no credentials."""
        return redact_url(self.endpoint)

    def api_key(self) -> str | None:
        """The key from the named environment variable, or None when it is unset or empty."""
        return os.environ.get(self.api_key_env) or None

    @property
    def reference_key_env(self) -> str:
        """The environment variable of the reference's key (default: the endpoint's)."""
        return self.reference_api_key_env or self.api_key_env

    def settings(self) -> dict[str, object]:
        """The settings that define a run, as recorded in the journal and the scorecard."""
        settings: dict[str, object] = {
            "endpoint": self.endpoint_display,
            "model": self.model,
            "families": list(self.families),
            "repeats": self.repeats,
            "seed": self.seed,
            "temperature": TEMPERATURE,
            "concurrency": self.concurrency,
            "insecure": self.insecure,
            "budget": self.budget,
        }
        if self.generated:
            settings["generated"] = {"cases": self.generated, "seed": self.generation_seed}
        if self.negative:
            settings["negative"] = {"cases": self.negative, "seed": self.seed}
        if self.load:
            settings["load"] = list(self.load)
        if self.apis is not None:
            settings["apis"] = list(self.apis)
        if self.parity_method != "auto":
            settings["parity_method"] = self.parity_method
        if self.max_context is not None:
            settings["max_context"] = self.max_context
        if self.reference_endpoint is not None:
            settings["reference"] = {
                "endpoint": redact_url(self.reference_endpoint),
                "model": self.reference_model,
            }
        return settings

    @property
    def generation_seed(self) -> int:
        """The seed of --generated cases (--generated-seed, else --seed)."""
        return self.seed if self.generated_seed is None else self.generated_seed


def load_baseline(path: Path) -> dict[str, Any]:
    """Read a baseline scorecard.

    Raises:
        ConfigError: the file cannot be read, is not JSON, or is not a scorecard.
    """
    from . import resources

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--baseline: cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--baseline: {str(path)!r} is not JSON: {exc}") from None
    errors = list(resources.validator("scorecard").iter_errors(data))
    if errors:
        raise ConfigError(
            f"--baseline: {str(path)!r} is not a scorecard: "
            f"{errors[0].json_path}: {errors[0].message}"
        )
    return dict(data)


def prepare_out_dir(path: Path) -> Path:
    """Create the output folder if needed and check that it can be written.

    Raises:
        ConfigError: naming the folder and the reason.
    """
    # mkdir would only say "File exists", which reads as if the folder were fine.
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out: {str(path)!r} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".verifier-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"--out: cannot write to {str(path)!r}: {exc.strerror or exc}") from None
    return path.resolve()
