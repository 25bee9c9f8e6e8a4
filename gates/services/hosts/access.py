"""Hosts: onboarding with a confirmed pinned key, encrypted credentials, key rotation; what a
run takes from its host (the profile snapshot, the values its templates are filled with)."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from documents.profile import ProfileSnapshot, profile_digest, profile_snapshot
from gates.crypto import CryptoError, Keyring, host_credential_aad
from gates.errors import DuplicateError, NotAllowedError, ServiceError
from gates.models import Gate, Host, Organization, Profile, Run
from gates.services.audit import Actor, audit_record
from gates.tenancy import Viewer
from runners.commands import checked_values
from runners.errors import SpecError
from runners.program.workorder import checked_retry_window
from runners.transport import SshTarget

HOST_KEY_TYPES = {
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "rsa-sha2-256",
    "rsa-sha2-512",
}
ADDRESS_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
USERNAME_PATTERN = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
PRIVATE_KEY_MARKERS = (
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
)

DEFAULT_PYTHON = "/usr/bin/python3"  # the host's interpreter for hostctl.py, unless set


def host_key_fingerprint(key_line: str) -> str:
    """SHA256 fingerprint (as `ssh-keygen -l` prints it) of an OpenSSH public key line."""
    parts = key_line.strip().split()
    if len(parts) < 2 or parts[0] not in HOST_KEY_TYPES:
        raise ServiceError(
            "expected an OpenSSH public key line like 'ssh-ed25519 AAAA...'", field="host_key"
        )
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError) as error:
        raise ServiceError("the key is not valid base64", field="host_key") from error
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def keyring() -> Keyring:
    try:
        return Keyring.from_base64(settings.TOLLGATE_ENCRYPTION_KEYS)
    except CryptoError as error:
        raise ServiceError(str(error), field="TOLLGATE_ENCRYPTION_KEYS") from error


def host_create(
    *,
    actor: Actor,
    viewer: Viewer,
    organization: Organization,
    name: str,
    profile: Profile,
    transport: str = Host.Transport.SSH,
    address: str = "",
    port: int = 22,
    username: str = "",
    host_key: str = "",
    private_key: str | None = None,
    key_file_path: str = "",
    labels: dict | None = None,
) -> Host:
    """Register a host. An SSH host needs its host key, confirmed by a person beforehand."""
    if not viewer.can("host.manage"):
        raise NotAllowedError("only vendor staff may register hosts")
    fingerprint = _validate_host_fields(transport, address, port, username, host_key)
    _validate_credential(transport, private_key, key_file_path)
    try:
        with transaction.atomic():
            host = Host.objects.create(
                organization=organization,
                name=name,
                transport=transport,
                address=address,
                port=port,
                username=username,
                host_key=host_key.strip(),
                host_key_fingerprint=fingerprint,
                key_file_path=key_file_path,
                profile=profile,
                labels=labels or {},
            )
            if private_key:
                host_set_credential(host=host, private_key=private_key)
            audit_record(
                actor=actor,
                action="host.create",
                target=host,
                organization_id=organization.id,
                detail={"name": name, "address": address, "fingerprint": fingerprint},
            )
    except IntegrityError as error:
        # The unique constraint decides, not a look before the insert: two requests race.
        if not Host.objects.filter(organization=organization, name=name).exists():
            raise
        raise DuplicateError(
            f"{organization.slug} already has a host named {name!r}", field="name"
        ) from error
    return host


# What a person may change on a registered host. The pinned key, the lease and the fencing
# token are not among them: a key is pinned by onboarding, the lease belongs to the runs.
EDITABLE_FIELDS = ("name", "address", "port", "username", "profile", "key_file_path", "parameters")


def host_update(
    *, actor: Actor, viewer: Viewer, host: Host, private_key: str | None = None, **changes
) -> Host:
    """Change a host's parameters (and, when given, replace its private key), checked as at
    registration, with the field named; nothing is written when any check fails."""
    if not viewer.can("host.manage"):
        raise NotAllowedError("only vendor staff may change hosts")
    unknown = sorted(set(changes) - set(EDITABLE_FIELDS))
    if unknown:
        raise ServiceError(f"{unknown[0]} cannot be changed here", field=unknown[0])
    for name, value in changes.items():
        setattr(host, name, value)
    _validate_host_fields(host.transport, host.address, host.port, host.username, host.host_key)
    drops_stored_key = _validate_changed_credential(host, private_key)
    run_values_check(host, {}, model_name="model")
    # Only the changed columns: a run may take the lease meanwhile, and a save of the whole
    # row would write back the lease and fencing token this instance read before.
    columns = sorted(changes) + (["credential_ciphertext"] if drops_stored_key else [])
    try:
        with transaction.atomic():
            host.save(update_fields=columns)
            if private_key:
                host_set_credential(host=host, private_key=private_key)
            changed = sorted(changes) + (["private_key"] if private_key else [])
            audit_record(
                actor=actor,
                action="host.update",
                target=host,
                organization_id=host.organization_id,
                detail={"changed": changed},  # names only: a key never reaches the trail
            )
    except IntegrityError as error:
        taken = Host.objects.filter(organization_id=host.organization_id, name=host.name)
        if not taken.exclude(pk=host.pk).exists():
            raise
        raise DuplicateError(f"another host is named {host.name!r}", field="name") from error
    return host


def host_pin_key(*, actor: Actor, viewer: Viewer, host: Host, host_key: str) -> Host:
    """Pin a newly scanned and confirmed key (a host re-installed): from now on only this key
    is accepted. Audited with both fingerprints."""
    if not viewer.can("host.manage"):
        raise NotAllowedError("only vendor staff may pin host keys")
    if host.transport != Host.Transport.SSH:
        raise ServiceError("a local host has no host key", field="host_key")
    fingerprint = host_key_fingerprint(host_key)
    previous = host.host_key_fingerprint
    with transaction.atomic():
        host.host_key, host.host_key_fingerprint = host_key.strip(), fingerprint
        host.save(update_fields=["host_key", "host_key_fingerprint"])
        audit_record(
            actor=actor,
            action="host.key_pin",
            target=host,
            organization_id=host.organization_id,
            detail={"previous": previous, "fingerprint": fingerprint},
        )
    return host


def _validate_changed_credential(host: Host, private_key: str | None) -> bool:
    """A new private key replaces the stored one (with no key file path beside it); a key
    file path given instead of a stored key replaces it. True when the stored key is dropped."""
    if host.transport == Host.Transport.LOCAL:
        return False
    if private_key or not host.has_stored_credential:
        _validate_credential(host.transport, private_key, host.key_file_path)
        return False
    if host.key_file_path:
        _validate_credential(host.transport, None, host.key_file_path)
        host.credential_ciphertext = None
        return True
    return False


def host_set_credential(*, host: Host, private_key: str) -> None:
    """Encrypt the private key bound to this organization and host (the AAD)."""
    aad = host_credential_aad(host.organization_id, host.pk)
    host.credential_ciphertext = keyring().encrypt(private_key.encode(), associated_data=aad)
    host.save(update_fields=["credential_ciphertext"])


def host_credential(host: Host) -> str | None:
    """The decrypted private key for the transport, or None when the host uses a key file."""
    if not host.credential_ciphertext:
        return None
    return _stored_credential(host)


def _stored_credential(host: Host) -> str:
    aad = host_credential_aad(host.organization_id, host.pk)
    try:
        return keyring().decrypt(host.credential_ciphertext, associated_data=aad).decode()
    except CryptoError as error:
        raise ServiceError(f"host {host.name}: {error}", field="credential") from error


def host_rotate_credentials() -> int:
    """Re-encrypt every stored credential with the newest key; returns how many changed."""
    ring = keyring()
    rotated = 0
    for host in Host.objects.exclude(credential_ciphertext=None).iterator():
        if ring.needs_rotation(host.credential_ciphertext):
            host_set_credential(host=host, private_key=_stored_credential(host))
            rotated += 1
    return rotated


def _validate_host_fields(
    transport: str, address: str, port: int, username: str, host_key: str
) -> str:
    if transport == Host.Transport.LOCAL:
        return ""
    if transport != Host.Transport.SSH:
        raise ServiceError(f"unknown transport {transport!r}", field="transport")
    if not ADDRESS_PATTERN.match(address):
        raise ServiceError("a host name or IP address is required", field="address")
    if not 1 <= int(port) <= 65535:
        raise ServiceError("a TCP port from 1 to 65535", field="port")
    if not USERNAME_PATTERN.match(username):
        raise ServiceError("a POSIX user name is required", field="username")
    if not host_key.strip():
        raise ServiceError(
            "pin the host key: scan it, confirm its fingerprint with the host's owner",
            field="host_key",
        )
    return host_key_fingerprint(host_key)


def _validate_credential(transport: str, private_key: str | None, key_file_path: str) -> None:
    if transport == Host.Transport.LOCAL:
        return
    if private_key and key_file_path:
        raise ServiceError("give a private key or a key file path, not both", field="private_key")
    if private_key and not private_key.strip().startswith(PRIVATE_KEY_MARKERS):
        raise ServiceError("not a PEM or OpenSSH private key", field="private_key")
    if not private_key and not key_file_path.startswith("/"):
        raise ServiceError(
            "a private key or an absolute key file path is required", field="private_key"
        )


def host_target(host: Host, *, check_timeout_s: float | None = None) -> SshTarget:
    """How to reach an SSH host, for runners.transport: the key decrypted in memory only
    (SshTarget keeps it out of repr). `check_timeout_s` bounds the connect, banner and auth
    waits of a connection check instead of the transport's defaults."""
    private_key = host_credential(host)
    target = SshTarget(
        name=host.name,
        address=host.address,
        port=host.port,
        username=host.username,
        host_key=host.host_key,
        private_key=private_key,
        key_path=None if private_key else host.key_file_path or None,
    )
    if check_timeout_s is None:
        return target
    timeout = check_timeout_s
    return replace(target, connect_timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)


def run_values(
    host: Host, spec: dict, *, model_name: str, profile_parameters: dict | None = None
) -> dict:
    """The values a run's templates are filled with: defaults, then the profile's (the run's
    snapshot of them when given), the spec's server section and the host's parameters, each
    overriding the one before."""
    return {
        "python": DEFAULT_PYTHON,
        "model": model_name,
        **(host.profile.parameters if profile_parameters is None else profile_parameters),
        **spec.get("server", {}),
        **host.parameters,
    }


def run_profile_snapshot(host: Host) -> ProfileSnapshot:
    """The host's profile now, as a run stores it (a run made before snapshots reads it so)."""
    return _profile_snapshot_of(host.profile)


def _profile_snapshot_of(profile: Profile) -> ProfileSnapshot:
    # Copies: the run's snapshot must not share dicts with a Profile instance edited later.
    commands, parameters = copy.deepcopy(profile.commands), copy.deepcopy(profile.parameters)
    return profile_snapshot(profile.name, commands, parameters)


@dataclass(frozen=True)
class UploadProfile:
    """The profile an upload run names (the command lines its person ran) and the values
    given in place of a host's parameters."""

    profile: Profile
    parameters: dict[str, Any] = field(default_factory=dict)


def run_profile_fields(
    host: Host | None, gate: Gate, upload: UploadProfile | None = None
) -> dict[str, Any]:
    """A new run's snapshot of its host's profile (or of the profile an upload names, with
    its values checked as a host's are against the gate's spec) and the digest; none for an
    upload that names no profile."""
    if host is not None:
        snapshot = run_profile_snapshot(host)
    elif upload is not None:
        snapshot = _profile_snapshot_of(upload.profile)
        _check_upload_values(upload, gate)
    else:
        return {}
    fields = {"profile_snapshot": snapshot, "profile_digest": profile_digest(snapshot)}
    return fields if upload is None else {**fields, "upload_parameters": upload.parameters}


def upload_run_values(run: Run) -> dict[str, Any]:
    """What an upload run's profile templates would have been filled with: the profile's
    defaults (its snapshot), the spec's server section and the upload's parameters."""
    profile = (run.profile_snapshot or {}).get("parameters", {})
    return {**profile, **run.spec.document.get("server", {}), **run.upload_parameters}


def _check_upload_values(upload: UploadProfile, gate: Gate) -> None:
    values = {
        "python": DEFAULT_PYTHON,
        "model": gate.engagement.model_name,
        **upload.profile.parameters,
        **gate.current_spec.document.get("server", {}),
        **upload.parameters,
    }
    try:
        checked_values(values)
    except SpecError as problem:
        raise ServiceError(problem.reason, field=f"parameters.{problem.field}") from None


def run_values_check(host: Host, spec: dict, *, model_name: str) -> None:
    """Refuse to start a run whose values a template could not take (a run_root with '..', a
    path with shell metacharacters), with the field named, before anything is written."""
    try:
        checked_values(run_values(host, spec, model_name=model_name))
        host_retry_window(host)
        if not isinstance(host.parameters.get("keep_run_dir", False), bool):
            raise SpecError("must be true or false", field="keep_run_dir")
    except SpecError as problem:
        raise ServiceError(problem.reason, field=f"parameters.{problem.field}") from None


def host_retry_window(host: Host) -> float:
    """The host's transport retry window in seconds, or the setting's; SpecError naming the
    parameter when it is not a number of seconds."""
    default = settings.TOLLGATE_TRANSPORT_RETRY_WINDOW_S
    window = host.parameters.get("transport_retry_window_s", default)
    return checked_retry_window(window, host=host.name)
