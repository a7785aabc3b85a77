"""The secret and what it derives: twins' generators, the seed, the order, the commitment.

Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ..corpus import Case

# A twin's id: its case's with this after it (before any ``[api]``); no case id has a "~".
SUFFIX = "~rotated"
# Shorter secrets could be found again from the commitment by trying them.
MIN_SECRET = 16
COMMITMENT = "hmac-sha256"
_COMMITTED = b"llm-endpoint-verifier rotation commitment v1"

# A family's variant of one case's data under `rng`, or None when it cannot vary.
Rotator = Callable[[Mapping[str, Any], random.Random], "dict[str, Any] | None"]


@dataclasses.dataclass(frozen=True, slots=True)
class Rotation:
    """The run's secret rotation: its twins, its seed and its commitment.

    Args:
        secret: the secret (never recorded).
        env: the environment variable it came from.
    """

    secret: bytes = dataclasses.field(repr=False)
    env: str = ""

    def _mac(self, *parts: str) -> bytes:
        return hmac.new(self.secret, "\0".join(parts).encode(), hashlib.sha256).digest()

    @property
    def commitment(self) -> str:
        """``hmac-sha256:HEX``: what the scorecard holds, checkable by whoever has the secret."""
        digest = hmac.new(self.secret, _COMMITTED, hashlib.sha256).hexdigest()
        return f"{COMMITMENT}:{digest}"

    @property
    def seed(self) -> int:
        """The seed the run sends when ``--seed`` is not given: not the fixed default."""
        return int.from_bytes(self._mac("seed")[:4], "big") >> 1

    def random(self, family: str, case_id: str) -> random.Random:
        """The generator of one case's twin: the same secret and case, the same twin."""
        return random.Random(int.from_bytes(self._mac("case", family, case_id), "big"))

    def twin(self, case: Case, rotate: Rotator) -> Case | None:
        """The case's rotated twin, or None when nothing in it can vary."""
        data = rotate(case.data, self.random(case.family, case.id))
        if data is None or data == case.data:
            return None
        return dataclasses.replace(
            case, id=f"{case.id}{SUFFIX}", data=data, source=f"{case.source} (rotated)"
        )

    def interleaved(self, cases: Sequence[Case], rotators: Mapping[str, Rotator]) -> list[Case]:
        """`cases` with their twins: each pair in an order of the secret's, pairs shuffled."""
        pairs: list[list[Case]] = []
        for case in cases:
            rotate = rotators.get(case.family)
            twin = self.twin(case, rotate) if rotate is not None else None
            pair = [case] if twin is None else [case, twin]
            self.random(case.family, f"{case.id}\0order").shuffle(pair)
            pairs.append(pair)
        random.Random(int.from_bytes(self._mac("order"), "big")).shuffle(pairs)
        return [case for pair in pairs for case in pair]


def from_environment(env: str, environ: Mapping[str, str]) -> Rotation:
    """The rotation whose secret the environment variable `env` holds.

    Raises:
        ConfigError: the variable is unset or empty, or the secret is too short.
    """
    secret = environ.get(env, "")
    if not secret:
        raise ConfigError(f"--rotate {env}: the environment variable {env} is not set")
    if len(secret) < MIN_SECRET:
        raise ConfigError(
            f"--rotate {env}: the secret is {len(secret)} characters; use at least "
            f"{MIN_SECRET} (openssl rand -hex 16), or its commitment could be reversed"
        )
    return Rotation(secret.encode(), env)


def is_twin(case_id: str) -> bool:
    """Whether an id (without its ``[api]``) is a rotated twin's."""
    return case_id.endswith(SUFFIX)
