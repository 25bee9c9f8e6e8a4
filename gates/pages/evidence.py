"""The gate page's evidence box: where to download the bundle, which key signs it, the
envelope digest once sealed, and who co-signed. Reads only: a page view never seals."""

from __future__ import annotations

from django.urls import reverse

from gates.evidence import layout, statement, store
from gates.models import EvidenceKey, EvidenceSeal, Gate


def evidence_brief(gate: Gate) -> dict | None:
    decision = gate.decisions.first()
    if decision is None:
        return None
    brief = {
        "url": reverse("api:gate-evidence", args=[gate.pk]),
        "signatures_url": reverse("api:gate-evidence-signatures", args=[gate.pk]),
        "keys_url": reverse("api:evidence-keys"),
        "sealed": False,
    }
    seal = EvidenceSeal.objects.select_related("key").filter(decision=decision).first()
    if seal is None:
        current = EvidenceKey.objects.filter(retired_at__isnull=True).first()
        return {**brief, "fingerprint": current.fingerprint if current else None}
    envelope = statement.envelope_bytes(store.seal_envelope(seal))
    cosigners = [f"the {row['party']} ({row['keyid']})" for row in store.cosignature_rows(seal)]
    return {
        **brief,
        "sealed": True,
        "fingerprint": seal.key.fingerprint,
        "envelope_digest": layout.sha256_hex(envelope),
        "cosigners": cosigners,
    }
