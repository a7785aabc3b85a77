"""Reading the inputs: plain scorecards and signed envelopes, with their signature status."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jsonschema import exceptions as jsonschema_exceptions

from .. import resources
from ..scorecard import signing
from .tables import Signature, SignatureState

ENVELOPE_KEYS = frozenset({"payload", "payloadType", "signatures"})
# Schema messages quote the offending value; a whole scorecard would not fit on one line.
MESSAGE_LIMIT = 200


class InputError(Exception):
    """An input that cannot be compared; the message is one line naming the file."""


@dataclass(frozen=True)
class Input:
    """A readable input: its path, its scorecard, its signature status."""

    path: str
    scorecard: dict[str, Any]
    signature: Signature
    label: str | None = None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[:MESSAGE_LIMIT] + "..."


def load_input(
    path: Path, public_keys: Sequence[Ed25519PublicKey] = (), label: str | None = None
) -> Input:
    """Read a ``scorecard.json`` or a ``scorecard.dsse.json`` envelope.

    `label` names the vendor in the comparison (else its endpoint URL and model).

    An envelope's signature is checked with the key among `public_keys` that signed it;
    a signature that does not verify is reported in the status, not raised.

    Raises:
        InputError: the file is missing or unreadable, not JSON, a malformed envelope,
            or does not hold a scorecard.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{path}: not JSON (nested too deeply)") from None
    signature = Signature(SignatureState.UNSIGNED)
    if isinstance(data, dict) and ENVELOPE_KEYS & set(data) and "schema_version" not in data:
        try:
            statement = signing.read_statement(raw)
        except signing.SignatureError as exc:
            raise InputError(f"{path}: malformed envelope: {_one_line(str(exc))}") from None
        data = statement["predicate"]
        signature = signature_status(raw, public_keys)
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a scorecard (the JSON is not an object)")
    error = jsonschema_exceptions.best_match(resources.validator("scorecard").iter_errors(data))
    if error is not None:
        raise InputError(f"{path}: not a scorecard: {error.json_path}: {_one_line(error.message)}")
    return Input(str(path), data, signature, label)


def signature_status(envelope: bytes, public_keys: Sequence[Ed25519PublicKey]) -> Signature:
    """Verified with the key whose id the envelope names; not verified without that key.

    Only a key with the signer's id can tell a bad signature from a foreign one: with it,
    any failure (changed payload, edited file, wrong subjects) makes the envelope INVALID.
    """
    signer = json.loads(envelope)["signatures"][0]["keyid"]
    for key in public_keys:
        if signing.key_id(key) != signer:
            continue
        try:
            signing.verify_envelope(envelope, key)
        except signing.SignatureError as exc:
            return Signature(SignatureState.INVALID, signer, _one_line(str(exc)))
        return Signature(SignatureState.VERIFIED, signer)
    return Signature(SignatureState.UNVERIFIED, signer if isinstance(signer, str) else None)
