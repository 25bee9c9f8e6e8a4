"""The signed statement: an in-toto Statement v1 over every bundle member, in a DSSE envelope
signed with Ed25519, and the key ids that name the signers.

Pure (`cryptography` only), so the offline verifier can check an envelope with nothing else.
The server signs with securesystemslib's DSSE Envelope (gates.evidence.store); this module is
the verifier's own check of the same format: the DSSE pre-authentication encoding is five
fields, and depending on securesystemslib here would add a dependency for customers who run
only bin/tollgate-verify.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gates import sshsig

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "https://tollgate.dev/evidence/decision/v1"
# The namespace a party's `ssh-keygen -Y sign` co-signature over the PAE bytes is made in.
COSIGN_NAMESPACE = "tollgate-evidence"


class EnvelopeError(ValueError):
    """The envelope or a signature in it is malformed or does not verify; says which."""


def statement(subjects: dict[str, str], predicate: dict) -> dict:
    """In-toto Statement v1: every member name with its SHA-256, and Tollgate's predicate."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": n, "digest": {"sha256": subjects[n]}} for n in sorted(subjects)],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def payload_bytes(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what every signature signs."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def envelope(payload: bytes, signatures: list[tuple[str, bytes]]) -> dict:
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {"keyid": keyid, "sig": base64.b64encode(sig).decode()} for keyid, sig in signatures
        ],
    }


def envelope_bytes(document: dict) -> bytes:
    """The stored form of an envelope, whose SHA-256 is the bundle's envelope digest."""
    return (json.dumps(document, sort_keys=True, indent=2) + "\n").encode()


def envelope_payload(document: object) -> tuple[bytes, bytes]:
    """(payload, PAE bytes) of an envelope; EnvelopeError if it is not a DSSE envelope."""
    if not isinstance(document, dict) or document.get("payloadType") != PAYLOAD_TYPE:
        raise EnvelopeError(f"envelope: payloadType must be {PAYLOAD_TYPE}")
    payload = _b64(document.get("payload"), "envelope payload")
    return payload, pae(PAYLOAD_TYPE, payload)


def verify_envelope(document: dict, key: Ed25519PublicKey) -> str:
    """The key id of the signature in `document` that `key` made over its PAE, or EnvelopeError
    naming the signature that fails (or saying none is by this key)."""
    _, signed = envelope_payload(document)
    keyid = key_fingerprint(key)
    signatures = document.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeError("envelope: no signatures")
    mine = [s for s in signatures if isinstance(s, dict) and s.get("keyid") == keyid]
    if not mine:
        listed = ", ".join(str(s.get("keyid")) for s in signatures if isinstance(s, dict))
        raise EnvelopeError(f"signature: none by key {keyid} (the envelope has {listed})")
    for signature in mine:
        try:
            key.verify(_b64(signature.get("sig"), f"signature {keyid}"), signed)
        except InvalidSignature as error:
            raise EnvelopeError(f"signature {keyid}: does not verify over the payload") from error
    return keyid


def raw_public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def openssh_line(key: Ed25519PublicKey, comment: str = "tollgate-evidence") -> str:
    blob = _ssh_blob(key)
    return f"{sshsig.KEY_TYPE} {base64.b64encode(blob).decode()} {comment}"


def key_fingerprint(key: Ed25519PublicKey) -> str:
    """The key id: `ssh-keygen -l`'s SHA256 fingerprint, so one string names the key everywhere
    (the API, the gate page, the envelope, a party's own `ssh-keygen -l -f key.pub`)."""
    return sshsig.fingerprint(_ssh_blob(key))


def load_public_key(text: str | bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM or an OpenSSH `ssh-ed25519 AAAA...` line."""
    data = text.encode() if isinstance(text, str) else text
    if data.lstrip().startswith(b"ssh-ed25519"):
        return public_key_from_ssh(data.decode())
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as error:
        raise EnvelopeError(f"public key: not PEM or OpenSSH ({error})") from error
    if not isinstance(key, Ed25519PublicKey):
        raise EnvelopeError("public key: only Ed25519 keys sign Tollgate evidence")
    return key


def public_key_from_ssh(line: str) -> Ed25519PublicKey:
    try:
        blob = sshsig.public_key_blob(line)
    except sshsig.SshSigError as error:
        raise EnvelopeError(f"public key: {error}") from error
    return Ed25519PublicKey.from_public_bytes(blob[-32:])


def _ssh_blob(key: Ed25519PublicKey) -> bytes:
    kind = sshsig.KEY_TYPE.encode()
    raw = raw_public_bytes(key)
    return struct.pack(">I", len(kind)) + kind + struct.pack(">I", len(raw)) + raw


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise EnvelopeError(f"{what}: missing")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise EnvelopeError(f"{what}: not base64") from error
