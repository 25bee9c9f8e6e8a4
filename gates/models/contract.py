"""The agreed bar: each party's signature over a spec version's digest, the Ed25519 keys a party
may sign with, and the stop-loss resets both parties sign."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from gates.models.appendonly import AppendOnlyModel
from gates.models.choices import user_reference


class Party(models.TextChoices):
    VENDOR = "vendor"
    CUSTOMER = "customer"


class SpecSignature(AppendOnlyModel):
    """One party's signature over one spec version's canonical SHA-256. Never changed: the
    digest is copied in, so a signature names exactly the document it was given for."""

    spec = models.ForeignKey("gates.GateSpec", on_delete=models.PROTECT, related_name="signatures")
    party = models.CharField(max_length=16, choices=Party.choices)
    digest = models.CharField(max_length=64)
    signed_by = user_reference()
    signed_at = models.DateTimeField(default=timezone.now, editable=False)
    # Optional: an SSHSIG (`ssh-keygen -Y sign -n tollgate-spec`) over the digest, made with a
    # key the party registered, so the signature can be checked without Tollgate's accounts.
    key = models.ForeignKey(
        "gates.PartyKey", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    ssh_signature = models.TextField(blank=True)
    # Set when the signer acknowledged an underpowered G3 spec: the gate's power at its claims
    # at the noise known then, the noise's source and what would have made it decisive.
    acknowledged_power = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["spec", "signed_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["spec", "party"], name="one_signature_per_party"),
            models.CheckConstraint(
                condition=models.Q(party__in=["vendor", "customer"]), name="signature_party_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.spec} signed by the {self.party}"


class PartyKey(models.Model):
    """An Ed25519 public key (OpenSSH line) a person registered to sign specs with."""

    organization = models.ForeignKey(
        "gates.Organization", on_delete=models.PROTECT, related_name="party_keys"
    )
    user = user_reference()
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=80, unique=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["organization", "-created_at"]

    def __str__(self) -> str:
        return self.fingerprint


class StopLossReset(models.Model):
    """Both parties agree that failures counted so far no longer count toward stop-loss.
    Takes effect when the second party signs; the reason is written down and audited."""

    gate = models.ForeignKey("gates.Gate", on_delete=models.PROTECT, related_name="resets")
    reason = models.TextField()
    created_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    vendor_signed_by = user_reference()
    vendor_signed_at = models.DateTimeField(null=True, blank=True)
    customer_signed_by = user_reference()
    customer_signed_at = models.DateTimeField(null=True, blank=True)
    effective_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["gate", "-created_at"]

    def __str__(self) -> str:
        return f"{self.gate} stop-loss reset"


class InventoryAmendment(AppendOnlyModel):
    """A changed host inventory (a GPU swapped, a driver updated) proposed to replace the one
    G1 accepted. It holds for later runs only once both parties signed its digest; until then
    the re-probe of every G2-G4 run still compares with the inventory in force."""

    engagement = models.ForeignKey(
        "gates.Engagement", on_delete=models.PROTECT, related_name="inventory_amendments"
    )
    inventory = models.JSONField()
    # SHA-256 of the canonical {"engagement", "inventory"}: what the signatures cover.
    digest = models.CharField(max_length=64)
    reason = models.TextField()
    # The run whose re-probe saw the changed host (its invalid decision names each field).
    source_run = models.ForeignKey(
        "gates.Run", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    proposed_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["engagement", "-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.engagement} inventory amendment {self.digest[:12]}"

    @property
    def signed_parties(self) -> set[str]:
        return {s.party for s in self.signatures.all() if s.digest == self.digest}

    @property
    def in_force(self) -> bool:
        return self.signed_parties == {Party.VENDOR, Party.CUSTOMER}


class InventorySignature(AppendOnlyModel):
    """One party's signature over an inventory amendment's digest; never changed."""

    amendment = models.ForeignKey(
        InventoryAmendment, on_delete=models.PROTECT, related_name="signatures"
    )
    party = models.CharField(max_length=16, choices=Party.choices)
    digest = models.CharField(max_length=64)
    signed_by = user_reference()
    signed_at = models.DateTimeField(default=timezone.now, editable=False)
    key = models.ForeignKey(
        "gates.PartyKey", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    ssh_signature = models.TextField(blank=True)

    class Meta:
        ordering = ["amendment", "signed_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["amendment", "party"], name="one_inventory_signature_per_party"
            ),
            models.CheckConstraint(
                condition=models.Q(party__in=["vendor", "customer"]),
                name="inventory_signature_party_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.amendment} signed by the {self.party}"
