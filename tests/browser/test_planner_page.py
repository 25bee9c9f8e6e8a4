"""The planner page in a real browser: Debian chromium submits the form and Plotly draws the
heatmap from the embedded figure JSON (static plotly.js, no CDN)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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
