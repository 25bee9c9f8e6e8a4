"""The gate report as a real PDF: WeasyPrint renders the report template on the server, Kaleido
draws the charts to SVG in the Debian chromium. pdftotext reads the verdict and the digest back;
pdftoppm leaves page 1 as a PNG in the test artifacts, for a person to look at."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from gates import services
from gates.decisions import decide_g1
from gates.pages.report import svg as static_charts
from gates.pages.report.page import report_digest
from tests.gates.pages.test_dashboards import G1_FACTS, decide_uploaded, record_g3_decision
from worker import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ARTIFACTS = Path(settings.BASE_DIR) / "var" / "test" / "artifacts"


def pdf_text(document: bytes, tmp_path: Path) -> str:
    path = tmp_path / "report.pdf"
    path.write_bytes(document)
    text = subprocess.run(
        ["pdftotext", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout
    return re.sub(r"\s+", " ", text)


def page_one_png(document: bytes, tmp_path: Path, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    source = tmp_path / f"{name}.pdf"
    source.write_bytes(document)
    prefix = ARTIFACTS / name
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", "-singlefile", str(source), prefix],
        check=True,
    )
    return prefix.with_suffix(".png")


def download(client, user, gate_id: int):
    """The first ask queues the PDF (the suite renders none at decision), the worker's task
    renders it, then the link serves it."""
    client.force_login(user)
    url = reverse("gates:gate-report-pdf", args=[gate_id])
    first = client.get(url)
    if first.status_code != 202:
        return first
    for pdf_id in services.report_pdfs_to_render():
        tasks.render_report_pdf(pdf_id)
    return client.get(url)


def test_a_g3_pdf_carries_the_verdict_the_digest_and_drawn_charts(
    client, actor, vendor_viewer, engagement, customer_viewer, tmp_path
):
    decision = record_g3_decision(actor, vendor_viewer, engagement)
    started = time.monotonic()
    response = download(client, customer_viewer, decision.gate_id)
    seconds = time.monotonic() - started
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert "attachment;" in response["Content-Disposition"]
    document = response.content
    assert document.startswith(b"%PDF-")
    text = pdf_text(document, tmp_path)
    digest = report_digest(decision)
    assert f"Verdict: {decision.verdict.upper()}" in text
    assert f"{digest.label.capitalize()} {digest.value}" in text
    assert "Each clause against its bar" in text and "could not be drawn" not in text
    # Kaleido's SVG text stays text in the PDF: the forest plot's tier labels are readable.
    assert "c=16" in text
    png = page_one_png(document, tmp_path, f"report-g3-{decision.pk}")
    assert png.stat().st_size > 10_000
    print(f"G3 report PDF: {len(document)} bytes in {seconds:.1f} s; page 1 at {png}")


def test_a_g1_pdf_without_charts_needs_no_browser(
    client, actor, vendor_viewer, engagement, customer_viewer, tmp_path, monkeypatch
):
    def no_browser(figures):
        assert not figures, "a G1 report has no charts to draw"
        return []

    monkeypatch.setattr(static_charts, "figures_as_svg", no_browser)
    g1 = engagement.gates.get(kind="G1")
    decision = decide_uploaded(actor, vendor_viewer, g1, lambda s: decide_g1(s, G1_FACTS))
    started = time.monotonic()
    document = download(client, customer_viewer, g1.pk).content
    seconds = time.monotonic() - started
    text = pdf_text(document, tmp_path)
    assert "Verdict: PASS" in text and report_digest(decision).value in text
    assert "NVIDIA H100 80GB HBM3" in text
    page_one_png(document, tmp_path, "report-g1")
    print(f"G1 report PDF: {len(document)} bytes in {seconds:.1f} s")


def test_when_the_charts_cannot_be_drawn_the_pdf_still_has_every_number_and_says_so(
    client, actor, vendor_viewer, engagement, customer_viewer, tmp_path, monkeypatch
):
    def broken(figures):
        raise static_charts.ChartExportError("no browser")

    monkeypatch.setattr(static_charts, "figures_as_svg", broken)
    decision = record_g3_decision(actor, vendor_viewer, engagement, repetitions=3)
    text = pdf_text(download(client, customer_viewer, decision.gate_id).content, tmp_path)
    assert "The charts could not be drawn for this PDF" in text
    assert report_digest(decision).value in text and "at least the bar" in text


def test_without_a_browser_the_chart_export_fails_with_its_own_error(monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    with pytest.raises(static_charts.ChartExportError, match="/nonexistent/chromium"):
        static_charts.figures_as_svg([{"data": [], "layout": {}}])
