"""The gate report: one decided gate on one page (verdict, clause table, charts, G1 inventory,
spec signatures, evidence digest), as HTML with print styles and as a PDF rendered on the
server from the same template. HTTP only: look up through tenancy, gather, render.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from gates.evidence import envelope_digest
from gates.models import Decision, Gate
from gates.pages import dashboards
from gates.pages.dashboards import Panel
from gates.pages.overview import verdict_words
from gates.pages.report import pdf
from gates.pages.report import svg as static_charts
from gates.pages.report.tables import NO_INTERVAL, clause_table, inventory_table
from gates.tenancy import get_visible_or_404, viewer_for_request

TEMPLATE = "gates/gate_report.html"


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


@login_required
@require_GET
def gate_report_pdf(request: HttpRequest, pk: int) -> HttpResponse:
    """The same template, its charts drawn to SVG beforehand (WeasyPrint runs no JavaScript)."""
    gate, decision = _decided_gate(request, pk)
    started = time.monotonic()
    panels = _panels(engine_decision(decision))
    chart_error = ""
    try:
        svgs = static_charts.figures_as_svg([panel.figure for panel in panels])
    except static_charts.ChartExportError:
        svgs, chart_error = [""] * len(panels), "the charts could not be drawn for this PDF"
    charts = [ReportChart(panel, _svg_url(svg)) for panel, svg in zip(panels, svgs, strict=True)]
    context = report_context(gate, decision, charts, pdf=True, chart_error=chart_error)
    document = pdf.html_to_pdf(render_to_string(TEMPLATE, context, request=request))
    response = HttpResponse(document, content_type="application/pdf")
    name = f"tollgate-{gate.engagement_id}-{gate.kind}-decision-{decision.pk}.pdf"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["Server-Timing"] = f"pdf;dur={(time.monotonic() - started) * 1000:.0f}"
    return response


def report_context(
    gate: Gate, decision: Decision, charts: list[ReportChart], *, pdf: bool, chart_error: str = ""
) -> dict[str, Any]:
    judged = engine_decision(decision)
    facts, inventory_decision = _inventory_facts(gate, judged)
    host, gpus = inventory_table(facts)
    result = judged.result if judged and isinstance(judged.result, Mapping) else {}
    clauses = clause_table(judged.clauses if judged else [])
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
    if decision.kind == Decision.Kind.ENGINE:
        return decision
    earlier = decision.gate.decisions.filter(
        kind=Decision.Kind.ENGINE, created_at__lte=decision.created_at
    )
    return earlier.select_related("spec").first()


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
    if gate.kind != Gate.Kind.G1:
        decision = (
            Decision.objects.filter(
                gate__engagement_id=gate.engagement_id,
                gate__kind=Gate.Kind.G1,
                kind=Decision.Kind.ENGINE,
            )
            .select_related("spec")
            .first()
        )
    if decision is None or not isinstance(decision.result, Mapping):
        return None, None
    inputs = decision.result.get("inputs")
    facts = inputs.get("facts") if isinstance(inputs, Mapping) else None
    return (facts, decision) if isinstance(facts, Mapping) else (None, None)


def _svg_url(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode() if svg else ""
