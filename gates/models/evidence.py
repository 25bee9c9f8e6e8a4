"""Signed evidence: the server's Ed25519 signing keys (with their validity), each decision's
seal (the signed in-toto statement), the parties' co-signatures over it, and the evidence
library: reports published with both parties' signed consent, and the claims citing them."""

from __future__ import annotations

import secrets

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


def public_slug() -> str:
    # Unguessable, so a proposal's future URL says nothing before it is published.
    return secrets.token_urlsafe(12)


class Publication(models.Model):
    """One decided gate's report in the library. `state` follows the consent records:
    proposed (vendor) -> published (customer approved) -> withdrawn (either party)."""

    class State(models.TextChoices):
        PROPOSED = "proposed"
        PUBLISHED = "published"
        WITHDRAWN = "withdrawn"

    class Naming(models.TextChoices):
        NAME = "name", "the customer's name"
        INDUSTRY = "industry", "an industry label"
        ANONYMOUS = "anonymous", "anonymous"

    decision = models.ForeignKey(
        "gates.Decision", on_delete=models.PROTECT, related_name="publications"
    )
    slug = models.CharField(max_length=32, unique=True, default=public_slug, editable=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PROPOSED)
    naming = models.CharField(max_length=16, choices=Naming.choices, blank=True)
    industry_label = models.CharField(max_length=80, blank=True)
    host_details = models.JSONField(default=list, blank=True)
    # What the public page shows, fixed when the customer approved (redacted as agreed).
    record = models.JSONField(default=dict, blank=True)
    bundle = models.BinaryField(blank=True, default=b"")
    bundle_sha256 = models.CharField(max_length=64, blank=True)
    # The public PDF, rendered once (at approval by the worker, or by the first reader) and then
    # served as stored: what it shows is fixed with `record`, and rendering costs seconds.
    pdf = models.BinaryField(blank=True, default=b"")
    pdf_sha256 = models.CharField(max_length=64, blank=True)
    proposed_at = models.DateTimeField(default=timezone.now, editable=False)
    published_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_by = models.CharField(max_length=16, blank=True)
    withdrawal_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-published_at", "-proposed_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["proposed", "published", "withdrawn"]),
                name="publication_state_known",
            ),
        ]

    def __str__(self) -> str:
        return f"publication {self.slug} of {self.decision}"

    @property
    def is_public(self) -> bool:
        """Reachable from the library: published, or withdrawn after it was (a tombstone)."""
        return self.published_at is not None


class PublicationConsent(AppendOnlyModel):
    """One party's act on a publication (propose, approve, withdraw) with its terms, as
    canonical JSON signed by the server's evidence key: the consent trail anyone can check."""

    class Act(models.TextChoices):
        PROPOSE = "propose"
        APPROVE = "approve"
        WITHDRAW = "withdraw"

    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="consents")
    act = models.CharField(max_length=16, choices=Act.choices)
    party = models.CharField(max_length=16)
    organization = models.ForeignKey(
        "gates.Organization", on_delete=models.PROTECT, related_name="+"
    )
    payload = models.BinaryField()
    key = models.ForeignKey("gates.EvidenceKey", on_delete=models.PROTECT, related_name="+")
    signature = models.BinaryField()
    signed_by = user_reference()
    signed_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["publication", "signed_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(party__in=["vendor", "customer"]),
                name="consent_party_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.act} by the {self.party} on {self.publication}"


class Claim(models.Model):
    """A vendor's sentence with numbers, citing published reports; its status is computed
    from the reports' clauses whenever it is read (gates/decisions/claims.py)."""

    organization = models.ForeignKey(
        "gates.Organization", on_delete=models.PROTECT, related_name="claims"
    )
    slug = models.CharField(max_length=32, unique=True, default=public_slug, editable=False)
    text = models.TextField()
    publications = models.ManyToManyField(Publication, related_name="claims")
    created_by = user_reference()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.text[:60]
