"""Gate report PDFs rendered once by the worker and then served as stored (docs/dashboards.md).

A stored PDF is keyed by its decision and a fingerprint of everything else the report reads,
so a waiver (a new decision), a signature added to the spec, a new G1 inventory or a renamed
engagement is a new key: the old PDF is never served for it. The rendering itself lives with
the page (gates/pages/report); these functions only queue, claim, store and find.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from gates.models import Decision, Gate, ReportPdf
from gates.services.pokes import RENDER_REPORT_PDF, poke_on_commit
from gates.services.worklist import worklist_claim, worklist_stale

# Bump when the report template changes what a stored PDF shows: every stored one goes stale.
RENDERING_VERSION = 1
# A claim older than this is a killed worker's: the beat sweep pokes the PDF again.
STALE_CLAIM = timedelta(minutes=5)


def report_engine_decision(decision: Decision) -> Decision | None:
    """Where the report's numbers come from: the decision itself, or for a waiver or a stop
    the engine's decision it overrode (None when it overrode none)."""
    if decision.kind == Decision.Kind.ENGINE:
        return decision
    earlier = Decision.objects.filter(
        gate_id=decision.gate_id, kind=Decision.Kind.ENGINE, created_at__lte=decision.created_at
    )
    return earlier.select_related("spec").first()


def report_inventory_decision(gate: Gate, judged: Decision | None) -> Decision | None:
    """The decision whose G1 facts the report shows: this one for G1, else the engagement's
    latest engine decision of G1 (the hardware every later gate was measured on)."""
    if gate.kind == Gate.Kind.G1:
        return judged
    return (
        Decision.objects.filter(
            gate__engagement_id=gate.engagement_id,
            gate__kind=Gate.Kind.G1,
            kind=Decision.Kind.ENGINE,
        )
        .select_related("spec")
        .first()
    )


def report_pdf_fingerprint(decision: Decision) -> str:
    """The SHA-256 of what the report reads beyond the decision's own append-only fields."""
    gate = Gate.objects.select_related("engagement__organization").get(pk=decision.gate_id)
    judged = report_engine_decision(decision)
    inventory = report_inventory_decision(gate, judged)
    engagement = gate.engagement
    runs = judged.runs.order_by("pk").values_list("pk", "host__name") if judged else []
    inputs = {
        "version": RENDERING_VERSION,
        "decision": decision.pk,
        "judged": judged.pk if judged else None,
        "inventory": inventory.pk if inventory else None,
        "signatures": sorted(decision.spec.signatures.values_list("pk", flat=True)),
        "runs": [list(run) for run in runs],  # finished_at: set with the decision, once
        "engagement": [engagement.title, engagement.model_name, engagement.organization.name],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def report_pdf_at_decision(decision: Decision) -> None:
    """Queue a new decision's PDF, so the link serves it at once (rendered once by the worker,
    after commit); with TOLLGATE_REPORT_PDF_AT_DECISION off, the first ask queues it instead."""
    if settings.TOLLGATE_REPORT_PDF_AT_DECISION:
        report_pdf_request(decision)


def report_pdf_request(decision: Decision) -> ReportPdf:
    """The stored PDF of the decision as the report reads today, queued (and the worker poked
    after commit) when there is none yet. Idempotent: a second call finds the first's row."""
    fingerprint = report_pdf_fingerprint(decision)
    found = ReportPdf.objects.filter(decision=decision, fingerprint=fingerprint).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            stored = ReportPdf.objects.create(decision=decision, fingerprint=fingerprint)
    except IntegrityError:  # another request queued it between the read and the write
        return ReportPdf.objects.get(decision=decision, fingerprint=fingerprint)
    poke_on_commit(RENDER_REPORT_PDF, stored.pk)
    return stored


def report_pdf_current(decision: Decision) -> ReportPdf | None:
    """The stored PDF for the report as it reads now, if one was queued; never a stale one."""
    fingerprint = report_pdf_fingerprint(decision)
    return ReportPdf.objects.filter(decision=decision, fingerprint=fingerprint).first()


def report_pdf_claim(pdf_id: int) -> bool:
    """Take the rendering up; False when it is done or another worker holds it."""
    queued = ReportPdf.objects.filter(state=ReportPdf.State.QUEUED)
    return worklist_claim(queued, pdf_id, STALE_CLAIM)


def report_pdf_store(*, pdf_id: int, document: bytes) -> ReportPdf:
    """Keep the rendered bytes with their SHA-256 and size; drop the decision's older versions."""
    with transaction.atomic():
        stored = ReportPdf.objects.select_for_update().get(pk=pdf_id)
        stored.content = document
        stored.sha256 = hashlib.sha256(document).hexdigest()
        stored.size = len(document)
        stored.state = ReportPdf.State.READY
        stored.error = ""
        stored.rendered_at = timezone.now()
        stored.save()
        ReportPdf.objects.filter(decision_id=stored.decision_id).exclude(pk=pdf_id).delete()
    return stored


def report_pdf_fail(*, pdf_id: int, error: str) -> None:
    ReportPdf.objects.filter(pk=pdf_id).update(state=ReportPdf.State.FAILED, error=error[:2000])


def report_pdfs_to_render() -> list[int]:
    """PDFs still queued with no live claim (a lost poke, a killed worker): the sweep pokes them."""
    return worklist_stale(ReportPdf.objects.filter(state=ReportPdf.State.QUEUED), STALE_CLAIM)
