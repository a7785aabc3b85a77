"""Loading the case corpus: ``cases/<family>/*.jsonl``, every line validated on load."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema.protocols import Validator

from .. import cache, resources
from ..errors import CaseDataError
from ..protocol.apis import API_NAMES


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One case of one family, as loaded from its JSONL line.

    Args:
        family: the family the case belongs to (its folder name).
        id: the case id, unique within the family.
        data: the whole validated JSON object.
        source: ``file:line`` where it was read, for messages.
        api: the API its requests go through (:data:`~verifier.protocol.apis.API_NAMES`); a
            case over another API than ``chat`` is the twin of the chat case of the same
            data, its id the chat case's with ``[api]`` after it (``tc-001[messages]``).
    """

    family: str
    id: str
    data: Mapping[str, Any]
    source: str
    api: str = "chat"

    @property
    def key(self) -> str:
        """``family/id``: the case's identity in the journal and the scorecard."""
        return f"{self.family}/{self.id}"

    def over(self, api: str) -> Case:
        """The twin of this (chat) case over `api`: the same data, sent through that API."""
        if api == self.api:
            return self
        return dataclasses.replace(self, id=f"{self.id}[{api}]", api=api)


@dataclasses.dataclass(frozen=True, slots=True)
class Corpus:
    """The cases of a run and the digests that identify exactly what was tested."""

    cases: tuple[Case, ...]
    digests: Mapping[str, str]
    # The private packs among the cases (:func:`~verifier.cases.packs.described`), and whether
    # the public corpus runs too (not with --cases-only).
    packs: tuple[Mapping[str, Any], ...] = ()
    public: bool = True
    # --rotate: the secret's commitment, the families with twins and how many
    # (:mod:`~verifier.cases.rotation`); None: every case ran as written.
    rotation: Mapping[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """What the journal and the scorecard say of the corpus: digests, packs, rotation."""
        record: dict[str, Any] = {"digest": self.digest, "families": dict(self.digests)}
        if self.packs:
            record["packs"] = [dict(pack) for pack in self.packs]
            record["public"] = self.public
        record["rotation"] = dict(self.rotation) if self.rotation is not None else None
        return record

    @property
    def digest(self) -> str:
        """sha256 over the per-family digests (and a rotation's commitment): the whole corpus."""
        joined = "\n".join(f"{k}={v}" for k, v in sorted(self.digests.items()))
        if self.rotation is not None:
            joined += f"\nrotation={self.rotation['commitment']}"
        return hashlib.sha256(joined.encode()).hexdigest()

    def extended(self, cases: Iterable[Case], label: str, digest: str) -> Corpus:
        """A corpus with these cases and more, the extra identified in the digests as `label`."""
        return dataclasses.replace(
            self, cases=self.cases + tuple(cases), digests={**self.digests, label: digest}
        )

    def over_apis(self, apis: Callable[[Case], Iterable[str]]) -> Corpus:
        """The cases over the APIs each is sent through (`apis`, of a case).

        The chat cases keep their order; each other API's twins follow, API by API in the
        order of :data:`API_NAMES`. The digests stay the corpus's own: a twin is the same
        case, sent another way.
        """
        chosen = [set(apis(case)) for case in self.cases]
        cases = tuple(
            case.over(api)
            for api in API_NAMES
            for case, its in zip(self.cases, chosen, strict=True)
            if api in its
        )
        return dataclasses.replace(self, cases=cases)

    def by_family(self, family: str) -> list[Case]:
        """The cases of one family, in corpus order."""
        return [c for c in self.cases if c.family == family]


def _json_path(error: jsonschema_exceptions.ValidationError) -> str:
    return error.json_path if error.path else "$"


# The cache's name for case files that validated: a key is the sha256 of a file's bytes and
# of everything its validation depended on.
VALIDATED = "validated-cases"


def parse_line(
    text: str,
    path: str,
    line: int,
    family: str,
    validator: Validator | None = None,
    *,
    validate: bool = True,
) -> Case:
    """Parse and validate one JSONL line as a case of `family`.

    `validator` checks the case (default: the family's ``schemas/<family>.case.schema.json``);
    with `validate` false the line is only parsed (its file's bytes validated before).

    Raises:
        CaseDataError: naming ``path:line``, the JSON path and the schema's complaint.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseDataError(path, line, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        # Valid JSON syntax that Python refuses: an integer of more than 4300 digits, or
        # nesting deeper than the interpreter's recursion limit.
        raise CaseDataError(path, line, f"not valid JSON: {exc}") from None
    if validate:
        validator = validator or resources.validator(f"{family}.case")
        error = jsonschema_exceptions.best_match(validator.iter_errors(data))
        if error is not None:
            raise CaseDataError(path, line, f"{_json_path(error)}: {error.message}")
    return Case(family=family, id=data["id"], data=data, source=f"{path}:{line}")


def load_family(
    folder: Path, family: str, validator: Validator | None = None
) -> tuple[list[Case], str]:
    """Every case in ``folder/*.jsonl``, and the family's sha256 over those files.

    A file whose bytes validated before against the same schemas (the verifier's cache) is
    only parsed: validating the packaged corpus is most of the time it takes to load.

    Raises:
        CaseDataError: for the first bad line or duplicate id.
    """
    cases: list[Case] = []
    seen: dict[str, str] = {}
    digest = hashlib.sha256()
    against = _validation_identity(family, validator)
    for file in sorted(folder.glob("*.jsonl")):
        raw = file.read_bytes()
        digest.update(file.name.encode() + b"\0" + raw + b"\0")
        key = hashlib.sha256(against + raw).hexdigest()
        validate = not cache.is_marked(VALIDATED, key)
        display = _display(file)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CaseDataError(display, None, f"not UTF-8 text: {exc.reason}") from None
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            case = parse_line(line, display, number, family, validator, validate=validate)
            if case.id in seen:
                raise CaseDataError(
                    display, number, f"duplicate case id {case.id!r} (first at {seen[case.id]})"
                )
            seen[case.id] = case.source
            cases.append(case)
        if validate:
            cache.mark(VALIDATED, key)
    return cases, digest.hexdigest()


def _validation_identity(family: str, validator: Validator | None) -> bytes:
    """What validating a case file of `family` depends on besides its bytes."""
    schema = resources.schema(f"{family}.case") if validator is None else validator.schema
    text = json.dumps(schema, sort_keys=True, default=str)
    return f"{_jsonschema_version()}\0{resources.schemas_digest()}\0{text}\0".encode()


@functools.cache
def _jsonschema_version() -> str:
    # Its format checkers and keywords are part of what a validation result means.
    return metadata.version("jsonschema")


def load_corpus(
    families: Iterable[str],
    root: Path | None = None,
    *,
    folders: Mapping[str, Path] | None = None,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> Corpus:
    """Load the cases of `families` from `root` (default: the packaged ``cases/``).

    A family registered by another plugin brings its own case folder (`folders`) and case
    schema (`schemas`), by family name.

    Raises:
        CaseDataError: for a missing family folder, a bad line or a duplicate id.
    """
    base = root if root is not None else resources.data_dir("cases")
    cases: list[Case] = []
    digests: dict[str, str] = {}
    for family in families:
        folder = (folders or {}).get(family) or base / family
        if not folder.is_dir():
            raise CaseDataError(_display(folder), None, "no such case folder")
        schema = (schemas or {}).get(family)
        validator = None if schema is None else case_validator(family, schema)
        loaded, digests[family] = load_family(folder, family, validator)
        cases.extend(loaded)
    return Corpus(cases=tuple(cases), digests=digests)


def case_validator(family: str, schema: Mapping[str, Any]) -> Validator:
    """A validator for a plugin family's case schema (2020-12, formats checked).

    Raises:
        CaseDataError: the schema itself is not a valid JSON Schema.
    """
    try:
        Draft202012Validator.check_schema(schema)
    except jsonschema_exceptions.SchemaError as exc:
        where = f"the case schema of family {family!r}"
        raise CaseDataError(where, None, f"not a JSON Schema: {exc.message}") from None
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _display(path: Path) -> str:
    """A path relative to the working directory where that is shorter."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
