"""Where the data that ships with the package (cases, schemas) lives."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The folder `name` (``cases`` or ``schemas``) of this installation.

    A wheel carries it inside the package (``verifier/_data/<name>``); a source
    checkout or an editable install has it at the top of the repository.
    """
    packaged = _PACKAGE / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE.parent / name


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``schemas/<name>.schema.json``, loaded once."""
    path = data_dir("schemas") / f"{name}.schema.json"
    with path.open(encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


@functools.cache
def _registry() -> Registry:
    """Every schema of ``schemas/`` by its ``$id``, so that they can refer to each other."""
    resources = []
    for path in sorted(data_dir("schemas").glob("*.schema.json")):
        contents = schema(path.name.removesuffix(".schema.json"))
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A compiled validator for ``schemas/<name>.schema.json``, built once per process."""
    return Draft202012Validator(
        schema(name), registry=_registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


@functools.cache
def schemas_digest() -> str:
    """sha256 over every packaged schema file: what a validation result depends on."""
    digest = hashlib.sha256()
    for path in sorted(data_dir("schemas").glob("*.schema.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
