"""Idempotency keys: the one writer of IdempotencyKey rows. A creating request claims its key
in its own transaction, stores its response there, and a retry within 24 h gets it back."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from gates.errors import ServiceError
from gates.models import IdempotencyKey
from gates.services.hosts.access import keyring

KEEP_FOR = timedelta(hours=24)
HEADER = "Idempotency-Key"


class IdempotencyKeyReusedError(ServiceError):
    code = "idempotency_key_reused"
    status = 422


class IdempotencyKeyBusyError(ServiceError):
    code = "idempotency_key_busy"
    status = 409


@dataclass(frozen=True)
class StoredResponse:
    status_code: int
    body: Any


def idempotency_fingerprint(*, method: str, path: str, body: Any) -> str:
    """SHA-256 of the request as the key promises it: method, path and the canonical body."""
    canonical = json.dumps(
        [method.upper(), path, body], sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_claim(*, owner: str, key: str, fingerprint: str) -> StoredResponse | None:
    """Claim the key for this request (None: go on, store the response before commit), or the
    response a first request with this key gave. Call inside the request's transaction.

    A concurrent twin waits here on the unique index until the first commits or rolls back.
    """
    for _ in range(2):
        if _insert(owner=owner, key=key, fingerprint=fingerprint):
            return None
        stored = IdempotencyKey.objects.filter(owner=owner, key=key).first()
        if stored is None:
            continue
        if stored.expires_at <= timezone.now():
            stored.delete()
            continue
        if stored.fingerprint != fingerprint:
            raise IdempotencyKeyReusedError(
                "this key was used with another request in the last 24 h", field=HEADER
            )
        return StoredResponse(stored.status_code, _body(stored))
    # Twice inserted and twice gone again (expired and purged in between): rare; let them retry.
    raise IdempotencyKeyBusyError("the key is being claimed concurrently; retry", field=HEADER)


def idempotency_store(
    *, owner: str, key: str, status_code: int, body: Any, sealed: bool = False
) -> None:
    """Record the first response under the claimed key; `sealed` encrypts it (it holds a secret)."""
    values: dict[str, Any] = {"status_code": status_code, "response_body": body}
    if sealed:
        plaintext = json.dumps(body, default=str).encode()
        ciphertext = keyring().encrypt(plaintext, associated_data=_aad(owner, key))
        values.update(response_body=None, response_sealed=ciphertext)
    IdempotencyKey.objects.filter(owner=owner, key=key).update(**values)


def idempotency_purge_expired(*, now=None) -> int:
    """Delete keys past their 24 h (lazy expiry: called before each claim, outside the request's
    transaction so its row locks last one statement, not a whole request)."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted


def _insert(*, owner: str, key: str, fingerprint: str) -> bool:
    now = timezone.now()
    try:
        with transaction.atomic():
            IdempotencyKey.objects.create(
                owner=owner, key=key, fingerprint=fingerprint, expires_at=now + KEEP_FOR
            )
    except IntegrityError:
        return False
    return True


def _body(stored: IdempotencyKey) -> Any:
    if stored.response_sealed is None:
        return stored.response_body
    aad = _aad(stored.owner, stored.key)
    return json.loads(keyring().decrypt(stored.response_sealed, associated_data=aad))


def _aad(owner: str, key: str) -> bytes:
    # Bound to the row, so a sealed response copied under another owner's key won't open.
    return f"tollgate:idempotency:{owner}:{key}".encode()
