"""Ed25519 keys a party registers to sign spec digests with their own key (SSHSIG)."""

from __future__ import annotations

from django.db import transaction

from gates import sshsig
from gates.errors import NotAllowedError, ServiceError
from gates.models import Organization, PartyKey
from gates.services.audit import Actor, audit_record
from gates.tenancy import Viewer


def party_key_register(*, actor: Actor, viewer: Viewer, public_key: str) -> PartyKey:
    """Register the signer's OpenSSH Ed25519 public key for their organization."""
    if viewer.signing_party is None or actor.user is None:
        raise NotAllowedError("only a vendor admin or a customer owner registers a signing key")
    try:
        blob = sshsig.public_key_blob(public_key)
    except sshsig.SshSigError as error:
        raise ServiceError(str(error), field="public_key") from error
    fingerprint = sshsig.fingerprint(blob)
    organization = _signer_organization(viewer)
    with transaction.atomic():
        if PartyKey.objects.filter(fingerprint=fingerprint).exists():
            raise ServiceError("this key is already registered", field="public_key")
        key = PartyKey.objects.create(
            organization=organization,
            user=actor.user,
            public_key=" ".join(public_key.split()[:2]),
            fingerprint=fingerprint,
        )
        audit_record(
            actor=actor,
            action="party_key.register",
            target=key,
            organization_id=organization.id,
            detail={"fingerprint": fingerprint},
        )
    return key


def ssh_signature_check(viewer: Viewer, digest: str, armored: str) -> PartyKey:
    """The signer's registered key that made this SSHSIG over `digest`, or a field error."""
    try:
        blob = sshsig.verify(armored, digest.encode())
    except sshsig.SshSigError as error:
        raise ServiceError(str(error), field="ssh_signature") from error
    key = PartyKey.objects.filter(
        fingerprint=sshsig.fingerprint(blob), user=viewer.user, revoked_at__isnull=True
    ).first()
    if key is None:
        raise ServiceError(
            "the signature verifies, but with a key you have not registered",
            field="ssh_signature",
        )
    return key


def _signer_organization(viewer: Viewer) -> Organization:
    kind = Organization.Kind.VENDOR if viewer.signing_party == "vendor" else "customer"
    return Organization.objects.filter(pk__in=viewer.organization_ids, kind=kind).first()
