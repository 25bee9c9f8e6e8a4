"""Signed evidence: the server's Ed25519 signing keys (with their validity), each decision's
seal (the signed in-toto statement), and the parties' co-signatures over it."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from gates.models.appendonly import AppendOnlyModel
from gates.models.choices import user_reference


class EvidenceKey(models.Model):
    """A key the server signs evidence with. Retired keys stay listed (old bundles still
    verify); only `retired_at`/`not_after` ever change."""

    class Source(models.TextChoices):
        DATABASE = "database", "created here, stored encrypted"
        FILE = "file", "read from TOLLGATE_SIGNING_KEY_FILE"

    fingerprint = models.CharField(max_length=80, unique=True)
    public_key = models.TextField(help_text="OpenSSH line: ssh-ed25519 AAAA... tollgate-evidence")
    public_pem = models.TextField()
    # AES-GCM under TOLLGATE_ENCRYPTION_KEYS, bound to the fingerprint; empty for a file key.
    private_key_encrypted = models.BinaryField(blank=True, default=b"")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.DATABASE)
    not_before = models.DateTimeField(default=timezone.now)
    not_after = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-not_before", "-id"]

    def __str__(self) -> str:
        return self.fingerprint


class EvidenceSeal(AppendOnlyModel):
    """A decision's signed statement, made once: the payload and the server's signature over
    it, and the facts of that moment the bundle shows (software versions, the G1 inventory)."""

    decision = models.OneToOneField("gates.Decision", on_delete=models.PROTECT, related_name="seal")
    key = models.ForeignKey(EvidenceKey, on_delete=models.PROTECT, related_name="seals")
    payload = models.BinaryField()
    signature = models.BinaryField()
    snapshot = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"seal of {self.decision}"


class EvidenceSignature(AppendOnlyModel):
    """A party's SSHSIG (`ssh-keygen -Y sign -n tollgate-evidence`) over a seal's DSSE
    pre-authentication bytes, made with a key they registered."""

    seal = models.ForeignKey(EvidenceSeal, on_delete=models.PROTECT, related_name="cosignatures")
    party = models.CharField(max_length=16)
    organization = models.ForeignKey(
        "gates.Organization", on_delete=models.PROTECT, related_name="+"
    )
    key = models.ForeignKey("gates.PartyKey", on_delete=models.PROTECT, related_name="+")
    ssh_signature = models.TextField()
    signed_by = user_reference()
    signed_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["seal", "signed_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["seal", "key"], name="one_cosignature_per_key"),
            models.CheckConstraint(
                condition=models.Q(party__in=["vendor", "customer"]),
                name="cosignature_party_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.seal} co-signed by the {self.party}"
