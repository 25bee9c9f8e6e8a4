"""The planner page in a real browser: Debian chromium submits the form and Plotly draws the
heatmap from the embedded figure JSON (static plotly.js, no CDN); the TTFT band's section
follows its task until the band is computed, and its chart is drawn when swapped in."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connection
from playwright.sync_api import BrowserContext

pytestmark = pytest.mark.slow


@pytest.fixture
def signed_in(session_cookie_for, customer_viewer, chromium_context) -> Iterator[BrowserContext]:
    cookie = session_cookie_for(customer_viewer)
    with chromium_context(cookie) as context:
        yield context


def test_submitting_the_form_draws_the_heatmap_and_the_recommendation(signed_in, live_server):
    page = signed_in.new_page()
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(f"{live_server.url}/planner/")
    page.select_option("#id_model", "llama-3.1-70b")
    page.fill("#id_gpus", "8")
    page.fill("#id_gpu_mem_gib", "80")
    page.fill("#id_concurrency", "64")
    page.fill("#id_context_tokens", "32000")
    page.fill("#id_reuse_ratio", "0.8")
    page.click("button[value=plan]")
    page.wait_for_selector("#planner-chart .plotly svg.main-svg")
    assert page.locator("#planner-chart .plotly .hm").count() == 1  # the heatmap layer
    assert page.locator("#planner-chart .plotly .scatterlayer .trace").count() == 2
    result = page.inner_text("#planner-result")
    assert "Offload is worth a joint test" in result
    assert "could be loaded from an offload tier" in result
    assert not failed, failed


def test_the_ttft_band_computes_beside_the_page_which_shows_it_when_done(
    signed_in, live_server, monkeypatch
):
    """The form asks for the band; the page shows its progress and, polling, swaps in each
    tier's band once the task (run here in a thread, as a worker would) has computed it."""
    from gates.models import TtftBandPrediction
    from gates.services import pokes
    from worker.tasks import predict_planner_ttft

    monkeypatch.setattr(pokes, "send", lambda name, *args: None)  # the thread is the worker
    page = signed_in.new_page()
    page.goto(f"{live_server.url}/planner/")
    page.fill("#id_gpus", "2")
    page.select_option("#id_band-gpu_kind", "H100-SXM5-80GB")
    page.fill("#id_band-prefix_tokens", "6144")
    page.fill("#id_band-suffix_tokens", "64")
    page.fill("#id_band-output_tokens", "32")
    page.fill("#id_band-sessions", "16")
    page.fill("#id_band-tiers", "4, 16")
    page.click("button[value=plan]")
    page.wait_for_selector('#ttft-band[data-state="computing"]')
    assert "Computing: 0/2 tiers done" in page.inner_text("#ttft-band")

    def work() -> None:
        try:
            predict_planner_ttft(TtftBandPrediction.objects.get().pk)
        finally:
            connection.close()  # the teardown flushes the tables: no connection left open

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    page.wait_for_selector('#ttft-band[data-state="ready"] li[data-tier="16"]')
    band = page.inner_text("#ttft-band")
    assert "c=4: TTFT p50 -" in band and "Computing" not in band
    assert "Assuming llama-3.1-70b on 2 x H100-SXM5-80GB" in band
    # The swapped-in section's chart is drawn too: one filled range per tier.
    page.wait_for_selector('#ttft-band [data-band-figure][data-drawn="true"]')
    assert page.locator("#ttft-band .plotly .barlayer .point").count() == 2
