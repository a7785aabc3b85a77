"""Signed scorecards: keys, DSSE envelopes, tamper detection, interop, the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from tests.conftest import child_env, pem_block
from verifier.errors import VerifierError
from verifier.scorecard import signing
from verifier.scorecard.signing import SignatureError

CORPUS_SHA256 = "c0" * 32
TRANSCRIPT = b'{"n":1}\n{"n":2}\n{"n":3}\n'
TRANSCRIPT_SHA256 = hashlib.sha256(TRANSCRIPT).hexdigest()


def scorecard(transcript_sha256: str = TRANSCRIPT_SHA256) -> dict[str, Any]:
    return {
        "corpus": {"digest": CORPUS_SHA256, "families": {"basic": "aa" * 32}},
        "transcript": {"sha256": transcript_sha256, "records": 3},
        "verdict": "pass",
        "endpoint": {"url": "http://127.0.0.1:8000/v1", "model": "tiny-model"},
        "run": {"id": "run-1"},
        "families": {},
        "note": "non-ASCII survives signing: café ✓",
    }


def pem_private(key: Any) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def pem_public(key: Any) -> bytes:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


# One key and one envelope for the property tests (hypothesis and function-scoped
# fixtures do not mix; the strategies need the envelope's length up front).
KEY = Ed25519PrivateKey.generate()
ENVELOPE = signing.sign_statement(
    signing.statement(
        scorecard(), transcript_sha256=TRANSCRIPT_SHA256, corpus_sha256=CORPUS_SHA256
    ),
    KEY,
)


def flipped(data: bytes, position: int, mask: int) -> bytes:
    changed = bytearray(data)
    changed[position] ^= mask
    return bytes(changed)


@pytest.fixture
def signed(tmp_path: Path) -> dict[str, Path]:
    """A key pair, a transcript and the envelope of a scorecard signed with them."""
    private_path, public_path = signing.generate_key(tmp_path / "key")
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(TRANSCRIPT)
    envelope = tmp_path / "scorecard.intoto.json"
    envelope.write_bytes(
        signing.sign_scorecard(scorecard(), transcript_path=transcript, key_path=private_path)
    )
    return {
        "private": private_path,
        "public": public_path,
        "transcript": transcript,
        "envelope": envelope,
    }


# --- keys -----------------------------------------------------------------------------------


def test_generate_key_writes_a_private_0600_and_a_public_0644_pair(tmp_path: Path) -> None:
    private_path, public_path = signing.generate_key(tmp_path / "signer")
    assert private_path == tmp_path / "signer"
    assert public_path == tmp_path / "signer.pub"
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(public_path.stat().st_mode) == 0o644
    assert private_path.read_bytes().startswith(pem_block("PRIVATE KEY", b"").split(b"\n")[0])
    assert public_path.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    private_key = signing.load_private_key(private_path)
    public_key = signing.load_public_key(public_path)
    assert pem_public(private_key.public_key()) == pem_public(public_key)
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert signing.key_id(public_key) == hashlib.sha256(raw).hexdigest()


def test_generate_key_modes_do_not_depend_on_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        private_path, public_path = signing.generate_key(tmp_path / "signer")
    finally:
        os.umask(old)
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(public_path.stat().st_mode) == 0o644


@pytest.mark.parametrize("existing", ["signer", "signer.pub"])
def test_generate_key_refuses_to_overwrite_either_file(tmp_path: Path, existing: str) -> None:
    (tmp_path / existing).write_text("precious\n")
    with pytest.raises(FileExistsError) as raised:
        signing.generate_key(tmp_path / "signer")
    assert raised.value.filename == str(tmp_path / existing)
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]
    assert (tmp_path / existing).read_text() == "precious\n"


def test_generate_key_force_replaces_the_pair_with_fresh_private_files(tmp_path: Path) -> None:
    private_path, public_path = signing.generate_key(tmp_path / "signer")
    first = signing.key_id(signing.load_public_key(public_path))
    private_path.chmod(0o644)  # a replaced key must not inherit a looser mode
    signing.generate_key(tmp_path / "signer", force=True)
    second = signing.key_id(signing.load_public_key(public_path))
    assert first != second
    assert signing.key_id(signing.load_private_key(private_path).public_key()) == second
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600


def key_files(tmp_path: Path) -> dict[str, Path]:
    """Key files that are wrong in one way each."""
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = Ed25519PrivateKey.generate()
    contents = {
        "garbage": b"this is not a key\n",
        "rsa": pem_private(rsa_key),
        "rsa.pub": pem_public(rsa_key.public_key()),
        "ec": pem_private(ec_key),
        "ec.pub": pem_public(ec_key.public_key()),
        "ed.pub": pem_public(ed_key.public_key()),
        "ed": pem_private(ed_key),
        "encrypted": ed_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        ),
        "broken": pem_block("PRIVATE KEY", b"AAAA"),
    }
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in [*contents, "missing"]}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("missing", "cannot read private key {path}: No such file or directory"),
        ("garbage", "{path} is not a PEM key file"),
        ("rsa", "{path} is not an Ed25519 private key (it is RSA)"),
        ("ec", "{path} is not an Ed25519 private key (it is EC secp256r1)"),
        ("ed.pub", "{path} is a public key; signing needs the private key"),
        ("encrypted", "{path} is an encrypted private key; give an unencrypted one"),
        ("broken", "{path} does not hold a readable PEM private key (it is a PRIVATE KEY)"),
    ],
)
def test_load_private_key_errors_are_one_clear_line(
    tmp_path: Path, name: str, expected: str
) -> None:
    path = key_files(tmp_path)[name]
    with pytest.raises(SignatureError) as raised:
        signing.load_private_key(path)
    message = str(raised.value)
    assert message.startswith(expected.format(path=path))
    assert "\n" not in message
    assert isinstance(raised.value, VerifierError)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("missing", "cannot read public key {path}: No such file or directory"),
        ("garbage", "{path} is not a PEM key file"),
        ("rsa.pub", "{path} is not an Ed25519 public key (it is RSA)"),
        ("ec.pub", "{path} is not an Ed25519 public key (it is EC secp256r1)"),
        ("ed", "{path} is a private key; verifying needs the public key"),
        ("encrypted", "{path} is a private key; verifying needs the public key"),
    ],
)
def test_load_public_key_errors_are_one_clear_line(
    tmp_path: Path, name: str, expected: str
) -> None:
    path = key_files(tmp_path)[name]
    with pytest.raises(SignatureError) as raised:
        signing.load_public_key(path)
    message = str(raised.value)
    assert message.startswith(expected.format(path=path))
    assert "\n" not in message


# --- format ---------------------------------------------------------------------------------


def test_pae_is_the_dsse_v1_encoding() -> None:
    # The example of the DSSE v1 protocol document.
    assert (
        signing.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert signing.pae("t", b"") == b"DSSEv1 1 t 0 "
    assert signing.pae("é", b"\x00") == b"DSSEv1 2 \xc3\xa9 1 \x00"


def test_statement_is_an_in_toto_statement_v1() -> None:
    card = scorecard()
    assert signing.statement(
        card, transcript_sha256=TRANSCRIPT_SHA256, corpus_sha256=CORPUS_SHA256
    ) == {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": "transcript.jsonl", "digest": {"sha256": TRANSCRIPT_SHA256}},
            {"name": "corpus", "digest": {"sha256": CORPUS_SHA256}},
        ],
        "predicateType": "https://llm-endpoint-verifier.invalid/scorecard/v1",
        "predicate": card,
    }
    with pytest.raises(ValueError, match="corpus digest"):
        signing.statement(card, transcript_sha256=TRANSCRIPT_SHA256, corpus_sha256="C0" * 32)


def test_envelope_file_is_canonical_dsse(signed: dict[str, Path]) -> None:
    data = signed["envelope"].read_bytes()
    envelope = json.loads(data)
    assert data == (json.dumps(envelope, sort_keys=True, separators=(",", ":")) + "\n").encode()
    assert list(envelope) == ["payload", "payloadType", "signatures"]
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    public_key = signing.load_public_key(signed["public"])
    [entry] = envelope["signatures"]
    assert entry["keyid"] == signing.key_id(public_key)
    payload = base64.b64decode(envelope["payload"], validate=True)
    statement = json.loads(payload)
    assert payload == json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    assert statement["predicate"] == scorecard()
    # The signature is over PAE(payloadType, payload), not over the payload alone.
    public_key.verify(base64.b64decode(entry["sig"]), signing.pae(envelope["payloadType"], payload))


# --- round trip -----------------------------------------------------------------------------


def test_round_trip_verifies_and_returns_the_statement(signed: dict[str, Path]) -> None:
    envelope = signed["envelope"].read_bytes()
    public_key = signing.load_public_key(signed["public"])
    verified = signing.verify_envelope(envelope, public_key)
    assert verified["predicate"] == scorecard()
    assert verified["subject"][0]["digest"]["sha256"] == TRANSCRIPT_SHA256
    assert verified["subject"][1]["digest"]["sha256"] == CORPUS_SHA256
    assert signing.verify_envelope(envelope, public_key, transcript=TRANSCRIPT) == verified
    assert signing.read_statement(envelope) == verified


def test_a_changed_transcript_byte_fails_naming_the_transcript(signed: dict[str, Path]) -> None:
    envelope = signed["envelope"].read_bytes()
    public_key = signing.load_public_key(signed["public"])
    changed = TRANSCRIPT.replace(b'"n":2', b'"n":3')
    with pytest.raises(SignatureError) as raised:
        signing.verify_envelope(envelope, public_key, transcript=changed)
    assert str(raised.value) == (
        f"the transcript's sha256 is {hashlib.sha256(changed).hexdigest()}, "
        f"the envelope's subject says {TRANSCRIPT_SHA256}"
    )


def test_another_key_fails_naming_both_key_ids(signed: dict[str, Path], tmp_path: Path) -> None:
    envelope = signed["envelope"].read_bytes()
    signer = signing.key_id(signing.load_public_key(signed["public"]))
    _, other_path = signing.generate_key(tmp_path / "other")
    other = signing.load_public_key(other_path)
    with pytest.raises(SignatureError) as raised:
        signing.verify_envelope(envelope, other)
    assert str(raised.value) == (
        f"the envelope was signed with key {signer}, verifying with key {signing.key_id(other)}"
    )


def test_a_keyid_claiming_another_key_does_not_verify(tmp_path: Path) -> None:
    other = Ed25519PrivateKey.generate()
    envelope = json.loads(ENVELOPE)
    envelope["signatures"][0]["keyid"] = signing.key_id(other.public_key())
    forged = (json.dumps(envelope, sort_keys=True, separators=(",", ":")) + "\n").encode()
    with pytest.raises(SignatureError, match="the signature does not verify with key"):
        signing.verify_envelope(forged, other.public_key())


def test_sign_scorecard_refuses_a_transcript_the_scorecard_is_not_about(tmp_path: Path) -> None:
    private_path, _ = signing.generate_key(tmp_path / "key")
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(TRANSCRIPT + b"{}\n")
    with pytest.raises(SignatureError, match="the transcript's sha256 is .*, the scorecard says"):
        signing.sign_scorecard(scorecard(), transcript_path=transcript, key_path=private_path)
    card = scorecard()
    del card["corpus"]
    transcript.write_bytes(TRANSCRIPT)
    with pytest.raises(SignatureError, match="no corpus digest"):
        signing.sign_scorecard(card, transcript_path=transcript, key_path=private_path)
    with pytest.raises(SignatureError, match="cannot read transcript"):
        signing.sign_scorecard(
            scorecard(), transcript_path=tmp_path / "missing", key_path=private_path
        )


def test_subjects_must_agree_with_the_scorecard() -> None:
    # Correctly signed, but the scorecard speaks of another corpus than the subject.
    card = scorecard()
    card["corpus"]["digest"] = "dd" * 32
    envelope = signing.sign_statement(
        signing.statement(card, transcript_sha256=TRANSCRIPT_SHA256, corpus_sha256=CORPUS_SHA256),
        KEY,
    )
    with pytest.raises(SignatureError, match="scorecard's corpus.digest is d+, the envelope's"):
        signing.verify_envelope(envelope, KEY.public_key())
    card = scorecard(transcript_sha256="ee" * 32)
    envelope = signing.sign_statement(
        signing.statement(card, transcript_sha256=TRANSCRIPT_SHA256, corpus_sha256=CORPUS_SHA256),
        KEY,
    )
    with pytest.raises(SignatureError, match="scorecard's transcript.sha256 is e+, the envelope"):
        signing.verify_envelope(envelope, KEY.public_key())


def test_a_signed_payload_that_is_not_our_statement_is_refused() -> None:
    other = signing.statement(
        scorecard(), transcript_sha256=TRANSCRIPT_SHA256, corpus_sha256=CORPUS_SHA256
    )
    other["predicateType"] = "https://slsa.dev/provenance/v1"
    with pytest.raises(SignatureError, match="predicateType is https://slsa.dev/provenance/v1"):
        signing.verify_envelope(signing.sign_statement(other, KEY), KEY.public_key())
    del other["subject"][1]
    other["predicateType"] = signing.PREDICATE_TYPE
    with pytest.raises(SignatureError, match="subjects are not transcript.jsonl and corpus"):
        signing.verify_envelope(signing.sign_statement(other, KEY), KEY.public_key())


@pytest.mark.parametrize(
    ("envelope", "unverified", "verified"),
    [
        (b"", "the envelope is not valid JSON", None),
        (b"\xff\n", "the envelope is not UTF-8 text", None),
        (b"[]\n", "the envelope is not a DSSE envelope", None),
        (
            b'{"payload":"e30=","payloadType":"x","signatures":[]}\n',
            "the envelope has 0 signatures; expected exactly one",
            None,
        ),
        (
            b'{"payload":"%%%","payloadType":"x","signatures":[{"keyid":"k","sig":""}]}\n',
            "the payload is not valid base64",
            None,
        ),
        (
            b'{"payload":"e30=","payloadType":"x","signatures":[{"keyid":"k","sig":""}]}\n',
            "the payload is not an in-toto Statement",
            "the payloadType is x, not application/vnd.in-toto+json",
        ),
    ],
)
def test_malformed_envelopes_are_refused(
    envelope: bytes, unverified: str, verified: str | None
) -> None:
    with pytest.raises(SignatureError) as raised:
        signing.read_statement(envelope)
    assert str(raised.value).startswith(unverified)
    with pytest.raises(SignatureError) as raised:
        signing.verify_envelope(envelope, KEY.public_key())
    assert str(raised.value).startswith(verified or unverified)


def test_an_edit_that_keeps_the_signed_bytes_is_still_refused() -> None:
    public_key = KEY.public_key()
    envelope = json.loads(ENVELOPE)
    pretty = (json.dumps(envelope, indent=2) + "\n").encode()
    with pytest.raises(SignatureError, match="not in canonical form: was it edited"):
        signing.verify_envelope(pretty, public_key)
    assert signing.read_statement(pretty) == signing.read_statement(ENVELOPE)
    # A 64-byte signature ends in one base64 character with 4 unused bits, then "==".
    sig = envelope["signatures"][0]["sig"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = sig[-3]
    envelope["signatures"][0]["sig"] = sig[:-3] + alphabet[alphabet.index(last) ^ 1] + "=="
    assert base64.b64decode(envelope["signatures"][0]["sig"]) == base64.b64decode(sig)
    edited = (json.dumps(envelope, sort_keys=True, separators=(",", ":")) + "\n").encode()
    with pytest.raises(SignatureError, match="the signature is not canonical base64"):
        signing.verify_envelope(edited, public_key)


# --- tampering, as properties -----------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, len(ENVELOPE) - 1), mask=st.integers(1, 255))
def test_every_single_byte_change_of_the_envelope_is_refused(position: int, mask: int) -> None:
    with pytest.raises(SignatureError):
        signing.verify_envelope(flipped(ENVELOPE, position, mask), KEY.public_key())


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, len(TRANSCRIPT) - 1), mask=st.integers(1, 255))
def test_every_single_byte_change_of_the_transcript_is_refused(position: int, mask: int) -> None:
    with pytest.raises(SignatureError, match="^the transcript's sha256 is "):
        signing.verify_envelope(
            ENVELOPE, KEY.public_key(), transcript=flipped(TRANSCRIPT, position, mask)
        )


@pytest.mark.parametrize("mask", [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80])
def test_every_position_of_the_envelope_is_covered(mask: int) -> None:
    # Exhaustive over positions for every single-bit flip, where hypothesis only samples.
    public_key = KEY.public_key()
    for position in range(len(ENVELOPE)):
        with pytest.raises(SignatureError):
            signing.verify_envelope(flipped(ENVELOPE, position, mask), public_key)


# --- interoperability with securesystemslib's DSSE ------------------------------------------------


def sslib_key(private_key: Ed25519PrivateKey) -> SSlibKey:
    public_key = private_key.public_key()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return SSlibKey(
        keyid=signing.key_id(public_key),
        keytype="ed25519",
        scheme="ed25519",
        keyval={"public": raw.hex()},
    )


def test_securesystemslib_verifies_our_envelope() -> None:
    key = sslib_key(KEY)
    envelope = Envelope.from_dict(json.loads(ENVELOPE))
    assert envelope.payload_type == signing.PAYLOAD_TYPE
    assert json.loads(envelope.payload) == signing.read_statement(ENVELOPE)
    assert envelope.verify([key], 1) == {signing.key_id(KEY.public_key()): key}


def test_securesystemslib_refuses_our_envelope_tampered() -> None:
    key = sslib_key(KEY)
    data = json.loads(ENVELOPE)
    statement = json.loads(base64.b64decode(data["payload"]))
    statement["predicate"]["verdict"] = "fail"
    data["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    with pytest.raises(VerificationError):
        Envelope.from_dict(data).verify([key], 1)


def test_securesystemslib_ignores_edits_that_we_refuse() -> None:
    # Found: securesystemslib verifies the decoded envelope, not the file. It accepts an
    # envelope re-indented or with a signature whose base64 differs in the unused bits, both
    # single-edit changes of the file that verify_envelope refuses.
    data = json.loads(ENVELOPE)
    sig = data["signatures"][0]["sig"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    data["signatures"][0]["sig"] = sig[:-3] + alphabet[alphabet.index(sig[-3]) ^ 1] + "=="
    edited = (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode()
    key = sslib_key(KEY)
    assert Envelope.from_dict(json.loads(edited)).verify([key], 1)
    with pytest.raises(SignatureError, match="not canonical base64"):
        signing.verify_envelope(edited, KEY.public_key())


def test_an_envelope_signed_by_securesystemslib_verifies_with_us() -> None:
    statement = signing.read_statement(ENVELOPE)
    payload = json.dumps(
        statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    envelope = Envelope(payload, signing.PAYLOAD_TYPE, {})
    signature = envelope.sign(CryptoSigner(KEY, sslib_key(KEY)))
    assert signature.keyid == signing.key_id(KEY.public_key())
    as_dict = envelope.to_dict()
    # Found: to_dict() has the right fields in sorted order, but it is a dict, not a file;
    # json.dumps' default separators are not our canonical form, so we re-serialise it
    # canonically. Ed25519 being deterministic, the result is our envelope byte for byte.
    assert signing.read_statement(json.dumps(as_dict).encode()) == statement
    with pytest.raises(SignatureError, match="not in canonical form"):
        signing.verify_envelope(json.dumps(as_dict).encode(), KEY.public_key())
    canonical = (json.dumps(as_dict, sort_keys=True, separators=(",", ":")) + "\n").encode()
    assert canonical == ENVELOPE
    assert signing.verify_envelope(canonical, KEY.public_key()) == statement


# --- the command line -------------------------------------------------------------------------


def verifier(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *map(str, args)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )


def test_cli_keygen(tmp_path: Path) -> None:
    out = tmp_path / "signer"
    done = verifier("keygen", "--out", out)
    assert done.returncode == 0, done.stderr
    key_id = signing.key_id(signing.load_public_key(Path(f"{out}.pub")))
    assert done.stdout == f"private key: {out}\npublic key: {out}.pub\nkey id: {key_id}\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600

    again = verifier("keygen", "--out", out)
    assert again.returncode == 2
    assert again.stdout == ""
    assert again.stderr == f"verifier keygen: error: {out} already exists (--force replaces it)\n"
    assert signing.key_id(signing.load_public_key(Path(f"{out}.pub"))) == key_id

    forced = verifier("keygen", "--out", out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert signing.key_id(signing.load_public_key(Path(f"{out}.pub"))) != key_id

    nowhere = verifier("keygen", "--out", tmp_path / "no-such-dir" / "signer")
    assert nowhere.returncode == 2
    assert nowhere.stderr == (
        f"verifier keygen: error: cannot write {tmp_path / 'no-such-dir' / 'signer'}: "
        "No such file or directory\n"
    )


def test_cli_verify_valid(signed: dict[str, Path]) -> None:
    key_id = signing.key_id(signing.load_public_key(signed["public"]))
    summary = (
        f"valid: signed by {key_id}; verdict PASS; endpoint http://127.0.0.1:8000/v1; "
        "model tiny-model; run run-1; 0 families"
    )
    done = verifier("verify", signed["envelope"], "--key", signed["public"])
    assert (done.returncode, done.stdout, done.stderr) == (0, summary + "\n", "")
    done = verifier(
        "verify",
        signed["envelope"],
        "--key",
        signed["public"],
        "--transcript",
        signed["transcript"],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{summary}; transcript {signed['transcript']} matches\n"


def test_cli_verify_invalid(signed: dict[str, Path], tmp_path: Path) -> None:
    envelope = signed["envelope"]
    signed["transcript"].write_bytes(TRANSCRIPT + b"\n")
    done = verifier(
        "verify", envelope, "--key", signed["public"], "--transcript", signed["transcript"]
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"verifier verify: invalid: {envelope}: the transcript's sha256")
    assert done.stderr.count("\n") == 1

    _, other = signing.generate_key(tmp_path / "other")
    done = verifier("verify", envelope, "--key", other)
    assert done.returncode == 1
    assert f"invalid: {envelope}: the envelope was signed with key " in done.stderr
    assert done.stderr.count("\n") == 1

    envelope.write_bytes(envelope.read_bytes().replace(b'"signatures"', b'"signatures" '))
    done = verifier("verify", envelope, "--key", signed["public"])
    assert (done.returncode, done.stderr) == (
        1,
        f"verifier verify: invalid: {envelope}: the envelope is not in canonical form: "
        "was it edited?\n",
    )


def test_cli_verify_bad_input(signed: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    done = verifier("verify", missing, "--key", signed["public"])
    assert (done.returncode, done.stderr) == (
        2,
        f"verifier verify: error: cannot read {missing}: No such file or directory\n",
    )
    done = verifier("verify", signed["envelope"], "--key", signed["private"])
    assert (done.returncode, done.stderr) == (
        2,
        f"verifier verify: error: {signed['private']} is a private key; verifying needs the "
        "public key (the .pub file)\n",
    )
    done = verifier(
        "verify", signed["envelope"], "--key", signed["public"], "--transcript", missing
    )
    assert done.returncode == 2
    assert (
        done.stderr == f"verifier verify: error: cannot read {missing}: No such file or directory\n"
    )
