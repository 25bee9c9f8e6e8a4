"""Report PDFs rendered once by the worker and served as stored (docs/dashboards.md "Report
PDFs"): the task renders once, the view serves the stored bytes without rendering, a PDF not
yet rendered gets a page that says so, a waiver makes a new PDF, and tenancy holds. WeasyPrint
runs for real; a G1 report has no charts, so no browser is needed and each render takes ~1 s."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.urls import reverse

from gates import services
from gates.decisions import decide_g1
from gates.models import Gate, ReportPdf
from gates.pages.report import page as report_page
from tests.gates.pages.test_dashboards import G1_FACTS, decide_uploaded
from worker import tasks

pytestmark = pytest.mark.django_db


def pdf_url(gate_id: int) -> str:
    return reverse("gates:gate-report-pdf", args=[gate_id])


@pytest.fixture
def g1(actor, vendor_viewer, engagement, settings) -> Gate:
    settings.TOLLGATE_REPORT_PDF_AT_DECISION = True  # the suite's default leaves it to the link
    gate = engagement.gates.get(kind="G1")
    decide_uploaded(actor, vendor_viewer, gate, lambda s: decide_g1(s, G1_FACTS))
    return gate


def no_rendering(monkeypatch) -> None:
    def refuse(decision):
        raise AssertionError("the PDF was rendered again")

    monkeypatch.setattr(report_page, "render_decision_pdf", refuse)


def test_recording_a_decision_queues_its_pdf_and_the_task_renders_it_once(g1, monkeypatch):
    queued = ReportPdf.objects.get(decision__gate=g1)
    assert queued.state == ReportPdf.State.QUEUED and services.report_pdfs_to_render() == [
        queued.pk
    ]
    tasks.render_report_pdf(queued.pk)
    stored = ReportPdf.objects.get(pk=queued.pk)
    document = bytes(stored.content)
    assert stored.state == ReportPdf.State.READY and document.startswith(b"%PDF-")
    assert stored.sha256 == hashlib.sha256(document).hexdigest() and stored.size == len(document)
    assert services.report_pdfs_to_render() == []
    no_rendering(monkeypatch)
    tasks.render_report_pdf(queued.pk)  # a redelivered poke: done, nothing to do
    tasks.render_report_pdfs()
    assert ReportPdf.objects.get(pk=queued.pk).rendered_at == stored.rendered_at


def test_the_link_serves_the_stored_bytes_without_rendering(
    client, g1, customer_viewer, monkeypatch
):
    stored = ReportPdf.objects.get(decision__gate=g1)
    tasks.render_report_pdf(stored.pk)
    stored.refresh_from_db()
    no_rendering(monkeypatch)
    client.force_login(customer_viewer)
    response = client.get(pdf_url(g1.pk))
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response.content == bytes(stored.content)
    assert response["ETag"] == f'"{stored.sha256}"'


def test_before_the_worker_renders_it_the_link_says_rendering_with_its_state(
    client, g1, customer_viewer, monkeypatch
):
    no_rendering(monkeypatch)
    client.force_login(customer_viewer)
    response = client.get(pdf_url(g1.pk))
    assert response.status_code == 202
    text = response.content.decode()
    assert "Rendering the PDF…" in text and "State: queued" in text
    assert 'http-equiv="refresh"' in text
    # ?render=now does not race a live worker: the PDF stays the worker's to render.
    assert client.get(pdf_url(g1.pk) + "?render=now").status_code == 202


def test_when_no_worker_takes_it_up_the_page_offers_and_does_the_render_itself(
    client, g1, customer_viewer
):
    ReportPdf.objects.filter(decision__gate=g1).update(
        created_at=ReportPdf.objects.get(decision__gate=g1).created_at
        - timedelta(seconds=report_page.WORKER_WAIT_S + 1)
    )
    client.force_login(customer_viewer)
    waiting = client.get(pdf_url(g1.pk)).content.decode()
    assert "no worker has taken it up" in waiting and "?render=now" in waiting
    response = client.get(pdf_url(g1.pk) + "?render=now")
    assert response.status_code == 200 and response.content.startswith(b"%PDF-")
    assert ReportPdf.objects.get(decision__gate=g1).state == ReportPdf.State.READY


def test_a_waiver_after_rendering_makes_the_next_request_get_the_new_pdf(
    client, actor, vendor_viewer, engagement, customer_viewer, settings
):
    settings.TOLLGATE_REPORT_PDF_AT_DECISION = True
    gate = engagement.gates.get(kind="G1")
    for _ in range(2):  # two failures put the gate at stop-loss review
        decide_uploaded(actor, vendor_viewer, gate, lambda s: {"verdict": "fail", "clauses": []})
    for pdf_id in services.report_pdfs_to_render():
        tasks.render_report_pdf(pdf_id)
    client.force_login(customer_viewer)
    before = client.get(pdf_url(gate.pk))
    assert before.status_code == 200
    services.gate_waive(
        actor=actor,
        viewer=vendor_viewer,
        gate=Gate.objects.get(pk=gate.pk),
        justification="Customer accepts G1 drift: one spare GPU is fine.",
    )
    waiting = client.get(pdf_url(gate.pk))
    assert waiting.status_code == 202, "the PDF from before the waiver is stale"
    for pdf_id in services.report_pdfs_to_render():
        tasks.render_report_pdf(pdf_id)
    after = client.get(pdf_url(gate.pk))
    assert after.status_code == 200 and after.content != before.content
    waiver = gate.decisions.first()
    assert waiver.kind == "waiver"
    assert (
        ReportPdf.objects.get(decision=waiver).sha256 == hashlib.sha256(after.content).hexdigest()
    )


def test_asking_again_finds_the_same_queued_pdf(g1):
    stored = ReportPdf.objects.get(decision__gate=g1)
    assert services.report_pdf_current(stored.decision) == stored
    assert services.report_pdf_request(stored.decision) == stored


def test_with_rendering_at_decision_off_the_first_ask_queues_it(
    actor, vendor_viewer, customer_viewer, engagement, client, settings
):
    settings.TOLLGATE_REPORT_PDF_AT_DECISION = False
    gate = engagement.gates.get(kind="G1")
    decide_uploaded(actor, vendor_viewer, gate, lambda s: decide_g1(s, G1_FACTS))
    assert not ReportPdf.objects.filter(decision__gate=gate).exists()
    client.force_login(customer_viewer)
    assert client.get(pdf_url(gate.pk)).status_code == 202
    assert ReportPdf.objects.get(decision__gate=gate).state == ReportPdf.State.QUEUED


def test_another_organization_gets_404_and_no_pdf(client, g1, other_owner):
    tasks.render_report_pdf(ReportPdf.objects.get(decision__gate=g1).pk)
    client.force_login(other_owner)
    response = client.get(pdf_url(g1.pk))
    assert response.status_code == 404 and b"%PDF" not in response.content
