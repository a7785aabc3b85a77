"""Signed scorecards: Ed25519 keys and DSSE envelopes around an in-toto Statement v1.

The Statement's subjects are the run's transcript and its case corpus (by sha256); its
predicate is the scorecard. The envelope file is the canonical JSON (sorted keys, compact
separators, ASCII, one trailing newline) of::

    {"payload": <base64 Statement>, "payloadType": "application/vnd.in-toto+json",
     "signatures": [{"keyid": <sha256 of the raw public key>, "sig": <base64 Ed25519>}]}

The signature covers the DSSE pre-authentication encoding of payloadType and payload.
Verification also insists on the canonical file form and canonical base64, so that no
edit of the file, not even one that leaves the signed bytes alone, goes unnoticed.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ..errors import SigningError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://llm-endpoint-verifier.invalid/scorecard/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
TRANSCRIPT_SUBJECT = "transcript.jsonl"
CORPUS_SUBJECT = "corpus"

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_PEM_LABEL = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


class SignatureError(SigningError):
    """A key, an envelope or a signature that does not load or does not verify.

    Its message is one line naming what failed.
    """


def generate_key(path: Path, *, force: bool = False) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: the private key to `path`, the public one beside it.

    The private key is unencrypted PKCS#8 PEM with mode 0600; the public key is
    SubjectPublicKeyInfo PEM in ``<path>.pub`` with mode 0644.

    Returns:
        The paths of the private and the public key.

    Raises:
        FileExistsError: either file exists and `force` is false (nothing is written).
        OSError: a file cannot be written.
    """
    path = Path(path)
    public_path = Path(str(path) + ".pub")
    if not force:
        for target in (path, public_path):
            if target.exists() or target.is_symlink():
                raise FileExistsError(errno.EEXIST, "already exists", str(target))
    private_key = Ed25519PrivateKey.generate()
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_new(path, private_pem, 0o600, replace=force)
    try:
        _write_new(public_path, public_pem, 0o644, replace=force)
    except BaseException:
        # A private key without its public half would only make the next keygen refuse.
        path.unlink(missing_ok=True)
        raise
    return path, public_path


def _write_new(path: Path, data: bytes, mode: int, *, replace: bool) -> None:
    if replace:
        # A fresh file: opening an existing one would keep its (maybe looser) mode.
        path.unlink(missing_ok=True)
    # Created with its final mode, so a private key is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as file:
        # The umask may have removed bits of `mode`; it can never have added any.
        os.fchmod(fd, mode)
        file.write(data)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Load an unencrypted PEM (PKCS#8) Ed25519 private key.

    Raises:
        SignatureError: the file cannot be read, is not a PEM private key, is encrypted,
            is a public key, or holds a key of another algorithm.
    """
    data, label = _pem_file(path, "private")
    if "PUBLIC KEY" in label:
        raise SignatureError(
            f"{path} is a public key; signing needs the private key (the file without .pub)"
        )
    if "ENCRYPTED" in label:
        raise SignatureError(f"{path} is an encrypted private key; give an unencrypted one")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        # The legacy encrypted PEM form carries the encryption in headers, not in the label.
        raise SignatureError(
            f"{path} is an encrypted private key; give an unencrypted one"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise SignatureError(
            f"{path} does not hold a readable PEM private key (it is a {label})"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path} is not an Ed25519 private key (it is {_algorithm(key)})")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Load a PEM (SubjectPublicKeyInfo) Ed25519 public key.

    Raises:
        SignatureError: the file cannot be read, is not a PEM public key, is a private
            key, or holds a key of another algorithm.
    """
    data, label = _pem_file(path, "public")
    if "PRIVATE KEY" in label:
        raise SignatureError(
            f"{path} is a private key; verifying needs the public key (the .pub file)"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise SignatureError(
            f"{path} does not hold a readable PEM public key (it is a {label})"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path} is not an Ed25519 public key (it is {_algorithm(key)})")
    return key


def _read_key_file(path: Path, kind: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SignatureError(f"cannot read {kind} key {path}: {exc.strerror or exc}") from None


def _pem_file(path: Path, kind: str) -> tuple[bytes, str]:
    """A key file's bytes and its PEM label (``PRIVATE KEY``...).

    Raises:
        SignatureError: the file cannot be read, or is not PEM.
    """
    data = _read_key_file(path, kind)
    label = _pem_label(data)
    if label is None:
        raise SignatureError(f"{path} is not a PEM key file")
    return data, label


def _pem_label(data: bytes) -> str | None:
    match = _PEM_LABEL.search(data)
    return match.group(1).decode("ascii") if match else None


def _algorithm(key: object) -> str:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return f"EC {key.curve.name}"
    return type(key).__name__.removeprefix("_").replace("PrivateKey", "").replace("PublicKey", "")


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key's id: the sha256 (hex) of its raw 32-byte public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def statement(
    scorecard: dict[str, Any], *, transcript_sha256: str, corpus_sha256: str
) -> dict[str, Any]:
    """The in-toto Statement v1 about a run: transcript and corpus as subjects.

    Raises:
        ValueError: a digest is not 64 lowercase hex digits.
    """
    for name, digest in (("transcript", transcript_sha256), ("corpus", corpus_sha256)):
        if not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest):
            raise ValueError(f"the {name} digest is not a sha256 in lowercase hex: {digest!r}")
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": TRANSCRIPT_SUBJECT, "digest": {"sha256": transcript_sha256}},
            {"name": CORPUS_SUBJECT, "digest": {"sha256": corpus_sha256}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": scorecard,
    }


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what the signature is computed over."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def sign_statement(statement: dict[str, Any], private_key: Ed25519PrivateKey) -> bytes:
    """Sign a Statement; returns the bytes of the envelope file.

    Raises:
        SignatureError: the statement cannot be serialised as JSON.
    """
    try:
        payload = json.dumps(
            statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SignatureError(f"the statement cannot be serialised as JSON: {exc}") from None
    signature = private_key.sign(pae(PAYLOAD_TYPE, payload))
    envelope = {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {
                "keyid": key_id(private_key.public_key()),
                "sig": base64.b64encode(signature).decode("ascii"),
            }
        ],
    }
    return _envelope_file(envelope)


def sign_scorecard(scorecard: dict[str, Any], *, transcript_path: Path, key_path: Path) -> bytes:
    """Sign a scorecard with the private key in `key_path`; returns the envelope file bytes.

    The transcript's sha256 is computed from `transcript_path`; the corpus digest is the
    scorecard's ``corpus.digest``.

    Raises:
        SignatureError: the key or the transcript cannot be read, the scorecard has no
            corpus digest, or its transcript digest is not the transcript file's.
    """
    private_key = load_private_key(key_path)
    try:
        transcript = Path(transcript_path).read_bytes()
    except OSError as exc:
        raise SignatureError(
            f"cannot read transcript {transcript_path}: {exc.strerror or exc}"
        ) from None
    transcript_sha256 = hashlib.sha256(transcript).hexdigest()
    corpus = scorecard.get("corpus")
    corpus_sha256 = corpus.get("digest") if isinstance(corpus, dict) else None
    if not isinstance(corpus_sha256, str) or not _SHA256_HEX.fullmatch(corpus_sha256):
        raise SignatureError("the scorecard has no corpus digest (a sha256 at corpus.digest)")
    recorded = scorecard.get("transcript")
    recorded_sha256 = recorded.get("sha256") if isinstance(recorded, dict) else None
    # Signing a scorecard about another transcript would make an envelope that never verifies.
    if recorded_sha256 is not None and recorded_sha256 != transcript_sha256:
        raise SignatureError(
            f"the transcript's sha256 is {transcript_sha256}, the scorecard says "
            f"{_shown(recorded_sha256)} ({transcript_path})"
        )
    return sign_statement(
        statement(scorecard, transcript_sha256=transcript_sha256, corpus_sha256=corpus_sha256),
        private_key,
    )


def read_statement(envelope: bytes) -> dict[str, Any]:
    """The Statement inside an envelope, decoded WITHOUT verifying its signature.

    For showing what an envelope claims; trust it only after `verify_envelope`.

    Raises:
        SignatureError: the envelope or its payload is malformed.
    """
    payload, _payload_type, _signature = _parse_envelope(envelope, strict=False)
    return _parse_statement(payload)


def verify_envelope(
    envelope: bytes, public_key: Ed25519PublicKey, *, transcript: bytes | None = None
) -> dict[str, Any]:
    """Verify an envelope file with a public key; returns the verified Statement.

    Args:
        envelope: the envelope file's bytes, exactly as written by `sign_statement`.
        public_key: the signer's public key.
        transcript: the transcript file's bytes, to check against the transcript subject.

    Raises:
        SignatureError: naming the first thing that does not verify.
    """
    payload, payload_type, (signer, signature) = _parse_envelope(envelope, strict=True)
    if payload_type != PAYLOAD_TYPE:
        raise SignatureError(f"the payloadType is {_shown(payload_type)}, not {PAYLOAD_TYPE}")
    expected = key_id(public_key)
    if signer != expected:
        raise SignatureError(
            f"the envelope was signed with key {_shown(signer)}, verifying with key {expected}"
        )
    try:
        public_key.verify(signature, pae(payload_type, payload))
    except InvalidSignature:
        raise SignatureError(
            f"the signature does not verify with key {expected} "
            "(the envelope was changed or signed with another key)"
        ) from None
    signed = _parse_statement(payload)
    subjects = _subject_digests(signed)
    if transcript is not None:
        actual = hashlib.sha256(transcript).hexdigest()
        if actual != subjects[TRANSCRIPT_SUBJECT]:
            raise SignatureError(
                f"the transcript's sha256 is {actual}, "
                f"the envelope's subject says {subjects[TRANSCRIPT_SUBJECT]}"
            )
    predicate = signed["predicate"]
    for subject, section, field in (
        (CORPUS_SUBJECT, "corpus", "digest"),
        (TRANSCRIPT_SUBJECT, "transcript", "sha256"),
    ):
        recorded = predicate.get(section)
        if isinstance(recorded, dict) and field in recorded:
            if recorded[field] != subjects[subject]:
                raise SignatureError(
                    f"the scorecard's {section}.{field} is {_shown(recorded[field])}, "
                    f"the envelope's {subject} subject says {subjects[subject]}"
                )
    return signed


def _envelope_file(envelope: dict[str, Any]) -> bytes:
    text = json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return (text + "\n").encode("ascii")


def _parse_envelope(envelope: bytes, *, strict: bool) -> tuple[bytes, str, tuple[str, bytes]]:
    """Payload, payloadType and the (keyid, signature) of an envelope file.

    `strict` also requires the canonical file form and canonical base64.
    """
    try:
        data = json.loads(envelope.decode("utf-8"))
    except UnicodeDecodeError:
        raise SignatureError("the envelope is not UTF-8 text") from None
    except (ValueError, RecursionError):
        raise SignatureError("the envelope is not valid JSON") from None
    if not isinstance(data, dict) or not {"payload", "payloadType", "signatures"} <= set(data):
        raise SignatureError(
            "the envelope is not a DSSE envelope (no payload, payloadType and signatures)"
        )
    payload, payload_type, signatures = data["payload"], data["payloadType"], data["signatures"]
    if not isinstance(payload, str) or not isinstance(payload_type, str):
        raise SignatureError("the envelope's payload and payloadType are not strings")
    if not isinstance(signatures, list) or len(signatures) != 1:
        count = len(signatures) if isinstance(signatures, list) else "no list of"
        raise SignatureError(f"the envelope has {count} signatures; expected exactly one")
    entry = signatures[0]
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("keyid"), str)
        or not isinstance(entry.get("sig"), str)
    ):
        raise SignatureError("the envelope's signature has no keyid and sig strings")
    if strict:
        if set(data) != {"payload", "payloadType", "signatures"} or set(entry) != {"keyid", "sig"}:
            raise SignatureError("the envelope has fields beyond payload, payloadType, signatures")
        if _envelope_file(data) != envelope:
            raise SignatureError("the envelope is not in canonical form: was it edited?")
    return (
        _base64(payload, "payload", strict=strict),
        payload_type,
        (entry["keyid"], _base64(entry["sig"], "signature", strict=strict)),
    )


def _base64(value: str, what: str, *, strict: bool) -> bytes:
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError(f"the {what} is not valid base64") from None
    # Unused bits of the last character do not change the decoded bytes; an edit there would
    # otherwise pass unnoticed.
    if strict and base64.b64encode(data).decode("ascii") != value:
        raise SignatureError(f"the {what} is not canonical base64")
    return data


def _parse_statement(payload: bytes) -> dict[str, Any]:
    try:
        signed = json.loads(payload.decode("utf-8"))
    except (ValueError, RecursionError):
        raise SignatureError("the payload is not JSON") from None
    if not isinstance(signed, dict) or signed.get("_type") != STATEMENT_TYPE:
        raise SignatureError(f"the payload is not an in-toto Statement ({STATEMENT_TYPE})")
    if signed.get("predicateType") != PREDICATE_TYPE:
        raise SignatureError(
            f"the Statement's predicateType is {_shown(signed.get('predicateType'))}, "
            f"not {PREDICATE_TYPE}"
        )
    if not isinstance(signed.get("predicate"), dict):
        raise SignatureError("the Statement's predicate is not a scorecard object")
    _subject_digests(signed)
    return signed


def _subject_digests(signed: dict[str, Any]) -> dict[str, str]:
    """The sha256 of each subject, by name; exactly the transcript and the corpus."""
    subjects = signed.get("subject")
    pairs = [_subject(s) for s in subjects] if isinstance(subjects, list) else []
    digests = dict(pair for pair in pairs if pair is not None)
    if None in pairs or len(pairs) != 2 or set(digests) != {TRANSCRIPT_SUBJECT, CORPUS_SUBJECT}:
        raise SignatureError(
            f"the Statement's subjects are not {TRANSCRIPT_SUBJECT} and {CORPUS_SUBJECT} "
            "with their sha256"
        )
    return digests


def _subject(subject: object) -> tuple[str, str] | None:
    if not isinstance(subject, dict) or not isinstance(subject.get("digest"), dict):
        return None
    name, sha256 = subject.get("name"), subject["digest"].get("sha256")
    if not isinstance(name, str) or not isinstance(sha256, str):
        return None
    return (name, sha256) if _SHA256_HEX.fullmatch(sha256) else None


def _shown(value: object) -> str:
    """A value from an envelope, made safe for a one-line message."""
    if isinstance(value, str) and value.isprintable() and len(value) <= 100:
        return value
    return repr(value)[:100]
