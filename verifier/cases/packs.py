"""Private case packs: a user's own cases, run beside the public corpus or instead of it.

A pack is a folder laid out as ``cases/`` is, ``<family>/*.jsonl``, each line a case of that
family validated against the same schema, with the same one-line errors. The scorecard names
each pack with the number of its cases the run sent and a digest of its files, never their
contents, so that an auditor who holds the pack can confirm what was run: ``verifier pack
DIR`` prints the same digest.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from jsonschema.protocols import Validator

from ..errors import ConfigError
from .corpus import Case, load_family

LAYOUT = "a pack holds <family>/*.jsonl, as cases/ does"


@dataclasses.dataclass(frozen=True, slots=True)
class Pack:
    """One pack as loaded: its name (the folder's), every case, each family folder's digest."""

    name: str
    cases: tuple[Case, ...]
    digests: Mapping[str, str]

    @property
    def digest(self) -> str:
        """sha256 over the family folders' digests: one value for the whole pack's content."""
        joined = "\n".join(f"{k}={v}" for k, v in sorted(self.digests.items()))
        return hashlib.sha256(joined.encode()).hexdigest()

    def cases_of(self, families: Collection[str]) -> list[Case]:
        """The pack's cases of `families`, in pack order."""
        return [case for case in self.cases if case.family in families]

    def coverage(self) -> dict[str, dict[str, int]]:
        """Per family, the number of cases in each category (its ``category``, else its file)."""
        counts: dict[str, Counter[str]] = {}
        for case in self.cases:
            counts.setdefault(case.family, Counter())[category(case)] += 1
        return {family: dict(sorted(c.items())) for family, c in sorted(counts.items())}


def category(case: Case) -> str:
    """A case's category: the one it states, else its file's name (the corpus's convention)."""
    stated = case.data.get("category")
    if isinstance(stated, str):
        return stated
    return Path(case.source.rpartition(":")[0]).stem


# A family's case validator, or None for a built-in family's packaged schema.
Validators = Callable[[str], Validator | None]


def load_pack(folder: Path, known: Collection[str], validators: Validators | None = None) -> Pack:
    """Load and validate every case of the pack in `folder`.

    Args:
        folder: the pack's folder, ``<family>/*.jsonl`` inside.
        known: the families a pack may hold (every family registered).
        validators: a family's case validator, by family name (None: the built-in
            family's packaged schema).

    Raises:
        ConfigError: the folder is missing, holds a folder that is no family, or holds no case.
        CaseDataError: a bad line or a duplicate id, naming ``file:line``.
    """
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder ({LAYOUT})")
    families = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    unknown = [p.name for p in families if p.name not in known]
    if unknown:
        raise ConfigError(
            f"{folder}: {unknown[0]!r} is no family ({LAYOUT}; families: {', '.join(known)})"
        )
    cases: list[Case] = []
    digests: dict[str, str] = {}
    for sub in families:
        validator = validators(sub.name) if validators is not None else None
        loaded, digests[sub.name] = load_family(sub, sub.name, validator)
        cases.extend(loaded)
    if not cases:
        raise ConfigError(f"{folder}: no case in it ({LAYOUT})")
    return Pack(folder.resolve().name, tuple(cases), digests)


def load_packs(
    folders: Collection[Path], known: Collection[str], validators: Validators | None = None
) -> list[Pack]:
    """Every pack of `folders`, in order.

    Raises:
        ConfigError: as :func:`load_pack`, or two packs share a name (the scorecard tells
            packs apart by name).
    """
    packs: list[Pack] = []
    for folder in folders:
        pack = load_pack(folder, known, validators)
        if any(other.name == pack.name for other in packs):
            raise ConfigError(
                f"{folder}: another pack is named {pack.name!r} (a pack is its "
                "folder's name: rename one)"
            )
        packs.append(pack)
    return packs


def described(pack: Pack, families: Collection[str]) -> dict[str, Any]:
    """What the scorecard records of a pack: its name, the cases the run sent, its digest."""
    return {"name": pack.name, "cases": len(pack.cases_of(families)), "digest": pack.digest}
