"""The gate report: one decided gate on one page (verdict, clause table, charts, G1 inventory,
spec signatures, evidence digest), as HTML with print styles and as a PDF rendered on the
server from the same template. HTTP only: look up through tenancy, gather, render.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET

from gates import services
from gates.evidence import envelope_digest
from gates.models import Decision, Gate, ReportPdf
from gates.pages import dashboards
from gates.pages.dashboards import Panel
from gates.pages.overview import verdict_words
from gates.pages.report import pdf
from gates.pages.report import svg as static_charts
from gates.pages.report.tables import NO_INTERVAL, clause_table, inventory_table
from gates.tenancy import get_visible_or_404, viewer_for_request

TEMPLATE = "gates/gate_report.html"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportDigest:
    """What ties the paper to the verifiable evidence: a named SHA-256."""

    label: str
    value: str


@dataclass(frozen=True)
class ReportChart:
    """A panel, with its SVG as a data: URL when the report is drawn without JavaScript."""

    panel: Panel
    svg_url: str = ""


def report_digest(decision: Decision) -> ReportDigest:
    """The SHA-256 of the decision's signed evidence envelope (docs/evidence.md): the paper
    names the bundle a reader can verify offline."""
    return ReportDigest("evidence envelope digest", envelope_digest(decision))


@login_required
@require_GET
def gate_report(request: HttpRequest, pk: int) -> HttpResponse:
    gate, decision = _decided_gate(request, pk)
    charts = [ReportChart(panel) for panel in _panels(engine_decision(decision))]
    return render(request, TEMPLATE, report_context(gate, decision, charts, pdf=False))


# A queued PDF no worker has taken up in this long: the evidence worker is not running, so the
# waiting page stops waiting for it and renders the PDF in the request instead.
WORKER_WAIT_S = 20
WAIT_TEMPLATE = "gates/report_pdf_wait.html"


@login_required
@require_GET
def gate_report_pdf(request: HttpRequest, pk: int) -> HttpResponse:
    """The PDF the worker rendered once for this decision, served as stored; while it is not
    ready, a page that says so and refreshes itself (docs/dashboards.md "Report PDFs")."""
    gate, decision = _decided_gate(request, pk)
    stored = services.report_pdf_request(decision)
    waited_s = (timezone.now() - stored.created_at).total_seconds()
    queued = stored.state == ReportPdf.State.QUEUED
    no_worker = queued and stored.claimed_at is None and waited_s > WORKER_WAIT_S
    if request.GET.get("render") == "now" and (no_worker or stored.state == ReportPdf.State.FAILED):
        try:
            stored_pdf_render(stored.pk)
        except Exception:  # stored as failed with its reason: the page below says so, no 500
            logger.exception("rendering the PDF of decision %s in the request failed", decision.pk)
        stored.refresh_from_db()
    if stored.state != ReportPdf.State.READY:
        context = {"gate": gate, "decision": decision, "stored": stored, "waited_s": waited_s}
        context["no_worker"] = no_worker
        return render(request, WAIT_TEMPLATE, context, status=202)
    response = HttpResponse(bytes(stored.content), content_type="application/pdf")
    name = f"tollgate-{gate.engagement_id}-{gate.kind}-decision-{decision.pk}.pdf"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["ETag"] = f'"{stored.sha256}"'
    return response


def stored_pdf_render(pdf_id: int) -> None:
    """Render a queued PDF and store it (the worker's task, or the request when no worker is
    alive); a failure is stored with its reason, for the waiting page to show."""
    stored = ReportPdf.objects.select_related("decision").get(pk=pdf_id)
    try:
        document = render_decision_pdf(stored.decision)
    except Exception as error:
        services.report_pdf_fail(pdf_id=pdf_id, error=f"{type(error).__name__}: {error}")
        raise
    services.report_pdf_store(pdf_id=pdf_id, document=document)


def render_decision_pdf(decision: Decision) -> bytes:
    """The report template, its charts drawn to SVG beforehand (WeasyPrint runs no JavaScript).
    Nothing in it depends on who asked: one PDF serves every viewer the view lets through."""
    gate = Gate.objects.select_related("engagement__organization").get(pk=decision.gate_id)
    panels = _panels(engine_decision(decision))
    chart_error = ""
    try:
        svgs = static_charts.figures_as_svg([panel.figure for panel in panels])
    except static_charts.ChartExportError:
        svgs, chart_error = [""] * len(panels), "the charts could not be drawn for this PDF"
    charts = [ReportChart(panel, _svg_url(svg)) for panel, svg in zip(panels, svgs, strict=True)]
    context = report_context(gate, decision, charts, pdf=True, chart_error=chart_error)
    return pdf.html_to_pdf(render_to_string(TEMPLATE, context))


def report_context(
    gate: Gate, decision: Decision, charts: list[ReportChart], *, pdf: bool, chart_error: str = ""
) -> dict[str, Any]:
    judged = engine_decision(decision)
    facts, inventory_decision = _inventory_facts(gate, judged)
    host, gpus = inventory_table(facts)
    result = judged.result if judged and isinstance(judged.result, Mapping) else {}
    # A replayed trace's advisory rows follow the clauses they never decide.
    clauses = clause_table([*(judged.clauses if judged else []), *_replay_bands(result)])
    return {
        "gate": gate,
        "engagement": gate.engagement,
        "decision": decision,
        "judged": judged,
        "spec": decision.spec,
        "signatures": decision.spec.signatures.select_related("signed_by", "key"),
        "runs": judged.runs.select_related("host").order_by("attempt") if judged else [],
        "reasons": [str(reason) for reason in result.get("reasons") or []],
        "clauses": clauses,
        "has_intervals": any(row.interval != NO_INTERVAL for row in clauses),
        "charts": charts,
        "chart_error": chart_error,
        "inventory_host": host,
        "inventory_gpus": gpus,
        "inventory_decision": inventory_decision,
        "digest": report_digest(decision),
        "pdf": pdf,
        "headline": headline(decision, result),
    }


def _replay_bands(result: Mapping[str, Any]) -> list:
    """The hit-rate rows, then the TTFT p50 rows, then the TTFT change rows, as the decision
    holds them."""
    rows = []
    for key in ("replay_bands", "replay_ttft_bands", "replay_ttft_changes"):
        found = result.get(key)
        rows += found if isinstance(found, list) else []
    return rows


def headline(decision: Decision, result: Mapping[str, Any]) -> dict[str, Any]:
    """The report's verdict line: a waiver reads "waived" (never the engine's verdict it
    overrode); a compressed soak says so next to the verdict."""
    soak = result.get("soak") if isinstance(result.get("soak"), Mapping) else {}
    qualifiers = ["compressed soak"] if soak and soak.get("compressed") else []
    if decision.kind == Decision.Kind.WAIVER:
        return {"word": "waived", "qualifiers": qualifiers, "override": "This waiver overrides"}
    override = "The engagement was stopped at stop-loss review after"
    return {
        "word": verdict_words(decision.verdict),
        "qualifiers": qualifiers,
        "override": override if decision.kind == Decision.Kind.STOP else "",
    }


def engine_decision(decision: Decision) -> Decision | None:
    """Where the numbers come from: the decision itself, or for a waiver or a stop the
    engine's decision it overrode (None when it overrode none)."""
    return services.report_engine_decision(decision)


def _decided_gate(request: HttpRequest, pk: int) -> tuple[Gate, Decision]:
    viewer = viewer_for_request(request)
    gate = get_visible_or_404(Gate.objects.select_related("engagement"), viewer, pk=pk)
    decision = gate.decisions.select_related("spec", "decided_by").first()
    if decision is None:
        raise Http404("this gate has no decision yet: a report covers a decided gate")
    return gate, decision


def _panels(decision: Decision | None) -> list[Panel]:
    if decision is None:
        return []
    dashboard = dashboards.decision_dashboard(decision)
    return dashboard.verdict + dashboard.evidence


def _inventory_facts(gate: Gate, decision: Decision | None) -> tuple[Any, Decision | None]:
    """What G1 observed of the host: this decision's facts for G1, else the engagement's latest
    engine decision of G1 (the hardware every later gate was measured on)."""
    decision = services.report_inventory_decision(gate, decision)
    if decision is None or not isinstance(decision.result, Mapping):
        return None, None
    inputs = decision.result.get("inputs")
    facts = inputs.get("facts") if isinstance(inputs, Mapping) else None
    return (facts, decision) if isinstance(facts, Mapping) else (None, None)


def _svg_url(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode() if svg else ""
